/*
 * ctl_migrate.c - `cohortctl migrate` on a database as releases before 0.2.0 left it (tasks
 * without `weight`), issue 25 item 3:
 * - --dry-run counts what migration 2 would change and writes nothing;
 * - a run killed part way (COHORT_TEST_MIGRATE_EXIT_AFTER: exit after K batches, the record
 *   left "running"), then run again, ends exactly as one uninterrupted run on a twin
 *   database: every task carries weight 1, a task that had a weight keeps it, nothing else
 *   changed, the record "done" with who, when and how many;
 * - run once more, it has nothing to do;
 * - `cohortctl schema --json` shows the database, the level, the nodes and the migration.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "support.h"

#define TASKS 10000
#define SERVICE "mig"

static char *db, *twin;
static mongoc_client_t *client;

/* TASKS tasks as an old release wrote them (no weight), one with weight 7, and schema 1. */
static void fill(const char *name)
{
    mongoc_collection_t *queue = mongoc_client_get_collection(client, name, "queue_" SERVICE);
    mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(queue, NULL);
    for (int i = 0; i < TASKS; i++) {
        bson_t *doc = i == 0 ? BCON_NEW("status", BCON_UTF8("pending"), "data", "{", "i",
                                        BCON_INT32(i), "}", "weight", BCON_INT32(7))
                             : BCON_NEW("status", BCON_UTF8(i % 2 ? "succeeded" : "pending"),
                                        "data", "{", "i", BCON_INT32(i), "}");
        mongoc_bulk_operation_insert(bulk, doc);
        bson_destroy(doc);
    }
    /* Two inserted by hand with ids of other types: the walk by _id range must not miss them. */
    bson_t *odd = BCON_NEW("_id", BCON_UTF8("by-hand"), "status", BCON_UTF8("done-by-hand"));
    mongoc_bulk_operation_insert(bulk, odd);
    bson_destroy(odd);
    odd = BCON_NEW("_id", BCON_INT32(42), "status", BCON_UTF8("done-by-hand"));
    mongoc_bulk_operation_insert(bulk, odd);
    bson_destroy(odd);
    bson_error_t error;
    cr_assert(mongoc_bulk_operation_execute(bulk, NULL, &error), "insert: %s", error.message);
    mongoc_bulk_operation_destroy(bulk);
    mongoc_collection_destroy(queue);
    mongoc_collection_t *meta = mongoc_client_get_collection(client, name, "cohort_meta");
    bson_t *schema = BCON_NEW("_id", BCON_UTF8("schema"), "version", BCON_INT32(1));
    cr_assert(mongoc_collection_insert_one(meta, schema, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(schema);
    mongoc_collection_destroy(meta);
}

static void setup(void)
{
    client = test_client();
    db = test_db_name("migrate");
    twin = test_db_name("migtwin");
    fill(db);
}

static void teardown(void)
{
    test_drop_db(db);
    test_drop_db(twin);
    free(db);
    free(twin);
    mongoc_client_destroy(client);
}

TestSuite(ctl_migrate, .init = setup, .fini = teardown, .timeout = 240);

static test_run_result_t migrate(const char *name, const char *exit_after, const char *extra)
{
    char env_exit[64];
    snprintf(env_exit, sizeof env_exit, "COHORT_TEST_MIGRATE_EXIT_AFTER=%s",
             exit_after ? exit_after : "0");
    const char *env[] = {env_exit, NULL};
    const char *args[] = {"migrate", "--batch", "1000", extra, NULL};
    return test_ctl_run(name, env, args);
}

static int64_t count(const char *name, const char *filter)
{
    return test_count(client, name, "queue_" SERVICE, filter);
}

static void assert_migrated(const char *name)
{
    cr_assert_eq(count(name, "{\"weight\": {\"$exists\": false}}"), 0,
                 "%s: tasks without weight remain", name);
    cr_assert_eq(count(name, "{\"weight\": 1}"), TASKS + 1, "%s: not every task weighs 1", name);
    cr_assert_eq(count(name, "{\"weight\": 7, \"data.i\": 0}"), 1,
                 "%s: the task that had a weight lost it", name);
    cr_assert_eq(count(name, "{\"status\": \"done-by-hand\", \"weight\": 1}"), 2,
                 "%s: the tasks with ids of other types were skipped", name);
    cr_assert_eq(count(name, "{\"status\": \"pending\"}"), TASKS / 2,
                 "%s: statuses changed", name);
    cr_assert_eq(test_count(client, name, "cohort_meta",
                            "{\"_id\": \"migration:2\", \"state\": \"done\", \"by\": {\"$exists\": "
                            "true}, \"finished_at\": {\"$exists\": true}}"),
                 1, "%s: no record of migration 2 done, by whom, when", name);
    cr_assert_eq(test_count(client, name, "cohort_meta", "{\"weight\": {\"$exists\": true}}"), 0,
                 "%s: the migration wrote into cohort_meta", name);
}

Test(ctl_migrate, dry_run_writes_nothing)
{
    test_run_result_t r = migrate(db, NULL, "--dry-run");
    cr_assert_eq(r.exit_code, 0, "dry run: exit %d: %s", r.exit_code, r.err);
    char said[64];
    snprintf(said, sizeof said, "would change %d document(s)", TASKS + 1);
    cr_assert(strstr(r.out, said), "dry run said: %s", r.out);
    test_run_result_free(&r);
    cr_assert_eq(count(db, "{\"weight\": {\"$exists\": true}}"), 1, "the dry run wrote weights");
    cr_assert_eq(test_count(client, db, "cohort_meta", "{\"_id\": \"migration:2\"}"), 0,
                 "the dry run recorded the migration");
}

Test(ctl_migrate, killed_part_way_then_again_ends_as_one_run)
{
    test_run_result_t r = migrate(db, "3", NULL);
    cr_assert_eq(r.exit_code, 3, "the test hook did not stop the run: exit %d: %s", r.exit_code,
                 r.err);
    test_run_result_free(&r);
    int64_t left = count(db, "{\"weight\": {\"$exists\": false}}");
    cr_assert(left >= TASKS + 1 - 3000 - 2 && left <= TASKS + 1 - 3000 + 2,
              "the killed run did not stop after 3 batches of 1000 (%lld left)", (long long)left);
    cr_assert_eq(test_count(client, db, "cohort_meta",
                            "{\"_id\": \"migration:2\", \"state\": \"running\"}"),
                 1, "the killed run's record does not say running");

    r = migrate(db, NULL, NULL);
    cr_assert_eq(r.exit_code, 0, "the second run: exit %d: %s", r.exit_code, r.err);
    test_run_result_free(&r);
    assert_migrated(db);

    fill(twin);
    r = migrate(twin, NULL, NULL);
    cr_assert_eq(r.exit_code, 0, "the twin's run: exit %d: %s", r.exit_code, r.err);
    test_run_result_free(&r);
    assert_migrated(twin);
    char changed[64];
    snprintf(changed, sizeof changed, "{\"changed\": %d}", TASKS + 1);
    cr_assert_eq(test_count(client, twin, "cohort_meta", changed), 1,
                 "the uninterrupted run did not count %d changes", TASKS + 1);
    cr_assert_eq(test_count(client, db, "cohort_meta", changed), 1,
                 "the killed and resumed runs together did not count %d changes", TASKS + 1);

    r = migrate(db, NULL, NULL);
    cr_assert(r.exit_code == 0 && strstr(r.out, "no migration pending"),
              "a third run found work: %s", r.out);
    test_run_result_free(&r);

    const char *args[] = {"schema", "--json", NULL};
    r = test_ctl_run(db, NULL, args);
    cr_assert_eq(r.exit_code, 0, "schema --json: exit %d: %s", r.exit_code, r.err);
    cr_assert(strstr(r.out, "\"database\" : 1") && strstr(r.out, "\"feature_level\" : 1") &&
                  strstr(r.out, "\"nodes\" : [") && strstr(r.out, "\"name\" : \"task_weight\"") &&
                  strstr(r.out, "\"state\" : \"done\""),
              "schema --json: %s", r.out);
    test_run_result_free(&r);
}
