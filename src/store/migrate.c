/*
 * migrate.c - the online migrations (migrate.h) and this release's one: schema version 2.
 *
 * Version 2 ("task_weight"): every task carries `weight`. Tasks written before weights
 * existed (releases before 0.2.0) have none and weigh 1, which the claim query has to allow
 * for with `weight: {$not: {$gt: room}}` (a missing field matches). Once every task carries
 * it, feature level 2 claims with the plain range `weight: {$lte: room}` (store/claims.c).
 * Adding `weight: 1` where it is missing changes nothing a 0.2.0 node reads: it already
 * counts a missing weight as 1 and writes one on every new task.
 */
#include "store/migrate.h"

#include <string.h>

#include "core/error.h"
#include "core/version.h"
#include "store/internal.h"

static const cohort_migration_t migrations[] = {
    {2, "task_weight",
     "every task carries weight (tasks written before weights existed get 1, which they "
     "weighed already)"},
};

const cohort_migration_t *cohort_migrations(size_t *n)
{
    *n = sizeof migrations / sizeof migrations[0];
    return migrations;
}

static void record_id(char *buf, size_t len, int64_t version)
{
    snprintf(buf, len, "migration:%lld", (long long)version);
}

bool cohort_store_migration_record(cohort_store_t *store, mongoc_client_t *client,
                                   int64_t version, bson_t *doc, bool *found, bson_error_t *error)
{
    char id[40];
    record_id(id, sizeof id, version);
    mongoc_collection_t *meta = store_collection(store, client, "cohort_meta");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id));
    bool ok = store_find_one(meta, filter, doc, found, error);
    bson_destroy(filter);
    mongoc_collection_destroy(meta);
    return ok;
}

bool cohort_store_migration_done(cohort_store_t *store, mongoc_client_t *client, int64_t version,
                                 bool *done, bson_error_t *error)
{
    bson_t doc;
    bool found = false;
    bool ok = cohort_store_migration_record(store, client, version, &doc, &found, error);
    bson_iter_t it;
    *done = ok && found && bson_iter_init_find(&it, &doc, "state") && BSON_ITER_HOLDS_UTF8(&it) &&
            strcmp(bson_iter_utf8(&it, NULL), "done") == 0;
    bson_destroy(&doc);
    return ok;
}

/* Writes the record's state: `start` (re)sets started_at, "running" adds `changed` to the
 * count of every run so far, "done" sets finished_at. */
static bool record(mongoc_collection_t *meta, const cohort_migration_t *m, const char *by,
                   const char *state, int64_t changed, bool start, bson_error_t *error)
{
    char id[40];
    record_id(id, sizeof id, m->version);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id));
    bson_t *update = BCON_NEW("$set", "{", "name", BCON_UTF8(m->name), "version",
                              BCON_INT64(m->version), "state", BCON_UTF8(state), "by",
                              BCON_UTF8(by), "release", BCON_UTF8(COHORT_VERSION), "}");
    bson_t *dates = strcmp(state, "done") == 0
                        ? BCON_NEW("$currentDate", "{", "finished_at", BCON_BOOL(true), "}",
                                   "$inc", "{", "changed", BCON_INT64(changed), "}")
                    : start ? BCON_NEW("$currentDate", "{", "started_at", BCON_BOOL(true), "}",
                                       "$unset", "{", "finished_at", BCON_UTF8(""), "}")
                            : BCON_NEW("$inc", "{", "changed", BCON_INT64(changed), "}");
    bson_concat(update, dates);
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bool ok = mongoc_collection_update_one(meta, filter, update, opts, NULL, error);
    bson_destroy(opts);
    bson_destroy(dates);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

typedef struct run {
    cohort_store_t *store;
    mongoc_client_t *client;
    mongoc_collection_t *meta;
    const cohort_migration_t *m;
    const char *by;
    bool dry_run;
    int64_t batch;
    cohort_migrate_progress_fn progress;
    void *user;
    int64_t changed;
} run_t;

/* One batch of migration 2: weight 1 on the tasks `filter` matches (it repeats the "no
 * weight" condition, so a task given a weight meanwhile keeps it), counted and recorded. */
static bool weigh_batch(run_t *r, mongoc_collection_t *queue, const char *name,
                        const bson_t *filter, bson_error_t *error)
{
    bson_t *update = BCON_NEW("$set", "{", "weight", BCON_INT32(1), "}");
    int64_t modified = 0;
    bool ok = store_write(queue, STORE_UPDATE_MANY, filter, update, NULL, "modifiedCount",
                          &modified, error) &&
              record(r->meta, r->m, r->by, "running", modified, false, error);
    r->changed += modified;
    bson_destroy(update);
    if (ok && r->progress)
        r->progress(r->user, name, r->changed);
    return ok;
}

/* The last _id of the array `ids` (n > 0 entries) into *last. */
static void last_id(const bson_t *ids, bson_value_t *last)
{
    bson_iter_t it, at;
    bson_iter_init(&it, ids);
    while (bson_iter_next(&it))
        at = it;
    bson_value_copy(bson_iter_value(&at), last);
}

/* Migration 2 on one queue collection, in _id order: a batch is the next `batch` ids without
 * `weight` after the previous batch's last, and one updateMany sets weight 1 on the _id range
 * it spans, repeating the condition (a task given a weight meanwhile keeps it). Both are
 * range scans of the _id index; a resumed run scans the ids done before once more. */
static bool weight_queue(run_t *r, const char *name, bson_error_t *error)
{
    mongoc_collection_t *queue = store_collection(r->store, r->client, name);
    bson_t *absent = BCON_NEW("$exists", BCON_BOOL(false));
    bson_t missing = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(&missing, "weight", absent);
    bool ok = true;
    if (r->dry_run) {
        int64_t n = mongoc_collection_count_documents(queue, &missing, NULL, NULL, NULL, error);
        ok = n >= 0;
        if (ok)
            r->changed += n;
    }
    bson_value_t after = {.value_type = BSON_TYPE_MINKEY};
    while (ok && !r->dry_run) {
        bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "sort", "{", "_id",
                                BCON_INT32(1), "}", "limit", BCON_INT64(r->batch));
        bson_t filter = BSON_INITIALIZER, range, ids = BSON_INITIALIZER;
        BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &range);
        BSON_APPEND_VALUE(&range, "$gt", &after);
        bson_append_document_end(&filter, &range);
        BSON_APPEND_DOCUMENT(&filter, "weight", absent);
        uint32_t n = 0;
        ok = store_find_ids(queue, &filter, opts, &ids, &n, error);
        bson_destroy(opts);
        bson_destroy(&filter);
        if (ok && n > 0) {
            bson_value_t last;
            last_id(&ids, &last);
            bson_t span = BSON_INITIALIZER;
            BSON_APPEND_DOCUMENT_BEGIN(&span, "_id", &range);
            BSON_APPEND_VALUE(&range, "$gt", &after);
            BSON_APPEND_VALUE(&range, "$lte", &last);
            bson_append_document_end(&span, &range);
            BSON_APPEND_DOCUMENT(&span, "weight", absent);
            ok = weigh_batch(r, queue, name, &span, error);
            bson_destroy(&span);
            if (after.value_type != BSON_TYPE_MINKEY)
                bson_value_destroy(&after);
            after = last;
        }
        bson_destroy(&ids);
        if (n == 0)
            break;
    }
    /* $gt compares within one BSON type only: tasks whose _id is of another type than the
     * ones walked (inserted by hand, not by Cohort) are left; a second pass takes them by
     * their ids, so that "done" means every task carries a weight. Normally it finds none. */
    while (ok && !r->dry_run) {
        bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "limit",
                                BCON_INT64(r->batch));
        bson_t ids = BSON_INITIALIZER;
        uint32_t n = 0;
        ok = store_find_ids(queue, &missing, opts, &ids, &n, error);
        bson_destroy(opts);
        if (ok && n > 0) {
            bson_t filter = BSON_INITIALIZER;
            store_append_id_in(&filter, &ids);
            BSON_APPEND_DOCUMENT(&filter, "weight", absent);
            ok = weigh_batch(r, queue, name, &filter, error);
            bson_destroy(&filter);
        }
        bson_destroy(&ids);
        if (n == 0)
            break;
    }
    if (after.value_type != BSON_TYPE_MINKEY)
        bson_value_destroy(&after);
    bson_destroy(&missing);
    bson_destroy(absent);
    mongoc_collection_destroy(queue);
    return ok;
}

static bool each_queue(void *user, const bson_t *doc, bson_error_t *error)
{
    bson_iter_t it;
    /* The name is checked here too: the embedded server ignores listCollections' filter. */
    if (!bson_iter_init_find(&it, doc, "name") || !BSON_ITER_HOLDS_UTF8(&it) ||
        strncmp(bson_iter_utf8(&it, NULL), "queue_", 6) != 0)
        return true;
    return weight_queue(user, bson_iter_utf8(&it, NULL), error);
}

bool cohort_store_migrate(cohort_store_t *store, mongoc_client_t *client,
                          const cohort_migration_t *m, const char *by, bool dry_run, int64_t batch,
                          cohort_migrate_progress_fn progress, void *user, int64_t *changed,
                          bson_error_t *error)
{
    run_t r = {.store = store,
               .client = client,
               .meta = store_collection(store, client, "cohort_meta"),
               .m = m,
               .by = by,
               .dry_run = dry_run,
               .batch = batch > 0 ? batch : 1000,
               .progress = progress,
               .user = user};
    bool ok = dry_run || record(r.meta, m, by, "running", 0, true, error);
    if (ok) {
        mongoc_database_t *db = mongoc_client_get_database(client, store->database);
        bson_t *opts = BCON_NEW("nameOnly", BCON_BOOL(true), "filter", "{", "name",
                                BCON_REGEX("^queue_", ""), "}");
        ok = store_walk_cursor(mongoc_database_find_collections_with_opts(db, opts), each_queue,
                               &r, error);
        bson_destroy(opts);
        mongoc_database_destroy(db);
    }
    if (ok && !dry_run)
        ok = record(r.meta, m, by, "done", 0, false, error);
    mongoc_collection_destroy(r.meta);
    *changed = r.changed;
    if (!ok)
        cohort_error_prefix(error, "migration %lld (%s): ", (long long)m->version, m->name);
    return ok;
}
