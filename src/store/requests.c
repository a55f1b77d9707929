/*
 * requests.c - the HTTP API's own queue operations (see requests.h).
 *
 * The Idempotency-Key is settled by the queue's unique sparse index on idempotency_key
 * (services.c), not by a read before the write, so two concurrent retries cannot both insert.
 */
#include "store/requests.h"

#include "store/insert.h"
#include "store/internal.h"
#include "store/listing.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define PAGE_BATCH 8 /* documents per batch when listing a page of tasks */

/* The id of the task holding `key` into `oid`; *found tells whether there is one. */
static bool find_idempotent(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *key, bson_oid_t *oid, bool *found, bson_error_t *error)
{
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t *filter = BCON_NEW("idempotency_key", BCON_UTF8(key));
    bson_t doc;
    bool ok = store_find_one(tasks, filter, &doc, found, error);
    bson_iter_t it;
    if (ok && *found && bson_iter_init_find(&it, &doc, "_id") && BSON_ITER_HOLDS_OID(&it))
        bson_oid_copy(bson_iter_oid(&it), oid);
    else
        *found = false;
    bson_destroy(&doc);
    bson_destroy(filter);
    mongoc_collection_destroy(tasks);
    return ok;
}

bool cohort_store_insert_task_once(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, const cohort_new_task_t *task,
                                   bson_oid_t *oid, bool *replayed, bool *exists,
                                   bool *coalesced, bson_error_t *error)
{
    *replayed = false;
    if (cohort_store_insert_task(store, client, service, task, oid, exists, coalesced, error))
        return true;
    if (!store_is_duplicate_key(error) || !task->idempotency_key)
        return false;
    /* A duplicate: the key's task if there is one, else it was the unique_key. */
    bson_error_t lookup;
    bool found = false;
    if (!find_idempotent(store, client, service, task->idempotency_key, oid, &found, &lookup)) {
        *error = lookup;
        return false;
    }
    if (found) {
        *exists = false;
        *replayed = true;
        return true;
    }
    return false;
}

bool cohort_store_delete_pending_tasks(cohort_store_t *store, mongoc_client_t *client,
                                       const char *service, const bson_oid_t *ids, size_t n,
                                       int64_t *deleted, bson_error_t *error)
{
    *deleted = 0;
    if (n == 0)
        return true;
    bson_t filter = BSON_INITIALIZER, in = BSON_INITIALIZER;
    for (uint32_t i = 0; i < n; i++) {
        char buf[16];
        const char *key;
        bson_uint32_to_string(i, &key, buf, sizeof buf);
        BSON_APPEND_OID(&in, key, &ids[i]);
    }
    store_append_id_in(&filter, &in);
    bson_destroy(&in);
    BSON_APPEND_UTF8(&filter, "status", "pending");
    mongoc_collection_t *tasks = store_queue(store, client, service);
    int64_t count = 0;
    bool ok = store_write(tasks, STORE_DELETE_MANY, &filter, NULL, NULL, "deletedCount", &count,
                          error);
    if (ok)
        *deleted = count;
    mongoc_collection_destroy(tasks);
    bson_destroy(&filter);
    return ok;
}

/* The filter of a page: its equality filters and view, and with `cursor` its keyset bound. */
static void task_page_filter(const cohort_task_page_t *page, bool cursor, bson_t *filter)
{
    if (page->status)
        BSON_APPEND_UTF8(filter, "status", page->status);
    if (page->kind)
        BSON_APPEND_UTF8(filter, "kind", page->kind);
    if (page->group)
        BSON_APPEND_UTF8(filter, "group", page->group);
    if (page->view != COHORT_TASK_VIEW_ALL) {
        bson_t cond;
        bool retrying = page->view == COHORT_TASK_VIEW_RETRYING;
        if (!page->status)
            BSON_APPEND_UTF8(filter, "status", "pending");
        BSON_APPEND_DOCUMENT_BEGIN(filter, "attempts", &cond);
        BSON_APPEND_INT32(&cond, retrying ? "$gte" : "$lt", 1);
        bson_append_document_end(filter, &cond);
        if (!retrying) {
            BSON_APPEND_DOCUMENT_BEGIN(filter, "not_before", &cond);
            BSON_APPEND_BOOL(&cond, "$exists", true);
            bson_append_document_end(filter, &cond);
        }
    }
    if (cursor && page->after) {
        bson_t bound;
        BSON_APPEND_DOCUMENT_BEGIN(filter, "_id", &bound);
        BSON_APPEND_OID(&bound, page->newest_first ? "$lt" : "$gt", page->after);
        bson_append_document_end(filter, &bound);
    }
}

/* data.<path> equal to the value as a string, or as a number when it reads as an integer. */
static void append_data_match(const cohort_task_page_t *page, bson_t *match)
{
    char field[300];
    snprintf(field, sizeof field, "data.%s", page->data_path);
    bson_t cond, in;
    BSON_APPEND_DOCUMENT_BEGIN(match, field, &cond);
    BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &in);
    BSON_APPEND_UTF8(&in, "0", page->data_value);
    char *end = NULL;
    errno = 0;
    long long n = strtoll(page->data_value, &end, 10);
    if (*page->data_value && !*end && errno == 0)
        BSON_APPEND_INT64(&in, "1", n);
    bson_append_array_end(&cond, &in);
    bson_append_document_end(match, &cond);
}

/* A page of a search by data: the next COHORT_TASK_SEARCH_SCAN tasks in the page's order that
 * match the other filters, of those the ones whose data matches, at most page->limit. */
static bool each_found_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const cohort_task_page_t *page, const bson_t *filter,
                            cohort_store_doc_fn fn, void *user, bson_error_t *error)
{
    bson_t data = BSON_INITIALIZER;
    append_data_match(page, &data);
    bson_t *pipeline =
        BCON_NEW("pipeline", "[", "{", "$match", BCON_DOCUMENT(filter), "}", "{", "$sort", "{",
                 "_id", BCON_INT32(page->newest_first ? -1 : 1), "}", "}", "{", "$limit",
                 BCON_INT64(COHORT_TASK_SEARCH_SCAN), "}", "{", "$match", BCON_DOCUMENT(&data), "}",
                 "{", "$limit", BCON_INT64(page->limit), "}", "{", "$project", "{", "history",
                 BCON_INT32(0), "}", "}", "]");
    bson_t *opts = BCON_NEW("batchSize", BCON_INT32(PAGE_BATCH));
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bool ok = store_walk_cursor(
        mongoc_collection_aggregate(tasks, MONGOC_QUERY_NONE, pipeline, opts, NULL), fn, user,
        error);
    mongoc_collection_destroy(tasks);
    bson_destroy(opts);
    bson_destroy(pipeline);
    bson_destroy(&data);
    return ok;
}

bool cohort_store_each_task_page(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const cohort_task_page_t *page,
                                 cohort_store_doc_fn fn, void *user, bson_error_t *error)
{
    bson_t filter = BSON_INITIALIZER;
    task_page_filter(page, true, &filter);
    if (page->data_path) {
        bool found = each_found_task(store, client, service, page, &filter, fn, user, error);
        bson_destroy(&filter);
        return found;
    }
    /* Small batches: a page ends at COHORT_API_PAGE_BYTES, so a batch of up to 16 MB (the
     * server's default for a limit of 500) would be read mostly to be thrown away. */
    bson_t *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(page->newest_first ? -1 : 1), "}",
                            "limit", BCON_INT64(page->limit), "batchSize", BCON_INT32(PAGE_BATCH),
                            "projection", "{", "history", BCON_INT32(0), "}");
    bool ok = store_walk_find(store_queue(store, client, service), &filter, opts, fn, user, error);
    bson_destroy(opts);
    bson_destroy(&filter);
    return ok;
}

bool cohort_store_count_task_page(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const cohort_task_page_t *page,
                                  int64_t *total, bson_error_t *error)
{
    bson_t filter = BSON_INITIALIZER;
    task_page_filter(page, false, &filter);
    mongoc_collection_t *tasks = store_queue(store, client, service);
    *total = mongoc_collection_count_documents(tasks, &filter, NULL, NULL, NULL, error);
    mongoc_collection_destroy(tasks);
    bson_destroy(&filter);
    return *total >= 0;
}
