/*
 * round_trips.h - this node's database round trips, measured on its pings (one findAndModify
 * of its node document each tick, node.c), kept as the last COHORT_ROUND_TRIPS samples so
 * memory stays fixed. Each node publishes their p99 and p50 in its node document (db_rtt_p99_ms,
 * db_rtt_p50_ms), and `cohortctl settings set` refuses a takeover_ms under
 * COHORT_TAKEOVER_RTT_MULTIPLE times the p99
 * (core/settings.h says why), so an unsafe lease is caught before it moves primacy.
 */
#ifndef COHORT_ROUND_TRIPS_H
#define COHORT_ROUND_TRIPS_H

#include <stddef.h>
#include <stdint.h>

#define COHORT_ROUND_TRIPS 256 /* samples kept: minutes of pings at a 1 s tick */

/* The caller owns it (embedded in the node); zero-initialised is empty. Main thread only. */
typedef struct cohort_round_trips {
    int64_t ms[COHORT_ROUND_TRIPS]; /* a ring of the latest samples */
    size_t n, next;
} cohort_round_trips_t;

/* Records one round trip of `ms` milliseconds (negative counts as 0). */
void cohort_round_trips_add(cohort_round_trips_t *rt, int64_t ms);

/* The `pct`th percentile (1..100) of the samples kept (nearest rank), or -1 with none. */
int64_t cohort_round_trips_percentile(const cohort_round_trips_t *rt, int pct);

/* The 99th percentile of the samples kept (nearest rank), or -1 with none. */
int64_t cohort_round_trips_p99(const cohort_round_trips_t *rt);

#endif
