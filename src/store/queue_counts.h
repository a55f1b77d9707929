/*
 * queue_counts.h - the `counts` collection: one small document per service, the queue's
 * counts as a service's primary measured them a moment ago (docs/SCHEMA.md), so that the
 * dashboard's calls read a document instead of scanning the queue.
 *
 * A snapshot holds the counts by status, the kinds and the groups with the most tasks (at
 * most COHORT_COUNTS_VALUES_MAX of each, their rows ordered by the value's total count, and
 * how many distinct values there are), the minute under way so far (cohort_minute_t's
 * fields), the run_at of the oldest due task, the due pending tasks by kind (at most
 * COHORT_COUNTS_DUE_KINDS_MAX kinds, cohort_store_due_by_kind's rows), when it was measured
 * (cluster ms) and how long the measure took. Measuring costs the scans the pages used to
 * wait for; publishing is one upsert.
 */
#ifndef COHORT_STORE_QUEUE_COUNTS_H
#define COHORT_STORE_QUEUE_COUNTS_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/history.h"
#include "store/queries.h"
#include "store/store.h"

/* The most kinds and groups a snapshot keeps (and GET .../counts?limit= may ask for). */
#define COHORT_COUNTS_VALUES_MAX 500
/* The most kinds of due tasks a snapshot keeps (GET .../due's rows). */
#define COHORT_COUNTS_DUE_KINDS_MAX 100

/* Measures `service`'s queue at `now_ms` (cluster ms) into `snap` (initialised here; the
 * caller destroys it): {measured_at, took_ms, total, counts, kinds, groups, minute,
 * oldest_due_at, due: {kinds: [{kind, due, oldest_due_at}], more}}, with `epoch` if non-zero
 * (the primary that measured it). Memory stays bounded: the rows stream and only the top
 * COHORT_COUNTS_VALUES_MAX values are kept. */
bool cohort_store_measure_counts(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, int64_t now_ms, int64_t epoch,
                                 bson_t *snap, bson_error_t *error);

/* Writes `snap` as `service`'s document (an upsert by _id = service name). */
bool cohort_store_publish_counts(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const bson_t *snap, bson_error_t *error);

/* Reads `service`'s published snapshot into `snap` (initialised; destroy it); *found false
 * when none was published. */
bool cohort_store_read_counts(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, bson_t *snap, bool *found,
                              bson_error_t *error);

/* A snapshot's fields back as C values: its counts by status, its minute under way (with
 * oldest_due_ms), when it was measured and how many tasks it counted. */
void cohort_counts_status(const bson_t *snap, cohort_status_counts_t *counts);
void cohort_counts_minute(const bson_t *snap, cohort_minute_t *minute);
int64_t cohort_counts_measured_at(const bson_t *snap);
int64_t cohort_counts_total(const bson_t *snap);
/* The pace its primary measures at (`every_ms`, ms; 0 if absent). */
int64_t cohort_counts_every_ms(const bson_t *snap);
/* How many distinct values `key` ("kinds", "groups") had, kept or not. */
int64_t cohort_counts_distinct(const bson_t *snap, const char *key);

#endif
