/*
 * schema.c - the database's schema version (cohort_meta {_id: "schema"}, issue 25 part 2):
 * - a node's first start on an empty database records schema version 1 (who and when), and
 *   publishes its release and schema in its nodes document;
 * - a node refuses a database whose schema version is newer than it knows: it exits 1 with
 *   one line naming both versions, and writes nothing (no nodes document);
 * - a database written before schema versions (Cohort data, no cohort_meta) counts as
 *   version 1: the node runs its tasks, says so at INFO and leaves cohort_meta unwritten;
 * - the fenced feature level (issue 25 item 4): on a 0.2.0 database (schema 1, level 1),
 *   `cohortctl upgrade finish` refuses while a live node knows only level 1 (a node that
 *   claims so through COHORT_TEST_FEATURE_LEVEL, as a 0.2.0 node would by publishing no
 *   level), naming it, and changes nothing; once that node is gone it raises schema version
 *   and level to this release's, and the node still running follows without a restart;
 *   `upgrade lower --to 1` goes back. tests/upgrade runs the same with real 0.2.0 nodes.
 */
#include <bson/bson.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster.h"
#include "core/version.h"
#include "support.h"

#define SERVICE "noop"

TestSuite(cluster_schema, .fini = cluster_cleanup_all, .timeout = 240);

static cluster_t *new_cluster(const char *tag)
{
    cluster_options_t options = {
        .tag = tag,
        .tick_ms = 200,
        .takeover_ms = 2000,
        .services = {{.name = SERVICE, .settings = "workers = 2"}},
    };
    return cluster_new(&options);
}

/* The int64 at `path` of the first document of `collection` matching `filter`; -1: none. */
static int64_t read_int(cluster_t *c, const char *collection, const char *filter, const char *path)
{
    bson_t doc;
    if (!test_find_one(c->client, c->db, collection, filter, &doc))
        return -1;
    bson_iter_t it;
    int64_t v = bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, path, &it) &&
                        BSON_ITER_HOLDS_NUMBER(&it)
                    ? bson_iter_as_int64(&it)
                    : -1;
    bson_destroy(&doc);
    return v;
}

static bool doc_has(cluster_t *c, const char *collection, const char *filter, const char *path)
{
    bson_t doc;
    if (!test_find_one(c->client, c->db, collection, filter, &doc))
        return false;
    bool has = test_doc_has(&doc, path);
    bson_destroy(&doc);
    return has;
}

Test(cluster_schema, empty_database_recorded_then_newer_refused)
{
    cluster_t *c = new_cluster("schema-new");
    cluster_node_t *first = cluster_add_node(c, NULL);
    cluster_node_start(first);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the node did not register");
    char recorded[64];
    snprintf(recorded, sizeof recorded, "new database: recorded schema version %d",
             COHORT_SCHEMA_VERSION);
    cluster_assert(c, cluster_wait_log(first, recorded, NULL, 10000),
                   "no INFO line for the recorded schema version");
    const char *schema = "{\"_id\": \"schema\"}";
    cluster_assert(c, read_int(c, "cohort_meta", schema, "version") == COHORT_SCHEMA_VERSION,
                   "an empty database's first node did not record schema version %d",
                   COHORT_SCHEMA_VERSION);
    cluster_assert(c,
                   doc_has(c, "cohort_meta", schema, "written_by") &&
                       doc_has(c, "cohort_meta", schema, "written_at") &&
                       doc_has(c, "cohort_meta", schema, "release"),
                   "the schema document does not say who wrote it and when");
    char node_filter[64];
    snprintf(node_filter, sizeof node_filter, "{\"_id\": \"%s\"}", first->id);
    cluster_assert(c,
                   read_int(c, "nodes", node_filter, "schema") == COHORT_SCHEMA_VERSION &&
                       doc_has(c, "nodes", node_filter, "release"),
                   "the node does not publish its release and schema");
    cluster_node_stop_ok(first, 15000);

    /* A later release wrote schema version 99: this one must not touch the database. */
    const char *drop[] = {"nodes", NULL};
    for (const char *const *name = drop; *name; name++) {
        mongoc_collection_t *coll = mongoc_client_get_collection(c->client, c->db, *name);
        mongoc_collection_drop(coll, NULL);
        mongoc_collection_destroy(coll);
    }
    mongoc_collection_t *meta = mongoc_client_get_collection(c->client, c->db, "cohort_meta");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8("schema"));
    bson_t *update = BCON_NEW("$set", "{", "version", BCON_INT32(99), "}");
    bson_error_t error;
    cluster_assert(c, mongoc_collection_update_one(meta, filter, update, NULL, NULL, &error),
                   "cannot set version 99: %s", error.message);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(meta);

    cluster_node_t *second = cluster_add_node(c, NULL);
    int64_t started = test_now_ms();
    cluster_node_start(second);
    cluster_assert(c, cluster_node_wait_exit(second, started, 20000) >= 0,
                   "the node kept running on a database of schema version 99");
    cluster_assert(c, WIFEXITED(second->wait_status) && WEXITSTATUS(second->wait_status) == 1,
                   "the node's exit status is %d, not 1", second->wait_status);
    char known[32];
    snprintf(known, sizeof known, "schema version %d", COHORT_SCHEMA_VERSION);
    char *line = cluster_log_find(second, "schema version is 99", known);
    cluster_assert(c, line, "no line naming both schema versions (99 and %d)",
                   COHORT_SCHEMA_VERSION);
    cr_log_info("refused: %s", line);
    free(line);
    snprintf(node_filter, sizeof node_filter, "{\"_id\": \"%s\"}", second->id);
    cluster_assert(c, !doc_has(c, "nodes", node_filter, "_id"),
                   "the refused node wrote its nodes document");
}

Test(cluster_schema, database_without_schema_runs_as_version_1)
{
    cluster_t *c = new_cluster("schema-old");
    /* Cohort data from before schema versions: a service and its queue, no cohort_meta. */
    const char *enqueue[] = {"enqueue", SERVICE, "--count", "5", "--create", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cannot enqueue");
    cluster_node_t *n = cluster_add_node(c, NULL);
    cluster_node_start(n);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 5, 30000),
                   "the node did not run the tasks of an unversioned database");
    cluster_assert(c, cluster_log_count(n, "records no schema version", "schema version 1") == 1,
                   "no INFO line saying the database is served as schema version 1");
    cluster_assert(c, !doc_has(c, "cohort_meta", "{\"_id\": \"schema\"}", "_id"),
                   "the node recorded a schema version into a database that held data");
    cluster_node_stop_ok(n, 15000);
}

/* The cluster's feature level as `cohortctl schema --json` would read it. */
static int64_t meta_level(cluster_t *c)
{
    return read_int(c, "cohort_meta", "{\"_id\": \"features\"}", "level");
}

Test(cluster_schema, upgrade_finish_refuses_while_an_older_node_is_live)
{
    cluster_t *c = new_cluster("schema-level");
    /* A database as 0.2.0 leaves it: schema 1 recorded, no features document. */
    const char *enqueue[] = {"enqueue", SERVICE, "--count", "3", "--create", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cannot enqueue");
    mongoc_collection_t *meta = mongoc_client_get_collection(c->client, c->db, "cohort_meta");
    bson_t *doc = BCON_NEW("_id", BCON_UTF8("schema"), "version", BCON_INT32(1));
    bson_error_t error;
    cluster_assert(c, mongoc_collection_insert_one(meta, doc, NULL, NULL, &error),
                   "cannot write schema 1: %s", error.message);
    bson_destroy(doc);
    mongoc_collection_destroy(meta);

    const char *old_env[] = {"COHORT_TEST_FEATURE_LEVEL=1", NULL};
    cluster_node_t *old = cluster_add_node(c, old_env);
    cluster_node_t *new = cluster_add_node(c, NULL);
    cluster_node_start(old);
    cluster_node_start(new);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 3, 30000), "the tasks did not run");
    cluster_assert(c, cluster_wait_log(new, "feature level 1 in use", NULL, 10000),
                   "the new node does not follow level 1 on a 0.2.0 database");

    const char *finish[] = {"upgrade", "finish", NULL};
    cluster_assert(c, cluster_run_ctl(c, finish) == 2,
                   "upgrade finish did not refuse while node %s knows only level 1", old->id);
    char log_path[512];
    snprintf(log_path, sizeof log_path, "%s/cohortctl.log", c->dir);
    char *log = test_read_file(log_path);
    char named[64];
    snprintf(named, sizeof named, "node %s (release", old->id);
    cluster_assert(c, log && strstr(log, named), "the refusal does not name %s: %s", old->id,
                   log ? log : "(no log)");
    free(log);
    cluster_assert(c,
                   read_int(c, "cohort_meta", "{\"_id\": \"schema\"}", "version") == 1 &&
                       meta_level(c) == -1,
                   "a refused finish changed the schema version or the level");

    /* The old node leaves; finish waits for its last ping to age past takeover_ms. */
    cluster_node_stop_ok(old, 15000);
    int rc = 2;
    for (int64_t until = test_now_ms() + 15000; rc == 2 && test_now_ms() < until;) {
        rc = cluster_run_ctl(c, finish);
        if (rc == 2)
            test_sleep_ms(500);
    }
    cluster_assert(c, rc == 0, "upgrade finish failed (exit %d) with every live node new", rc);
    cluster_assert(c,
                   read_int(c, "cohort_meta", "{\"_id\": \"schema\"}", "version") ==
                           COHORT_SCHEMA_VERSION &&
                       meta_level(c) == COHORT_FEATURE_LEVEL,
                   "finish did not raise the schema version and the level to %d",
                   COHORT_FEATURE_LEVEL);
    char follows[64];
    snprintf(follows, sizeof follows, "feature level %d in use", COHORT_FEATURE_LEVEL);
    cluster_assert(c, cluster_wait_log(new, follows, NULL, 45000),
                   "the running node did not follow the raised level");
    const char *more[] = {"enqueue", SERVICE, "--count", "3", NULL};
    cluster_assert(c, cluster_run_ctl(c, more) == 0, "cannot enqueue");
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 6, 30000),
                   "tasks did not run at the raised level");

    const char *lower[] = {"upgrade", "lower", "--to", "1", NULL};
    cluster_assert(c, cluster_run_ctl(c, lower) == 0, "upgrade lower --to 1 failed");
    cluster_assert(c,
                   read_int(c, "cohort_meta", "{\"_id\": \"schema\"}", "version") == 1 &&
                       meta_level(c) == 1,
                   "lower did not set the schema version and the level back to 1");
    cluster_node_stop_ok(new, 15000);
}
