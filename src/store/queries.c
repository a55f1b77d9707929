/*
 * queries.c - reading the queue for people and tools: counts by status, kind or group, one
 * task, a listing in claim order.
 *
 * Each is one command (or one per status): an aggregation or an index count. The counts by
 * kind or group are shaped to be covered by the {kind|group, status} indexes ensure_service
 * creates and stream their rows, so memory stays flat whatever the number of groups.
 */
#include "store/queries.h"

#include "store/internal.h"
#include "store/store.h"

#include "core/error.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The field of cohort_status_counts_t that holds each status. */
static const size_t count_field[COHORT_STATUS_COUNT] = {
    [COHORT_STATUS_PENDING] = offsetof(cohort_status_counts_t, pending),
    [COHORT_STATUS_CLAIMED] = offsetof(cohort_status_counts_t, claimed),
    [COHORT_STATUS_SUCCEEDED] = offsetof(cohort_status_counts_t, succeeded),
    [COHORT_STATUS_FAILED] = offsetof(cohort_status_counts_t, failed),
    [COHORT_STATUS_TIMED_OUT] = offsetof(cohort_status_counts_t, timed_out),
    [COHORT_STATUS_CANCELLED] = offsetof(cohort_status_counts_t, cancelled),
};

_Static_assert(COHORT_STATUS_COUNT == 6, "count_field: one row per status of core/status.h");

/* The field of `counts` that holds `status` (`other` for one out of range). */
static int64_t *count_of(cohort_status_counts_t *counts, cohort_task_status_t status)
{
    if ((unsigned)status >= COHORT_STATUS_COUNT)
        return &counts->other;
    return (int64_t *)((char *)counts + count_field[status]);
}

int64_t cohort_status_count(const cohort_status_counts_t *counts, cohort_task_status_t status)
{
    cohort_status_counts_t copy = *counts;
    return *count_of(&copy, status);
}

/* Counts tasks by status with one aggregation: all of them, or those matching `match`.
 * Without a match, a leading $sort on status lets real MongoDB answer from an index whose
 * first key is status (claim_order and others: a covered IXSCAN, no document fetched); a bare
 * $group would scan the collection. docs/BENCHMARKS.md, "Query plans". */
bool store_count_by_status(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const bson_t *match, cohort_status_counts_t *counts,
                           bson_error_t *error)
{
    memset(counts, 0, sizeof *counts);
    bson_t pipeline = BSON_INITIALIZER, stages, stage;
    BSON_APPEND_ARRAY_BEGIN(&pipeline, "pipeline", &stages);
    BSON_APPEND_DOCUMENT_BEGIN(&stages, "0", &stage);
    if (match) {
        BSON_APPEND_DOCUMENT(&stage, "$match", match);
    } else {
        bson_t by_status;
        BSON_APPEND_DOCUMENT_BEGIN(&stage, "$sort", &by_status);
        BSON_APPEND_INT32(&by_status, "status", 1);
        bson_append_document_end(&stage, &by_status);
    }
    bson_append_document_end(&stages, &stage);
    bson_t *group = BCON_NEW("$group", "{", "_id", BCON_UTF8("$status"), "n", "{", "$sum",
                             BCON_INT32(1), "}", "}");
    BSON_APPEND_DOCUMENT(&stages, "1", group);
    bson_destroy(group);
    bson_append_array_end(&pipeline, &stages);
    /* The sort is the index's on real MongoDB; a server without one may need the disk. */
    bson_t *opts = BCON_NEW("allowDiskUse", BCON_BOOL(true));

    mongoc_collection_t *tasks = store_queue(store, client, service);
    mongoc_cursor_t *cursor =
        mongoc_collection_aggregate(tasks, MONGOC_QUERY_NONE, &pipeline, opts, NULL);
    const bson_t *row;
    while (mongoc_cursor_next(cursor, &row)) {
        bson_iter_t id, n;
        if (!bson_iter_init_find(&n, row, "n") || !BSON_ITER_HOLDS_NUMBER(&n))
            continue;
        const char *status = bson_iter_init_find(&id, row, "_id") && BSON_ITER_HOLDS_UTF8(&id)
                                 ? bson_iter_utf8(&id, NULL)
                                 : "";
        int64_t value = bson_iter_as_int64(&n);
        cohort_task_status_t known;
        if (cohort_status_parse(status, &known))
            *count_of(counts, known) += value;
        else
            counts->other += value;
    }
    bool ok = store_cursor_done(cursor, error);
    bson_destroy(opts);
    bson_destroy(&pipeline);
    mongoc_collection_destroy(tasks);
    return ok;
}

bool cohort_store_count_by(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *field, cohort_count_row_fn row, void *user,
                           bson_error_t *error)
{
    char path[32];
    snprintf(path, sizeof path, "$%s", field);
    /* $sort and $project on exactly the keys of the {field: 1, status: 1} index let real
     * MongoDB answer from the index alone (a covered, in-order scan; no document fetched). */
    bson_t *pipeline = BCON_NEW(
        "pipeline", "[", "{", "$sort", "{", field, BCON_INT32(1), "status", BCON_INT32(1), "}",
        "}", "{", "$project", "{", "_id", BCON_INT32(0), field, BCON_INT32(1), "status",
        BCON_INT32(1), "}", "}", "{", "$group", "{", "_id", "{", "v", BCON_UTF8(path), "s",
        BCON_UTF8("$status"), "}", "n", "{", "$sum", BCON_INT32(1), "}", "}", "}", "{", "$sort",
        "{", "_id.v", BCON_INT32(1), "_id.s", BCON_INT32(1), "}", "}", "]");
    bson_t *opts = BCON_NEW("allowDiskUse", BCON_BOOL(true));
    mongoc_collection_t *tasks = store_queue(store, client, service);
    mongoc_cursor_t *cursor =
        mongoc_collection_aggregate(tasks, MONGOC_QUERY_NONE, pipeline, opts, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        const char *value = NULL, *status = "";
        int64_t n = 0;
        if (bson_iter_init_find(&it, doc, "n") && BSON_ITER_HOLDS_NUMBER(&it))
            n = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_t id;
            bson_iter_recurse(&it, &id);
            while (bson_iter_next(&id)) {
                if (strcmp(bson_iter_key(&id), "v") == 0 && BSON_ITER_HOLDS_UTF8(&id))
                    value = bson_iter_utf8(&id, NULL);
                else if (strcmp(bson_iter_key(&id), "s") == 0 && BSON_ITER_HOLDS_UTF8(&id))
                    status = bson_iter_utf8(&id, NULL);
            }
        }
        row(user, value, status, n);
    }
    bool ok = store_cursor_done(cursor, error);
    mongoc_collection_destroy(tasks);
    bson_destroy(opts);
    bson_destroy(pipeline);
    return ok;
}

bool cohort_store_count_statuses(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *const *statuses, size_t n,
                                 int64_t *counts, bson_error_t *error)
{
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        bson_t *filter = BCON_NEW("status", BCON_UTF8(statuses[i]));
        counts[i] = mongoc_collection_count_documents(tasks, filter, NULL, NULL, NULL, error);
        ok = counts[i] >= 0;
        bson_destroy(filter);
    }
    mongoc_collection_destroy(tasks);
    return ok;
}

bool cohort_store_read_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *id, bson_t *doc, bool *found, bson_error_t *error)
{
    bson_init(doc);
    *found = false;
    bson_oid_t oid;
    if (!store_task_oid(id, &oid, error))
        return false;
    bson_t *filter = BCON_NEW("_id", BCON_OID(&oid));
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bool ok = store_find_one(tasks, filter, doc, found, error);
    mongoc_collection_destroy(tasks);
    bson_destroy(filter);
    return ok;
}

mongoc_cursor_t *cohort_store_list_tasks(cohort_store_t *store, mongoc_client_t *client,
                                         const char *service, const char *status, int64_t limit)
{
    bson_t filter = BSON_INITIALIZER;
    if (status)
        BSON_APPEND_UTF8(&filter, "status", status);
    bson_t *sort = store_claim_sort();
    bson_t opts = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(&opts, "sort", sort);
    BSON_APPEND_INT64(&opts, "limit", limit);
    bson_t *projection = BCON_NEW("history", BCON_INT32(0), "data", BCON_INT32(0));
    BSON_APPEND_DOCUMENT(&opts, "projection", projection);
    mongoc_collection_t *tasks = store_queue(store, client, service);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, &filter, &opts, NULL);
    mongoc_collection_destroy(tasks);
    bson_destroy(projection);
    bson_destroy(&opts);
    bson_destroy(sort);
    bson_destroy(&filter);
    return cursor;
}

bool cohort_store_count_tasks(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              cohort_status_counts_t *counts, bson_error_t *error)
{
    return store_count_by_status(store, client, service, NULL, counts, error);
}
