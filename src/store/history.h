/*
 * history.h - the `history` collection: per service and minute, the queue's counts by status
 * at the end of the minute and the tasks enqueued, succeeded, failed and timed out during it
 * (docs/SCHEMA.md). The primary writes one document a minute; the dashboard's charts read
 * the last hour (GET /api/v1/services/{svc}/history). Kept for `history_retention_ms`.
 *
 * Every count is an index range: finished ones by {status, finished_at}, enqueued ones by
 * _id (an ObjectId starts with its creation second, so "enqueued during the minute" is an
 * _id range; it reads the creating process's clock, to the second, which a chart tolerates).
 */
#ifndef COHORT_STORE_HISTORY_H
#define COHORT_STORE_HISTORY_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"
#include "store/queries.h"
#include "store/kinds.h"

#define COHORT_MINUTE_MS 60000

/* One minute of a service, as stored and as the API shows it. */
typedef struct cohort_minute {
    int64_t at_ms; /* the minute's start */
    cohort_status_counts_t counts; /* the queue at the end of the minute */
    int64_t enqueued, succeeded, failed, timed_out; /* during the minute */
    int64_t epoch;          /* the primary that recorded it (0: not recorded) */
    char primary[129];      /* its node id ("" if not recorded) */
    int64_t oldest_due_ms;  /* run_at of the oldest due pending task at the measure; 0: none */
    const cohort_kinds_t *kinds; /* borrowed: the runs by kind, written as `kinds` (NULL: none) */
} cohort_minute_t;

/* Measures the minute [from_ms, from_ms + 1 min) of `service` into `minute`: the tasks
 * enqueued, succeeded, failed and timed out in it, the queue's counts now, and the run_at
 * of the oldest pending task due at `now_ms` (one indexed read). */
bool cohort_store_measure_minute(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, int64_t from_ms, int64_t now_ms,
                                 cohort_minute_t *minute, bson_error_t *error);

/* Writes `minute` (with its `kinds` when set; an upsert: the same minute written twice, by two primaries around a
 * failover, is one document) with its `epoch` and `primary`, and deletes the service's
 * minutes older than `retention_ms` before it. */
bool cohort_store_record_minute(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, const cohort_minute_t *minute,
                                int64_t retention_ms, bson_error_t *error);

/* Calls `fn` on each stored minute of `service` from `since_ms` on, oldest first, at most
 * `limit` of them. */
bool cohort_store_each_minute(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, int64_t since_ms, int64_t limit,
                              bool (*fn)(void *user, const cohort_minute_t *minute),
                              void *user, bson_error_t *error);

/* The due pending tasks of `service` at `now_ms` by kind, the kinds with the most first, at
 * most `limit`: `fn` gets each kind (NULL: tasks without one), how many are due and the
 * run_at of the oldest. One aggregation over the {status, run_at} index's range of due tasks
 * (each one's kind is read from its document). *more: kinds past `limit` were left out. */
typedef void (*cohort_due_kind_fn)(void *user, const char *kind, int64_t due, int64_t oldest_ms);
bool cohort_store_due_by_kind(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              int64_t now_ms, int64_t limit, cohort_due_kind_fn fn, void *user,
                              bool *more, bson_error_t *error);

#endif
