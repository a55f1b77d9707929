/*
 * bad_input.c - documents written by hand into the database in states Cohort never writes,
 * through the real service runtime (a cohort_service_t ticked by the test, workers claiming
 * from the local database). Each test names the bad input and the promised behaviour: a
 * clear error, or the task quarantined (failed with the reason), and nothing else lost or
 * stopped. docs/RELIABILITY.md's bad-input table cites these tests.
 *
 * Tasks (suite bad_task): _id not an ObjectId, attempts a string / huge / fractional,
 * run_at a string, an unknown status, no status, a bare {status: pending}, large data.
 * Config documents (suite bad_service_doc): epoch a string, primary a number, last_active
 * missing, lease_ms negative / a string / absurdly large, live settings out of range.
 *
 * Handler: tests/support/handlers/outcome.c (returns what the data asks, counts its calls).
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "core/clock.h"
#include "node/primary/election.h"
#include "node/service.h"
#include "store/store.h"
#include "store/queries.h"

#define SERVICE "badin"
#define NODE "node-badin"
#define QUEUE "queue_" SERVICE
#define TAKEOVER_MS 2000

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;
static cohort_service_config_t config;
static cohort_service_t *service;

static void setup(void)
{
    test_service_db_open("badin", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    if (service)
        cohort_service_destroy(service, client);
    service = NULL;
    test_service_db_close(&db, &store, &client);
    free(config.handler_path);
}

TestSuite(bad_task, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(bad_service_doc, .init = setup, .fini = teardown, .timeout = 60);

/* The service on the outcome handler: 3 attempts, 2 workers (started if `workers`). */
static void make_service(bool workers)
{
    config = test_service_config(SERVICE, test_handler_path("outcome"));
    config.workers = 2;
    config.max_attempts = 3;
    config.retry_base_ms = 10;
    service = test_service_new(&config, NODE, TAKEOVER_MS, store, client);
    cohort_settings_t file = {.tick_ms = 100,
                              .takeover_ms = TAKEOVER_MS,
                              .primary_task_count = 1000,
                              .secondary_task_count = 0,
                              .stall_timeout_ms = 1800000};
    cohort_service_set_file_settings(service, &file);
    bson_error_t err;
    if (workers)
        cr_assert(cohort_service_start(service, &err), "cannot start workers: %s", err.message);
}

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

static bson_t *from_json(const char *json)
{
    bson_error_t error;
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &error);
    cr_assert_not_null(doc, "bad JSON %s: %s", json, error.message);
    return doc;
}

/* Inserts a task document exactly as given (extended JSON): no field is added. */
static void insert_exact(const char *json)
{
    bson_t *doc = from_json(json);
    bson_error_t error;
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, QUEUE);
    cr_assert(mongoc_collection_insert_one(coll, doc, NULL, NULL, &error), "%s", error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(doc);
}

/* A well-formed task as the product writes it, due now; its id in hex. */
static void insert_good(char hex[25])
{
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    bson_oid_to_string(&oid, hex);
    bson_t *doc = BCON_NEW("_id", BCON_OID(&oid), "status", BCON_UTF8("pending"), "data", "{",
                           "}", "tracked", BCON_BOOL(false), "attempts", BCON_INT32(0), "run_at",
                           BCON_DATE_TIME(cohort_clock_cluster_ms() - 1000), "created_at",
                           BCON_DATE_TIME(cohort_clock_cluster_ms() - 1000));
    bson_error_t error;
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, QUEUE);
    cr_assert(mongoc_collection_insert_one(coll, doc, NULL, NULL, &error), "%s", error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(doc);
}

static char *oid_filter(const char *hex)
{
    char *filter = NULL;
    cr_assert_geq(asprintf(&filter, "{\"_id\": {\"$oid\": \"%s\"}}", hex), 0);
    return filter;
}

static const char *str_field(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it)
               ? bson_iter_utf8(&it, NULL)
               : NULL;
}

static bool status_is(const char *filter, const char *status)
{
    bson_t doc;
    if (!test_find_one(client, db, QUEUE, filter, &doc))
        return false;
    const char *now = str_field(&doc, "status");
    bool same = now && strcmp(now, status) == 0;
    bson_destroy(&doc);
    return same;
}

/* Ticks until the task matching `filter` has one of the final statuses; false on timeout.
 * The document is left in *doc (initialised here) either way. */
static bool tick_until_final(const char *filter, int64_t timeout_ms, bson_t *doc)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        test_service_tick(service, client);
        cr_assert(test_find_one(client, db, QUEUE, filter, doc), "task %s is gone", filter);
        const char *status = str_field(doc, "status");
        if (status && (strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0))
            return true;
        if (test_now_ms() >= deadline)
            return false;
        bson_destroy(doc);
        test_sleep_ms(20);
    }
}

static void expect_failed_with(const char *filter, const char *reason_part)
{
    bson_t doc;
    bool final = tick_until_final(filter, 15000, &doc);
    char *json = bson_as_relaxed_extended_json(&doc, NULL);
    cr_assert(final, "task %s never reached a final status: %s", filter, json);
    const char *status = str_field(&doc, "status");
    const char *error = str_field(&doc, "last_error");
    cr_assert(status && strcmp(status, "failed") == 0, "expected failed: %s", json);
    cr_assert(error && strstr(error, reason_part), "no clear reason ('%s'): %s", reason_part,
              json);
    bson_free(json);
    bson_destroy(&doc);
}

static void expect_succeeded(const char *filter)
{
    bson_t doc;
    bool final = tick_until_final(filter, 15000, &doc);
    char *json = bson_as_relaxed_extended_json(&doc, NULL);
    cr_assert(final && strcmp(str_field(&doc, "status"), "succeeded") == 0,
              "expected succeeded: %s", json);
    bson_free(json);
    bson_destroy(&doc);
}

/* ---- task documents ------------------------------------------------------------------- */

Test(bad_task, an_id_that_is_not_an_object_id_is_failed_without_running)
{
    make_service(true);
    insert_exact("{\"_id\": \"made-by-hand\", \"status\": \"pending\", \"data\": {}, "
                 "\"attempts\": 0, \"run_at\": {\"$date\": 0}}");
    insert_exact("{\"_id\": 12345, \"status\": \"pending\", \"data\": {}, "
                 "\"attempts\": 0, \"run_at\": {\"$date\": 0}}");
    expect_failed_with("{\"_id\": \"made-by-hand\"}", "not an ObjectId");
    expect_failed_with("{\"_id\": 12345}", "not an ObjectId");
    cr_assert_eq(outcome_calls(), 0, "the handler ran a task with a malformed _id");
}

Test(bad_task, attempts_a_string_is_quarantined_and_the_queue_goes_on)
{
    make_service(true);
    /* Due first, so every claim meets it until it is dealt with. */
    insert_exact("{\"_id\": {\"$oid\": \"650000000000000000000001\"}, \"status\": \"pending\", "
                 "\"data\": {}, \"attempts\": \"three\", \"run_at\": {\"$date\": 0}}");
    char good[25];
    insert_good(good);
    char *filter = oid_filter(good);
    expect_succeeded(filter);
    expect_failed_with("{\"_id\": {\"$oid\": \"650000000000000000000001\"}}", "malformed task");
    free(filter);
}

Test(bad_task, run_at_a_string_is_quarantined)
{
    make_service(true);
    insert_exact("{\"_id\": {\"$oid\": \"650000000000000000000002\"}, \"status\": \"pending\", "
                 "\"data\": {}, \"attempts\": 0, \"run_at\": \"tomorrow\"}");
    char good[25];
    insert_good(good);
    char *filter = oid_filter(good);
    expect_succeeded(filter);
    expect_failed_with("{\"_id\": {\"$oid\": \"650000000000000000000002\"}}", "malformed task");
    free(filter);
    cr_assert_eq(outcome_calls(), 1, "only the good task ran");
}

Test(bad_task, a_bare_pending_document_is_made_due_and_runs)
{
    make_service(true);
    insert_exact("{\"_id\": {\"$oid\": \"650000000000000000000003\"}, \"status\": \"pending\"}");
    expect_succeeded("{\"_id\": {\"$oid\": \"650000000000000000000003\"}}");
    cr_assert_eq(outcome_calls(), 1);
}

Test(bad_task, unknown_or_missing_status_is_left_alone_and_counted)
{
    make_service(true);
    insert_exact("{\"_id\": {\"$oid\": \"650000000000000000000004\"}, \"status\": \"on-hold\", "
                 "\"data\": {}, \"attempts\": 0, \"run_at\": {\"$date\": 0}}");
    insert_exact("{\"_id\": {\"$oid\": \"650000000000000000000005\"}, \"data\": {}, "
                 "\"attempts\": 0, \"run_at\": {\"$date\": 0}}");
    char good[25];
    insert_good(good);
    char *filter = oid_filter(good);
    expect_succeeded(filter);
    free(filter);
    for (int i = 0; i < 10; i++) { /* more ticks: still untouched */
        test_service_tick(service, client);
        test_sleep_ms(20);
    }
    cr_assert(status_is("{\"_id\": {\"$oid\": \"650000000000000000000004\"}}", "on-hold"));
    cr_assert_eq(test_count(client, db, QUEUE, "{\"attempts\": 0}"), 2,
                 "a task with an unknown or no status was claimed");
    cohort_status_counts_t counts;
    bson_error_t error;
    cr_assert(cohort_store_count_tasks(store, client, SERVICE, &counts, &error), "%s",
              error.message);
    cr_assert_eq(counts.other, 2, "status other: %lld", (long long)counts.other);
    cr_assert_eq(counts.succeeded, 1);
}

Test(bad_task, huge_attempts_fail_the_task_without_running_it)
{
    /* 2^32 + 1: as an int it reads as 1 (under max_attempts) while the document says
     * 4294967298 after the claim's $inc. */
    make_service(true);
    insert_exact("{\"_id\": {\"$oid\": \"650000000000000000000006\"}, \"status\": \"pending\", "
                 "\"data\": {}, \"attempts\": {\"$numberLong\": \"4294967297\"}, "
                 "\"run_at\": {\"$date\": 0}}");
    expect_failed_with("{\"_id\": {\"$oid\": \"650000000000000000000006\"}}",
                       "attempts is not a whole number");
    cr_assert_eq(outcome_calls(), 0, "the handler ran a task past max_attempts");
}

Test(bad_task, fractional_attempts_still_reach_a_final_status)
{
    make_service(true);
    insert_exact("{\"_id\": {\"$oid\": \"650000000000000000000007\"}, \"status\": \"pending\", "
                 "\"data\": {}, \"attempts\": 0.5, \"run_at\": {\"$date\": 0}}");
    bson_t doc;
    bool final = tick_until_final("{\"_id\": {\"$oid\": \"650000000000000000000007\"}}", 10000,
                                  &doc);
    char *json = bson_as_relaxed_extended_json(&doc, NULL);
    cr_assert(final, "a task with attempts 0.5 is stuck (outcome never recorded): %s", json);
    bson_free(json);
    bson_destroy(&doc);
}

Test(bad_task, a_megabyte_of_data_runs)
{
    make_service(true);
    size_t size = 1024 * 1024;
    char *big = malloc(size + 1);
    cr_assert_not_null(big);
    memset(big, 'x', size);
    big[size] = '\0';
    bson_oid_t oid;
    bson_oid_init_from_string(&oid, "650000000000000000000008");
    bson_t *doc = BCON_NEW("_id", BCON_OID(&oid), "status", BCON_UTF8("pending"), "data", "{",
                           "blob", BCON_UTF8(big), "}", "attempts", BCON_INT32(0), "run_at",
                           BCON_DATE_TIME(0));
    free(big);
    bson_error_t error;
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, QUEUE);
    cr_assert(mongoc_collection_insert_one(coll, doc, NULL, NULL, &error), "%s", error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(doc);
    expect_succeeded("{\"_id\": {\"$oid\": \"650000000000000000000008\"}}");
}

/* ---- the service's config document ---------------------------------------------------- */

/* Replaces the service's document with `json` (extended JSON; "_id" is added). */
static void write_service_doc(const char *json)
{
    bson_t *doc = from_json(json);
    BSON_APPEND_UTF8(doc, "_id", SERVICE);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(SERVICE));
    bson_error_t error;
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, "services");
    cr_assert(mongoc_collection_replace_one(coll, filter, doc, NULL, NULL, &error), "%s",
              error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(filter);
    bson_destroy(doc);
}

/* Ticks (every 50 ms) until this node is primary; returns its epoch, or 0 on timeout. The
 * log lines written meanwhile are returned in *log (caller frees). */
static int64_t tick_until_primary(int64_t timeout_ms, char **log)
{
    test_stderr_begin();
    int64_t deadline = test_now_ms() + timeout_ms, epoch = 0;
    while (test_now_ms() < deadline) {
        test_service_tick(service, client);
        epoch = cohort_election_epoch(&service->election);
        if (epoch > 0)
            break;
        test_sleep_ms(50);
    }
    *log = test_stderr_end();
    return epoch;
}

/* A last_active `age_ms` ago on the cluster clock, as extended JSON. */
static char *ago(int64_t age_ms)
{
    char *json = NULL;
    cr_assert_geq(asprintf(&json, "{\"$date\": {\"$numberLong\": \"%lld\"}}",
                           (long long)(cohort_clock_cluster_ms() - age_ms)),
                  0);
    return json;
}

Test(bad_service_doc, epoch_a_string_refuses_primacy_with_a_clear_error)
{
    /* Incrementing a string is impossible and guessing the epoch would break fencing:
     * no node may become primary, and the log must say why. */
    make_service(false);
    write_service_doc("{\"primary\": null, \"epoch\": \"seven\", \"last_active\": null, "
                      "\"batch_seq\": 1, \"draining\": null}");
    char *log = NULL;
    int64_t epoch = tick_until_primary(3 * TAKEOVER_MS, &log);
    cr_assert_eq(epoch, 0, "became primary over a string epoch (epoch %lld)", (long long)epoch);
    cr_assert(strstr(log, "election round failed") && strstr(log, "epoch"),
              "no clear error naming the epoch in the log:\n%s", log);
    free(log);
}

Test(bad_service_doc, primary_a_number_is_replaced_after_the_takeover_time)
{
    make_service(false);
    char *when = ago(0), *json = NULL;
    cr_assert_geq(asprintf(&json, "{\"primary\": 42, \"epoch\": 3, \"last_active\": %s, "
                                  "\"batch_seq\": 1, \"draining\": null}",
                           when),
                  0);
    write_service_doc(json);
    char *log = NULL;
    int64_t epoch = tick_until_primary(4 * TAKEOVER_MS, &log);
    cr_assert_eq(epoch, 4, "no takeover from a numeric primary (epoch %lld):\n%s",
                 (long long)epoch, log);
    free(log);
    free(json);
    free(when);
}

Test(bad_service_doc, a_primary_without_last_active_is_replaced)
{
    /* primary names a node (long gone) but last_active was removed or nulled by hand. */
    make_service(false);
    write_service_doc("{\"primary\": \"ghost\", \"epoch\": 5, \"batch_seq\": 1, "
                      "\"draining\": null}");
    char *log = NULL;
    int64_t epoch = tick_until_primary(4 * TAKEOVER_MS, &log);
    cr_assert_eq(epoch, 6,
                 "no node ever takes over a primary whose last_active is missing "
                 "(epoch %lld):\n%s",
                 (long long)epoch, log);
    free(log);
}

Test(bad_service_doc, a_negative_lease_ms_falls_back_to_the_takeover_time)
{
    make_service(false);
    char *when = ago(TAKEOVER_MS * 3), *json = NULL;
    cr_assert_geq(asprintf(&json, "{\"primary\": \"ghost\", \"epoch\": 2, \"last_active\": %s, "
                                  "\"lease_ms\": -5, \"batch_seq\": 1, \"draining\": null}",
                           when),
                  0);
    write_service_doc(json);
    char *log = NULL;
    int64_t epoch = tick_until_primary(4 * TAKEOVER_MS, &log);
    cr_assert_eq(epoch, 3, "no takeover with lease_ms = -5 (epoch %lld):\n%s", (long long)epoch,
                 log);
    free(log);
    free(json);
    free(when);
}

Test(bad_service_doc, a_string_lease_ms_falls_back_to_the_takeover_time)
{
    make_service(false);
    char *when = ago(TAKEOVER_MS * 3), *json = NULL;
    cr_assert_geq(asprintf(&json, "{\"primary\": \"ghost\", \"epoch\": 2, \"last_active\": %s, "
                                  "\"lease_ms\": \"long\", \"batch_seq\": 1, \"draining\": null}",
                           when),
                  0);
    write_service_doc(json);
    char *log = NULL;
    int64_t epoch = tick_until_primary(4 * TAKEOVER_MS, &log);
    cr_assert_eq(epoch, 3,
                 "no node ever takes over when lease_ms is a string (epoch %lld):\n%s",
                 (long long)epoch, log);
    free(log);
    free(json);
    free(when);
}

Test(bad_service_doc, an_absurd_lease_ms_is_capped_at_the_largest_takeover_ms)
{
    /* lease_ms = 10^12 (31 years): no live primary can have declared it, since takeover_ms
     * is at most one day. A dead primary must not keep the service for 31 years; capped at
     * the largest valid takeover_ms the wait is at most a day, but never forever. Here
     * last_active is two days old. */
    make_service(false);
    char *when = ago(2LL * 86400000), *json = NULL;
    cr_assert_geq(asprintf(&json, "{\"primary\": \"ghost\", \"epoch\": 2, \"last_active\": %s, "
                                  "\"lease_ms\": {\"$numberLong\": \"1000000000000\"}, "
                                  "\"batch_seq\": 1, \"draining\": null}",
                           when),
                  0);
    write_service_doc(json);
    char *log = NULL;
    int64_t epoch = tick_until_primary(4 * TAKEOVER_MS, &log);
    cr_assert_eq(epoch, 3,
                 "a primary silent for two days is never replaced because of a hand-written "
                 "lease_ms of 10^12 (epoch %lld):\n%s",
                 (long long)epoch, log);
    free(log);
    free(json);
    free(when);
}

Test(bad_service_doc, live_settings_out_of_range_are_reported_and_ignored)
{
    make_service(false);
    write_service_doc("{\"primary\": null, \"epoch\": 0, \"last_active\": null, "
                      "\"batch_seq\": 1, \"draining\": null, "
                      "\"settings\": {\"tick_ms\": -1, \"takeover_ms\": \"soon\"}}");
    char *log = NULL;
    int64_t epoch = tick_until_primary(3 * TAKEOVER_MS, &log);
    cr_assert_eq(epoch, 1, "bad settings stopped the election (epoch %lld):\n%s",
                 (long long)epoch, log);
    cr_assert(strstr(log, "ignoring the settings in the database") && strstr(log, "tick_ms"),
              "bad settings not reported:\n%s", log);
    cr_assert_eq(service->eff.tick_ms, 100, "a bad tick_ms was applied: %lld",
                 (long long)service->eff.tick_ms);
    cr_assert_eq(service->eff.takeover_ms, TAKEOVER_MS);
    free(log);
}
