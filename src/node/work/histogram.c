/*
 * histogram.c - recording one duration into its bucket (see histogram.h); lock-free.
 */
#include "node/work/histogram.h"

static const int64_t bounds_us[COHORT_HISTOGRAM_BUCKETS - 1] = COHORT_HISTOGRAM_BOUNDS_US;

void cohort_histogram_observe(cohort_histogram_t *h, int64_t duration_us)
{
    if (duration_us < 0)
        duration_us = 0;
    size_t i = 0;
    while (i < COHORT_HISTOGRAM_BUCKETS - 1 && duration_us > bounds_us[i])
        i++;
    atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, (uint64_t)duration_us, memory_order_relaxed);
}
