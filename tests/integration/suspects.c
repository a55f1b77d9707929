/*
 * suspects.c - the suspect rule in the store (docs/SCHEMA.md#suspects): a release of a
 * node's claims counts the attempt only of a task marked suspect and marks every other one,
 * its attempt in `uncounted` (attempts never go down); an external worker's lease that ran
 * out is counted as before; a node's claims skip suspects (a batch claim says it saw one), a
 * claim of suspects only takes them; an outcome clears the mark.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "support.h"
#include "core/clock.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/leases.h"
#include "store/outcomes.h"
#include "store/upkeep.h"

#define SERVICE "suspects"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    test_service_db_open("suspects", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(suspects, .init = setup, .fini = teardown, .timeout = 60);

/* Inserts a task in `status` (claimed by node-x at attempt 2, its check-in an hour old, or
 * pending and due) with `name` in its data, a suspect if `suspect`; `extra` (may be NULL) is
 * concatenated in. */
static void insert(const char *name, const char *status, bool suspect, const bson_t *extra)
{
    int64_t old = cohort_clock_cluster_ms() - 3600000;
    bson_t *doc = BCON_NEW("status", BCON_UTF8(status), "attempts",
                           BCON_INT32(strcmp(status, "claimed") == 0 ? 2 : 0), "priority",
                           BCON_INT32(0), "run_at", BCON_DATE_TIME(old), "data", "{", "name",
                           BCON_UTF8(name), "}");
    if (strcmp(status, "claimed") == 0)
        BCON_APPEND(doc, "claimed_by", BCON_UTF8("node-x"), "claimed_at", BCON_DATE_TIME(old),
                    "heartbeat_at", BCON_DATE_TIME(old));
    if (suspect)
        BSON_APPEND_BOOL(doc, "suspect", true);
    if (extra)
        bson_concat(doc, extra);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, "queue_" SERVICE);
    bson_error_t error;
    cr_assert(mongoc_collection_insert_one(coll, doc, NULL, NULL, &error), "%s", error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(doc);
}

/* The task named `name`, into *doc (destroy it). */
static void find(const char *name, bson_t *doc)
{
    char filter[96];
    snprintf(filter, sizeof filter, "{\"data.name\": \"%s\"}", name);
    cr_assert(test_find_one(client, db, "queue_" SERVICE, filter, doc), "no task %s", name);
}

Test(suspects, a_release_counts_only_a_suspects_attempt)
{
    insert("neighbour", "claimed", false, NULL);
    insert("suspect", "claimed", true, NULL);
    int64_t reset = 0;
    bson_error_t error;
    cr_assert(cohort_store_reset_stalled(store, client, SERVICE,
                                         cohort_clock_cluster_ms() - 60000, &reset, &error),
              "%s", error.message);
    cr_assert_eq(reset, 2);

    bson_t doc;
    find("neighbour", &doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "pending");
    cr_assert_eq(test_doc_int(&doc, "attempts"), 2, "attempts never go down");
    cr_assert_eq(test_doc_int(&doc, "uncounted"), 1, "the neighbour's attempt is not counted");
    cr_assert(test_doc_has(&doc, "suspect"), "the neighbour became a suspect");
    cr_assert(strstr(test_doc_str(&doc, "last_error"), "attempt not counted"));
    cr_assert_str_eq(test_doc_str(&doc, "history.0.event"), "crashed");
    cr_assert(test_doc_has(&doc, "history.0.counted"), "the entry says it was not counted");
    bson_destroy(&doc);

    find("suspect", &doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "pending");
    cr_assert_eq(test_doc_int(&doc, "attempts"), 2);
    cr_assert_not(test_doc_has(&doc, "uncounted"), "a suspect's attempt counts");
    cr_assert(test_doc_has(&doc, "suspect"), "it stays a suspect");
    cr_assert_not(test_doc_has(&doc, "history.0.counted"));
    bson_destroy(&doc);
}

Test(suspects, an_expired_lease_is_counted)
{
    bson_t *lease = BCON_NEW("lease_expires_at",
                             BCON_DATE_TIME(cohort_clock_cluster_ms() - 1000), "claim_token",
                             BCON_UTF8("t"));
    insert("leased", "claimed", false, lease);
    bson_destroy(lease);
    int64_t released = 0;
    bson_error_t error;
    cr_assert(cohort_store_expire_leases(store, client, SERVICE, cohort_clock_cluster_ms(),
                                         &released, &error),
              "%s", error.message);
    cr_assert_eq(released, 1);
    bson_t doc;
    find("leased", &doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "pending");
    cr_assert_not(test_doc_has(&doc, "uncounted"));
    cr_assert_not(test_doc_has(&doc, "suspect"));
    bson_destroy(&doc);
}

Test(suspects, a_nodes_claims_skip_suspects_and_a_claim_alone_takes_them)
{
    insert("suspect", "pending", true, NULL); /* first in claim order (oldest _id) */
    insert("a", "pending", false, NULL);
    insert("b", "pending", false, NULL);
    insert("c", "pending", false, NULL);
    int64_t now = cohort_clock_cluster_ms();
    bson_error_t error;

    /* A batch claim leaves it and says so. */
    bool seen = false;
    cohort_claim_filter_t skip = {.suspects = COHORT_SUSPECTS_SKIP, .suspect_seen = &seen};
    bson_t claimed[4];
    size_t n = 0;
    cr_assert(cohort_store_claim_tasks(store, client, SERVICE, "node-x", now, &skip, 2, claimed,
                                       &n, NULL, &error),
              "%s", error.message);
    cr_assert_eq(n, 1, "of the first 2 candidates, the suspect is left");
    cr_assert_not(cohort_store_task_suspect(&claimed[0]));
    cr_assert(seen, "the batch claim saw the suspect");
    bson_destroy(&claimed[0]);

    /* A single claim beside other tasks leaves it too. */
    bool found = false;
    cr_assert(cohort_store_claim_task(store, client, SERVICE, "node-x", now, &skip, &claimed[0],
                                      &found, NULL, &error),
              "%s", error.message);
    cr_assert(found);
    cr_assert_not(cohort_store_task_suspect(&claimed[0]));
    bson_destroy(&claimed[0]);

    /* A claim of suspects only takes it; its outcome clears the mark. */
    cohort_claim_filter_t only = {.suspects = COHORT_SUSPECTS_ONLY};
    cr_assert(cohort_store_claim_task(store, client, SERVICE, "node-x", now, &only, &claimed[0],
                                      &found, NULL, &error),
              "%s", error.message);
    cr_assert(found);
    cr_assert(cohort_store_task_suspect(&claimed[0]));
    bson_iter_t id;
    cr_assert(bson_iter_init_find(&id, &claimed[0], "_id"));
    cohort_task_result_t done = {.finish = COHORT_FINISH_SUCCEEDED,
                                 .started_at_ms = now,
                                 .ended_at_ms = cohort_clock_cluster_ms()};
    bool applied = false;
    cr_assert(cohort_store_finish_task_value(store, client, SERVICE, bson_iter_value(&id),
                                             "node-x", 1, &done, &applied, &error),
              "%s", error.message);
    cr_assert(applied);
    bson_destroy(&claimed[0]);
    bson_t doc;
    find("suspect", &doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "succeeded");
    cr_assert_not(test_doc_has(&doc, "suspect"), "the outcome cleared the mark");
    bson_destroy(&doc);

    /* None left: a claim of suspects only finds nothing, though tasks are due. */
    cr_assert(cohort_store_claim_task(store, client, SERVICE, "node-x", now, &only, &claimed[0],
                                      &found, NULL, &error),
              "%s", error.message);
    cr_assert_not(found);
    bson_destroy(&claimed[0]);
}
