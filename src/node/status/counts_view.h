/*
 * counts_view.h - a service's queue counts for the dashboard's calls (GET /api/v1/services,
 * .../counts, .../history's minute under way, .../due) without a scan per call: the snapshot the
 * service's primary publishes every COHORT_UPKEEP_INTERVAL_MS (store/queue_counts.h) when it
 * is fresh, else one measured here and kept for COHORT_COUNTS_CACHE_MS for the next callers.
 *
 * A queue smaller than COHORT_COUNTS_SNAPSHOT_MIN tasks is measured at every call (its scans
 * cost little and its figures stay exact). Every answer says when it was measured: callers
 * show `counts_as_of` and `counts_age_ms` (cohort_counts_view_append_age).
 *
 * Thread-safe: the cache is one small table under a mutex, at most COHORT_COUNTS_CACHE_SLOTS
 * services (the oldest entry makes room).
 */
#ifndef COHORT_COUNTS_VIEW_H
#define COHORT_COUNTS_VIEW_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

#define COHORT_COUNTS_SNAPSHOT_MIN 10000 /* tasks: below, every call measures */
#define COHORT_COUNTS_FRESH_MS 15000 /* older is stale (or 3 times its `every_ms` if longer) */
#define COHORT_COUNTS_CACHE_MS 5000      /* how long a measure made here serves others */
#define COHORT_COUNTS_CACHE_SLOTS 16

/* `service`'s counts into `snap` (initialised here whatever happens; the caller destroys it): the primary's
 * published snapshot, a recent one measured in this process, or one measured now. */
bool cohort_counts_view_get(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            bson_t *snap, bson_error_t *error);

/* Appends `<prefix>as_of` (the snapshot's measured_at, ISO-8601) and `<prefix>age_ms` (how
 * long before now, on the cluster clock; never negative) to `out`. */
void cohort_counts_view_append_age(bson_t *out, const char *prefix, const bson_t *snap);

#endif
