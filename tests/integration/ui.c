/*
 * ui.c - the dashboard over a real listener (node/http/ui.h, docs/UI.md): the embedded files with
 * their types, ETags (304 on If-None-Match), Content-Security-Policy and other headers, HEAD,
 * 301 for /ui, 404 and 405; then sessions (store/sessions.h, node/http/api_session.h): a one-time
 * code traded for an HttpOnly SameSite=Strict cookie once and only before it expires, a token
 * traded likewise, the API answering that cookie, and a cross-site state change refused;
 * then the endpoints the dashboard added (nodes, history, batches, audit, due) and the primary's
 * per-minute record behind the history, with its runs by kind (GET .../kinds, .../history/hours),
 * and the kinds a node's handler serves in its document.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api_server.h"
#include "ctl.h"
#include "http_client.h"
#include "support.h"
#include "core/clock.h"
#include "core/timefmt.h"
#include "core/token.h"
#include "node/http/api.h"
#include "node/primary/history.h"
#include "node/http/http.h"
#include "node/http/ui.h"
#include "store/history.h"
#include "store/kinds.h"
#include "store/sessions.h"
#include "store/store.h"
#include "store/nodes.h"
#include "store/tokens.h"

#define SERVICE "web"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static test_api_server_t srv;

static void setup(void)
{
    test_service_db_open("ui", SERVICE, &db, &store, &client);
    static const cohort_http_callbacks_t limits = {0};
    test_api_server_start(&srv, store, &limits, 0);
}

static void teardown(void)
{
    test_api_server_stop(&srv);
    test_service_db_close(&db, &store, &client);
}

TestSuite(ui, .init = setup, .fini = teardown, .timeout = 120);

/* The value of header `name` in a response (a static copy), or NULL. */
static const char *header(const http_response_t *r, const char *name)
{
    static char value[1024];
    size_t n = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > n && strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            snprintf(value, sizeof value, "%.*s", (int)(len - (size_t)(v - line)), v);
            return value;
        }
        line = end ? end + 2 : line + len;
    }
    return NULL;
}

static http_response_t get(const char *method, const char *path, const char *headers)
{
    http_response_t r;
    cr_assert(http_request_with(srv.port, method, path, headers, NULL, 5000, &r),
              "%s %s: no answer", method, path);
    return r;
}

Test(ui, serves_files_with_types_etags_and_policy)
{
    http_response_t r = get("GET", "/ui/", NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(header(&r, "Content-Type"), "text/html; charset=utf-8");
    const cohort_ui_asset_t *index = cohort_ui_find("/ui/");
    cr_assert_eq(r.body_len, index->len);
    cr_assert(memcmp(r.body, index->bytes, index->len) == 0);
    cr_assert_str_eq(header(&r, "ETag"), index->etag);
    cr_assert_str_eq(header(&r, "Content-Security-Policy"), COHORT_UI_CSP);
    cr_assert_not_null(strstr(COHORT_UI_CSP, "script-src 'self'"));
    cr_assert_null(strstr(COHORT_UI_CSP, "unsafe-inline"));
    cr_assert_not_null(strstr(COHORT_UI_CSP, "frame-ancestors 'none'"));
    cr_assert_str_eq(header(&r, "X-Content-Type-Options"), "nosniff");
    cr_assert_str_eq(header(&r, "Cache-Control"), "no-cache");
    cr_assert_str_eq(header(&r, "Referrer-Policy"), "no-referrer");
    http_response_free(&r);

    r = get("GET", "/ui/js/app.js", NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(header(&r, "Content-Type"), "text/javascript; charset=utf-8");
    http_response_free(&r);
    r = get("GET", "/ui/css/app.css", NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(header(&r, "Content-Type"), "text/css; charset=utf-8");
    http_response_free(&r);
    r = get("GET", "/ui/login?code=abc", NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_not_null(strstr(r.body, "js/login.js"));
    http_response_free(&r);
}

Test(ui, if_none_match_answers_304_and_head_no_body)
{
    char headers[128];
    snprintf(headers, sizeof headers, "If-None-Match: %s\r\n", cohort_ui_find("/ui/")->etag);
    http_response_t r = get("GET", "/ui/", headers);
    cr_assert_eq(r.status, 304);
    cr_assert_eq(r.body_len, 0);
    cr_assert_str_eq(header(&r, "ETag"), cohort_ui_find("/ui/")->etag);
    http_response_free(&r);
    r = get("GET", "/ui/", "If-None-Match: \"0000000000000000\"\r\n");
    cr_assert_eq(r.status, 200);
    http_response_free(&r);

    r = get("HEAD", "/ui/js/app.js", NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(r.body_len, 0);
    cr_assert_str_eq(header(&r, "Content-Type"), "text/javascript; charset=utf-8");
    http_response_free(&r);
}

Test(ui, redirects_refuses_and_hides_nothing)
{
    http_response_t r = get("GET", "/ui", NULL);
    cr_assert_eq(r.status, 301);
    cr_assert_str_eq(header(&r, "Location"), "/ui/");
    http_response_free(&r);
    r = get("GET", "/ui/nope.js", NULL);
    cr_assert_eq(r.status, 404);
    cr_assert_not_null(header(&r, "Content-Security-Policy"));
    http_response_free(&r);
    r = get("GET", "/ui/../CMakeLists.txt", NULL);
    cr_assert_neq(r.status, 200);
    http_response_free(&r);
    r = get("GET", "/ui/%2e%2e/CMakeLists.txt", NULL);
    cr_assert_eq(r.status, 404);
    http_response_free(&r);
    r = get("POST", "/ui/", NULL);
    cr_assert_eq(r.status, 405);
    cr_assert_str_eq(header(&r, "Allow"), "GET, HEAD");
    http_response_free(&r);
    /* The old routes are untouched. */
    r = get("GET", "/healthz", NULL);
    cr_assert_eq(r.status, 200);
    http_response_free(&r);
}

/* ---- sessions --------------------------------------------------------------------------- */

#define SAME_ORIGIN "Sec-Fetch-Site: same-origin\r\n"

/* A one-time code stored as cohortctl ui-link stores it: `scopes` "read" or "read,operate",
 * expiring `ttl_ms` from now on the server's clock (negative: already expired). */
static void make_code(const char *scopes, int64_t ttl_ms, char *code)
{
    bson_error_t error;
    char hash[COHORT_TOKEN_HASH_HEX];
    cr_assert(cohort_token_generate(code, COHORT_TOKEN_TEXT_MAX, &error), "%s", error.message);
    cr_assert(cohort_token_hash(code, hash, sizeof hash));
    bson_t array = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&array, "0", "read");
    if (strstr(scopes, "operate"))
        BSON_APPEND_UTF8(&array, "1", "operate");
    int64_t now;
    cr_assert(cohort_store_server_time(store, client, &now, &error), "%s", error.message);
    cr_assert(cohort_store_create_ui_code(store, client, hash, "ui tester", &array, now,
                                          now + ttl_ms, 3600000, &error),
              "%s", error.message);
    bson_destroy(&array);
}

static http_response_t post(const char *path, const char *headers, const char *body)
{
    http_response_t r;
    cr_assert(http_request_with(srv.port, "POST", path, headers, body, 5000, &r), "POST %s",
              path);
    return r;
}

/* Signs in with `json` ({"code": ...} or {"token": ...}); expects `status`; on 200 returns
 * the Cookie header line to send ("Cookie: cohort_session=...\r\n"). */
static void sign_in(const char *json, int status, char *cookie, size_t len)
{
    http_response_t r = post("/api/v1/session", SAME_ORIGIN, json);
    cr_assert_eq(r.status, status, "sign-in answered %d: %s", r.status, r.body);
    if (status == 200) {
        const char *set = header(&r, "Set-Cookie");
        cr_assert_not_null(set);
        cr_assert_not_null(strstr(set, "HttpOnly"), "%s", set);
        cr_assert_not_null(strstr(set, "SameSite=Strict"), "%s", set);
        cr_assert_not_null(strstr(set, "Path=/"), "%s", set);
        cr_assert(strncmp(set, "cohort_session=cht_", 19) == 0, "%s", set);
        snprintf(cookie, len, "Cookie: %.*s\r\n", (int)strcspn(set, ";"), set);
    } else {
        cr_assert_null(header(&r, "Set-Cookie"));
    }
    http_response_free(&r);
}

static void code_json(const char *code, char *json, size_t len)
{
    snprintf(json, len, "{\"code\": \"%s\"}", code);
}

/* Signs in with a fresh read-only code; returns the Cookie header line, as sign_in(). */
static void read_session(char *cookie, size_t len)
{
    char code[COHORT_TOKEN_TEXT_MAX], json[128];
    make_code("read", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, cookie, len);
}

Test(ui, a_code_signs_in_once_and_the_cookie_authenticates)
{
    char code[COHORT_TOKEN_TEXT_MAX], json[128], cookie[160];
    make_code("read", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, cookie, sizeof cookie);
    /* The database keeps hashes only. */
    cr_assert_eq(test_count(client, db, "ui_sessions", "{}"), 1);
    http_response_t r = get("GET", "/api/v1/whoami", cookie);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_not_null(strstr(r.body, "\"via\" : \"session\""), "%s", r.body);
    cr_assert_not_null(strstr(r.body, "\"name\" : \"ui tester\""), "%s", r.body);
    cr_assert_not_null(strstr(r.body, "\"can_operate\" : false"), "%s", r.body);
    http_response_free(&r);
    r = get("GET", "/api/v1/services", cookie);
    cr_assert_eq(r.status, 200, "%s", r.body);
    http_response_free(&r);
    /* The code worked once. */
    sign_in(json, 401, NULL, 0);
    /* A read session may not pause, even from the same origin. */
    char headers[256];
    snprintf(headers, sizeof headers, "%s%s", cookie, SAME_ORIGIN);
    r = post("/api/v1/services/" SERVICE "/pause", headers, "{}");
    cr_assert_eq(r.status, 403, "%s", r.body);
    cr_assert_not_null(strstr(r.body, "forbidden"), "%s", r.body);
    http_response_free(&r);
    /* Nor can the secret be used as a bearer token. */
    char bearer[128];
    snprintf(bearer, sizeof bearer, "Authorization: Bearer %.*s\r\n",
             (int)(strlen(cookie) - strlen("Cookie: cohort_session=") - 2),
             cookie + strlen("Cookie: cohort_session="));
    r = get("GET", "/api/v1/services", bearer);
    cr_assert_eq(r.status, 401, "%s", r.body);
    http_response_free(&r);
}

Test(ui, an_expired_or_unknown_code_is_refused)
{
    char code[COHORT_TOKEN_TEXT_MAX], json[128];
    make_code("read", -1000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 401, NULL, 0);
    make_code("read", 300, code);
    code_json(code, json, sizeof json);
    test_sleep_ms(600);
    sign_in(json, 401, NULL, 0);
    sign_in("{\"code\": \"cht_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}", 401, NULL, 0);
    sign_in("{\"code\": \"nope\"}", 401, NULL, 0);
    sign_in("{\"code\": 3}", 400, NULL, 0);
    sign_in("{}", 400, NULL, 0);
    sign_in("{\"code\": \"a\", \"token\": \"b\"}", 400, NULL, 0);
    sign_in("{\"user\": \"root\"}", 400, NULL, 0);
}

Test(ui, a_cross_site_change_with_the_cookie_is_refused)
{
    char code[COHORT_TOKEN_TEXT_MAX], json[128], cookie[160], headers[512];
    make_code("read,operate", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, cookie, sizeof cookie);
    const char *const bad[] = {
        "Sec-Fetch-Site: cross-site\r\n",
        "Sec-Fetch-Site: same-site\r\n",
        "Origin: http://evil.example\r\n",
        "Sec-Fetch-Site: cross-site\r\nOrigin: http://127.0.0.1\r\n",
        "", /* neither header */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(headers, sizeof headers, "%s%s", cookie, bad[i]);
        http_response_t r = post("/api/v1/services/" SERVICE "/pause", headers, "{}");
        cr_assert_eq(r.status, 403, "case %zu: %d %s", i, r.status, r.body);
        cr_assert_not_null(strstr(r.body, "cross_site"), "%s", r.body);
        http_response_free(&r);
    }
    bson_t doc;
    test_read_service(store, client, SERVICE, &doc);
    cr_assert_not(test_doc_has(&doc, "pause"), "a refused pause paused the service");
    bson_destroy(&doc);
    /* The same from the dashboard's own page goes through, and so does an Origin equal to
     * the Host from a browser without Sec-Fetch-Site. */
    snprintf(headers, sizeof headers, "%s%s", cookie, SAME_ORIGIN);
    http_response_t r = post("/api/v1/services/" SERVICE "/pause", headers, "{}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    http_response_free(&r);
    test_read_service(store, client, SERVICE, &doc);
    cr_assert(test_doc_has(&doc, "pause"), "the same-origin pause did not pause the service");
    bson_destroy(&doc);
    snprintf(headers, sizeof headers, "%sOrigin: http://127.0.0.1:%d\r\n", cookie, srv.port);
    r = post("/api/v1/services/" SERVICE "/resume", headers, "{}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    http_response_free(&r);
    /* Sign-in itself refuses another site's page (login CSRF). */
    make_code("read", 60000, code);
    code_json(code, json, sizeof json);
    r = post("/api/v1/session", "Sec-Fetch-Site: cross-site\r\n", json);
    cr_assert_eq(r.status, 403, "%s", r.body);
    http_response_free(&r);
}

Test(ui, a_token_signs_in_and_sign_out_ends_the_session)
{
    char token[COHORT_TOKEN_TEXT_MAX], hash[COHORT_TOKEN_HASH_HEX], json[128], cookie[160];
    bson_error_t error;
    cr_assert(cohort_token_generate(token, sizeof token, &error));
    cr_assert(cohort_token_hash(token, hash, sizeof hash));
    bson_t array = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&array, "0", "admin");
    bool exists;
    cr_assert(cohort_store_create_token(store, client, "sre", hash, &array, "test", &exists,
                                        &error),
              "%s", error.message);
    bson_destroy(&array);
    snprintf(json, sizeof json, "{\"token\": \"%s\"}", token);
    sign_in(json, 200, cookie, sizeof cookie);
    http_response_t r = get("GET", "/api/v1/whoami", cookie);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_not_null(strstr(r.body, "\"name\" : \"token sre\""), "%s", r.body);
    cr_assert_not_null(strstr(r.body, "\"can_operate\" : true"), "%s", r.body);
    http_response_free(&r);
    sign_in("{\"token\": \"cht_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}", 401, NULL, 0);

    char headers[256];
    snprintf(headers, sizeof headers, "%s%s", cookie, SAME_ORIGIN);
    cr_assert(http_request_with(srv.port, "DELETE", "/api/v1/session", headers, NULL, 5000, &r));
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_not_null(strstr(header(&r, "Set-Cookie"), "Max-Age=0"));
    http_response_free(&r);
    r = get("GET", "/api/v1/whoami", cookie);
    cr_assert_eq(r.status, 401, "%s", r.body);
    http_response_free(&r);

    /* Revoking the token ends the sessions it signed in. */
    sign_in(json, 200, cookie, sizeof cookie);
    r = get("GET", "/api/v1/whoami", cookie);
    cr_assert_eq(r.status, 200, "%s", r.body);
    http_response_free(&r);
    test_run_result_t run = test_ctl(db, "tokens", "revoke", "sre");
    cr_assert_eq(run.exit_code, 0, "%s", run.err);
    cr_assert_not_null(strstr(run.out, "1 dashboard session(s) signed in with it ended"), "%s",
                       run.out);
    test_run_result_free(&run);
    r = get("GET", "/api/v1/whoami", cookie);
    cr_assert_eq(r.status, 401, "a revoked token's session still works: %s", r.body);
    http_response_free(&r);
}

Test(ui, cohortctl_ui_link_prints_a_link_that_works_once)
{
    test_run_result_t run =
        test_ctl(db, "ui-link", "--scopes", "operate", "--url", "http://127.0.0.1:9/");
    cr_assert_eq(run.exit_code, 0, "%s", run.err);
    cr_assert(strncmp(run.out, "http://127.0.0.1:9/ui/login?code=cht_", 37) == 0, "%s",
              run.out);
    char json[128], cookie[160];
    snprintf(json, sizeof json, "{\"code\": \"%.*s\"}", (int)strcspn(run.out + 33, "\n"),
             run.out + 33);
    sign_in(json, 200, cookie, sizeof cookie);
    sign_in(json, 401, NULL, 0);
    http_response_t r = get("GET", "/api/v1/whoami", cookie);
    cr_assert_not_null(strstr(r.body, "\"can_operate\" : true"), "%s", r.body);
    http_response_free(&r);
    test_run_result_free(&run);
    run = test_ctl(db, "ui-link", "--scopes", "admin", "--url", "http://x");
    cr_assert_eq(run.exit_code, 2, "%s", run.err);
    test_run_result_free(&run);
}

/* ---- GET /api/v1/nodes ------------------------------------------------------------------ */

Test(ui, nodes_answers_what_cohortctl_nodes_says)
{
    int64_t now;
    bson_error_t error;
    cr_assert(cohort_store_server_time(store, client, &now, &error), "%s", error.message);
    mongoc_collection_t *nodes = mongoc_client_get_collection(client, db, "nodes");
    bson_t *doc = BCON_NEW("_id", "n1", "host", "h1", "pid", BCON_INT64(42), "version", "9.9",
                           "seen_at", BCON_DATE_TIME(now), "services", "[", "web", "]");
    cr_assert(mongoc_collection_insert_one(nodes, doc, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(doc);
    doc = BCON_NEW("_id", "n2", "host", "h2", "pid", BCON_INT64(43), "version", "9.9",
                   "seen_at", BCON_DATE_TIME(now - 3600000), "services", "[", "web", "]");
    cr_assert(mongoc_collection_insert_one(nodes, doc, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(doc);
    mongoc_collection_destroy(nodes);

    char code[COHORT_TOKEN_TEXT_MAX], json[128], cookie[160];
    make_code("read", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, cookie, sizeof cookie);
    http_response_t r = get("GET", "/api/v1/nodes", cookie);
    cr_assert_eq(r.status, 200, "%s", r.body);
    bson_t body;
    cr_assert(bson_init_from_json(&body, r.body, -1, &error), "%s", error.message);
    cr_assert_str_eq(test_doc_str(&body, "nodes.0.node_id"), "n1");
    cr_assert_str_eq(test_doc_str(&body, "nodes.0.state"), "live");
    cr_assert_str_eq(test_doc_str(&body, "nodes.0.services.0"), "web");
    cr_assert_str_eq(test_doc_str(&body, "nodes.1.node_id"), "n2");
    cr_assert_str_eq(test_doc_str(&body, "nodes.1.state"), "expired");
    cr_assert_geq(test_doc_int(&body, "nodes.1.last_ping_ms_ago"), 3600000);
    bson_destroy(&body);
    http_response_free(&r);
    r = get("POST", "/api/v1/nodes", cookie);
    cr_assert_eq(r.status, 403, "a POST with the cookie and no origin: %s", r.body);
    http_response_free(&r);

    test_run_result_t run = test_ctl(db, "nodes", "--json");
    cr_assert_eq(run.exit_code, 0, "%s", run.err);
    cr_assert(bson_init_from_json(&body, run.out, -1, &error), "%s", error.message);
    cr_assert_str_eq(test_doc_str(&body, "nodes.0.state"), "live");
    cr_assert_str_eq(test_doc_str(&body, "nodes.1.state"), "expired");
    cr_assert_eq(test_doc_int(&body, "nodes.0.pid"), 42);
    bson_destroy(&body);
    test_run_result_free(&run);
}

/* ---- the per-minute history ------------------------------------------------------------- */

/* Each of `queries` (a NULL-ended list) after /api/v1/services/web`path` answers 400. */
static void expect_400s(const char *path, const char *const *queries, const char *cookie)
{
    for (size_t i = 0; queries[i]; i++) {
        char full[160];
        snprintf(full, sizeof full, "/api/v1/services/" SERVICE "%s%s", path, queries[i]);
        http_response_t r = get("GET", full, cookie);
        cr_assert_eq(r.status, 400, "%s: %s", full, r.body);
        http_response_free(&r);
    }
}

/* The server's time, at least 5 s before the end of its minute (waiting for the next one). */
static int64_t server_now_clear_of_minute_end(void)
{
    int64_t now;
    bson_error_t error;
    cr_assert(cohort_store_server_time(store, client, &now, &error), "%s", error.message);
    if (now % COHORT_MINUTE_MS > COHORT_MINUTE_MS - 5000) {
        test_sleep_ms(COHORT_MINUTE_MS - now % COHORT_MINUTE_MS + 100);
        cr_assert(cohort_store_server_time(store, client, &now, &error), "%s", error.message);
    }
    return now;
}

Test(ui, history_records_minutes_bounded_by_retention_and_the_api_reads_them)
{
    bson_error_t error;
    int64_t now = server_now_clear_of_minute_end();
    int64_t minute = now - now % COHORT_MINUTE_MS;
    int64_t last = minute - COHORT_MINUTE_MS; /* the minute that ended */
    mongoc_collection_t *queue = mongoc_client_get_collection(client, db, "queue_" SERVICE);
    /* In the last minute: 2 succeeded, 1 failed, 1 timed out; before it: 1 succeeded. */
    const struct {
        const char *status;
        int64_t finished;
    } tasks[] = {{"succeeded", last + 1000},   {"succeeded", last + 59000},
                 {"failed", last + 30000},     {"timed_out", last + 2000},
                 {"succeeded", last - 1000},   {"pending", 0}};
    for (size_t i = 0; i < sizeof tasks / sizeof tasks[0]; i++) {
        bson_t *doc = tasks[i].finished
                          ? BCON_NEW("status", BCON_UTF8(tasks[i].status), "finished_at",
                                     BCON_DATE_TIME(tasks[i].finished))
                          : BCON_NEW("status", BCON_UTF8(tasks[i].status));
        cr_assert(mongoc_collection_insert_one(queue, doc, NULL, NULL, &error), "%s",
                  error.message);
        bson_destroy(doc);
    }
    mongoc_collection_destroy(queue);

    cohort_minute_t m;
    cr_assert(cohort_store_measure_minute(store, client, SERVICE, last, now, &m, &error), "%s",
              error.message);
    cr_assert_eq(m.succeeded, 2);
    cr_assert_eq(m.failed, 1);
    cr_assert_eq(m.timed_out, 1);
    cr_assert_eq(m.counts.succeeded, 3);
    cr_assert_eq(m.counts.pending, 1);
    /* The ids were made just now: enqueued in the minute under way, not in the last one. */
    cr_assert_eq(m.enqueued, 0);
    cohort_minute_t cur;
    cr_assert(cohort_store_measure_minute(store, client, SERVICE, minute, now, &cur, &error));
    cr_assert_eq(cur.oldest_due_ms, 0, "the pending task has no run_at: not due");
    cr_assert_eq(cur.enqueued, 6);

    /* Two primaries around a failover write the same minute: one document. An old minute
     * goes when a newer one is recorded past the retention. */
    cohort_minute_t old = m;
    old.at_ms = last - 3 * 3600000;
    old.epoch = m.epoch = 1;
    snprintf(m.primary, sizeof m.primary, "node-a");
    cr_assert(cohort_store_record_minute(store, client, SERVICE, &old, 86400000, &error));
    cr_assert(cohort_store_record_minute(store, client, SERVICE, &m, 86400000, &error));
    m.epoch = 2;
    snprintf(m.primary, sizeof m.primary, "node-b");
    cr_assert(cohort_store_record_minute(store, client, SERVICE, &m, 86400000, &error));
    cr_assert_eq(test_count(client, db, "history", "{}"), 2);
    cr_assert(cohort_store_record_minute(store, client, SERVICE, &m, 3600000, &error));
    cr_assert_eq(test_count(client, db, "history", "{}"), 1, "the old minute outlived retention");

    /* The oldest due pending task: by run_at, due ones only. */
    queue = mongoc_client_get_collection(client, db, "queue_" SERVICE);
    const int64_t run_ats[] = {now - 5000, now - 9000, now + 60000};
    for (size_t i = 0; i < 3; i++) {
        bson_t *doc = BCON_NEW("status", "pending", "run_at", BCON_DATE_TIME(run_ats[i]));
        cr_assert(mongoc_collection_insert_one(queue, doc, NULL, NULL, &error));
        bson_destroy(doc);
    }
    mongoc_collection_destroy(queue);
    cr_assert(cohort_store_measure_minute(store, client, SERVICE, minute, now, &cur, &error));
    cr_assert_eq(cur.oldest_due_ms, now - 9000);

    char code[COHORT_TOKEN_TEXT_MAX], json[128], cookie[160];
    make_code("read", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, cookie, sizeof cookie);
    http_response_t r = get("GET", "/api/v1/services/" SERVICE "/history?minutes=60", cookie);
    cr_assert_eq(r.status, 200, "%s", r.body);
    bson_t body;
    cr_assert(bson_init_from_json(&body, r.body, -1, &error), "%s", error.message);
    cr_assert_eq(test_doc_int(&body, "minutes.0.succeeded"), 2, "%s", r.body);
    cr_assert_eq(test_doc_int(&body, "minutes.0.failed"), 1);
    cr_assert_eq(test_doc_int(&body, "minutes.0.counts.pending"), 1);
    cr_assert_eq(test_doc_int(&body, "minutes.0.epoch"), 2, "the later primary's write stands");
    cr_assert_str_eq(test_doc_str(&body, "minutes.0.primary"), "node-b");
    cr_assert_not(test_doc_has(&body, "minutes.1"));
    cr_assert_eq(test_doc_int(&body, "current.enqueued"), 9);
    cr_assert_not_null(test_doc_str(&body, "current.oldest_due_at"));
    bson_destroy(&body);
    http_response_free(&r);
    const char *const bad[] = {"?minutes=0", "?minutes=1441", "?minutes=x", "?hours=1", NULL};
    expect_400s("/history", bad, cookie);
    r = get("GET", "/api/v1/services/a.b/history", cookie);
    cr_assert_eq(r.status, 400, "%s", r.body);
    http_response_free(&r);
    r = get("GET", "/api/v1/services/" SERVICE "/history", NULL);
    cr_assert_eq(r.status, 401, "%s", r.body);
    http_response_free(&r);
}

/* ---- runs by kind: the minute's histogram, its percentiles and GET .../kinds ---------------- */

/* A finished task of `kind` (NULL: none) that ran `ms` and ended with `status` at `at`. */
static void insert_run(const char *kind, const char *status, int64_t ms, int64_t at)
{
    mongoc_collection_t *queue = mongoc_client_get_collection(client, db, "queue_" SERVICE);
    bson_t *doc = BCON_NEW("status", BCON_UTF8(status), "claimed_at", BCON_DATE_TIME(at - ms),
                           "finished_at", BCON_DATE_TIME(at));
    if (kind)
        BSON_APPEND_UTF8(doc, "kind", kind);
    bson_error_t error;
    cr_assert(mongoc_collection_insert_one(queue, doc, NULL, NULL, &error), "%s", error.message);
    bson_destroy(doc);
    mongoc_collection_destroy(queue);
}

static const cohort_kind_stats_t *find_kind(const cohort_kinds_t *kinds, const char *kind)
{
    for (size_t i = 0; i < kinds->n; i++)
        if (strcmp(kinds->kind[i].kind, kind) == 0)
            return &kinds->kind[i];
    cr_assert_fail("no kind '%s'", kind);
    return NULL;
}

/* The number `field` of the kind `kind` in a /kinds reply (-1: no such kind or field). */
static double reply_kind(const bson_t *body, const char *kind, const char *field)
{
    for (int i = 0; i < COHORT_KINDS_MAX; i++) {
        char path[64];
        snprintf(path, sizeof path, "kinds.%d.kind", i);
        const char *k = test_doc_str(body, path);
        if (k && strcmp(k, kind) == 0) {
            snprintf(path, sizeof path, "kinds.%d.%s", i, field);
            bson_iter_t it, found;
            if (bson_iter_init(&it, body) && bson_iter_find_descendant(&it, path, &found) &&
                BSON_ITER_HOLDS_NUMBER(&found))
                return bson_iter_as_double(&found);
            return -1;
        }
    }
    return -1;
}

/* GET .../kinds`query` answered 200, its body into `body` (the caller destroys it). */
static void get_kinds(const char *query, const char *cookie, bson_t *body)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/services/" SERVICE "/kinds%s", query);
    http_response_t r = get("GET", path, cookie);
    cr_assert_eq(r.status, 200, "%s: %s", query, r.body);
    bson_error_t error;
    cr_assert(bson_init_from_json(body, r.body, -1, &error), "%s", error.message);
    http_response_free(&r);
}

Test(ui, kinds_measure_a_minute_into_buckets_and_the_api_sums_the_window)
{
    bson_error_t error;
    int64_t now = server_now_clear_of_minute_end();
    int64_t minute = now - now % COHORT_MINUTE_MS, last = minute - COHORT_MINUTE_MS;
    /* The last minute: "fast" 3 runs of 5 ms and 1 of 50 ms; "slow" 2 s and 2.5 s succeeded,
     * 2.5 s failed, 400 s timed out; one run without a kind; one "fast" run before the minute
     * and a pending task, neither counted. */
    insert_run("fast", "succeeded", 5, last + 1000);
    insert_run("fast", "succeeded", 5, last + 2000);
    insert_run("fast", "succeeded", 5, last + 3000);
    insert_run("fast", "succeeded", 50, last + 59999);
    insert_run("slow", "succeeded", 2000, last + 4000);
    insert_run("slow", "succeeded", 2500, last + 5000);
    insert_run("slow", "failed", 2500, last + 6000);
    insert_run("slow", "timed_out", 400000, last + 7000);
    insert_run(NULL, "succeeded", 0, last + 8000);
    insert_run("fast", "succeeded", 5, last - 1);
    insert_run("slow", "pending", 5, last + 9000);

    cohort_kinds_t kinds;
    cr_assert(cohort_store_measure_kinds(store, client, SERVICE, last, minute, &kinds, &error),
              "%s", error.message);
    cr_assert_eq(kinds.n, 3);
    const cohort_kind_stats_t *fast = find_kind(&kinds, "fast"), *slow = find_kind(&kinds, "slow");
    cr_assert_eq(fast->succeeded, 4);
    cr_assert_eq(fast->failed + fast->timed_out, 0);
    cr_assert_eq(fast->ms[0], 3, "5 ms is under 10 ms");
    cr_assert_eq(fast->ms[2], 1, "50 ms is in 30-100 ms");
    cr_assert_eq(slow->succeeded, 2);
    cr_assert_eq(slow->failed, 1);
    cr_assert_eq(slow->timed_out, 1);
    cr_assert_eq(slow->ms[5], 3, "2 s and 2.5 s are in 1-3 s");
    cr_assert_eq(slow->ms[10], 1, "400 s is in 300-1000 s");
    cr_assert_eq(find_kind(&kinds, "")->succeeded, 1);

    /* Percentiles are buckets, the rank rounded up: fast's p50 (2nd of 4) under 10 ms, its p95
     * (4th) 30-100 ms; slow's p50 1-3 s, its p95 300-1000 s; 1,500 runs past the last bound
     * land in the open bucket. */
    int64_t from, to;
    cr_assert(cohort_kind_percentile(fast, 50, &from, &to));
    cr_assert(from == 0 && to == 10, "fast p50 [%lld, %lld)", (long long)from, (long long)to);
    cr_assert(cohort_kind_percentile(fast, 95, &from, &to));
    cr_assert(from == 30 && to == 100, "fast p95 [%lld, %lld)", (long long)from, (long long)to);
    cr_assert(cohort_kind_percentile(slow, 50, &from, &to));
    cr_assert(from == 1000 && to == 3000);
    cr_assert(cohort_kind_percentile(slow, 95, &from, &to));
    cr_assert(from == 300000 && to == 1000000);
    cohort_kind_stats_t open = {.ms = {[COHORT_KIND_BUCKETS - 1] = 1500}};
    cr_assert(cohort_kind_percentile(&open, 50, &from, &to));
    cr_assert(from == 1000000 && to == -1);
    cohort_kind_stats_t none = {0};
    cr_assert_not(cohort_kind_percentile(&none, 50, &from, &to), "no runs: no percentile");

    /* Past 32 kinds a window says it left some out; the first 32 keep their counts. */
    static cohort_kinds_t many, one;
    one.n = 1;
    for (int i = 0; i <= COHORT_KINDS_MAX; i++) {
        snprintf(one.kind[0].kind, sizeof one.kind[0].kind, "k%d", i);
        one.kind[0].succeeded = 1;
        cohort_kinds_add(&many, &one);
    }
    cr_assert_eq(many.n, COHORT_KINDS_MAX);
    cr_assert(many.capped, "the 33rd kind is left out and said so");
    cr_assert_eq(find_kind(&many, "k31")->succeeded, 1);

    /* The minute written with its kinds, a minute two hours back likewise and rolled up into
     * its hour, and an old node's minute without kinds (read, adds nothing). */
    cohort_minute_t m = {.at_ms = last, .epoch = 1, .kinds = &kinds};
    cr_assert(cohort_store_record_minute(store, client, SERVICE, &m, 86400000, &error), "%s",
              error.message);
    int64_t hour = now - now % COHORT_HOUR_MS, old_hour = hour - 2 * COHORT_HOUR_MS;
    m.at_ms = old_hour + 5 * COHORT_MINUTE_MS;
    cr_assert(cohort_store_record_minute(store, client, SERVICE, &m, 86400000, &error));
    cohort_minute_t bare = {.at_ms = old_hour + 6 * COHORT_MINUTE_MS, .epoch = 1};
    cr_assert(cohort_store_record_minute(store, client, SERVICE, &bare, 86400000, &error));
    cr_assert(cohort_store_record_hour(store, client, SERVICE, old_hour, &error), "%s",
              error.message);
    cr_assert(cohort_store_record_hour(store, client, SERVICE, old_hour, &error));
    cr_assert_eq(test_count(client, db, "history_hours", "{}"), 1, "one document per hour");
    cohort_kinds_t sum = {0};
    int64_t docs = 0;
    cr_assert(cohort_store_sum_kinds(store, client, SERVICE, true, 0, &sum, &docs, &error));
    cr_assert_eq(docs, 1);
    cr_assert_eq(find_kind(&sum, "slow")->timed_out, 1);
    cr_assert_eq(find_kind(&sum, "fast")->ms[0], 3);

    /* One more fast run in the minute under way: the API counts it live. */
    insert_run("fast", "succeeded", 5, minute);
    char cookie[160];
    read_session(cookie, sizeof cookie);
    bson_t body;
    get_kinds("", cookie, &body);
    cr_assert_eq(test_doc_int(&body, "minutes"), 60);
    cr_assert_eq(reply_kind(&body, "fast", "finished"), 5);
    cr_assert_eq(reply_kind(&body, "slow", "finished"), 4);
    cr_assert_eq(reply_kind(&body, "slow", "failed"), 1);
    cr_assert_eq(reply_kind(&body, "slow", "p95.from_ms"), 300000);
    cr_assert_eq(reply_kind(&body, "slow", "p50.to_ms"), 3000);
    cr_assert_eq(reply_kind(&body, "fast", "p50.to_ms"), 10);
    cr_assert_eq(reply_kind(&body, "slow", "error_rate"), 0.5, "2 of 4 failed or timed out");
    cr_assert_eq(reply_kind(&body, "fast", "error_rate"), 0);
    bson_destroy(&body);
    /* The day adds the minute two hours back; the week reads its hour, not its minutes. */
    get_kinds("?minutes=1440", cookie, &body);
    cr_assert_eq(reply_kind(&body, "slow", "finished"), 8);
    cr_assert_eq(test_doc_int(&body, "minutes_read"), 3);
    bson_destroy(&body);
    get_kinds("?minutes=10080", cookie, &body);
    cr_assert_str_eq(test_doc_str(&body, "source"), "hours");
    cr_assert_eq(test_doc_int(&body, "hours_read"), 1);
    int64_t in_hour = last >= hour ? 4 : 0; /* the last minute, if in the hour under way */
    cr_assert_eq(reply_kind(&body, "slow", "finished"), 4 + in_hour);
    bson_destroy(&body);

    /* The rollups themselves, for the week's chart: the hour two hours back, its 2 minutes. */
    http_response_t r = get("GET", "/api/v1/services/" SERVICE "/history/hours", cookie);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert(bson_init_from_json(&body, r.body, -1, &error), "%s", error.message);
    cr_assert_not_null(test_doc_str(&body, "hours.0.at"), "%s", r.body);
    cr_assert_eq(test_doc_int(&body, "hours.0.minutes"), 2);
    cr_assert_eq(test_doc_int(&body, "hours.0.counts.pending"), 0);
    cr_assert_not(test_doc_has(&body, "hours.0.kinds"));
    cr_assert_not(test_doc_has(&body, "hours.1"));
    bson_destroy(&body);
    http_response_free(&r);
    const char *const bad_hours[] = {"?hours=0", "?hours=193", "?hours=x", "?hours=", "?days=7",
                                     NULL};
    expect_400s("/history/hours", bad_hours, cookie);
    const char *const bad[] = {"?minutes=0", "?minutes=61", "?minutes=x", "?minutes=10081",
                               "?minutes=", "?hours=1", NULL};
    expect_400s("/kinds", bad, cookie);
    r = get("GET", "/api/v1/services/" SERVICE "/kinds", NULL);
    cr_assert_eq(r.status, 401, "%s", r.body);
    http_response_free(&r);
}

/* ---- the audit trail -------------------------------------------------------------------- */

Test(ui, every_operator_action_is_audited_and_read_newest_first)
{
    char code[COHORT_TOKEN_TEXT_MAX], json[128], reader[160], operator[160], headers[256];
    make_code("read", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, reader, sizeof reader);
    make_code("read,operate", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, operator, sizeof operator);

    snprintf(headers, sizeof headers, "%s%s", reader, SAME_ORIGIN);
    http_response_t r = post("/api/v1/services/" SERVICE "/pause", headers, "{}");
    cr_assert_eq(r.status, 403);
    http_response_free(&r);
    snprintf(headers, sizeof headers, "%s%s", operator, SAME_ORIGIN);
    r = post("/api/v1/services/" SERVICE "/pause", headers,
             "{\"kind\": \"mail\", \"reason\": \"smtp down\"}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    http_response_free(&r);
    /* Reads are not actions. */
    r = get("GET", "/api/v1/services", operator);
    http_response_free(&r);
    cr_assert_eq(test_count(client, db, "audit", "{}"), 2);

    r = get("GET", "/api/v1/audit?limit=1", reader);
    cr_assert_eq(r.status, 200, "%s", r.body);
    bson_t body;
    bson_error_t error;
    cr_assert(bson_init_from_json(&body, r.body, -1, &error), "%s", error.message);
    cr_assert_str_eq(test_doc_str(&body, "entries.0.who"), "ui tester");
    cr_assert_str_eq(test_doc_str(&body, "entries.0.via"), "session");
    cr_assert_str_eq(test_doc_str(&body, "entries.0.path"), "/api/v1/services/" SERVICE "/pause");
    cr_assert_str_eq(test_doc_str(&body, "entries.0.body.reason"), "smtp down");
    cr_assert_eq(test_doc_int(&body, "entries.0.status"), 200);
    cr_assert_not(test_doc_has(&body, "entries.0.error"));
    cr_assert_not_null(test_doc_str(&body, "entries.0.at"));
    char next[64];
    snprintf(next, sizeof next, "%s", test_doc_str(&body, "next"));
    bson_destroy(&body);
    http_response_free(&r);

    char path[128];
    snprintf(path, sizeof path, "/api/v1/audit?limit=1&before=%s", next);
    r = get("GET", path, reader);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert(bson_init_from_json(&body, r.body, -1, &error), "%s", error.message);
    cr_assert_eq(test_doc_int(&body, "entries.0.status"), 403);
    cr_assert_str_eq(test_doc_str(&body, "entries.0.error"), "forbidden");
    bson_destroy(&body);
    http_response_free(&r);
    r = get("GET", "/api/v1/audit?limit=0", reader);
    cr_assert_eq(r.status, 400, "%s", r.body);
    http_response_free(&r);
    r = get("GET", "/api/v1/audit?before=zz", reader);
    cr_assert_eq(r.status, 400, "%s", r.body);
    http_response_free(&r);
}

/* A refusal before the caller is known (401, a cross-site session request) on an operator
 * endpoint is audited too, but at most once a minute per node and kind (401, cross-site): a
 * flood of them cannot grow the collection, nor hide the other kind. The ones left out are counted on the next entry. Reads are not audited. */
Test(ui, refusals_of_unknown_callers_are_audited_and_bounded)
{
    char code[COHORT_TOKEN_TEXT_MAX], json[128], operator[160];
    make_code("read,operate", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, operator, sizeof operator);

    /* a session's POST without Sec-Fetch-Site / Origin: cross-site */
    http_response_t r = post("/api/v1/services/" SERVICE "/pause", operator, "{}");
    cr_assert_eq(r.status, 403, "%s", r.body);
    http_response_free(&r);
    cr_assert_eq(test_count(client, db, "audit", "{}"), 1, "the cross-site refusal is audited");
    cr_assert_eq(test_count(client, db, "audit",
                            "{\"who\": \"\", \"via\": \"session\", \"status\": 403, "
                            "\"error\": \"cross_site\", \"path\": \"/api/v1/services/" SERVICE
                            "/pause\"}"),
                 1);
    for (int i = 0; i < 20; i++) {
        r = post("/api/v1/services/" SERVICE "/pause",
                 "Authorization: Bearer cht_not-a-real-token\r\n", "{}");
        cr_assert_eq(r.status, 401, "%s", r.body);
        http_response_free(&r);
    }
    r = get("GET", "/api/v1/services", NULL); /* a read: never audited */
    cr_assert_eq(r.status, 401, "%s", r.body);
    http_response_free(&r);
    /* One entry per kind a minute: the first 401 beside the cross-site refusal, no more. */
    cr_assert_eq(test_count(client, db, "audit", "{\"status\": 401, \"who\": \"\"}"), 1,
                 "the first 401 is audited (a cross-site entry does not hide it)");
    cr_assert_eq(test_count(client, db, "audit", "{}"), 2, "a flood of 401s grew the audit");
    cr_assert_eq(test_count(client, db, "queue_" SERVICE, "{}"), 0);
}

/* ---- GET .../batches -------------------------------------------------------------------- */

Test(ui, batches_shows_the_open_draining_and_last_completed_batch)
{
    bson_error_t error;
    mongoc_collection_t *services = mongoc_client_get_collection(client, db, "services");
    bson_t *filter = BCON_NEW("_id", SERVICE);
    bson_t *update = BCON_NEW(
        "$set", "{", "batch_seq", BCON_INT64(7), "draining", "{", "seq", BCON_INT64(6),
        "epoch", BCON_INT64(2), "}", "batches_completed", BCON_INT64(5), "last_batch", "{",
        "seq", BCON_INT64(5), "succeeded", BCON_INT64(10), "failed", BCON_INT64(1),
        "completed_by", "node-b", "epoch", BCON_INT64(2), "completed_at",
        BCON_DATE_TIME(1795255200000LL), "}", "elected_at", BCON_DATE_TIME(1795255100000LL), "}");
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    cr_assert(mongoc_collection_update_one(services, filter, update, opts, NULL, &error), "%s",
              error.message);
    bson_destroy(opts);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(services);

    char code[COHORT_TOKEN_TEXT_MAX], json[128], cookie[160];
    make_code("read", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, cookie, sizeof cookie);
    http_response_t r = get("GET", "/api/v1/services/" SERVICE "/batches", cookie);
    cr_assert_eq(r.status, 200, "%s", r.body);
    bson_t body;
    cr_assert(bson_init_from_json(&body, r.body, -1, &error), "%s", error.message);
    cr_assert_eq(test_doc_int(&body, "open"), 7);
    cr_assert_eq(test_doc_int(&body, "draining"), 6);
    cr_assert_eq(test_doc_int(&body, "completed"), 5);
    cr_assert_eq(test_doc_int(&body, "last.succeeded"), 10);
    cr_assert_str_eq(test_doc_str(&body, "last.completed_by"), "node-b");
    cr_assert_str_eq(test_doc_str(&body, "last.completed_at"), "2026-11-21T10:00:00.000Z");
    cr_assert_str_eq(test_doc_str(&body, "elected_at"), "2026-11-21T09:58:20.000Z");
    bson_destroy(&body);
    http_response_free(&r);
    r = get("GET", "/api/v1/services/nope/batches", cookie);
    cr_assert_eq(r.status, 404, "%s", r.body);
    http_response_free(&r);
}

/* The primary's tick (node/primary/history.c): the minute that ended is written once, with the
 * primary's epoch and node id; later ticks of the same minute write nothing. */
Test(ui, the_primary_records_each_ended_minute_once)
{
    cohort_service_config_t config = {.name = SERVICE, .history_retention_ms = 86400000};
    cohort_service_t *s = calloc(1, sizeof *s);
    s->config = &config;
    s->node_id = "node-h";
    s->store = store;
    /* A run of kind "mail" that failed after 150 ms in the minute that ends: in its `kinds`. */
    server_now_clear_of_minute_end();
    int64_t now = cohort_clock_cluster_ms();
    insert_run("mail", "failed", 150, now - now % COHORT_MINUTE_MS - 30000);
    cohort_history_tick(s, client, 3);
    cr_assert_eq(test_count(client, db, "history", "{}"), 1);
    int64_t recorded = s->history_minute_ms;
    cr_assert_gt(recorded, 0);
    cr_assert_eq(recorded % COHORT_MINUTE_MS, 0);
    bson_t doc;
    cr_assert(test_find_one(client, db, "history", "{}", &doc));
    cr_assert_str_eq(test_doc_str(&doc, "primary"), "node-h");
    cr_assert_eq(test_doc_int(&doc, "epoch"), 3);
    cr_assert_eq(test_doc_int(&doc, "at"), recorded - COHORT_MINUTE_MS, "the minute that ended");
    cr_assert_str_eq(test_doc_str(&doc, "kinds.0.kind"), "mail");
    cr_assert_eq(test_doc_int(&doc, "kinds.0.failed"), 1);
    cr_assert_eq(test_doc_int(&doc, "kinds.0.ms.3"), 1, "150 ms is in 100-300 ms");
    bson_destroy(&doc);
    /* Within the same minute: nothing more (a tick is seconds, a minute is sixty of them). */
    if (cohort_clock_cluster_ms() - recorded < COHORT_MINUTE_MS - 2000) {
        mongoc_collection_t *h = mongoc_client_get_collection(client, db, "history");
        bson_error_t error;
        bson_t *all = bson_new();
        cr_assert(mongoc_collection_delete_many(h, all, NULL, NULL, &error), "%s", error.message);
        bson_destroy(all);
        mongoc_collection_destroy(h);
        cohort_history_tick(s, client, 3);
        cr_assert_eq(test_count(client, db, "history", "{}"), 0, "a second write in one minute");
    }
    free(s);
}

/* ---- POST .../block and .../unblock ----------------------------------------------------- */

Test(ui, block_and_unblock_set_the_operators_switch)
{
    char code[COHORT_TOKEN_TEXT_MAX], json[128], reader[160], operator[160], headers[256];
    make_code("read", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, reader, sizeof reader);
    make_code("read,operate", 60000, code);
    code_json(code, json, sizeof json);
    sign_in(json, 200, operator, sizeof operator);

    snprintf(headers, sizeof headers, "%s%s", operator, SAME_ORIGIN);
    http_response_t r = post("/api/v1/services/" SERVICE "/block", headers,
                             "{\"kind\": \"mail\", \"reason\": \"smtp down\"}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_not_null(strstr(r.body, "\"blocked\" : true"), "%s", r.body);
    http_response_free(&r);
    bson_t doc;
    test_read_service(store, client, SERVICE, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "block.mail.reason"), "smtp down");
    cr_assert_str_eq(test_doc_str(&doc, "block.mail.by"), "tester via dashboard");
    bson_destroy(&doc);

    r = post("/api/v1/services/" SERVICE "/unblock", headers, "{\"kind\": \"mail\"}");
    cr_assert_eq(r.status, 200, "%s", r.body);
    http_response_free(&r);
    test_read_service(store, client, SERVICE, &doc);
    cr_assert_not(test_doc_has(&doc, "block.mail"));
    bson_destroy(&doc);

    r = post("/api/v1/services/" SERVICE "/unblock", headers, "{\"reason\": \"x\"}");
    cr_assert_eq(r.status, 400, "unblock takes no reason: %s", r.body);
    http_response_free(&r);
    r = post("/api/v1/services/nope/block", headers, "{}");
    cr_assert_eq(r.status, 404, "%s", r.body);
    http_response_free(&r);
    r = get("GET", "/api/v1/services/" SERVICE "/block", operator);
    cr_assert_eq(r.status, 405, "%s", r.body);
    cr_assert_str_eq(header(&r, "Allow"), "POST");
    http_response_free(&r);
    snprintf(headers, sizeof headers, "%s%s", reader, SAME_ORIGIN);
    r = post("/api/v1/services/" SERVICE "/block", headers, "{}");
    cr_assert_eq(r.status, 403, "%s", r.body);
    http_response_free(&r);
    test_read_service(store, client, SERVICE, &doc);
    cr_assert_not(test_doc_has(&doc, "block.*"), "a refused block blocked");
    bson_destroy(&doc);
    /* Each of the five requests to an operate endpoint is in the audit, refusals too (the
     * GET, answered 405, asked for no action). */
    cr_assert_eq(test_count(client, db, "audit", "{}"), 5);
}

/* ---- which kinds the workers take, and the due tasks by kind --------------------------- */

/* Pings node n1 hosting SERVICE with one worker and a handler of `kinds` (NULL: every kind). */
static void ping_with_kinds(const char *const *kinds)
{
    const char *services[] = {SERVICE};
    const int64_t workers[] = {1};
    const char *const *per_service[] = {kinds};
    cohort_node_info_t info = {.node_id = "n1",
                               .host = "h1",
                               .pid = 42,
                               .version = "9.9",
                               .services = services,
                               .workers = workers,
                               .n_services = 1,
                               .kinds = per_service,
                               .db_rtt_p99_ms = -1,
                               .db_rtt_p50_ms = -1};
    int64_t server_ms;
    bool expired;
    bson_error_t error;
    cr_assert(
        cohort_store_ping_node(store, client, &info, NULL, &server_ms, &expired, NULL, &error),
        "%s", error.message);
}

/* `n` pending tasks of `kind` (NULL: none) due at `run_at`. */
static void due_tasks(const char *kind, int n, int64_t run_at)
{
    mongoc_collection_t *queue = mongoc_client_get_collection(client, db, "queue_" SERVICE);
    bson_error_t error;
    for (int i = 0; i < n; i++) {
        bson_t *doc = BCON_NEW("status", "pending", "run_at", BCON_DATE_TIME(run_at), "data", "{",
                               "}", "attempts", BCON_INT32(0), "priority", BCON_INT32(0));
        if (kind)
            BSON_APPEND_UTF8(doc, "kind", kind);
        cr_assert(mongoc_collection_insert_one(queue, doc, NULL, NULL, &error), "%s",
                  error.message);
        bson_destroy(doc);
    }
    mongoc_collection_destroy(queue);
}

/* GET `path` with `cookie` as a document into `body` (initialised); asserts 200. */
static void get_doc(const char *path, const char *cookie, bson_t *body)
{
    http_response_t r = get("GET", path, cookie);
    bson_error_t error;
    cr_assert_eq(r.status, 200, "%s: %s", path, r.body);
    cr_assert(bson_init_from_json(body, r.body, -1, &error), "%s", error.message);
    http_response_free(&r);
}

Test(ui, nodes_publish_their_handlers_kinds_and_due_counts_by_kind)
{
    static const char *const kinds[] = {"email", "sms", NULL};
    ping_with_kinds(kinds);
    int64_t now;
    bson_error_t error;
    cr_assert(cohort_store_server_time(store, client, &now, &error), "%s", error.message);
    due_tasks("mail", 3, now - 420000);
    due_tasks("mail", 1, now - 60000);
    due_tasks("mail", 2, now + 3600000); /* not due yet: not counted */
    due_tasks("email", 1, now - 60000);

    char cookie[160];
    read_session(cookie, sizeof cookie);
    bson_t body;
    get_doc("/api/v1/nodes", cookie, &body);
    cr_assert_str_eq(test_doc_str(&body, "nodes.0.kinds." SERVICE ".0"), "email");
    cr_assert_str_eq(test_doc_str(&body, "nodes.0.kinds." SERVICE ".1"), "sms");
    bson_destroy(&body);

    get_doc("/api/v1/services/" SERVICE "/due", cookie, &body);
    char oldest[40];
    cohort_time_format(now - 420000, oldest, sizeof oldest);
    cr_assert_str_eq(test_doc_str(&body, "kinds.0.kind"), "mail");
    cr_assert_eq(test_doc_int(&body, "kinds.0.due"), 4);
    cr_assert_str_eq(test_doc_str(&body, "kinds.0.oldest_due_at"), oldest);
    cr_assert_str_eq(test_doc_str(&body, "kinds.1.kind"), "email");
    cr_assert_eq(test_doc_int(&body, "kinds.1.due"), 1);
    cr_assert_not(test_doc_has(&body, "kinds.2"));
    bson_destroy(&body);

    http_response_t r = get("GET", "/api/v1/services/nosuch/due", cookie);
    cr_assert_eq(r.status, 404, "an unknown service: %s", r.body);
    http_response_free(&r);
    r = get("GET", "/api/v1/services/" SERVICE "/due?kind=x", cookie);
    cr_assert_eq(r.status, 400, "a query: %s", r.body);
    http_response_free(&r);

    ping_with_kinds(NULL); /* a handler that takes every kind: no entry */
    get_doc("/api/v1/nodes", cookie, &body);
    cr_assert_not(test_doc_has(&body, "nodes.0.kinds." SERVICE), "%s", "kinds left behind");
    bson_destroy(&body);
}
