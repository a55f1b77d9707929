/*
 * queries.h - reading the queue for people and tools (queries.c): counts by status, kind or
 * group, one task, a listing in claim order.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_QUERIES_H
#define COHORT_STORE_QUERIES_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "store/store.h"

typedef struct cohort_status_counts {
    int64_t pending, claimed, succeeded, failed, timed_out, cancelled;
    int64_t other; /* any other status (written by hand) */
} cohort_status_counts_t;

/* The count of `status` in `counts` (the field of that name). */
int64_t cohort_status_count(const cohort_status_counts_t *counts, cohort_task_status_t status);

/* Counts the service's tasks by status and by `field` ("kind" or "group"): one aggregation
 * whose rows stream to `row` (value NULL: tasks without the field), so memory stays constant
 * whatever the number of groups. */
typedef void (*cohort_count_row_fn)(void *user, const char *value, const char *status, int64_t n);
bool cohort_store_count_by(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *field, cohort_count_row_fn row, void *user,
                           bson_error_t *error);

/* Counts the tasks in each of `n` statuses with one count command each (an index count on
 * {status}). */
bool cohort_store_count_statuses(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *const *statuses, size_t n,
                                 int64_t *counts, bson_error_t *error);

/* Reads one task by id (24 hex digits) into `doc` (initialised; destroy it). */
bool cohort_store_read_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *id, bson_t *doc, bool *found, bson_error_t *error);

/* A cursor over the service's tasks (status NULL: any) in claim order, at most `limit`. */
mongoc_cursor_t *cohort_store_list_tasks(cohort_store_t *store, mongoc_client_t *client,
                                         const char *service, const char *status, int64_t limit);

/* Counts the service's tasks by status with one aggregation. */
bool cohort_store_count_tasks(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              cohort_status_counts_t *counts, bson_error_t *error);

#endif
