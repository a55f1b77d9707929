/*
 * api_workers.c - the HTTP API's external-worker endpoints (node/http/api_workers.h), called
 * in-process through cohort_api_handle() against the local database, with a hosted service
 * of `handler = external`: claims (with a lease, filtered by kind, pause, groups, attempts;
 * the hold asked for when nothing is due), heartbeats, succeed / fail / release fenced on
 * the claim, replays answered 200 without a second effect, lost leases answered 409 with
 * nothing written, the primary's lease sweep, every refusal of bad input with its status
 * and code, and the worker's entry in `nodes`.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "api_server.h"
#include "support.h"
#include "core/clock.h"
#include "core/token.h"
#include "node/http/api.h"
#include "node/http/api_parse.h"
#include "node/primary/election.h"
#include "node/work/filter.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/leases.h"
#include "store/nodes.h"
#include "store/outcomes.h"
#include "store/tokens.h"

#define SERVICE "ext"
#define QUEUE "queue_" SERVICE

static test_api_fixture_t fx;
static char tok_work[COHORT_TOKEN_TEXT_MAX], tok_read[COHORT_TOKEN_TEXT_MAX];

static void setup(void)
{
    test_api_fixture_open(
        &fx, &(test_api_setup_t){.prefix = "apiwork",
                                 .service = SERVICE,
                                 .host = true,
                                 .max_attempts = 3,
                                 .retry_base_ms = 60000, /* a retried task stays pending */
                                 .max_wait_ms = 5000});
    test_api_token(fx.store, fx.client, "worker", "work,enqueue", tok_work);
    test_api_token(fx.store, fx.client, "reader", "read", tok_read);
}

static void teardown(void)
{
    test_api_fixture_close(&fx);
}

TestSuite(api_workers, .init = setup, .fini = teardown, .timeout = 120);

static test_api_answer_t request_as(const char *method, const char *token, const char *path,
                                    const char *body)
{
    return test_api_call(&fx, token, method, path, body, NULL);
}

static test_api_answer_t call_as(const char *token, const char *path, const char *body)
{
    return request_as("POST", token, path, body);
}

static test_api_answer_t call(const char *path, const char *body)
{
    return call_as(tok_work, path, body);
}

static void expect(test_api_answer_t a, int status, const char *code, const char *what)
{
    test_api_expect(a, status, code, NULL, what);
}

#define CLAIMS "/api/v1/services/" SERVICE "/claims"

static void enqueue(const char *body)
{
    test_api_answer_t a = call("/api/v1/services/" SERVICE "/tasks", body);
    cr_assert_eq(a.status, 201, "enqueue %s: %s", body, a.json);
    cr_assert_str_eq(a.wake, SERVICE, "an enqueue wakes the service's held claims");
    test_api_answer_free(&a);
}

/* One claimed task of a claim's reply. */
typedef struct claimed {
    char id[25];
    char token[COHORT_LEASE_TOKEN_MAX];
    int64_t attempt;
} claimed_t;

/* Claims (body) and returns how many tasks came back, the first `max_out` in `out`. */
static size_t claim(const char *body, claimed_t *out, size_t max_out, int64_t *hold_ms)
{
    test_api_answer_t a = call(CLAIMS, body);
    cr_assert_eq(a.status, 200, "claim %s: %s", body, a.json);
    if (hold_ms)
        *hold_ms = a.hold_ms;
    size_t n = 0;
    for (;; n++) {
        char key[64];
        snprintf(key, sizeof key, "tasks.%zu.id", n);
        const char *id = test_doc_str(a.body, key);
        if (!id)
            break;
        if (n < max_out) {
            snprintf(out[n].id, sizeof out[n].id, "%s", id);
            snprintf(key, sizeof key, "tasks.%zu.lease.token", n);
            cr_assert_not_null(test_doc_str(a.body, key), "%s", a.json);
            snprintf(out[n].token, sizeof out[n].token, "%s", test_doc_str(a.body, key));
            snprintf(key, sizeof key, "tasks.%zu.attempt", n);
            out[n].attempt = test_doc_int(a.body, key);
            snprintf(key, sizeof key, "tasks.%zu.lease.expires_at", n);
            cr_assert_not_null(test_doc_str(a.body, key), "an expiry time: %s", a.json);
        }
    }
    test_api_answer_free(&a);
    return n;
}

static test_api_answer_t lease_call(const claimed_t *t, const char *action, const char *body)
{
    char path[256];
    snprintf(path, sizeof path, "/api/v1/leases/%s/%s", t->token, action);
    return call(path, body);
}

/* The task document (destroy it). */
static void read_task(const char *id, bson_t *doc)
{
    char filter[80];
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%s\"}}", id);
    cr_assert(test_find_one(fx.client, fx.db, QUEUE, filter, doc), "task %s is missing", id);
}

static void expect_status(const char *id, const char *status)
{
    bson_t doc;
    read_task(id, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), status, "task %s", id);
    bson_destroy(&doc);
}

/* The number of history entries of task `id` whose outcome is `outcome`. */
static int history_count(const char *id, const char *outcome)
{
    bson_t doc;
    read_task(id, &doc);
    int n = 0;
    for (int i = 0; i < COHORT_HISTORY_MAX; i++) {
        char key[64];
        snprintf(key, sizeof key, "history.%d.outcome", i);
        const char *o = test_doc_str(&doc, key);
        n += o && strcmp(o, outcome) == 0;
    }
    bson_destroy(&doc);
    return n;
}

Test(api_workers, claim_heartbeat_succeed_and_replay)
{
    enqueue("{\"data\": {\"n\": 1}, \"kind\": \"mail\"}");
    claimed_t t;
    cr_assert_eq(claim("{\"worker\": \"py-1\", \"max\": 4, \"lease_ms\": 5000}", &t, 1, NULL), 1);
    cr_assert_eq(t.attempt, 1);
    expect_status(t.id, "claimed");
    bson_t doc;
    read_task(t.id, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "claimed_by"), "py-1");
    cr_assert(test_doc_has(&doc, "lease_expires_at"));
    int64_t first = test_doc_int(&doc, "lease_expires_at");
    bson_destroy(&doc);

    test_api_answer_t hb =
        lease_call(&t, "heartbeat", "{\"lease_ms\": 60000, \"progress\": {\"p\": 3}}");
    cr_assert_eq(hb.status, 200, "%s", hb.json);
    cr_assert(test_doc_has(hb.body, "expires_at"));
    cr_assert(test_doc_has(hb.body, "cancel_requested"));
    test_api_answer_free(&hb);
    read_task(t.id, &doc);
    cr_assert_gt(test_doc_int(&doc, "lease_expires_at"), first + 40000, "the lease was extended");
    cr_assert_eq(test_doc_int(&doc, "progress.p"), 3);
    bson_destroy(&doc);

    test_api_answer_t ok = lease_call(&t, "succeed", "{\"result\": {\"sent\": 2}}");
    cr_assert_eq(ok.status, 200, "%s", ok.json);
    cr_assert_str_eq(test_doc_str(ok.body, "status"), "succeeded");
    test_api_answer_free(&ok);
    read_task(t.id, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "succeeded");
    cr_assert_eq(test_doc_int(&doc, "result.sent"), 2, "the result is stored");
    cr_assert_str_eq(test_doc_str(&doc, "history.0.node"), "py-1");
    bson_destroy(&doc);
    /* ... and GET .../tasks/{id} returns it, with the last progress */
    char path[128];
    snprintf(path, sizeof path, "/api/v1/services/" SERVICE "/tasks/%s", t.id);
    test_api_answer_t got = request_as("GET", tok_read, path, NULL);
    cr_assert_eq(got.status, 200, "%s", got.json);
    cr_assert_eq(test_doc_int(got.body, "result.sent"), 2, "no result: %s", got.json);
    cr_assert_eq(test_doc_int(got.body, "progress.p"), 3, "no progress: %s", got.json);
    test_api_answer_free(&got);

    /* The same succeed again (a retry after a dropped reply): 200, nothing written twice. */
    test_api_answer_t again = lease_call(&t, "succeed", "{\"result\": {\"sent\": 2}}");
    cr_assert_eq(again.status, 200, "%s", again.json);
    cr_assert(test_doc_has(again.body, "replayed"), "%s", again.json);
    test_api_answer_free(&again);
    cr_assert_eq(history_count(t.id, "succeeded"), 1);
    /* A different outcome for the same attempt is a conflict; a heartbeat too. */
    expect(lease_call(&t, "fail", "{\"error\": \"late\"}"), 409, "conflict", "fail after succeed");
    expect(lease_call(&t, "heartbeat", NULL), 409, "conflict", "heartbeat after succeed");
    expect_status(t.id, "succeeded");
}

Test(api_workers, lost_lease_changes_nothing)
{
    enqueue("{\"data\": {\"n\": 2}}");
    claimed_t first;
    cr_assert_eq(claim("{\"worker\": \"py-1\", \"lease_ms\": 1000}", &first, 1, NULL), 1);
    /* The primary's sweep, as if the lease ran out 2 s ago. */
    int64_t released = 0;
    bson_error_t error;
    cr_assert(cohort_store_expire_leases(fx.store, fx.client, SERVICE,
                                         cohort_clock_cluster_ms() + 2000, &released, &error),
              "%s", error.message);
    cr_assert_eq(released, 1);
    expect_status(first.id, "pending");
    expect(lease_call(&first, "succeed", "{}"), 409, "lease_lost", "succeed after expiry");
    expect(lease_call(&first, "heartbeat", "{}"), 409, "lease_lost", "heartbeat after expiry");
    expect_status(first.id, "pending");

    /* Claimed again by another worker: the old token still changes nothing. */
    claimed_t second;
    cr_assert_eq(claim("{\"worker\": \"py-2\"}", &second, 1, NULL), 1);
    cr_assert_str_eq(second.id, first.id);
    cr_assert_eq(second.attempt, 2, "the expired attempt counted");
    expect(lease_call(&first, "fail", "{\"retry\": false}"), 409, "lease_lost", "old fail");
    /* The write itself is fenced, not only the read before it: the old lease's outcome,
     * written straight through the store, matches nothing. */
    cohort_lease_ref_t old;
    cr_assert(cohort_lease_token_parse(first.token, &old));
    cohort_task_result_t late = {.finish = COHORT_FINISH_SUCCEEDED};
    bool applied = true, held = true, cancel = false;
    cr_assert(
        cohort_store_finish_leased(fx.store, fx.client, &old, "py-1", &late, &applied, &error));
    cr_assert_not(applied, "a lost lease's outcome was written");
    cr_assert(cohort_store_extend_lease(fx.store, fx.client, &old,
                                        cohort_clock_cluster_ms() + 60000, NULL, &held, &cancel,
                                        &error));
    cr_assert_not(held, "a lost lease was extended");
    cr_assert(cohort_store_release_lease(fx.store, fx.client, &old, NULL, &applied, &error));
    cr_assert_not(applied, "a lost lease was released");
    expect(lease_call(&first, "release", NULL), 409, "lease_lost", "old release");
    expect_status(first.id, "claimed");
    test_api_answer_t ok = lease_call(&second, "succeed", NULL);
    cr_assert_eq(ok.status, 200, "%s", ok.json);
    test_api_answer_free(&ok);
    cr_assert_eq(history_count(first.id, "succeeded"), 1);
    bson_t doc;
    read_task(first.id, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "history.0.event"), "crashed",
                     "the expired attempt is in the history");
    cr_assert_str_eq(test_doc_str(&doc, "history.0.node"), "py-1");
    bson_destroy(&doc);
}

Test(api_workers, fail_retry_release_and_attempts)
{
    enqueue("{\"data\": {\"n\": 3}}");
    claimed_t t;
    cr_assert_eq(claim("{\"worker\": \"py-1\"}", &t, 1, NULL), 1);
    test_api_answer_t f = lease_call(&t, "fail", "{\"error\": \"smtp down\"}");
    cr_assert_eq(f.status, 200, "%s", f.json);
    cr_assert_str_eq(test_doc_str(f.body, "status"), "pending", "retry is the default");
    cr_assert(test_doc_has(f.body, "retry_at"));
    test_api_answer_free(&f);
    bson_t doc;
    read_task(t.id, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "last_error"), "smtp down");
    cr_assert_gt(test_doc_int(&doc, "run_at"), cohort_clock_cluster_ms() + 30000,
                 "the service's backoff");
    bson_destroy(&doc);
    cr_assert_eq(claim("{\"worker\": \"py-1\"}", &t, 1, NULL), 0, "not due before its backoff");

    /* release: back to pending at once, the attempt not counted. */
    enqueue("{\"data\": {\"n\": 4}}");
    claimed_t r;
    cr_assert_eq(claim("{\"worker\": \"py-1\"}", &r, 1, NULL), 1);
    test_api_answer_t rel = lease_call(&r, "release", NULL);
    cr_assert_eq(rel.status, 200, "%s", rel.json);
    cr_assert_str_eq(rel.wake, SERVICE, "a release wakes held claims");
    test_api_answer_free(&rel);
    read_task(r.id, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "pending");
    cr_assert_eq(test_doc_int(&doc, "attempts"), 0);
    bson_destroy(&doc);
    expect(lease_call(&r, "release", NULL), 409, "lease_lost", "released twice");

    /* retry: false fails it for good; so does a retry past max_attempts (3). */
    claimed_t g;
    cr_assert_eq(claim("{\"worker\": \"py-1\"}", &g, 1, NULL), 1);
    cr_assert_str_eq(g.id, r.id);
    test_api_answer_t final =
        lease_call(&g, "fail", "{\"error\": \"bad address\", \"retry\": false}");
    cr_assert_str_eq(test_doc_str(final.body, "status"), "failed");
    test_api_answer_free(&final);
    expect_status(g.id, "failed");
}

Test(api_workers, exhausted_attempts_fail_without_running)
{
    enqueue("{\"data\": {\"n\": 5}}");
    /* A task whose attempts are used up (as after max_attempts lost leases). */
    mongoc_collection_t *q = mongoc_client_get_collection(fx.client, fx.db, QUEUE);
    bson_t *all = bson_new();
    bson_t *set = BCON_NEW("$set", "{", "attempts", BCON_INT32(3), "}");
    cr_assert(mongoc_collection_update_many(q, all, set, NULL, NULL, NULL));
    bson_destroy(set);
    bson_destroy(all);
    mongoc_collection_destroy(q);
    claimed_t t;
    cr_assert_eq(claim("{\"worker\": \"py-1\"}", &t, 1, NULL), 0, "not handed out");
    bson_t doc;
    cr_assert(test_find_one(fx.client, fx.db, QUEUE, "{}", &doc));
    cr_assert_str_eq(test_doc_str(&doc, "status"), "failed");
    cr_assert(strstr(test_doc_str(&doc, "last_error"), "max_attempts"));
    bson_destroy(&doc);
}

Test(api_workers, kinds_groups_pause_and_hold)
{
    int64_t hold = 0;
    claimed_t t[4];
    cr_assert_eq(claim("{\"worker\": \"py-1\", \"wait_ms\": 60000}", t, 4, &hold), 0);
    cr_assert_eq(hold, 5000, "nothing due: hold, capped by api_max_wait_ms");
    cr_assert_eq(claim("{\"worker\": \"py-1\"}", t, 4, &hold), 0);
    cr_assert_eq(hold, 0, "no wait_ms: answered at once");

    enqueue("{\"data\": {}, \"kind\": \"sms\"}");
    cr_assert_eq(claim("{\"worker\": \"py-1\", \"kinds\": [\"mail\"]}", t, 4, NULL), 0);
    cr_assert_eq(claim("{\"worker\": \"py-1\", \"kinds\": [\"sms\"]}", t, 4, NULL), 1);

    /* One task of a group at a time. */
    enqueue("{\"data\": {}, \"group\": \"acct-1\"}");
    enqueue("{\"data\": {}, \"group\": \"acct-1\"}");
    claimed_t g[4];
    cr_assert_eq(claim("{\"worker\": \"py-2\", \"max\": 4}", g, 4, NULL), 1);
    cr_assert_eq(claim("{\"worker\": \"py-3\", \"max\": 4}", g + 1, 3, NULL), 0,
                 "the group is busy");
    test_api_answer_t ok = lease_call(&g[0], "succeed", NULL);
    test_api_answer_free(&ok);
    cohort_filter_forget_busy_group(fx.service, "acct-1");
    cr_assert_eq(claim("{\"worker\": \"py-3\", \"max\": 4}", g + 1, 3, NULL), 1);

    /* A paused service hands out nothing. */
    enqueue("{\"data\": {}}");
    pthread_mutex_lock(&fx.service->lock);
    fx.service->stopped_all = true;
    pthread_mutex_unlock(&fx.service->lock);
    cr_assert_eq(claim("{\"worker\": \"py-1\"}", t, 4, NULL), 0);
    pthread_mutex_lock(&fx.service->lock);
    fx.service->stopped_all = false;
    pthread_mutex_unlock(&fx.service->lock);
    cr_assert_eq(claim("{\"worker\": \"py-1\"}", t, 4, NULL), 1);
}

Test(api_workers, registry_entry_and_name_clash)
{
    claimed_t t;
    claim("{\"worker\": \"py-9\", \"wait_ms\": 2000, \"lease_ms\": 10000}", &t, 1, NULL);
    bson_t doc;
    cr_assert(test_find_one(fx.client, fx.db, "nodes", "{\"_id\": \"py-9\"}", &doc));
    cr_assert_str_eq(test_doc_str(&doc, "kind"), "external");
    cr_assert_str_eq(test_doc_str(&doc, "services.0"), SERVICE);
    cr_assert(test_doc_has(&doc, "seen_at"));
    cr_assert_gt(test_doc_int(&doc, "alive_until"), cohort_clock_cluster_ms() + 8000);
    bson_destroy(&doc);
    /* Marked expired once alive_until passed (the primary's maintenance). */
    int64_t expired = 0;
    bson_error_t error;
    cr_assert(cohort_store_expire_workers(fx.store, fx.client, cohort_clock_cluster_ms() + 60000,
                                          &expired, &error));
    cr_assert_geq(expired, 1);
    /* A cohortd node's id cannot be a worker's name. */
    cr_assert(test_find_one(fx.client, fx.db, "nodes", "{\"_id\": \"test-clock\"}", &doc),
              "the clock sync registered a node");
    bson_destroy(&doc);
    expect(call(CLAIMS, "{\"worker\": \"test-clock\"}"), 409, "conflict", "a node's id");
}

Test(api_workers, bad_input)
{
    expect(call(CLAIMS, "{}"), 400, "bad_request", "no worker");
    expect(call(CLAIMS, "{\"worker\": \"a b\"}"), 400, "bad_request", "bad worker name");
    expect(call(CLAIMS, "{\"worker\": \"w\", \"max\": 0}"), 400, "bad_request", "max 0");
    expect(call(CLAIMS, "{\"worker\": \"w\", \"max\": 101}"), 400, "bad_request", "max 101");
    expect(call(CLAIMS, "{\"worker\": \"w\", \"max\": \"4\"}"), 400, "bad_request", "max text");
    expect(call(CLAIMS, "{\"worker\": \"w\", \"lease_ms\": 10}"), 400, "bad_request", "lease");
    expect(call(CLAIMS, "{\"worker\": \"w\", \"wait_ms\": -1}"), 400, "bad_request", "wait");
    expect(call(CLAIMS, "{\"worker\": \"w\", \"kinds\": [\"a/b\"]}"), 400, "bad_request",
           "kind");
    expect(call(CLAIMS, "{\"worker\": \"w\", \"speed\": 1}"), 400, "bad_request", "unknown");
    expect(call(CLAIMS, "[1]"), 400, "bad_request", "not an object");
    expect(call(CLAIMS, "{\"worker\": "), 400, "bad_request", "malformed JSON");
    expect(call("/api/v1/services/nothere/claims", "{\"worker\": \"w\"}"), 404, "not_found",
           "a service no node has run");
    mongoc_collection_t *services = mongoc_client_get_collection(fx.client, fx.db, "services");
    bson_t *other = BCON_NEW("_id", "other");
    cr_assert(mongoc_collection_insert_one(services, other, NULL, NULL, NULL));
    bson_destroy(other);
    mongoc_collection_destroy(services);
    expect(call("/api/v1/services/other/claims", "{\"worker\": \"w\"}"), 404, "not_hosted",
           "a service this node does not host");
    expect(call_as(tok_read, CLAIMS, "{\"worker\": \"w\"}"), 403, "forbidden", "scope read");
    expect(call("/api/v1/leases/l1.ext.zz/succeed", NULL), 400, "bad_request", "bad token");
    expect(call("/api/v1/leases/l1.ext.6b04c3e17f69d9325a002a62.1.6b04c3e17f69d9325a002a63/"
                "finish",
                NULL),
           404, "not_found", "unknown action");
    expect(call("/api/v1/leases/l1.ext.6b04c3e17f69d9325a002a62.1.6b04c3e17f69d9325a002a63/"
                "succeed",
                NULL),
           404, "not_found", "a task that does not exist");
    enqueue("{\"data\": {}}");
    claimed_t t;
    cr_assert_eq(claim("{\"worker\": \"w\"}", &t, 1, NULL), 1);
    expect(lease_call(&t, "heartbeat", "{\"lease_ms\": \"x\"}"), 400, "bad_request", "hb type");
    expect(lease_call(&t, "succeed", "{\"result\": 5}"), 400, "bad_request", "result type");
    expect(lease_call(&t, "fail", "{\"retry\": 1}"), 400, "bad_request", "retry type");
    expect(lease_call(&t, "release", "{\"why\": 1}"), 400, "bad_request", "release field");
    expect_status(t.id, "claimed");
    char path[256];
    snprintf(path, sizeof path, "/api/v1/leases/%s/succeed", t.token);
    expect(request_as("GET", tok_work, path, NULL), 405, NULL, "GET on a lease's succeed");
}

Test(api_workers, an_operators_cancel_reaches_the_worker)
{
    char operator[COHORT_TOKEN_TEXT_MAX];
    test_api_token(fx.store, fx.client, "operator", "operate", operator);
    enqueue("{\"data\": {\"n\": 9}}");
    claimed_t t;
    cr_assert_eq(claim("{\"worker\": \"py-1\"}", &t, 1, NULL), 1);
    test_api_answer_t hb = lease_call(&t, "heartbeat", NULL);
    cr_assert_eq(test_doc_int(hb.body, "cancel_requested"), INT64_MIN, "a bool");
    cr_assert_not(strstr(hb.json, "true"), "no cancel asked yet: %s", hb.json);
    test_api_answer_free(&hb);
    char path[128];
    snprintf(path, sizeof path, "/api/v1/services/" SERVICE "/tasks/%s/cancel", t.id);
    test_api_answer_t c = call_as(operator, path, NULL);
    cr_assert_eq(c.status, 202, "%s", c.json);
    cr_assert_str_eq(test_doc_str(c.body, "claimed_by"), "py-1");
    test_api_answer_free(&c);
    hb = lease_call(&t, "heartbeat", NULL);
    cr_assert_eq(hb.status, 200, "%s", hb.json);
    cr_assert(strstr(hb.json, "\"cancel_requested\" : true"), "%s", hb.json);
    test_api_answer_free(&hb);
    /* The worker stops: it fails the task for good; the claim was untouched until then. */
    test_api_answer_t f = lease_call(&t, "fail", "{\"error\": \"cancelled\", \"retry\": false}");
    cr_assert_eq(f.status, 200, "%s", f.json);
    test_api_answer_free(&f);
    expect_status(t.id, "failed");
    /* A task that is not running any more: the usual refusal. */
    test_api_answer_t again = call_as(operator, path, NULL);
    cr_assert_eq(again.status, 409, "%s", again.json);
    test_api_answer_free(&again);
}

/* ---- lease tokens as capabilities ---------------------------------------------------------- */

/* The lease token of task `id`, attempt 1, with claim `claim` (24 or 32 hex digits). */
static claimed_t forged(const char *id, const char *claim)
{
    claimed_t t = {.attempt = 1};
    snprintf(t.id, sizeof t.id, "%s", id);
    snprintf(t.token, sizeof t.token, "l1." SERVICE ".%s.1.%s", id, claim);
    return t;
}

/*
 * The probe of issue 23: a second `work` token learns a task's id by enqueueing it, and
 * guesses the claim token of the victim's claim from it. With ObjectIds (time, process,
 * counter) the guess "the task's id + 1" named the claim at once, its succeed was stored, and
 * the victim's own succeed was answered 200 "replayed" and lost. Now the claim's secret is
 * 128 random bits: every guess near the id (the next 64 counters, over 3 seconds) is refused
 * and changes nothing, the victim's outcome is written, and the history names the API token
 * that wrote it.
 */
Test(api_workers, a_guessed_lease_token_writes_nothing)
{
    char intruder[COHORT_TOKEN_TEXT_MAX];
    test_api_token(fx.store, fx.client, "intruder", "work,enqueue", intruder);
    test_api_answer_t made =
        call_as(intruder, "/api/v1/services/" SERVICE "/tasks", "{\"data\": {}}");
    cr_assert_eq(made.status, 201, "%s", made.json);
    char id[25];
    snprintf(id, sizeof id, "%s", test_doc_str(made.body, "id"));
    test_api_answer_free(&made);
    claimed_t victim;
    cr_assert_eq(claim("{\"worker\": \"victim\", \"lease_ms\": 60000}", &victim, 1, NULL), 1);
    cr_assert_str_eq(victim.id, id);

    bson_oid_t oid;
    bson_oid_init_from_string(&oid, id);
    uint32_t time = (uint32_t)oid.bytes[0] << 24 | (uint32_t)oid.bytes[1] << 16 |
                    (uint32_t)oid.bytes[2] << 8 | oid.bytes[3];
    uint32_t counter = (uint32_t)oid.bytes[9] << 16 | (uint32_t)oid.bytes[10] << 8 |
                       oid.bytes[11];
    int accepted = 0;
    for (uint32_t dt = 0; dt < 3; dt++) {
        for (uint32_t dc = 1; dc <= 64; dc++) {
            bson_oid_t guess = oid;
            uint32_t t = time + dt, c = counter + dc;
            guess.bytes[0] = (uint8_t)(t >> 24), guess.bytes[1] = (uint8_t)(t >> 16);
            guess.bytes[2] = (uint8_t)(t >> 8), guess.bytes[3] = (uint8_t)t;
            guess.bytes[9] = (uint8_t)(c >> 16), guess.bytes[10] = (uint8_t)(c >> 8);
            guess.bytes[11] = (uint8_t)c;
            char text[25];
            bson_oid_to_string(&guess, text);
            claimed_t g = forged(id, text);
            char path[256];
            snprintf(path, sizeof path, "/api/v1/leases/%s/succeed", g.token);
            test_api_answer_t a = call_as(intruder, path, "{\"result\": {\"by\": \"intruder\"}}");
            accepted += a.status == 200;
            cr_assert(a.status == 409 || a.status == 200, "guess %s: %s", text, a.json);
            test_api_answer_free(&a);
        }
    }
    cr_assert_eq(accepted, 0, "%d guessed lease tokens were accepted", accepted);
    expect_status(id, "claimed");
    const char *secret = strrchr(victim.token, '.') + 1;
    cr_assert_eq(strlen(secret), 32, "128 bits of claim secret: %s", victim.token);

    test_api_answer_t ok = lease_call(&victim, "succeed", "{\"result\": {\"by\": \"victim\"}}");
    cr_assert_eq(ok.status, 200, "%s", ok.json);
    cr_assert_not(test_doc_has(ok.body, "replayed"), "the victim's outcome is written: %s",
                  ok.json);
    test_api_answer_free(&ok);
    bson_t doc;
    read_task(id, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "result.by"), "victim");
    cr_assert_str_eq(test_doc_str(&doc, "history.0.node"), "victim");
    cr_assert_str_eq(test_doc_str(&doc, "history.0.token"), "worker",
                     "the history names the API token that wrote the outcome");
    bson_destroy(&doc);
}

/* A node's own claim (an ObjectId claim token, no lease) is no lease: a lease token naming it
 * exactly is refused and writes nothing. */
Test(api_workers, a_nodes_claim_is_not_a_lease)
{
    enqueue("{\"data\": {}}");
    char node_token[COHORT_CLAIM_TOKEN_SIZE];
    cohort_store_new_claim_token(node_token);
    bson_t docs[1];
    size_t n = 0;
    bson_error_t error;
    cr_assert(cohort_store_claim_tasks(fx.store, fx.client, SERVICE, "node-a",
                                       cohort_clock_cluster_ms(), NULL, 1, docs, &n, node_token,
                                       &error),
              "%s", error.message);
    cr_assert_eq(n, 1);
    char id[25];
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &docs[0], "_id"));
    bson_oid_to_string(bson_iter_oid(&it), id);
    bson_destroy(&docs[0]);
    claimed_t t = forged(id, node_token);
    expect(lease_call(&t, "succeed", "{}"), 409, "lease_lost", "a node's claim");
    expect(lease_call(&t, "heartbeat", "{}"), 409, "lease_lost", "a node's claim");
    expect(lease_call(&t, "release", NULL), 409, "lease_lost", "a node's claim");
    bson_t doc;
    read_task(id, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "claimed");
    cr_assert_str_eq(test_doc_str(&doc, "claimed_by"), "node-a");
    cr_assert_not(test_doc_has(&doc, "history.0"), "nothing written");
    bson_destroy(&doc);
}

/* Reports `action` with `body`, then again: applied, then a replay. */
static void report_twice(const claimed_t *t, const char *action, const char *body)
{
    for (int i = 0; i < 2; i++) {
        test_api_answer_t a = lease_call(t, action, body);
        cr_assert_eq(a.status, 200, "%s %s: %s", action, body, a.json);
        cr_assert_eq(test_doc_has(a.body, "replayed"), i == 1, "%s %s, call %d: %s", action,
                     body, i + 1, a.json);
        test_api_answer_free(&a);
    }
}

/* A replay is the outcome already written under the claim with the same body: succeed's
 * `result` as stored, fail's `error` (and not retry: false for a task left pending). Any
 * other body is a conflict and changes nothing. */
Test(api_workers, a_replay_with_another_body_is_a_conflict)
{
    enqueue("{\"data\": {\"n\": 1}}");
    enqueue("{\"data\": {\"n\": 2}}");
    claimed_t t[2];
    cr_assert_eq(claim("{\"worker\": \"py-1\", \"max\": 2}", t, 2, NULL), 2);

    report_twice(&t[0], "succeed", "{\"result\": {\"sent\": 2}}");
    expect(lease_call(&t[0], "succeed", "{\"result\": {\"sent\": 3}}"), 409, "conflict",
           "succeed with another result");
    expect(lease_call(&t[0], "succeed", "{}"), 409, "conflict", "succeed without the result");
    expect(lease_call(&t[0], "succeed", "{\"result\": {\"sent\": 2, \"x\": 1}}"), 409,
           "conflict", "succeed with more in the result");
    bson_t doc;
    read_task(t[0].id, &doc);
    cr_assert_eq(test_doc_int(&doc, "result.sent"), 2, "the stored result is untouched");
    bson_destroy(&doc);
    cr_assert_eq(history_count(t[0].id, "succeeded"), 1);

    report_twice(&t[1], "fail", "{\"error\": \"smtp down\"}");
    expect(lease_call(&t[1], "fail", "{\"error\": \"disk full\"}"), 409, "conflict",
           "fail with another error");
    expect(lease_call(&t[1], "fail", "{\"error\": \"smtp down\", \"retry\": false}"), 409,
           "conflict", "retry: false for a task left pending");
    read_task(t[1].id, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "pending");
    cr_assert_str_eq(test_doc_str(&doc, "last_error"), "smtp down");
    cr_assert_str_eq(test_doc_str(&doc, "history.0.token"), "worker");
    bson_destroy(&doc);
}
