/*
 * kinds.h - per-kind run statistics for the dashboard (docs/SCHEMA.md "history", docs/API.md
 * "Kinds"): for each task kind, the runs that finished in a minute by final status, and a
 * fixed log-bucket histogram of their durations (finished_at - claimed_at, both the server's
 * clock). The primary measures each minute with one aggregation over the {status,
 * finished_at} index range and keeps it in the minute's `history` document; every hour it
 * sums the hour into `history_hours` (kept 8 days) for the week view. Percentiles are read
 * from the histogram: an answer is a bucket ("between 100 and 300 ms"), never finer.
 */
#ifndef COHORT_STORE_KINDS_H
#define COHORT_STORE_KINDS_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

#define COHORT_KIND_BUCKETS 12   /* durations: < 10 ms, < 30, < 100, ... < 1,000 s, longer */
#define COHORT_KINDS_MAX 32      /* kinds kept per minute or window; more set `capped` */
#define COHORT_HOUR_MS 3600000
#define COHORT_HOURS_RETENTION_MS (8LL * 24 * COHORT_HOUR_MS) /* history_hours: 8 days */

/* The upper bound (exclusive) of each bucket but the last, which is open: 10, 30, 100, ... ms. */
extern const int64_t cohort_kind_bucket_ms[COHORT_KIND_BUCKETS - 1];

/* One kind's finished runs ("" for tasks without a kind). */
typedef struct cohort_kind_stats {
    char kind[129];
    int64_t succeeded, failed, timed_out;
    int64_t ms[COHORT_KIND_BUCKETS]; /* runs by duration bucket (all three statuses) */
} cohort_kind_stats_t;

/* The kinds of a minute or a window: value type, no pointers. */
typedef struct cohort_kinds {
    size_t n;
    bool capped; /* some kinds were left out: more than COHORT_KINDS_MAX */
    cohort_kind_stats_t kind[COHORT_KINDS_MAX];
} cohort_kinds_t;

/* Measures the runs of `service` that finished in [from_ms, to_ms) into `kinds` (reset
 * first): one aggregation on the {status, finished_at} index, grouped by kind, status and
 * bucket on the server, so its reply has at most kinds x 3 x 12 small rows. */
bool cohort_store_measure_kinds(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, int64_t from_ms, int64_t to_ms,
                                cohort_kinds_t *kinds, bson_error_t *error);

/* Adds `add` into `sum`, kind by kind (kinds beyond the cap set sum->capped). */
void cohort_kinds_add(cohort_kinds_t *sum, const cohort_kinds_t *add);

/* The bucket holding the `pct`-th percentile (0 < pct <= 100) of `k`'s durations into
 * [*from_ms, *to_ms) (*to_ms = -1: the open last bucket); false if it has no runs. */
bool cohort_kind_percentile(const cohort_kind_stats_t *k, int pct, int64_t *from_ms,
                            int64_t *to_ms);

/* Appends `kinds` as the array `key` of `doc` (the stored form, SCHEMA.md), and reads it back
 * from the array at iterator `it` (adding to `kinds`: callers reset it). */
void cohort_kinds_append(bson_t *doc, const char *key, const cohort_kinds_t *kinds);
void cohort_kinds_read(bson_iter_t *it, cohort_kinds_t *kinds);

/* Sums the kinds of `service`'s stored minutes (`hours`: its hourly rollups instead) from
 * `since_ms` on into `sum` (not reset), and the number of documents read into *docs (a
 * minute without `kinds`, written by an older node, counts but adds nothing). */
bool cohort_store_sum_kinds(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            bool hours, int64_t since_ms, cohort_kinds_t *sum, int64_t *docs,
                            bson_error_t *error);

/* Writes the hour [hour_ms, hour_ms + 1 h) of `service` into `history_hours`: the sums of its
 * stored minutes (enqueued, succeeded, failed, timed_out, kinds), the queue's counts of its
 * last minute; an upsert, so a second primary writes the same document. Deletes the hours
 * older than COHORT_HOURS_RETENTION_MS before it. */
bool cohort_store_record_hour(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, int64_t hour_ms, bson_error_t *error);

/* Calls `fn` on each stored hour of `service` from `since_ms` on, oldest first, at most `limit`
 * of them: the `history_hours` document without its kinds (borrowed for the call). */
bool cohort_store_each_hour(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            int64_t since_ms, int64_t limit,
                            bool (*fn)(void *user, const bson_t *hour), void *user,
                            bson_error_t *error);

#endif
