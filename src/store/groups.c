/*
 * groups.c - group locks: the claimed task of a group holds its lock, and the busy groups are
 * those whose lock is held.
 *
 * The lock is a field on the claimed task under a unique sparse index (group_lock), so the
 * server, not a read before the write, guarantees at most one running task per group; every
 * outcome and unclaim removes it in the same write that ends the claim.
 */
#include "store/groups.h"

#include "store/internal.h"
#include "store/store.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

bool cohort_store_lock_group(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const bson_value_t *id, const char *node_id, int32_t attempt,
                             const char *group, bool *locked, bson_error_t *error)
{
    *locked = false;
    bson_t *filter = store_held_claim(id, node_id, attempt);
    bson_t *update = BCON_NEW("$set", "{", "group_lock", BCON_UTF8(group), "}");
    bool ok = store_update_task(store, client, service, filter, update, locked, error);
    if (!ok && store_is_duplicate_key(error))
        ok = true; /* the group is busy: *locked is false */
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_busy_groups(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              char **groups, size_t max, size_t *n, bson_error_t *error)
{
    *n = 0;
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t *filter = BCON_NEW("group_lock", "{", "$exists", BCON_BOOL(true), "}");
    bson_t *opts = BCON_NEW("projection", "{", "group_lock", BCON_INT32(1), "_id", BCON_INT32(0),
                            "}", "limit", BCON_INT64((int64_t)max));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, filter, opts, NULL);
    const bson_t *doc;
    bool ok = true;
    while (ok && *n < max && mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "group_lock") && BSON_ITER_HOLDS_UTF8(&it)) {
            char *name = strdup(bson_iter_utf8(&it, NULL));
            if (name)
                groups[(*n)++] = name;
            else
                ok = cohort_error_nomem(error, "the busy groups");
        }
    }
    ok = ok && !mongoc_cursor_error(cursor, error);
    if (!ok) { /* nothing for the caller to free */
        for (size_t i = 0; i < *n; i++)
            free(groups[i]);
        *n = 0;
    }
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(tasks);
    return ok;
}
