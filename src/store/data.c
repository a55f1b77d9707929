/*
 * data.c - the service's generic data: data.<key> in its config document.
 *
 * Writes from a primary are fenced on its epoch, so a deposed primary's late write is
 * dropped rather than applied over its successor's. The increment and the compare-and-set
 * are one findAndModify each, with the condition in the filter: concurrent callers on any
 * node are serialised by the server, so no update is lost.
 */
#include "store/data.h"

#include "store/internal.h"
#include "store/services.h"
#include "store/store.h"

#include <stdio.h>

static void data_path(char path[128], const char *key)
{
    snprintf(path, 128, "data.%s", key);
}

/* Initialises `update` to {$set: {path: value}}, or {$unset: {path: ""}} if value is NULL. */
static void set_or_unset(bson_t *update, const char *path, const bson_value_t *value)
{
    bson_t op;
    bson_init(update);
    BSON_APPEND_DOCUMENT_BEGIN(update, value ? "$set" : "$unset", &op);
    if (value)
        bson_append_value(&op, path, -1, value);
    else
        BSON_APPEND_UTF8(&op, path, "");
    bson_append_document_end(update, &op);
}

bool cohort_store_get_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, bson_value_t *value, bool *found,
                           bson_error_t *error)
{
    *found = false;
    bson_t doc;
    bool exists = false;
    if (!cohort_store_read_service(store, client, service, &doc, &exists, error)) {
        bson_destroy(&doc);
        return false;
    }
    char path[128];
    data_path(path, key);
    bson_iter_t it, child;
    if (exists && bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, path, &child)) {
        bson_value_copy(bson_iter_value(&child), value);
        *found = true;
    }
    bson_destroy(&doc);
    return true;
}

bool cohort_store_set_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, const bson_value_t *value, const char *node_id,
                           int64_t epoch, bool *applied, bson_error_t *error)
{
    char path[128];
    data_path(path, key);
    bson_t update;
    set_or_unset(&update, path, value);
    bool ok = store_fenced_update(store, client, service, node_id, epoch, NULL, &update, applied,
                                  error);
    bson_destroy(&update);
    return ok;
}

/* {$or: [{path: absent}, {path: an int32 or int64 that `delta` cannot overflow}]}, and not
 * an array: a query's $type and $lte would match an array by its elements. */
static void append_incrementable(bson_t *filter, const char *path, int64_t delta)
{
    const char *bound = delta >= 0 ? "$lte" : "$gte";
    int64_t limit = delta >= 0 ? INT64_MAX - delta : INT64_MIN - delta;
    bson_t *either = BCON_NEW("$or", "[",
                              "{", path, "{", "$exists", BCON_BOOL(false), "}", "}",
                              "{", path, "{", "$type", BCON_UTF8("int"), bound,
                              BCON_INT64(limit), "}", "}",
                              "{", path, "{", "$type", BCON_UTF8("long"), bound,
                              BCON_INT64(limit), "}", "}",
                              "]",
                              path, "{", "$not", "{", "$type", BCON_UTF8("array"), "}", "}");
    bson_concat(filter, either);
    bson_destroy(either);
}

/* One findAndModify of the service's config document; *applied: a document matched, and
 * then `after` (may be NULL) receives it as updated (the caller destroys it). */
static bool modify_service(cohort_store_t *store, mongoc_client_t *client, const bson_t *filter,
                           const bson_t *update, bson_t *after, bool *applied,
                           bson_error_t *error)
{
    mongoc_collection_t *services = store_collection(store, client, "services");
    bson_t doc;
    bool ok = store_find_and_modify(services, filter, NULL, update, NULL, true, false, &doc,
                                    applied, error);
    if (*applied && after)
        bson_steal(after, &doc);
    else if (*applied)
        bson_destroy(&doc);
    mongoc_collection_destroy(services);
    return ok;
}

bool cohort_store_inc_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, int64_t delta, const char *node_id, int64_t epoch,
                           int64_t *result, bool *applied, bson_error_t *error)
{
    char path[128];
    data_path(path, key);
    bson_t filter = BSON_INITIALIZER;
    store_service_filter(&filter, service, node_id, epoch);
    append_incrementable(&filter, path, delta);
    /* An int64 operand makes the stored value an int64 whatever it was. */
    bson_t *update = BCON_NEW("$inc", "{", path, BCON_INT64(delta), "}");
    bson_t after;
    bool ok = modify_service(store, client, &filter, update, &after, applied, error);
    if (ok && *applied) {
        *result = store_int64_field(&after, path, 0);
        bson_destroy(&after);
    }
    bson_destroy(update);
    bson_destroy(&filter);
    return ok;
}

bool cohort_store_cas_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, const bson_value_t *expected,
                           const bson_value_t *value, const char *node_id, int64_t epoch,
                           bool *applied, bson_error_t *error)
{
    char path[128];
    data_path(path, key);
    bson_t filter = BSON_INITIALIZER;
    store_service_filter(&filter, service, node_id, epoch);
    if (!expected) {
        bson_t *absent = BCON_NEW(path, "{", "$exists", BCON_BOOL(false), "}");
        bson_concat(&filter, absent);
        bson_destroy(absent);
    } else {
        /* The aggregation $eq compares whole values: a query's {path: v} would also match an
         * array holding v. $literal keeps a document with $-keys from being an expression. */
        char field[130];
        snprintf(field, sizeof field, "$%s", path);
        bson_t expr, eq, literal;
        BSON_APPEND_DOCUMENT_BEGIN(&filter, "$expr", &expr);
        BSON_APPEND_ARRAY_BEGIN(&expr, "$eq", &eq);
        BSON_APPEND_UTF8(&eq, "0", field);
        BSON_APPEND_DOCUMENT_BEGIN(&eq, "1", &literal);
        bson_append_value(&literal, "$literal", -1, expected);
        bson_append_document_end(&eq, &literal);
        bson_append_array_end(&expr, &eq);
        bson_append_document_end(&filter, &expr);
    }
    bson_t update;
    set_or_unset(&update, path, value);
    bool ok = modify_service(store, client, &filter, &update, NULL, applied, error);
    bson_destroy(&update);
    bson_destroy(&filter);
    return ok;
}
