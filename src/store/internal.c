/*
 * internal.c - the helpers every file of the store shares (see internal.h): collections by
 * name, one-line updates of a queue, findAndModify with a copied result, the primacy
 * fence on the config document.
 */
#include "store/internal.h"

#include "store/store.h"

#include "core/error.h"

#include <stdio.h>
#include <string.h>

mongoc_collection_t *store_collection(cohort_store_t *store, mongoc_client_t *client,
                                      const char *name)
{
    return mongoc_client_get_collection(client, store->database, name);
}

mongoc_collection_t *store_queue(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service)
{
    char name[96];
    snprintf(name, sizeof name, "queue_%s", service);
    return store_collection(store, client, name);
}

/* Passes `ok` on; a failure the server gave no reason for names COMMAND and the collection. */
static bool explained(bool ok, bson_error_t *error, const char *command, mongoc_collection_t *coll)
{
    if (!ok)
        cohort_error_explain_silent(error, "%s of %s", command, mongoc_collection_get_name(coll));
    return ok;
}

bool store_write(mongoc_collection_t *coll, store_write_kind_t kind, const bson_t *filter,
                 const bson_t *update, const bson_t *opts, const char *count_field,
                 int64_t *count, bson_error_t *error)
{
    bson_t reply;
    bool ok = false;
    switch (kind) {
    case STORE_UPDATE_ONE:
        ok = mongoc_collection_update_one(coll, filter, update, opts, &reply, error);
        break;
    case STORE_UPDATE_MANY:
        ok = mongoc_collection_update_many(coll, filter, update, opts, &reply, error);
        break;
    case STORE_DELETE_ONE:
        ok = mongoc_collection_delete_one(coll, filter, opts, &reply, error);
        break;
    case STORE_DELETE_MANY:
        ok = mongoc_collection_delete_many(coll, filter, opts, &reply, error);
        break;
    }
    if (count)
        *count = ok && count_field ? store_int64_field(&reply, count_field, 0) : 0;
    bson_destroy(&reply);
    bool updates = kind == STORE_UPDATE_ONE || kind == STORE_UPDATE_MANY;
    return explained(ok, error, updates ? "update" : "delete", coll);
}

/* One write on the service's queue. */
static bool write_queue(cohort_store_t *store, mongoc_client_t *client, const char *service,
                        store_write_kind_t kind, const bson_t *filter, const bson_t *update,
                        const char *count_field, int64_t *count, bson_error_t *error)
{
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bool ok = store_write(tasks, kind, filter, update, NULL, count_field, count, error);
    mongoc_collection_destroy(tasks);
    return ok;
}

bool store_update_queue(cohort_store_t *store, mongoc_client_t *client, const char *service,
                        const bson_t *filter, const bson_t *update, int64_t *modified,
                        bson_error_t *error)
{
    return write_queue(store, client, service, STORE_UPDATE_MANY, filter, update,
                       "modifiedCount", modified, error);
}

bool store_update_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                       const bson_t *filter, const bson_t *update, bool *matched,
                       bson_error_t *error)
{
    int64_t n = 0;
    bool ok = write_queue(store, client, service, STORE_UPDATE_ONE, filter, update,
                          "matchedCount", &n, error);
    *matched = n == 1;
    return ok;
}

bool store_walk_find(mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
                     store_doc_fn fn, void *user, bson_error_t *error)
{
    bool ok = store_walk_cursor(mongoc_collection_find_with_opts(coll, filter, opts, NULL), fn,
                                user, error);
    explained(ok, error, "find", coll);
    mongoc_collection_destroy(coll);
    return ok;
}

/* findAndModify; `out` receives a copy of the returned document if there is one. */
bool store_find_and_modify(mongoc_collection_t *coll, const bson_t *query, const bson_t *sort,
                           const bson_t *update, const bson_t *fields, bool return_new,
                           bool upsert, bson_t *out, bool *found, bson_error_t *error)
{
    mongoc_find_and_modify_opts_t *opts = mongoc_find_and_modify_opts_new();
    mongoc_find_and_modify_opts_set_update(opts, update);
    if (sort)
        mongoc_find_and_modify_opts_set_sort(opts, sort);
    if (fields)
        mongoc_find_and_modify_opts_set_fields(opts, fields);
    int flags = MONGOC_FIND_AND_MODIFY_NONE;
    if (return_new)
        flags |= MONGOC_FIND_AND_MODIFY_RETURN_NEW;
    if (upsert)
        flags |= MONGOC_FIND_AND_MODIFY_UPSERT;
    mongoc_find_and_modify_opts_set_flags(opts, (mongoc_find_and_modify_flags_t)flags);
    bool ok = store_find_and_modify_with(coll, query, opts, out, found, error);
    mongoc_find_and_modify_opts_destroy(opts);
    return ok;
}

bool store_find_and_modify_with(mongoc_collection_t *coll, const bson_t *query,
                                const mongoc_find_and_modify_opts_t *opts, bson_t *out,
                                bool *found, bson_error_t *error)
{
    bson_t reply;
    bool ok = mongoc_collection_find_and_modify_with_opts(coll, query, opts, &reply, error);
    *found = false;
    if (ok) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, &reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            uint32_t len;
            const uint8_t *data;
            bson_iter_document(&it, &len, &data);
            bson_t value;
            if (bson_init_static(&value, data, len)) {
                bson_copy_to(&value, out);
                *found = true;
            }
        }
    }
    bson_destroy(&reply);
    return explained(ok, error, "findAndModify", coll);
}

bool store_find_one(mongoc_collection_t *coll, const bson_t *filter, bson_t *doc, bool *found,
                    bson_error_t *error)
{
    bson_init(doc);
    *found = false;
    bson_t *opts = BCON_NEW("limit", BCON_INT64(1));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *next;
    if (mongoc_cursor_next(cursor, &next)) {
        bson_destroy(doc);
        bson_copy_to(next, doc);
        *found = true;
    }
    bool ok = store_cursor_done(cursor, error);
    bson_destroy(opts);
    return explained(ok, error, "find", coll);
}

bool store_bulk_execute(mongoc_bulk_operation_t *bulk, const char *field, int64_t *count,
                        bson_error_t *error)
{
    bson_t reply;
    bool ok = mongoc_bulk_operation_execute(bulk, &reply, error) != 0;
    *count = store_int64_field(&reply, field, 0);
    bson_destroy(&reply);
    if (!ok)
        cohort_error_explain_silent(error, "bulk write");
    return ok;
}

/* Runs a find and collects the _id of every document into the array `ids` (*n of them). */
bool store_find_ids(mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
                    bson_t *ids, uint32_t *n, bson_error_t *error)
{
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "_id")) {
            char key[16];
            const char *k;
            bson_uint32_to_string((*n)++, &k, key, sizeof key);
            bson_append_value(ids, k, -1, bson_iter_value(&it));
        }
    }
    bool ok = store_cursor_done(cursor, error);
    return explained(ok, error, "find", coll);
}

void store_append_strings(bson_t *doc, const char *key, const char *const *values, size_t n,
                          bool with_null)
{
    bson_t array;
    BSON_APPEND_ARRAY_BEGIN(doc, key, &array);
    uint32_t i = 0;
    char buf[16];
    const char *k;
    if (with_null) {
        bson_uint32_to_string(i++, &k, buf, sizeof buf);
        BSON_APPEND_NULL(&array, k);
    }
    for (size_t j = 0; j < n; j++) {
        bson_uint32_to_string(i++, &k, buf, sizeof buf);
        BSON_APPEND_UTF8(&array, k, values[j]);
    }
    bson_append_array_end(doc, &array);
}

void store_append_id_in(bson_t *filter, const bson_t *ids)
{
    bson_t id;
    BSON_APPEND_DOCUMENT_BEGIN(filter, "_id", &id);
    BSON_APPEND_ARRAY(&id, "$in", ids);
    bson_append_document_end(filter, &id);
}

void store_append_outside_open_batches(bson_t *filter, int64_t keep_from)
{
    bson_t *clause = BCON_NEW("$or", "[", "{", "tracked", "{", "$ne", BCON_BOOL(true), "}", "}",
                              "{", "batch", "{", "$lt", BCON_INT64(keep_from), "}", "}", "{",
                              "batch", "{", "$exists", BCON_BOOL(false), "}", "}", "]");
    bson_concat(filter, clause);
    bson_destroy(clause);
}

bool store_task_oid(const char *id, bson_oid_t *oid, bson_error_t *error)
{
    if (!bson_oid_is_valid(id, strlen(id))) {
        bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_INVALID,
                       "'%s' is not a task id (24 hex digits)", id);
        return false;
    }
    bson_oid_init_from_string(oid, id);
    return true;
}

bool store_is_duplicate_key(const bson_error_t *error)
{
    return error->code == 11000 || error->code == 11001;
}

void store_service_filter(bson_t *filter, const char *service, const char *node_id,
                          int64_t epoch)
{
    BSON_APPEND_UTF8(filter, "_id", service);
    if (node_id) {
        BSON_APPEND_UTF8(filter, "primary", node_id);
        BSON_APPEND_INT64(filter, "epoch", epoch);
    }
}

/* An update of the service's config document, fenced on primacy under `epoch`. */
bool store_fenced_update(cohort_store_t *store, mongoc_client_t *client, const char *service,
                         const char *node_id, int64_t epoch, const bson_t *extra_filter,
                         const bson_t *update, bool *applied, bson_error_t *error)
{
    mongoc_collection_t *services = store_collection(store, client, "services");
    bson_t filter = BSON_INITIALIZER;
    store_service_filter(&filter, service, node_id, epoch);
    if (extra_filter)
        bson_concat(&filter, extra_filter);
    int64_t matched = 0;
    bool ok = store_write(services, STORE_UPDATE_ONE, &filter, update, NULL, "matchedCount",
                          &matched, error);
    *applied = matched == 1;
    bson_destroy(&filter);
    mongoc_collection_destroy(services);
    return ok;
}

bool store_cursor_done(mongoc_cursor_t *cursor, bson_error_t *error)
{
    bool ok = !mongoc_cursor_error(cursor, error);
    mongoc_cursor_destroy(cursor);
    return ok;
}
