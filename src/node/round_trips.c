/*
 * round_trips.c - the ring of database round trips and its p99 (see round_trips.h). The
 * percentile sorts a copy of at most COHORT_ROUND_TRIPS samples, once per ping.
 */
#include "node/round_trips.h"

#include <stdlib.h>
#include <string.h>

void cohort_round_trips_add(cohort_round_trips_t *rt, int64_t ms)
{
    rt->ms[rt->next] = ms < 0 ? 0 : ms;
    rt->next = (rt->next + 1) % COHORT_ROUND_TRIPS;
    if (rt->n < COHORT_ROUND_TRIPS)
        rt->n++;
}

static int compare_ms(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t cohort_round_trips_p99(const cohort_round_trips_t *rt)
{
    return cohort_round_trips_percentile(rt, 99);
}

int64_t cohort_round_trips_percentile(const cohort_round_trips_t *rt, int pct)
{
    if (rt->n == 0)
        return -1;
    int64_t sorted[COHORT_ROUND_TRIPS];
    memcpy(sorted, rt->ms, rt->n * sizeof *sorted);
    qsort(sorted, rt->n, sizeof *sorted, compare_ms);
    /* Nearest rank: the smallest sample with at least pct% of the samples at or below it. */
    size_t rank = (rt->n * (size_t)pct + 99) / 100;
    return sorted[rank - 1];
}
