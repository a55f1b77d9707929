/*
 * outcomes.c - what happens to a task after its handler ran, through the real service
 * runtime: a cohort_service_t with worker threads claiming from the local database, the
 * test thread ticking it. Covers retries with backoff, exhausted retries, permanent
 * failures, invalid outcomes, the retry schedule, lost claims, runaway attempt counts,
 * malformed task data (quarantined, never handed to the handler) and bounded history.
 *
 * Handlers: the shipped noop (fail_first_n) and tests/support/handlers/outcome.c, which
 * returns whatever outcome the task's data asks for and counts its calls.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "core/clock.h"
#include "node/handler/context.h"
#include "node/service.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/insert.h"
#include "store/nodes.h"
#include "store/outcomes.h"
#include "store/upkeep.h"
#include "node/work/task.h"

#define SERVICE "outcomes"
#define NODE "node-outcomes"
#define QUEUE "queue_" SERVICE

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;
static cohort_service_config_t config;
static cohort_option_t options[4];
static cohort_service_t *service;

static void setup(void)
{
    test_service_db_open("outcomes", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    if (service)
        cohort_service_destroy(service, client);
    service = NULL;
    test_service_db_close(&db, &store, &client);
    free(config.handler_path);
}

TestSuite(outcomes, .init = setup, .fini = teardown, .timeout = 30);

/* Creates the service (not started) on `handler` with the given options ("key", "value"
 * pairs, NULL-terminated). */
static void make_service(const char *handler, int64_t max_attempts, int64_t retry_base_ms,
                         const char *const kv[])
{
    size_t n = 0;
    for (; kv && kv[2 * n]; n++)
        options[n] = (cohort_option_t){kv[2 * n], kv[2 * n + 1], (int)(20 + n)};
    config = test_service_config(SERVICE, handler);
    config.workers = 2;
    config.max_attempts = max_attempts;
    config.retry_base_ms = retry_base_ms;
    config.options = options;
    config.n_options = n;
    service = test_service_new(&config, NODE, 10000, store, client);
}

static void start_service(const char *handler, int64_t max_attempts, int64_t retry_base_ms,
                          const char *const kv[])
{
    make_service(handler, max_attempts, retry_base_ms, kv);
    bson_error_t err;
    cr_assert(cohort_service_start(service, &err), "cannot start workers: %s", err.message);
}

static const char *noop_so(void)
{
    return test_build_path("handlers/cohort_noop.so");
}

/* How many times the outcome handler's process_task ran in this process. */
static long long outcome_calls(void)
{
    void *dl = dlopen(test_handler_path("outcome"), RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(dl, "the outcome handler is not loaded");
    long long (*calls)(void) = (long long (*)(void))dlsym(dl, "outcome_handler_calls");
    cr_assert_not_null(calls, "outcome_handler_calls not exported");
    long long n = calls();
    dlclose(dl);
    return n;
}

/* Inserts a task with data from JSON (NULL: {}) the way the product does; returns its id. */
static bson_oid_t insert_task(const char *data_json)
{
    bson_error_t error;
    bson_t *data = NULL;
    if (data_json) {
        data = bson_new_from_json((const uint8_t *)data_json, -1, &error);
        cr_assert_not_null(data, "bad JSON %s: %s", data_json, error.message);
    }
    cohort_new_task_t task = {.data = data,
                              .tracked = true,
                              .created_by = "outcomes-test",
                              .now_ms = cohort_clock_cluster_ms()};
    bson_oid_t oid;
    cr_assert(cohort_store_insert_task(store, client, SERVICE, &task, &oid, NULL, NULL, &error), "%s",
              error.message);
    if (data)
        bson_destroy(data);
    return oid;
}

/* Inserts a document written by hand (extended JSON), due now. */
static bson_oid_t insert_raw(const char *json)
{
    bson_error_t error;
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &error);
    cr_assert_not_null(doc, "bad JSON %s: %s", json, error.message);
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    BSON_APPEND_OID(doc, "_id", &oid);
    BSON_APPEND_DATE_TIME(doc, "run_at", cohort_clock_cluster_ms() - 1000);
    BSON_APPEND_DATE_TIME(doc, "created_at", cohort_clock_cluster_ms() - 1000);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, QUEUE);
    cr_assert(mongoc_collection_insert_one(coll, doc, NULL, NULL, &error), "%s", error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(doc);
    return oid;
}

/* Reads the task into *doc (initialised here); fails the test if it is gone. */
static void read_task(const bson_oid_t *oid, bson_t *doc)
{
    char hex[25], filter[64];
    bson_oid_to_string(oid, hex);
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%s\"}}", hex);
    cr_assert(test_find_one(client, db, QUEUE, filter, doc), "task %s is gone", hex);
}

static uint32_t history_length(const bson_t *doc)
{
    bson_iter_t it, entries;
    uint32_t n = 0;
    if (bson_iter_init_find(&it, doc, "history") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &entries))
        while (bson_iter_next(&entries))
            n++;
    return n;
}

static char *as_json(const bson_t *doc)
{
    return bson_as_relaxed_extended_json(doc, NULL);
}

/* Ticks the service until the task's status is `status`; the task is left in *doc. */
static void tick_until_status(const bson_oid_t *oid, const char *status, int64_t timeout_ms,
                              bson_t *doc)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        test_service_tick(service, client);
        read_task(oid, doc);
        const char *now = test_doc_str(doc, "status");
        if (now && strcmp(now, status) == 0)
            return;
        if (test_now_ms() >= deadline) {
            char *json = as_json(doc);
            cr_assert_fail("task did not become %s within %lld ms: %s", status,
                           (long long)timeout_ms, json);
        }
        bson_destroy(doc);
        test_sleep_ms(20);
    }
}

/* Checks history entry i: attempt, outcome, node and (if not NULL) part of the error. */
static void assert_history(const bson_t *doc, int i, int attempt, const char *outcome,
                           const char *error_part)
{
    char path[64];
    snprintf(path, sizeof path, "history.%d.attempt", i);
    cr_assert_eq(test_doc_int(doc, path), attempt, "history[%d].attempt", i);
    snprintf(path, sizeof path, "history.%d.outcome", i);
    const char *got = test_doc_str(doc, path);
    cr_assert(got && strcmp(got, outcome) == 0, "history[%d].outcome is %s, want %s", i,
              got ? got : "(none)", outcome);
    snprintf(path, sizeof path, "history.%d.node", i);
    cr_assert(test_doc_str(doc, path) && strcmp(test_doc_str(doc, path), NODE) == 0,
              "history[%d].node", i);
    snprintf(path, sizeof path, "history.%d.started_at", i);
    int64_t started = test_doc_int(doc, path);
    snprintf(path, sizeof path, "history.%d.ended_at", i);
    int64_t ended = test_doc_int(doc, path);
    cr_assert(started != INT64_MIN && ended != INT64_MIN, "history[%d] lacks its times", i);
    cr_assert_geq(ended + cohort_clock_uncertainty_ms() + 1, started,
                  "history[%d] ended before it started", i);
    snprintf(path, sizeof path, "history.%d.error", i);
    if (error_part) {
        const char *error = test_doc_str(doc, path);
        cr_assert(error && strstr(error, error_part), "history[%d].error is %s, want \"%s\"", i,
                  error ? error : "(none)", error_part);
    } else {
        cr_assert_not(test_doc_has(doc, path), "history[%d] has an error but succeeded", i);
    }
}

/* ---- retries ------------------------------------------------------------------------- */

Test(outcomes, retries_then_succeeds)
{
    start_service(noop_so(), 5, 100, (const char *const[]){"fail_first_n", "2", NULL});
    bson_oid_t id = insert_task("{\"n\": 1}");
    bson_t doc;
    tick_until_status(&id, "succeeded", 15000, &doc);
    char *json = as_json(&doc);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 3, "succeeds on attempt n+1: %s", json);
    cr_assert_eq(history_length(&doc), 3, "%s", json);
    assert_history(&doc, 0, 1, "retry", "failing attempt 1");
    assert_history(&doc, 1, 2, "retry", "failing attempt 2");
    assert_history(&doc, 2, 3, "succeeded", NULL);
    cr_assert(test_doc_has(&doc, "finished_at"), "%s", json);
    cr_assert_eq(test_doc_int(&doc, "data.n"), 1, "data survives the retries");

    /* the retries waited: base*2^0 after attempt 1, base*2^1 after attempt 2 (the slack
     * covers clock error and the moment between computing run_at and ended_at) */
    int64_t slack = 2 * cohort_clock_uncertainty_ms() + 30;
    int64_t gap1 =
        test_doc_int(&doc, "history.1.started_at") - test_doc_int(&doc, "history.0.ended_at");
    int64_t gap2 =
        test_doc_int(&doc, "history.2.started_at") - test_doc_int(&doc, "history.1.ended_at");
    cr_assert_geq(gap1 + slack, 100, "retry 1 ran %lld ms after attempt 1 (want 100)",
                  (long long)gap1);
    cr_assert_geq(gap2 + slack, 200, "retry 2 ran %lld ms after attempt 2 (want 200)",
                  (long long)gap2);

    cr_assert_eq(atomic_load(&service->stats.retried), 2);
    cr_assert_eq(atomic_load(&service->stats.succeeded), 1);
    cr_assert_eq(atomic_load(&service->stats.failed), 0);
    cr_assert_eq(atomic_load(&service->stats.claimed), 3);
    bson_free(json);
    bson_destroy(&doc);
}

Test(outcomes, retries_exhausted_fail_the_task)
{
    start_service(noop_so(), 3, 10, (const char *const[]){"fail_first_n", "100", NULL});
    bson_oid_t id = insert_task(NULL);
    bson_t doc;
    tick_until_status(&id, "failed", 15000, &doc);
    char *json = as_json(&doc);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 3, "attempts == max_attempts: %s", json);
    const char *last_error = test_doc_str(&doc, "last_error");
    cr_assert(last_error && strstr(last_error, "failing attempt 3"), "last_error: %s", json);
    cr_assert_eq(history_length(&doc), 3);
    assert_history(&doc, 0, 1, "retry", "failing attempt 1");
    assert_history(&doc, 1, 2, "retry", "failing attempt 2");
    assert_history(&doc, 2, 3, "failed", "failing attempt 3");
    cr_assert(test_doc_has(&doc, "finished_at"));

    /* it stays failed: nothing claims it again */
    for (int i = 0; i < 5; i++) {
        test_service_tick(service, client);
        test_sleep_ms(20);
    }
    bson_destroy(&doc);
    read_task(&id, &doc);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 3);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "failed");
    cr_assert_eq(atomic_load(&service->stats.failed), 1);
    cr_assert_eq(atomic_load(&service->stats.retried), 2);
    bson_free(json);
    bson_destroy(&doc);
}

Test(outcomes, permanent_failure_fails_at_once)
{
    start_service(test_handler_path("outcome"), 5, 10, NULL);
    bson_oid_t with_message = insert_task("{\"outcome\": 2, \"error\": \"bad input: no user 7\"}");
    bson_oid_t without = insert_task("{\"outcome\": 2}");
    bson_t doc;
    tick_until_status(&with_message, "failed", 10000, &doc);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 1);
    cr_assert_str_eq(test_doc_str(&doc, "last_error"), "bad input: no user 7");
    cr_assert_eq(history_length(&doc), 1);
    assert_history(&doc, 0, 1, "failed", "bad input: no user 7");
    bson_destroy(&doc);

    tick_until_status(&without, "failed", 10000, &doc);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 1);
    cr_assert_str_eq(test_doc_str(&doc, "last_error"), "handler reported a permanent failure");
    bson_destroy(&doc);
    cr_assert_eq(outcome_calls(), 2, "each ran exactly once");
    cr_assert_eq(atomic_load(&service->stats.retried), 0);
}

Test(outcomes, invalid_outcome_fails_the_task)
{
    start_service(test_handler_path("outcome"), 5, 10, NULL);
    bson_oid_t garbage = insert_task("{\"outcome\": 42}");
    bson_oid_t negative = insert_task("{\"outcome\": -1}");
    bson_t doc;
    tick_until_status(&garbage, "failed", 10000, &doc);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 1, "an invalid outcome is not retried");
    cr_assert_str_eq(test_doc_str(&doc, "last_error"), "handler returned invalid outcome 42");
    assert_history(&doc, 0, 1, "failed", "invalid outcome 42");
    bson_destroy(&doc);
    tick_until_status(&negative, "failed", 10000, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "last_error"), "handler returned invalid outcome -1");
    bson_destroy(&doc);
    cr_assert_eq(outcome_calls(), 2);
}

Test(outcomes, a_handler_error_with_success_is_still_success)
{
    start_service(test_handler_path("outcome"), 5, 10, NULL);
    bson_oid_t id = insert_task("{\"outcome\": 0, \"error\": \"just a note\"}");
    bson_t doc;
    tick_until_status(&id, "succeeded", 10000, &doc);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 1);
    cr_assert_eq(history_length(&doc), 1);
    cr_assert_str_eq(test_doc_str(&doc, "history.0.outcome"), "succeeded");
    bson_destroy(&doc);
}

/* ---- the retry schedule, one attempt at a time ---------------------------------------- */

/* Claims the task for this node as the workers would, at cluster time now_ms. */
static bool claim(int64_t now_ms, bson_t *claimed)
{
    bool found = false;
    bson_error_t error;
    cr_assert(
        cohort_store_claim_task(store, client, SERVICE, NODE, now_ms, NULL, claimed, &found, NULL, &error),
        "%s", error.message);
    return found;
}

Test(outcomes, retry_run_at_follows_the_schedule)
{
    /* Workers are not started: this thread claims and executes, so it can look at each
     * retry's run_at before the next attempt. */
    make_service(test_handler_path("outcome"), 5, 5000, NULL);
    bson_oid_t id = insert_task("{\"outcome\": 1, \"error\": \"try later\"}");
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, service, client, false);
    int64_t due = cohort_clock_cluster_ms();
    for (int n = 0; n < 3; n++) {
        int64_t delay = 5000LL << n;
        bson_t claimed, doc;
        if (n > 0) {
            cr_assert_not(claim(due - 1, &claimed), "retry %d was claimable before run_at", n);
            bson_destroy(&claimed);
        }
        cr_assert(claim(due, &claimed), "attempt %d not claimable at its run_at", n + 1);
        cohort_task_execute(&ctx, 0, &claimed);
        bson_destroy(&claimed);

        read_task(&id, &doc);
        char *json = as_json(&doc);
        cr_assert_str_eq(test_doc_str(&doc, "status"), "pending", "%s", json);
        cr_assert_eq(test_doc_int(&doc, "attempts"), n + 1);
        cr_assert_str_eq(test_doc_str(&doc, "last_error"), "try later");
        int64_t run_at = test_doc_int(&doc, "run_at");
        char path[64];
        snprintf(path, sizeof path, "history.%d.ended_at", n);
        int64_t ended = test_doc_int(&doc, path);
        cr_assert(run_at - ended <= delay && run_at - ended >= delay - 100,
                  "after attempt %d run_at is %lld ms after it ended, want %lld", n + 1,
                  (long long)(run_at - ended), (long long)delay);
        int64_t server_now = 0;
        bson_error_t error;
        cr_assert(cohort_store_server_time(store, client, &server_now, &error), "%s",
                  error.message);
        cr_assert(run_at - server_now > delay - 1000 && run_at - server_now <= delay + 100,
                  "run_at is %lld ms in the future of the server, want about %lld",
                  (long long)(run_at - server_now), (long long)delay);
        due = run_at;
        bson_free(json);
        bson_destroy(&doc);
    }
    cr_assert_eq(outcome_calls(), 3);
}

Test(outcomes, last_retry_uses_the_final_attempt)
{
    /* With max_attempts 2 the second RETRY fails the task instead of scheduling a third. */
    make_service(test_handler_path("outcome"), 2, 0, NULL);
    bson_oid_t id = insert_task("{\"outcome\": 1}");
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, service, client, false);
    for (int attempt = 1; attempt <= 2; attempt++) {
        bson_t claimed;
        cr_assert(claim(cohort_clock_cluster_ms() + 1000, &claimed), "attempt %d", attempt);
        cohort_task_execute(&ctx, 0, &claimed);
        bson_destroy(&claimed);
    }
    bson_t doc;
    read_task(&id, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "failed");
    cr_assert_eq(test_doc_int(&doc, "attempts"), 2);
    cr_assert_str_eq(test_doc_str(&doc, "last_error"), "handler asked for a retry");
    bson_destroy(&doc);
}

/* ---- claims that moved on -------------------------------------------------------------- */

Test(outcomes, outcome_from_a_node_without_the_claim_is_not_applied)
{
    bson_oid_t id = insert_task(NULL);
    bson_t claimed, before, after;
    cr_assert(claim(cohort_clock_cluster_ms() + 1000, &claimed));
    bson_destroy(&claimed);
    read_task(&id, &before);

    int64_t now = cohort_clock_cluster_ms();
    cohort_task_result_t result = {
        .finish = COHORT_FINISH_SUCCEEDED, .started_at_ms = now, .ended_at_ms = now};
    bool applied = true;
    bson_error_t error;
    bson_value_t id_value = {.value_type = BSON_TYPE_OID};
    bson_oid_copy(&id, &id_value.value.v_oid);
    cr_assert(cohort_store_finish_task_value(store, client, SERVICE, &id_value, "another-node", 1,
                                             &result, &applied, &error),
              "%s", error.message);
    cr_assert_not(applied, "another node's outcome was applied");
    cohort_task_result_t failed = {
        .finish = COHORT_FINISH_FAILED, .error = "stale", .started_at_ms = now, .ended_at_ms = now};
    applied = true;
    cr_assert(cohort_store_finish_task_value(store, client, SERVICE, &id_value, NODE, 2, &failed,
                                             &applied, &error));
    cr_assert_not(applied, "an outcome for another attempt was applied");

    read_task(&id, &after);
    cr_assert(bson_equal(&before, &after), "the task changed:\nbefore %s\nafter  %s",
              as_json(&before), as_json(&after));
    cr_assert_str_eq(test_doc_str(&after, "status"), "claimed");
    cr_assert_str_eq(test_doc_str(&after, "claimed_by"), NODE);
    cr_assert_eq(history_length(&after), 0);

    /* the holder of the claim can still finish it */
    applied = false;
    cr_assert(cohort_store_finish_task_value(store, client, SERVICE, &id_value, NODE, 1, &result,
                                             &applied, &error));
    cr_assert(applied);
    bson_destroy(&after);
    read_task(&id, &after);
    cr_assert_str_eq(test_doc_str(&after, "status"), "succeeded");
    bson_destroy(&before);
    bson_destroy(&after);
}

Test(outcomes, a_running_task_whose_claim_moved_on_is_not_overwritten)
{
    start_service(test_handler_path("outcome"), 5, 10, NULL);
    bson_oid_t id = insert_task("{\"sleep_ms\": 1500}");
    bson_t doc;
    tick_until_status(&id, "claimed", 5000, &doc);
    bson_destroy(&doc);

    /* While the handler runs, the claim is reset and taken by another node (what a stall
     * reset followed by a claim elsewhere looks like). */
    char hex[25], filter_json[64];
    bson_oid_to_string(&id, hex);
    snprintf(filter_json, sizeof filter_json, "{\"_id\": {\"$oid\": \"%s\"}}", hex);
    bson_error_t error;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &error);
    bson_t *update =
        BCON_NEW("$set", "{", "claimed_by", BCON_UTF8("thief"), "attempts", BCON_INT32(2), "}");
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, QUEUE);
    cr_assert(mongoc_collection_update_one(coll, filter, update, NULL, NULL, &error), "%s",
              error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(update);
    bson_destroy(filter);

    int64_t deadline = test_now_ms() + 10000;
    while (atomic_load(&service->stats.lost_claims) == 0 && test_now_ms() < deadline)
        test_sleep_ms(20);
    cr_assert_eq(atomic_load(&service->stats.lost_claims), 1, "the lost claim was not noticed");
    cr_assert_eq(atomic_load(&service->stats.succeeded), 0, "a lost claim counted as success");
    read_task(&id, &doc);
    char *json = as_json(&doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "claimed", "%s", json);
    cr_assert_str_eq(test_doc_str(&doc, "claimed_by"), "thief", "%s", json);
    cr_assert_eq(history_length(&doc), 0, "the stale outcome was recorded: %s", json);
    cr_assert_eq(outcome_calls(), 1);
    bson_free(json);
    bson_destroy(&doc);
}

/* Issue 22, defect 3: a claim taken back while its handler runs (a stall reset, node expiry
 * or release) leaves a "crashed" history entry naming this node and attempt. The worker's
 * bulk write of its late outcome then matches nothing, and that entry is not the outcome: it
 * must be counted as a lost claim, never as a success (the stop summary reads these). */
Test(outcomes, a_late_outcome_after_a_reset_is_not_counted_as_written)
{
    start_service(test_handler_path("outcome"), 5, 10, NULL);
    bson_oid_t id = insert_task("{\"sleep_ms\": 1500}");
    bson_t doc;
    tick_until_status(&id, "claimed", 5000, &doc);
    bson_destroy(&doc);

    /* What the primary's reset writes: pending again, history {event: crashed, node: NODE,
     * attempt: 1}. */
    int64_t released = 0;
    bson_error_t error;
    cr_assert(cohort_store_release_claims(store, client, SERVICE, NODE, &released, &error), "%s",
              error.message);
    cr_assert_eq(released, 1, "the running task's claim was not released");

    /* The other worker may claim it again at once (attempt 2) and write that success. */
    int64_t deadline = test_now_ms() + 10000;
    while (atomic_load(&service->stats.lost_claims) == 0 && test_now_ms() < deadline)
        test_sleep_ms(20);
    test_sleep_ms(100); /* a success counted with the loss would be counted by now */
    read_task(&id, &doc);
    char *json = as_json(&doc);
    uint64_t written = 0;
    bson_iter_t it, entry;
    for (uint32_t i = 0; i < history_length(&doc); i++) {
        char path[48];
        snprintf(path, sizeof path, "history.%u.outcome", i);
        written += bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, path, &entry) &&
                   BSON_ITER_HOLDS_UTF8(&entry) &&
                   strcmp(bson_iter_utf8(&entry, NULL), "succeeded") == 0;
    }
    cr_assert_eq(atomic_load(&service->stats.lost_claims), 1, "the lost claim was not noticed: %s",
                 json);
    cr_assert_eq(atomic_load(&service->stats.succeeded), written,
                 "%llu success(es) counted, %llu written: %s",
                 (unsigned long long)atomic_load(&service->stats.succeeded),
                 (unsigned long long)written, json);
    bson_free(json);
    bson_destroy(&doc);
}

/* ---- tasks that must never reach the handler ------------------------------------------ */

Test(outcomes, attempts_beyond_max_fail_without_running)
{
    /* Three earlier claims never reported (the handler killed its node each time): the
     * fourth claim must end the task, not run it again. */
    start_service(test_handler_path("outcome"), 3, 10, NULL);
    bson_oid_t id = insert_raw("{\"status\": \"pending\", \"data\": {}, \"tracked\": true, "
                               "\"created_by\": \"hand\", \"attempts\": 3}");
    bson_t doc;
    tick_until_status(&id, "failed", 10000, &doc);
    char *json = as_json(&doc);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 4, "%s", json);
    const char *last_error = test_doc_str(&doc, "last_error");
    cr_assert(last_error && strstr(last_error, "exceeds max_attempts 3"), "%s", json);
    cr_assert_eq(history_length(&doc), 1);
    assert_history(&doc, 0, 4, "failed", "exceeds max_attempts");
    cr_assert_eq(outcome_calls(), 0, "the handler ran a task past max_attempts");
    bson_free(json);
    bson_destroy(&doc);
}

Test(outcomes, malformed_data_is_quarantined)
{
    start_service(test_handler_path("outcome"), 5, 10, NULL);
    bson_oid_t string_data = insert_raw("{\"status\": \"pending\", \"data\": \"not a document\", "
                                        "\"tracked\": false, \"attempts\": 0}");
    bson_oid_t null_data = insert_raw("{\"status\": \"pending\", \"data\": null, "
                                      "\"tracked\": false, \"attempts\": 0}");
    bson_oid_t array_data = insert_raw("{\"status\": \"pending\", \"data\": [1, 2], "
                                       "\"tracked\": false, \"attempts\": 0}");
    const bson_oid_t *ids[] = {&string_data, &null_data, &array_data};
    for (size_t i = 0; i < 3; i++) {
        bson_t doc;
        tick_until_status(ids[i], "failed", 10000, &doc);
        char *json = as_json(&doc);
        const char *last_error = test_doc_str(&doc, "last_error");
        cr_assert(last_error && strstr(last_error, "task data") &&
                      strstr(last_error, "not a document"),
                  "no clear reason: %s", json);
        cr_assert_eq(test_doc_int(&doc, "attempts"), 1, "quarantined, not retried: %s", json);
        cr_assert_eq(history_length(&doc), 1);
        assert_history(&doc, 0, 1, "failed", "not a document");
        bson_free(json);
        bson_destroy(&doc);
    }
    cr_assert_eq(outcome_calls(), 0, "the handler was given malformed data");
    cr_assert_eq(atomic_load(&service->stats.failed), 3);
}

Test(outcomes, history_keeps_the_last_ten_runs)
{
    start_service(noop_so(), 14, 0, (const char *const[]){"fail_first_n", "1000", NULL});
    bson_oid_t id = insert_task(NULL);
    bson_t doc;
    tick_until_status(&id, "failed", 20000, &doc);
    char *json = as_json(&doc);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 14, "%s", json);
    cr_assert_eq(history_length(&doc), COHORT_HISTORY_MAX, "history has %u entries: %s",
                 history_length(&doc), json);
    for (int i = 0; i < COHORT_HISTORY_MAX; i++) {
        int attempt = 14 - COHORT_HISTORY_MAX + 1 + i; /* the last ten: 5..14 */
        char part[64];
        snprintf(part, sizeof part, "failing attempt %d", attempt);
        assert_history(&doc, i, attempt, attempt == 14 ? "failed" : "retry", part);
    }
    bson_free(json);
    bson_destroy(&doc);
}
