/*
 * histogram.h - a histogram of durations (the task duration of the metrics), a fixed set of
 * buckets of atomics: worker threads observe without a lock and memory does not grow with
 * the number of tasks. A leaf module: the service's statistics hold one, metrics.c renders it.
 */
#ifndef COHORT_HISTOGRAM_H
#define COHORT_HISTOGRAM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Upper bounds of the task duration buckets, in microseconds (.001 s to 60 s); one more
 * bucket, +Inf, follows. */
#define COHORT_HISTOGRAM_BOUNDS_US                                                                 \
    {                                                                                              \
        1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000, 10000000, 60000000             \
    }
#define COHORT_HISTOGRAM_BUCKETS 11 /* the ten bounds and +Inf */

/* A histogram of durations. Buckets are counted per bucket (not cumulatively); rendering
 * adds them up, and _count is their total, so _count always equals the +Inf bucket. */
typedef struct cohort_histogram {
    _Atomic uint64_t buckets[COHORT_HISTOGRAM_BUCKETS];
    _Atomic uint64_t sum_us;
} cohort_histogram_t;

/* Records one duration (negative values count as 0). Lock-free; safe from any thread. */
void cohort_histogram_observe(cohort_histogram_t *histogram, int64_t duration_us);

#endif
