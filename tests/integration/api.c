/*
 * api.c - the HTTP API v1 against the local database: every endpoint of the first slice and
 * every status it answers (401 none/bad/revoked, 403, 400 for each kind of bad input, 404,
 * 405, 409, 413, 201/200), called in-process through cohort_api_handle(); then the real
 * listener (cohort_http_start on a loop thread) for what only HTTP can show: a body over
 * api_max_body gets 413, a client that stops half-way through its headers is cut.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_fixture.h"
#include "api_server.h"
#include "support.h"
#include "core/clock.h"
#include "core/token.h"
#include "node/status/counts_view.h"
#include "node/http/api.h"
#include "node/http/api_pool.h"
#include "node/http/http.h"
#include "store/queue_counts.h"
#include "store/store.h"
#include "store/tokens.h"

#define SERVICE "web"
#define TTL_MS TEST_API_TOKEN_TTL_MS

static test_api_fixture_t fx;
static char tok_read[COHORT_TOKEN_TEXT_MAX], tok_all[COHORT_TOKEN_TEXT_MAX];

static void setup(void)
{
    test_api_fixture_open(&fx, &(test_api_setup_t){.prefix = "api", .service = SERVICE});
    test_api_token(fx.store, fx.client, "reader", "read", tok_read);
    test_api_token(fx.store, fx.client, "root", "admin", tok_all);
}

static void teardown(void)
{
    test_api_fixture_close(&fx);
}

TestSuite(api, .init = setup, .fini = teardown, .timeout = 120);

/* One request; `token` NULL sends no Authorization header, "" a bad one. */
static test_api_answer_t call(const char *token, const char *method, const char *target,
                              const char *body)
{
    return test_api_call(&fx, token, method, target, body, NULL);
}

/* Asserts the status and, for an error, its code and that it has a message; frees it. */
static void expect(test_api_answer_t a, int status, const char *code, const char *what)
{
    test_api_expect(a, status, code, NULL, what);
}

#define TASKS "/api/v1/services/" SERVICE "/tasks"

Test(api, tokens_401_403)
{
    expect(call(NULL, "GET", "/api/v1/services", NULL), 401, "unauthorized", "no token");
    expect(call("", "GET", "/api/v1/services", NULL), 401, "unauthorized", "empty token");
    expect(call("cht_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "GET", "/api/v1/services",
                NULL),
           401, "unauthorized", "unknown token");
    expect(call("not-a-token", "GET", "/api/v1/nothing", NULL), 401, "unauthorized",
           "a bad token on an unknown path");
    expect(call(tok_read, "POST", TASKS, "{}"), 403, "forbidden", "read token enqueues");
    expect(call(tok_read, "POST", "/api/v1/services/" SERVICE "/pause", "{}"), 403, "forbidden",
           "read token pauses");
    expect(call(tok_read, "GET", "/api/v1/services", NULL), 200, NULL, "read token reads");
}

/* Waits until `token` is refused (the cache holds it for at most TTL_MS). */
static bool refused(void *arg)
{
    test_api_answer_t a = call(arg, "GET", "/api/v1/services", NULL);
    bool no = a.status == 401;
    test_api_answer_free(&a);
    return no;
}

Test(api, revoked_token_refused_within_one_tick)
{
    expect(call(tok_read, "GET", "/api/v1/services", NULL), 200, NULL, "before revocation");
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_revoke_token(fx.store, fx.client, "reader", &found, &error), "%s",
              error.message);
    int64_t revoked_at = test_now_ms();
    cr_assert(test_wait_until(refused, tok_read, 10 * TTL_MS), "still accepted");
    /* the cache may serve it for one TTL, no longer (plus a generous margin for the machine) */
    cr_assert_leq(test_now_ms() - revoked_at, TTL_MS + 2000);
    cr_assert(test_count(fx.client, fx.db, "tokens", "{\"_id\": \"root\"}") == 1);
}

Test(api, last_used_written_once)
{
    expect(call(tok_all, "GET", "/api/v1/services", NULL), 200, NULL, "first use");
    cr_assert_eq(test_count(fx.client, fx.db, "tokens",
                            "{\"_id\": \"root\", \"last_used\": {\"$exists\": true}}"),
                 1, "last_used not written");
    cr_assert_eq(test_count(fx.client, fx.db, "tokens",
                            "{\"_id\": \"reader\", \"last_used\": {\"$exists\": true}}"),
                 0);
}

Test(api, services_as_status_json)
{
    test_api_answer_t a = call(tok_all, "GET", "/api/v1/services", NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_str_eq(test_doc_str(a.body, "services.0.name"), SERVICE);
    cr_assert(test_doc_has(a.body, "services.0.counts.pending"), "%s", a.json);
    cr_assert(test_doc_has(a.body, "services.0.paused"), "%s", a.json);
    test_api_answer_free(&a);
    expect(call(tok_all, "POST", "/api/v1/services", NULL), 405, "method_not_allowed", "POST");
}

Test(api, create_read_idempotent)
{
    test_api_answer_t a =
        call(tok_all, "POST", TASKS,
             "{\"data\": {\"n\": 7}, \"priority\": 5, \"kind\": \"mail\", \"group\": "
             "\"g1\", \"timeout_ms\": 60000, \"not_before\": \"2020-01-01T00:00:00Z\", "
             "\"weight\": 4}");
    cr_assert_eq(a.status, 201, "%s", a.json);
    char id[25];
    snprintf(id, sizeof id, "%s", test_doc_str(a.body, "id"));
    cr_assert(bson_oid_is_valid(id, strlen(id)), "%s", a.json);
    test_api_answer_free(&a);

    char path[200];
    snprintf(path, sizeof path, TASKS "/%s", id);
    a = call(tok_read, "GET", path, NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_str_eq(test_doc_str(a.body, "status"), "pending");
    cr_assert_eq(test_doc_int(a.body, "data.n"), 7);
    cr_assert_eq(test_doc_int(a.body, "priority"), 5);
    cr_assert_eq(test_doc_int(a.body, "weight"), 4);
    cr_assert_str_eq(test_doc_str(a.body, "kind"), "mail");
    cr_assert_str_eq(test_doc_str(a.body, "group"), "g1");
    cr_assert(strchr(test_doc_str(a.body, "created_at"), 'T'), "not ISO-8601: %s", a.json);
    cr_assert(test_doc_has(a.body, "history"), "%s", a.json);
    test_api_answer_free(&a);
    cr_assert_eq(test_count(fx.client, fx.db, "queue_" SERVICE, "{\"task_timeout_ms\": 60000}"), 1);

    test_api_answer_t first =
        test_api_call(&fx, tok_all, "POST", TASKS, "{\"data\": {}}", "order-42");
    test_api_answer_t again =
        test_api_call(&fx, tok_all, "POST", TASKS, "{\"data\": {}}", "order-42");
    cr_assert_eq(first.status, 201, "%s", first.json);
    cr_assert_eq(again.status, 200, "a retried POST: %s", again.json);
    cr_assert_str_eq(test_doc_str(first.body, "id"), test_doc_str(again.body, "id"));
    test_api_answer_free(&first);
    test_api_answer_free(&again);
    cr_assert_eq(
        test_count(fx.client, fx.db, "queue_" SERVICE, "{\"idempotency_key\": \"order-42\"}"), 1);

    expect(call(tok_all, "POST", TASKS, "{\"unique_key\": \"u1\"}"), 201, NULL, "unique");
    expect(call(tok_all, "POST", TASKS, "{\"unique_key\": \"u1\"}"), 409, "conflict", "again");
    snprintf(path, sizeof path, TASKS "/%s", "0123456789abcdef01234567");
    expect(call(tok_all, "GET", path, NULL), 404, "not_found", "no such task");
}

Test(api, bad_input_400_and_nothing_written)
{
    static const char *const bodies[] = {
        "{\"data\": ",                      /* malformed JSON */
        "[1, 2]",                           /* not an object */
        "",                                 /* no body */
        "{\"data\": 5}",                    /* wrong type */
        "{\"priority\": \"high\"}",         /* wrong type */
        "{\"priority\": 99999999}",         /* out of range */
        "{\"weight\": 0}",                  /* out of range */
        "{\"weight\": \"heavy\"}",          /* wrong type */
        "{\"colour\": \"red\"}",            /* unknown field */
        "{\"delay_ms\": 5, \"not_before\": 1}", /* exclusive */
        "{\"kind\": \"a b\"}",
        "{\"not_after\": \"yesterday\"}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        test_api_answer_t a = call(tok_all, "POST", TASKS, bodies[i]);
        cr_assert_eq(a.status, 400, "body %zu (%s): %d %s", i, bodies[i], a.status, a.json);
        test_api_answer_free(&a);
    }
    test_api_answer_t a = call(tok_all, "POST", TASKS, "{\"weight\": 1001}");
    cr_assert(strstr(test_doc_str(a.body, "error.message"),
                     "field 'weight': task option 'weight' = 1001 is out of range [1, 1000]"),
              "%s", a.json);
    test_api_answer_free(&a);
    a = call(tok_all, "POST", TASKS, "{\"colour\": 1}");
    cr_assert(strstr(test_doc_str(a.body, "error.message"), "colour"), "%s", a.json);
    test_api_answer_free(&a);
    expect(call(tok_all, "POST", TASKS ":batch", "{\"tasks\": [{}, {\"priority\": 1.5}]}"), 400,
           "bad_request", "a batch with one bad task");
    expect(call(tok_all, "POST", TASKS ":batch", "{\"tasks\": []}"), 400, "bad_request", "empty");
    expect(call(tok_all, "POST", TASKS ":batch", "{\"jobs\": []}"), 400, "bad_request", "field");
    static const char *const queries[] = {"?limit=501", "?limit=0", "?limit=ten",
                                          "?after=c1.zz", "?after=abc", "?status=done",
                                          "?colour=red", "?limit=5&limit=6"};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        char path[200];
        snprintf(path, sizeof path, TASKS "%s", queries[i]);
        expect(call(tok_all, "GET", path, NULL), 400, "bad_request", queries[i]);
    }
    expect(call(tok_all, "GET", "/api/v1/services/" SERVICE "/counts?by=colour", NULL), 400,
           "bad_request", "counts by");
    expect(call(tok_all, "GET", "/api/v1/services/../tasks", NULL), 400, "bad_request", "..");
    expect(call(tok_all, "GET", "/api/v1/services/%2e%2e/tasks", NULL), 400, "bad_request",
           "encoded ..");
    expect(call(tok_all, "GET", TASKS "/..%2f..%2fetc", NULL), 400, "bad_request", "bad id");
    expect(call(tok_all, "GET", "/api/v1/services/nope/tasks", NULL), 404, "not_found", "svc");
    expect(call(tok_all, "POST", "/api/v1/services/nope/tasks", "{}"), 404, "not_found", "svc");
    expect(call(tok_all, "GET", "/api/v1/other", NULL), 404, "not_found", "path");
    expect(call(tok_all, "DELETE", TASKS, NULL), 405, "method_not_allowed", "DELETE");
    cr_assert_eq(test_count(fx.client, fx.db, "queue_" SERVICE, "{}"), 0, "bad input wrote tasks");
}

Test(api, batch_list_pages_counts)
{
    char body[4096] = "{\"tasks\": [";
    for (int i = 0; i < 25; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body),
                 "%s{\"data\": {\"i\": %d}, \"kind\": \"%s\"}", i ? ", " : "", i,
                 i % 2 ? "odd" : "even");
    strcat(body, "]}");
    test_api_answer_t a = call(tok_all, "POST", TASKS ":batch", body);
    cr_assert_eq(a.status, 201, "%s", a.json);
    cr_assert(test_doc_has(a.body, "ids.24"), "%s", a.json);
    test_api_answer_free(&a);

    /* pages of 10: 10, 10, 5, every task once, in order */
    char path[256] = TASKS "?limit=10&kind=odd";
    int seen = 0, pages = 0;
    int64_t last = -1;
    for (;;) {
        a = call(tok_read, "GET", path, NULL);
        cr_assert_eq(a.status, 200, "%s", a.json);
        for (int i = 0; i < 10; i++) {
            char key[32];
            snprintf(key, sizeof key, "items.%d.data.i", i);
            int64_t v = test_doc_int(a.body, key);
            if (v == INT64_MIN)
                break;
            cr_assert_gt(v, last, "out of order: %s", a.json);
            last = v;
            seen++;
        }
        pages++;
        const char *next = test_doc_str(a.body, "next");
        if (!next) {
            test_api_answer_free(&a);
            break;
        }
        snprintf(path, sizeof path, TASKS "?limit=10&kind=odd&after=%s", next);
        test_api_answer_free(&a);
        cr_assert_lt(pages, 5);
    }
    cr_assert_eq(seen, 12, "odd tasks seen %d", seen);
    cr_assert_eq(pages, 2);

    a = call(tok_read, "GET", "/api/v1/services/" SERVICE "/counts", NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "counts.pending"), 25, "%s", a.json);
    test_api_answer_free(&a);
    a = call(tok_read, "GET", "/api/v1/services/" SERVICE "/counts?by=kind", NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert(strstr(a.json, "\"odd\""), "%s", a.json);
    test_api_answer_free(&a);

    char big[64 * 1001 + 32] = "{\"tasks\": [";
    for (int i = 0; i < 1001; i++)
        strcat(big, i ? ", {}" : "{}");
    strcat(big, "]}");
    expect(call(tok_all, "POST", TASKS ":batch", big), 400, "bad_request", "1001 tasks");
}

Test(api, pause_and_resume)
{
    expect(call(tok_all, "POST", "/api/v1/services/" SERVICE "/pause",
                "{\"kind\": \"mail\", \"reason\": \"smtp down\"}"),
           200, NULL, "pause");
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "pause.mail.reason"), "smtp down");
    cr_assert_str_eq(test_doc_str(&doc, "pause.mail.by"), "api token root");
    bson_destroy(&doc);
    expect(call(tok_all, "POST", "/api/v1/services/" SERVICE "/resume", "{\"kind\": \"mail\"}"),
           200, NULL, "resume");
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    cr_assert_not(test_doc_has(&doc, "pause.mail"));
    bson_destroy(&doc);
    expect(call(tok_all, "POST", "/api/v1/services/" SERVICE "/resume", "{\"reason\": \"x\"}"),
           400, "bad_request", "resume takes no reason");
    expect(call(tok_all, "POST", "/api/v1/services/nope/pause", ""), 404, "not_found", "svc");
}

/* ---- over HTTP: the listener's own limits ----------------------------------------------- */

Test(api, http_413_and_slow_client_cut)
{
    test_api_server_t s;
    cohort_http_callbacks_t limits = {.api_max_body = 2048};
    test_api_server_start(&s, fx.store, &limits, 0);
    char head[512];
    int fd = test_connect(s.port);
    int len = snprintf(head, sizeof head,
                       "POST " TASKS " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                       "Content-Length: 5000\r\nConnection: close\r\n\r\n",
                       tok_all);
    cr_assert_eq(send(fd, head, (size_t)len, MSG_NOSIGNAL), len);
    char body[5000];
    memset(body, ' ', sizeof body);
    send(fd, body, sizeof body, MSG_NOSIGNAL); /* the server may close before it is all read */
    char *got = test_read_until_closed(fd, 30000);
    cr_assert_not_null(got, "no answer to an oversized body");
    cr_assert(strncmp(got, "HTTP/1.1 413", 12) == 0, "want 413, got: %.200s", got);
    close(fd);

    /* A request that fits, over the same listener: JSON with its status. */
    fd = test_connect(s.port);
    len = snprintf(head, sizeof head,
                   "GET /api/v1/services HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Connection: close\r\n\r\n",
                   tok_all);
    cr_assert_eq(send(fd, head, (size_t)len, MSG_NOSIGNAL), len);
    got = test_read_until_closed(fd, 30000);
    cr_assert(got && strncmp(got, "HTTP/1.1 200", 12) == 0, "%.300s", got);
    cr_assert(strstr(got, "application/json") && strstr(got, "\"services\""), "%.500s", got);
    close(fd);

    /* A slowloris: half a request line, then nothing. The listener's timeout cuts it. */
    fd = test_connect(s.port);
    cr_assert_eq(send(fd, "GET /api/v1/serv", 16, MSG_NOSIGNAL), 16);
    int64_t start = test_now_ms();
    got = test_read_until_closed(fd, 60000);
    cr_assert_not_null(got, "a silent client held its connection for 60 s");
    cr_assert_geq(test_now_ms() - start, 1000, "cut at once, not by the timeout");
    close(fd);
    test_api_server_stop(&s);
}

/* GET .../counts, /services and .../history say when their counts were measured; by=group
 * shows the groups with the most tasks first, at most `limit` of them, and how many there
 * are; a big queue's counts come from the snapshot its primary published while it is fresh,
 * never from one gone stale (issue 28). */
Test(api, counts_as_of_and_groups_bounded)
{
    char body[8192] = "{\"tasks\": [";
    for (int i = 0; i < 78; i++) /* g0 has 12 tasks, g1 11, ... g11 1 */
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s{\"group\": \"g%d\"}",
                 i ? ", " : "", i < 12 ? 0 : i < 23 ? 1 : i < 33 ? 2 : 3 + (i - 33) % 9);
    strcat(body, "]}");
    test_api_answer_t a = call(tok_all, "POST", TASKS ":batch", body);
    cr_assert_eq(a.status, 201, "%s", a.json);
    test_api_answer_free(&a);
    const char *counts = "/api/v1/services/" SERVICE "/counts";
    a = call(tok_read, "GET", "/api/v1/services/" SERVICE "/counts?by=group&limit=2", NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_str_eq(test_doc_str(a.body, "rows.0.group"), "g0", "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "rows.0.count"), 12, "%s", a.json);
    cr_assert_str_eq(test_doc_str(a.body, "rows.1.group"), "g1", "%s", a.json);
    cr_assert_not(test_doc_has(a.body, "rows.2"), "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "distinct"), 12, "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "limit"), 2, "%s", a.json);
    cr_assert(test_doc_has(a.body, "as_of") && test_doc_int(a.body, "age_ms") >= 0, "%s",
              a.json);
    test_api_answer_free(&a);
    a = call(tok_read, "GET", "/api/v1/services", NULL);
    cr_assert(test_doc_has(a.body, "services.0.counts_as_of"), "%s", a.json);
    test_api_answer_free(&a);
    a = call(tok_read, "GET", "/api/v1/services/" SERVICE "/history?minutes=5", NULL);
    cr_assert_eq(test_doc_int(a.body, "current.counts.pending"), 78, "%s", a.json);
    cr_assert(test_doc_has(a.body, "current.as_of"), "%s", a.json);
    test_api_answer_free(&a);
    const char *bad[] = {"?by=group&limit=0", "?by=group&limit=501", "?by=kind&limit=x",
                         "?by=group&limit=", "?limit=3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s%s", counts, bad[i]);
        expect(call(tok_read, "GET", path, NULL), 400, "bad_request", bad[i]);
    }

    /* the snapshot a primary publishes for a big queue: served while fresh, with its age */
    bson_t snap;
    bson_error_t error;
    int64_t now = cohort_clock_cluster_ms();
    cr_assert(cohort_store_measure_counts(fx.store, fx.client, SERVICE, now - 3000, 7, &snap,
                                          &error),
              "%s", error.message);
    bson_t big = BSON_INITIALIZER;
    bson_copy_to_excluding_noinit(&snap, &big, "total", "counts", "due", NULL);
    BSON_APPEND_INT64(&big, "total", 123456);
    bson_t *pending = BCON_NEW("pending", BCON_INT64(123456));
    BSON_APPEND_DOCUMENT(&big, "counts", pending);
    bson_destroy(pending);
    bson_t *due =
        BCON_NEW("kinds", "[", "{", "kind", BCON_UTF8("snapkind"), "due", BCON_INT64(123456),
                 "oldest_due_at", BCON_DATE_TIME(now - 60000), "}", "]", "more", BCON_BOOL(true));
    BSON_APPEND_DOCUMENT(&big, "due", due);
    bson_destroy(due);
    cr_assert(cohort_store_publish_counts(fx.store, fx.client, SERVICE, &big, &error), "%s",
              error.message);
    a = call(tok_read, "GET", counts, NULL);
    cr_assert_eq(test_doc_int(a.body, "counts.pending"), 123456, "%s", a.json);
    cr_assert_geq(test_doc_int(a.body, "age_ms"), 2500, "%s", a.json);
    test_api_answer_free(&a);
    /* GET .../due serves the snapshot's due kinds too, with its age */
    a = call(tok_read, "GET", "/api/v1/services/" SERVICE "/due", NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_str_eq(test_doc_str(a.body, "kinds.0.kind"), "snapkind", "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "kinds.0.due"), 123456, "%s", a.json);
    cr_assert_not(test_doc_has(a.body, "kinds.1"), "%s", a.json);
    cr_assert(strstr(a.json, "\"more\" : true"), "%s", a.json);
    cr_assert(test_doc_has(a.body, "as_of"), "%s", a.json);
    cr_assert_geq(test_doc_int(a.body, "age_ms"), 2500, "%s", a.json);
    test_api_answer_free(&a);
    /* gone stale (its primary stopped measuring): measured again, not shown as current */
    bson_destroy(&big);
    bson_init(&big);
    bson_copy_to_excluding_noinit(&snap, &big, "total", "measured_at", NULL);
    BSON_APPEND_INT64(&big, "total", 123456);
    BSON_APPEND_DATE_TIME(&big, "measured_at", now - COHORT_COUNTS_FRESH_MS - 5000);
    cr_assert(cohort_store_publish_counts(fx.store, fx.client, SERVICE, &big, &error), "%s",
              error.message);
    a = call(tok_read, "GET", counts, NULL);
    cr_assert_eq(test_doc_int(a.body, "counts.pending"), 78, "%s", a.json);
    cr_assert_lt(test_doc_int(a.body, "age_ms"), COHORT_COUNTS_FRESH_MS, "%s", a.json);
    test_api_answer_free(&a);
    a = call(tok_read, "GET", "/api/v1/services/" SERVICE "/due", NULL);
    cr_assert_not(strstr(a.json, "snapkind"), "%s", a.json);
    test_api_answer_free(&a);
    bson_destroy(&big);
    bson_destroy(&snap);
}

/* The snapshot keeps the 500 groups with the most tasks whatever the number of groups, and
 * counts them all: 601 groups, the largest ("top", 100 tasks) last in the stream. */
Test(api, counts_snapshot_keeps_the_largest_groups)
{
    size_t cap = 700 * 40 + 64;
    char *body = malloc(cap);
    strcpy(body, "{\"tasks\": [");
    for (int i = 0; i < 700; i++) {
        char g[16];
        snprintf(g, sizeof g, i < 600 ? "g%03d" : "top", i);
        snprintf(body + strlen(body), cap - strlen(body), "%s{\"group\": \"%s\"}", i ? ", " : "",
                 g);
    }
    strcat(body, "]}");
    test_api_answer_t a = call(tok_all, "POST", TASKS ":batch", body);
    cr_assert_eq(a.status, 201, "%s", a.json);
    test_api_answer_free(&a);
    free(body);
    bson_t snap;
    bson_error_t error;
    cr_assert(cohort_store_measure_counts(fx.store, fx.client, SERVICE,
                                          cohort_clock_cluster_ms(), 0, &snap, &error),
              "%s", error.message);
    cr_assert_eq(cohort_counts_distinct(&snap, "groups"), 601);
    cr_assert_eq(cohort_counts_total(&snap), 700);
    cr_assert_str_eq(test_doc_str(&snap, "groups.rows.0.group"), "top");
    cr_assert_eq(test_doc_int(&snap, "groups.rows.0.count"), 100);
    cr_assert(test_doc_has(&snap, "groups.rows.499"));
    cr_assert_not(test_doc_has(&snap, "groups.rows.500"));
    bson_destroy(&snap);
    a = call(tok_read, "GET", "/api/v1/services/" SERVICE "/counts?by=group&limit=500", NULL);
    cr_assert_eq(test_doc_int(a.body, "distinct"), 601, "%.300s", a.json);
    cr_assert(test_doc_has(a.body, "rows.499") && !test_doc_has(a.body, "rows.500"));
    test_api_answer_free(&a);
}
