/*
 * weights.c - load-aware claiming against the local database, through the store calls: the
 * claim filter's weight room (a task heavier than the room is skipped, lighter ones behind it
 * are claimed; a task written before weights existed weighs 1), batch claims that take one
 * task within the room and only light ones beyond it (prefetch), the first-task-of-any-weight
 * rule of a node holding nothing,
 * and the `weight` field every new task is written with.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/insert.h"
#include "support.h"

#define SERVICE "weights"
#define QUEUE "queue_" SERVICE
#define NODE "node-w"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    test_service_db_open("weights", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(weights, .init = setup, .fini = teardown, .timeout = 60);

/* A pending task of `weight` (0: the store's default) and `priority`, due now; data.name =
 * name. */
static void insert(const char *name, int64_t weight, int64_t priority)
{
    bson_t *data = BCON_NEW("name", BCON_UTF8(name));
    cohort_new_task_t task = {.data = data,
                              .created_by = "weights-test",
                              .now_ms = cohort_clock_cluster_ms() - 10,
                              .priority = priority,
                              .weight = weight};
    bson_oid_t oid;
    bson_error_t error;
    bool exists = true, coalesced = true;
    cr_assert(cohort_store_insert_task(store, client, SERVICE, &task, &oid, &exists, &coalesced,
                                       &error),
              "%s", error.message);
    bson_destroy(data);
}

/* A pending task as written before weights existed: no `weight` field. */
static void insert_legacy(const char *name, int64_t priority)
{
    insert(name, 1, priority);
    mongoc_collection_t *queue = mongoc_client_get_collection(client, db, QUEUE);
    bson_t *filter = BCON_NEW("data.name", BCON_UTF8(name));
    bson_t *update = BCON_NEW("$unset", "{", "weight", BCON_UTF8(""), "}");
    bson_error_t error;
    cr_assert(mongoc_collection_update_one(queue, filter, update, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(queue);
    cr_assert_eq(test_count(client, db, QUEUE, "{\"weight\": {\"$exists\": false}}"), 1);
}

/* One claim with the filter's weight room; the name of the task claimed, "" if none. */
static const char *claim_one(int64_t room, bool any_first, char *name, size_t len)
{
    cohort_claim_filter_t filter = {.weight_room = room, .weight_any_first = any_first};
    bson_t doc;
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_claim_task(store, client, SERVICE, NODE, cohort_clock_cluster_ms(),
                                      &filter, &doc, &found, NULL, &error),
              "claim: %s", error.message);
    snprintf(name, len, "%s", found ? test_doc_str(&doc, "data.name") : "");
    bson_destroy(&doc);
    return name;
}

/* One batch claim of up to `max` tasks; their names, space-separated, in claim order. */
static const char *claim_batch(int64_t room, bool any_first, size_t max, char *names,
                               size_t len)
{
    cohort_claim_filter_t filter = {.weight_room = room, .weight_any_first = any_first};
    bson_t docs[16];
    size_t n = 0;
    bson_error_t error;
    cr_assert(cohort_store_claim_tasks(store, client, SERVICE, NODE, cohort_clock_cluster_ms(),
                                       &filter, max, docs, &n, NULL, &error),
              "claim: %s", error.message);
    names[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(names);
        snprintf(names + used, len - used, "%s%s", i ? " " : "",
                 test_doc_str(&docs[i], "data.name"));
        bson_destroy(&docs[i]);
    }
    return names;
}

Test(weights, every_new_task_is_written_with_its_weight)
{
    insert("a", 7, 0);
    insert("b", 0, 0); /* unset: 1 */
    cr_assert_eq(test_count(client, db, QUEUE, "{\"data.name\": \"a\", \"weight\": 7}"), 1);
    cr_assert_eq(test_count(client, db, QUEUE, "{\"data.name\": \"b\", \"weight\": 1}"), 1);
}

Test(weights, a_claim_skips_tasks_heavier_than_the_room_and_old_tasks_weigh_1)
{
    insert("heavy", 3, 10);
    insert_legacy("old", 5);
    insert("light", 1, 0);
    char name[32];
    cr_assert_str_eq(claim_one(2, false, name, sizeof name), "old",
                     "the heavy task first in claim order is skipped; one without weight fits");
    cr_assert_str_eq(claim_one(2, false, name, sizeof name), "light");
    cr_assert_str_eq(claim_one(2, false, name, sizeof name), "", "only the heavy one is left");
    cr_assert_str_eq(claim_one(3, false, name, sizeof name), "heavy", "room 3 fits weight 3");
}

Test(weights, a_node_holding_nothing_claims_the_first_task_whatever_its_weight)
{
    insert("huge", 900, 10);
    insert("light", 1, 0);
    char name[32];
    cr_assert_str_eq(claim_one(2, true, name, sizeof name), "huge");
    cr_assert_str_eq(claim_one(0, false, name, sizeof name), "light", "room 0: no limit");
}

Test(weights, a_batch_claim_takes_one_task_within_the_room_and_light_ones_beyond_it)
{
    insert("a3", 3, 9);
    insert("b2", 2, 8);
    insert_legacy("c1", 7);
    insert("d2", 2, 6);
    insert("e1", 1, 5);
    char names[128];
    cr_assert_str_eq(claim_batch(2, false, 10, names, sizeof names), "b2 c1 e1",
                     "a3 is past the room; b2 fits; beyond it only light tasks are prefetched");
    cr_assert_eq(test_count(client, db, QUEUE, "{\"status\": \"claimed\"}"), 3,
                 "only the tasks kept are claimed");
    cr_assert_str_eq(claim_batch(1, true, 10, names, sizeof names), "a3",
                     "any first task, and no weighted one prefetched");
    cr_assert_str_eq(claim_batch(0, false, 10, names, sizeof names), "d2", "room 0: no limit");
}
