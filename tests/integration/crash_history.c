/*
 * crash_history.c - an attempt that never reported (its node stopped checking in, expired,
 * or restarted under the same id) is taken back to pending with a "crashed" entry in the
 * task's history naming the node, the attempt, the time and the reason, so `cohortctl task`
 * tells the story of every attempt. The release writes one entry per task, conditional on the
 * claim it saw, and goes in pages, so more than COHORT_OPERATOR_PAGE stalled tasks are all
 * released and recorded.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "core/clock.h"
#include "store/store.h"
#include "store/nodes.h"
#include "store/operator.h"
#include "store/upkeep.h"

#define SERVICE "crashes"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    test_service_db_open("crashhist", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(crash_history, .init = setup, .fini = teardown, .timeout = 120);

/* Inserts `n` tasks claimed by `node` at attempt 2 whose last check-in is an hour old, each
 * with its first run in the history. */
static void insert_claimed(const char *node, int n)
{
    int64_t old = cohort_clock_cluster_ms() - 3600000;
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, "queue_" SERVICE);
    bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
    mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(coll, opts);
    for (int i = 0; i < n; i++) {
        bson_t *doc = BCON_NEW("status", BCON_UTF8("claimed"), "claimed_by", BCON_UTF8(node),
                               "attempts", BCON_INT32(2), "priority", BCON_INT32(0), "run_at",
                               BCON_DATE_TIME(old), "claimed_at", BCON_DATE_TIME(old),
                               "heartbeat_at", BCON_DATE_TIME(old), "data", "{", "}", "history",
                               "[", "{", "node", BCON_UTF8(node), "attempt", BCON_INT32(1),
                               "outcome", BCON_UTF8("retry"), "}", "]");
        mongoc_bulk_operation_insert(bulk, doc);
        bson_destroy(doc);
    }
    bson_error_t error;
    cr_assert(mongoc_bulk_operation_execute(bulk, NULL, &error), "%s", error.message);
    mongoc_bulk_operation_destroy(bulk);
    bson_destroy(opts);
    mongoc_collection_destroy(coll);
}

static int64_t count(const char *filter)
{
    return test_count(client, db, "queue_" SERVICE, filter);
}

/* The one task's second history entry is the crash of attempt 2 on `node`, with `reason`. */
static void assert_crash_entry(const char *node, const char *reason)
{
    bson_t doc;
    cr_assert(test_find_one(client, db, "queue_" SERVICE, "{}", &doc));
    char *text = bson_as_relaxed_extended_json(&doc, NULL);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "pending", "%s", text);
    cr_assert_str_eq(test_doc_str(&doc, "history.0.outcome"), "retry", "the run is kept: %s",
                     text);
    const char *event = test_doc_str(&doc, "history.1.event");
    cr_assert(event && strcmp(event, "crashed") == 0, "no crashed entry: %s", text);
    cr_assert_str_eq(test_doc_str(&doc, "history.1.node"), node, "%s", text);
    cr_assert_eq(test_doc_int(&doc, "history.1.attempt"), 2, "%s", text);
    cr_assert(strstr(test_doc_str(&doc, "history.1.error"), reason), "%s", text);
    int64_t age = cohort_clock_cluster_ms() - test_doc_int(&doc, "history.1.at");
    cr_assert(age >= -1000 && age < 60000, "the crash's time is %lld ms off: %s", (long long)age,
              text);
    bson_free(text);
    bson_destroy(&doc);
}

Test(crash_history, a_stalled_claim_is_recorded_as_a_crash)
{
    insert_claimed("n2", 1);
    int64_t reset = 0;
    bson_error_t error;
    cr_assert(cohort_store_reset_stalled(store, client, SERVICE, cohort_clock_cluster_ms() - 60000,
                                         &reset, &error),
              "%s", error.message);
    cr_assert_eq(reset, 1);
    assert_crash_entry("n2", "stopped checking in");
}

Test(crash_history, a_restarted_nodes_claim_is_recorded_as_a_crash)
{
    insert_claimed("n3", 1);
    int64_t released = 0;
    bson_error_t error;
    cr_assert(cohort_store_release_claims(store, client, SERVICE, "n3", &released, &error), "%s",
              error.message);
    cr_assert_eq(released, 1);
    assert_crash_entry("n3", "restarted");
}

Test(crash_history, an_expired_nodes_claim_is_recorded_as_a_crash)
{
    cohort_node_info_t info = {.node_id = "n4", .host = "h", .pid = 1, .version = "test",
                               .started_at_ms = 1};
    int64_t server_ms = 0, nodes = 0, released = 0;
    bson_error_t error;
    cr_assert(cohort_store_ping_node(store, client, &info, NULL, &server_ms, NULL, NULL, &error),
              "%s", error.message);
    insert_claimed("n4", 1);
    test_sleep_ms(5);
    cr_assert(cohort_store_server_time(store, client, &server_ms, &error), "%s", error.message);
    cr_assert(cohort_store_expire_nodes(store, client, SERVICE, server_ms + 1000, &nodes,
                                        &released, &error),
              "%s", error.message);
    cr_assert_eq(released, 1);
    assert_crash_entry("n4", "expired");
}

Test(crash_history, a_release_of_many_claims_goes_in_pages_and_records_each)
{
    const int n = COHORT_OPERATOR_PAGE + COHORT_OPERATOR_PAGE / 2;
    insert_claimed("n5", n);
    int64_t reset = 0;
    bson_error_t error;
    cr_assert(cohort_store_reset_stalled(store, client, SERVICE, cohort_clock_cluster_ms() - 60000,
                                         &reset, &error),
              "%s", error.message);
    cr_assert_eq(reset, n);
    cr_assert_eq(count("{\"status\": \"pending\", \"history.event\": \"crashed\", "
                       "\"history.node\": \"n5\", \"history.attempt\": 2}"),
                 n);
}

Test(crash_history, a_claim_still_checked_in_is_left_alone)
{
    /* A claim still checked in is not stalled: nothing released, nothing recorded. */
    insert_claimed("n6", 1);
    int64_t reset = 0;
    bson_error_t error;
    cr_assert(cohort_store_reset_stalled(store, client, SERVICE,
                                         cohort_clock_cluster_ms() - 7200000, &reset, &error),
              "%s", error.message);
    cr_assert_eq(reset, 0);
    cr_assert_eq(count("{\"status\": \"claimed\", \"history.event\": {\"$exists\": false}}"), 1);
}
