/*
 * schedules_store.c - the store's half of exactly-once recurring tasks (src/store/schedules.c)
 * against the local database: the record of a schedule's last slot lands only under the
 * writer's primacy and epoch and only over the last slot it read (a deposed primary's late
 * record and a record based on a stale read change nothing); a slot's second task is a
 * duplicate-key refusal, and the first one is found by its key; pause needs a known schedule.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "support.h"
#include "core/schedule.h"
#include "store/store.h"
#include "store/insert.h"
#include "store/schedules.h"
#include "store/services.h"

#define SERVICE "cronstore"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    test_service_db_open("sched_store", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(schedules_store, .init = setup, .fini = teardown, .timeout = 60);

/* Makes `node` the primary under `epoch`, as a takeover would. */
static void primacy(const char *node, int64_t epoch)
{
    mongoc_collection_t *services = mongoc_client_get_collection(client, db, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(SERVICE));
    bson_t *update = BCON_NEW("$set", "{", "primary", BCON_UTF8(node), "epoch",
                              BCON_INT64(epoch), "}");
    bson_error_t error;
    cr_assert(mongoc_collection_update_one(services, filter, update, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
}

static cohort_schedule_state_t state(void)
{
    bson_t doc;
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_read_service(store, client, SERVICE, &doc, &found, &error), "%s",
              error.message);
    cr_assert(found);
    cohort_schedule_state_t st;
    cohort_store_schedule_state(&doc, "nightly", &st);
    bson_destroy(&doc);
    return st;
}

static bool record(const char *node, int64_t epoch, bool from_found, int64_t from, int64_t to)
{
    cohort_schedule_record_t r = {.id = "nightly", .series = "0 3 * * * @ UTC",
                                  .from_found = from_found, .from_slot_ms = from,
                                  .to_slot_ms = to, .created = 1};
    bool applied = false;
    bson_error_t error;
    cr_assert(cohort_store_record_schedule(store, client, SERVICE, node, epoch, &r, &applied,
                                           &error),
              "%s", error.message);
    return applied;
}

Test(schedules_store, the_record_is_fenced_on_epoch_and_on_the_slot_read)
{
    primacy("n1", 5);
    cr_assert(record("n1", 5, false, 0, 1000000), "the first record");
    cr_assert_not(record("n1", 5, false, 0, 2000000), "a second 'first' record landed");
    cr_assert(record("n1", 5, true, 1000000, 2000000), "the next record");
    cr_assert_not(record("n1", 5, true, 1000000, 3000000), "a record on a stale read landed");
    cohort_schedule_state_t st = state();
    cr_assert(st.found);
    cr_assert_eq(st.last_slot_ms, 2000000);
    cr_assert_eq(st.last_epoch, 5);
    cr_assert_eq(st.created, 2);
    cr_assert_str_eq(st.series, "0 3 * * * @ UTC");

    primacy("n2", 6); /* n1 is deposed */
    cr_assert_not(record("n1", 5, true, 2000000, 3000000), "a deposed primary's record landed");
    cr_assert_not(record("n2", 5, true, 2000000, 3000000), "a record under an old epoch landed");
    cr_assert(record("n2", 6, true, 2000000, 3000000), "the new primary's record");
    st = state();
    cr_assert_eq(st.last_slot_ms, 3000000);
    cr_assert_eq(st.last_epoch, 6);
}

Test(schedules_store, a_slots_second_task_is_refused_and_the_first_is_found)
{
    char key[COHORT_SCHEDULE_KEY_MAX];
    cohort_schedule_slot_key("nightly", 1795485600000LL, key, sizeof key);
    cohort_new_task_t task = {.created_by = "n1", .epoch = 5, .now_ms = 1795485600000LL,
                              .unique_key = key};
    bson_oid_t first, second, found_oid;
    bool exists = false, coalesced = false, found = false;
    bson_error_t error;
    cr_assert(cohort_store_insert_task(store, client, SERVICE, &task, &first, &exists,
                                       &coalesced, &error),
              "%s", error.message);
    task.created_by = "n2";
    cr_assert_not(cohort_store_insert_task(store, client, SERVICE, &task, &second, &exists,
                                           &coalesced, &error),
                  "a slot got a second task");
    cr_assert(exists, "the refusal is not a duplicate key: %s", error.message);
    cr_assert(cohort_store_find_unique_task(store, client, SERVICE, key, &found_oid, &found,
                                            &error),
              "%s", error.message);
    cr_assert(found);
    cr_assert(bson_oid_equal(&first, &found_oid));
    cr_assert(cohort_store_find_unique_task(store, client, SERVICE, "schedule:nightly:x",
                                            &found_oid, &found, &error));
    cr_assert_not(found);
}

Test(schedules_store, pause_needs_a_known_schedule)
{
    bool found = true;
    bson_error_t error;
    cr_assert(cohort_store_pause_schedule(store, client, SERVICE, "nightly", true, &found,
                                          &error),
              "%s", error.message);
    cr_assert_not(found, "an unknown schedule was paused");
    primacy("n1", 1);
    cr_assert(record("n1", 1, false, 0, 1000));
    cr_assert(cohort_store_pause_schedule(store, client, SERVICE, "nightly", true, &found,
                                          &error));
    cr_assert(found);
    cr_assert(state().paused);
    cr_assert(cohort_store_pause_schedule(store, client, SERVICE, "nightly", false, &found,
                                          &error));
    cr_assert_not(state().paused);
    cr_assert_eq(state().last_slot_ms, 1000, "pausing touched the slot");
}

/* A state edited by hand so that last_slot is no date: read as damaged, and the primary's
 * restart record (written as for a schedule never seen) replaces it. */
Test(schedules_store, a_damaged_state_is_replaced_by_the_next_record)
{
    primacy("n1", 2);
    mongoc_collection_t *services = mongoc_client_get_collection(client, db, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(SERVICE));
    bson_t *update = BCON_NEW("$set", "{", "schedules.nightly.last_slot", BCON_UTF8("soon"),
                              "schedules.nightly.series", BCON_UTF8("0 3 * * * @ UTC"), "}");
    bson_error_t error;
    cr_assert(mongoc_collection_update_one(services, filter, update, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    cohort_schedule_state_t st = state();
    cr_assert(st.found && st.damaged);
    cr_assert(record("n1", 2, false, 0, 5000), "the restart record did not replace it");
    st = state();
    cr_assert(st.found && !st.damaged);
    cr_assert_eq(st.last_slot_ms, 5000);
    cr_assert_not(record("n1", 2, false, 0, 6000), "a second restart record landed");
}
