/*
 * groups.h - group locks (groups.c): the claimed task of a group holds its lock, and the busy
 * groups are those whose lock is held.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_GROUPS_H
#define COHORT_STORE_GROUPS_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* A claimed task of a group takes the group's lock: group_lock = `group` on the task, under
 * a unique index, so at most one claimed task per group exists. *locked is false if another
 * task of the group holds it (nothing changed then). */
bool cohort_store_lock_group(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const bson_value_t *id, const char *node_id, int32_t attempt,
                             const char *group, bool *locked, bson_error_t *error);

/* The groups whose lock is held right now (at most `max`; `groups` receives strdup()ed names
 * the caller frees). One query on the group_lock index. On failure (the database, or out of
 * memory) *n is 0 and nothing is left to free. */
bool cohort_store_busy_groups(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              char **groups, size_t max, size_t *n, bson_error_t *error);

#endif
