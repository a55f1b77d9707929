/*
 * insert.c - creating tasks: the task document, one insert, coalescing onto a pending task,
 * and bulk inserts.
 *
 * Uniqueness and coalescing are settled by the server's unique indexes (unique_key,
 * coalesce_pending), never by a read before the write, so concurrent creators cannot both
 * win. Bulk inserts go in bounded chunks so memory stays flat whatever the count. Every task
 * carries its partition (always 0 today; docs/SCALING.md says what more would be for).
 */
#include "store/insert.h"

#include "store/internal.h"
#include "store/store.h"

#include <string.h>

#define INSERT_CHUNK 10000 /* documents per bulk insert */

/* FNV-1a, 32 bits: a stable hash of a key (the same partition on every node and release). */
static uint32_t key_hash(const char *key)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

int32_t cohort_store_task_partition(const cohort_new_task_t *task, const bson_oid_t *oid,
                                    int32_t partitions)
{
    if (partitions <= 1)
        return 0;
    const char *key = task->unique_key        ? task->unique_key
                      : task->idempotency_key ? task->idempotency_key
                      : task->coalesce_key    ? task->coalesce_key
                                              : task->group;
    uint32_t h = key ? key_hash(key) : bson_oid_hash(oid);
    return (int32_t)(h % (uint32_t)partitions);
}

static void build_task(bson_t *doc, const cohort_new_task_t *task, const bson_oid_t *oid)
{
    BSON_APPEND_OID(doc, "_id", oid);
    BSON_APPEND_UTF8(doc, "status", "pending");
    if (task->data) {
        BSON_APPEND_DOCUMENT(doc, "data", task->data);
    } else {
        bson_t empty = BSON_INITIALIZER;
        BSON_APPEND_DOCUMENT(doc, "data", &empty);
    }
    BSON_APPEND_BOOL(doc, "tracked", task->tracked);
    if (task->tracked)
        BSON_APPEND_INT64(doc, "batch", task->batch);
    if (task->unique_key)
        BSON_APPEND_UTF8(doc, "unique_key", task->unique_key);
    if (task->idempotency_key)
        BSON_APPEND_UTF8(doc, "idempotency_key", task->idempotency_key);
    BSON_APPEND_DATE_TIME(doc, "created_at", task->now_ms);
    BSON_APPEND_UTF8(doc, "created_by", task->created_by);
    if (task->epoch > 0)
        BSON_APPEND_INT64(doc, "epoch", task->epoch);
    int64_t due = task->not_before_ms > task->now_ms ? task->not_before_ms : task->now_ms;
    BSON_APPEND_DATE_TIME(doc, "run_at", due);
    BSON_APPEND_INT32(doc, "attempts", 0);
    BSON_APPEND_INT32(doc, "partition",
                      cohort_store_task_partition(task, oid, COHORT_TASK_PARTITIONS));
    BSON_APPEND_INT32(doc, "priority", (int32_t)task->priority);
    BSON_APPEND_INT32(doc, "base_priority", (int32_t)task->priority);
    BSON_APPEND_INT32(doc, "weight", task->weight > 0 ? (int32_t)task->weight : 1);
    if (task->not_before_ms > 0)
        BSON_APPEND_DATE_TIME(doc, "not_before", task->not_before_ms);
    if (task->not_after_ms > 0)
        BSON_APPEND_DATE_TIME(doc, "not_after", task->not_after_ms);
    if (task->timeout_ms > 0 || task->timeout_set)
        BSON_APPEND_INT64(doc, "task_timeout_ms", task->timeout_ms);
    if (task->kind)
        BSON_APPEND_UTF8(doc, "kind", task->kind);
    if (task->group)
        BSON_APPEND_UTF8(doc, "group", task->group);
    if (task->coalesce_key) {
        BSON_APPEND_UTF8(doc, "coalesce_key", task->coalesce_key);
        BSON_APPEND_UTF8(doc, "coalesce_pending", task->coalesce_key);
    }
}

/* A task with a coalesce key: the pending task holding the key takes the new data, or, if
 * there is none, the new task is inserted holding it (an upsert; a unique index settles a
 * race between two creators, and the loser retries as an update). */
static bool coalesce_task(mongoc_collection_t *tasks, const cohort_new_task_t *task,
                          bson_oid_t *oid, bool *coalesced, bson_error_t *error)
{
    bool ok = false;
    for (int round = 0; round < 3; round++) {
        bson_oid_t id;
        bson_oid_init(&id, NULL);
        bson_t doc = BSON_INITIALIZER;
        build_task(&doc, task, &id);
        bson_t insert = BSON_INITIALIZER;
        bson_iter_t it;
        bson_iter_init(&it, &doc);
        while (bson_iter_next(&it)) /* everything but data, which $set writes either way */
            if (strcmp(bson_iter_key(&it), "data") != 0)
                bson_append_iter(&insert, NULL, 0, &it);
        bson_t *filter = BCON_NEW("coalesce_pending", BCON_UTF8(task->coalesce_key));
        bson_t update = BSON_INITIALIZER, set;
        BSON_APPEND_DOCUMENT(&update, "$setOnInsert", &insert);
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
        if (task->data) {
            BSON_APPEND_DOCUMENT(&set, "data", task->data);
        } else {
            bson_t empty = BSON_INITIALIZER;
            BSON_APPEND_DOCUMENT(&set, "data", &empty);
        }
        bson_append_document_end(&update, &set);
        bson_t inc;
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
        BSON_APPEND_INT32(&inc, "creations", 1); /* the creations this task stands for */
        bson_append_document_end(&update, &inc);
        bson_t out;
        bool found = false;
        /* The document before the update: none means it was inserted. */
        bson_t *fields = BCON_NEW("_id", BCON_INT32(1));
        ok = store_find_and_modify(tasks, filter, NULL, &update, fields, false, true, &out, &found,
                                   error);
        if (ok && found) {
            bson_iter_t oid_it;
            if (bson_iter_init_find(&oid_it, &out, "_id") && BSON_ITER_HOLDS_OID(&oid_it))
                bson_oid_copy(bson_iter_oid(&oid_it), &id);
            bson_destroy(&out);
        }
        *coalesced = found;
        if (ok && oid)
            bson_oid_copy(&id, oid);
        bson_destroy(fields);
        bson_destroy(&update);
        bson_destroy(filter);
        bson_destroy(&insert);
        bson_destroy(&doc);
        if (ok || !store_is_duplicate_key(error))
            break;
        /* Another creator inserted the key just now (or the task has a unique_key that
         * exists): try again as an update. */
    }
    return ok;
}

bool cohort_store_insert_task(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const cohort_new_task_t *task, bson_oid_t *oid,
                              bool *exists, bool *coalesced, bson_error_t *error)
{
    if (exists)
        *exists = false;
    bool merged = false;
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bool ok;
    if (task->coalesce_key) {
        ok = coalesce_task(tasks, task, oid, &merged, error);
    } else {
        bson_oid_t id;
        bson_oid_init(&id, NULL);
        bson_t doc = BSON_INITIALIZER;
        build_task(&doc, task, &id);
        ok = mongoc_collection_insert_one(tasks, &doc, NULL, NULL, error);
        bson_destroy(&doc);
        if (ok && oid)
            bson_oid_copy(&id, oid);
    }
    mongoc_collection_destroy(tasks);
    if (coalesced)
        *coalesced = merged;
    if (!ok && exists && task->unique_key && store_is_duplicate_key(error))
        *exists = true;
    return ok;
}

bool cohort_store_insert_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const cohort_new_task_t *task, int64_t count,
                               int64_t *inserted, bson_error_t *error)
{
    *inserted = 0;
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bool ok = true;
    while (ok && *inserted < count) {
        int64_t chunk = count - *inserted < INSERT_CHUNK ? count - *inserted : INSERT_CHUNK;
        bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
        mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(tasks,
                                                                                         opts);
        for (int64_t i = 0; ok && i < chunk; i++) {
            bson_oid_t id;
            bson_oid_init(&id, NULL);
            bson_t doc = BSON_INITIALIZER;
            build_task(&doc, task, &id);
            ok = mongoc_bulk_operation_insert_with_opts(bulk, &doc, NULL, error);
            bson_destroy(&doc);
        }
        int64_t acknowledged = 0;
        if (ok) {
            ok = store_bulk_execute(bulk, "nInserted", &acknowledged, error);
            *inserted += acknowledged;
        }
        mongoc_bulk_operation_destroy(bulk);
        bson_destroy(opts);
    }
    mongoc_collection_destroy(tasks);
    return ok;
}

bool cohort_store_insert_task_list(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, const cohort_new_task_t *tasks, size_t n,
                                   int64_t *inserted, bson_error_t *error)
{
    *inserted = 0;
    if (n == 0)
        return true;
    mongoc_collection_t *queue = store_queue(store, client, service);
    bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
    mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(queue, opts);
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        bson_oid_t id;
        bson_oid_init(&id, NULL);
        bson_t doc = BSON_INITIALIZER;
        build_task(&doc, &tasks[i], &id);
        ok = mongoc_bulk_operation_insert_with_opts(bulk, &doc, NULL, error);
        bson_destroy(&doc);
    }
    if (ok)
        ok = store_bulk_execute(bulk, "nInserted", inserted, error);
    mongoc_bulk_operation_destroy(bulk);
    bson_destroy(opts);
    mongoc_collection_destroy(queue);
    return ok;
}
