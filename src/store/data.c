/*
 * data.c - the service's generic data: data.<key> in its config document.
 *
 * Writes from a primary are fenced on its epoch, so a deposed primary's late write is
 * dropped rather than applied over its successor's.
 */
#include "store/internal.h"

#include <stdio.h>

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
    snprintf(path, sizeof path, "data.%s", key);
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
    snprintf(path, sizeof path, "data.%s", key);
    bson_t update = BSON_INITIALIZER, op;
    BSON_APPEND_DOCUMENT_BEGIN(&update, value ? "$set" : "$unset", &op);
    if (value)
        bson_append_value(&op, path, -1, value);
    else
        BSON_APPEND_UTF8(&op, path, "");
    bson_append_document_end(&update, &op);
    bool ok = store_fenced_update(store, client, service, node_id, epoch, NULL, &update, applied,
                                  error);
    bson_destroy(&update);
    return ok;
}
