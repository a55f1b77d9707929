/*
 * round_trips.c - the node's database round trips (node/round_trips.h): the p99 is the
 * nearest-rank 99th percentile of the last COHORT_ROUND_TRIPS samples, so one slow ping in a
 * hundred shows and old samples leave the ring.
 */
#include <criterion/criterion.h>

#include "node/round_trips.h"

Test(round_trips, none_is_minus_one)
{
    cohort_round_trips_t rt = {0};
    cr_expect_eq(cohort_round_trips_p99(&rt), -1);
}

Test(round_trips, p99_is_the_nearest_rank)
{
    cohort_round_trips_t rt = {0};
    for (int i = 1; i <= 100; i++)
        cohort_round_trips_add(&rt, i);
    cr_expect_eq(cohort_round_trips_p99(&rt), 99);
    cohort_round_trips_add(&rt, -5); /* counts as 0 */
    cr_expect_eq(cohort_round_trips_p99(&rt), 99);
    cohort_round_trips_t few = {0};
    cohort_round_trips_add(&few, 7);
    cohort_round_trips_add(&few, 300);
    cr_expect_eq(cohort_round_trips_p99(&few), 300, "with few samples, the slowest");
}

Test(round_trips, p50_is_the_median_by_nearest_rank)
{
    cohort_round_trips_t rt = {0};
    cr_expect_eq(cohort_round_trips_percentile(&rt, 50), -1);
    for (int i = 1; i <= 100; i++)
        cohort_round_trips_add(&rt, i);
    cr_expect_eq(cohort_round_trips_percentile(&rt, 50), 50);
    cohort_round_trips_t few = {0};
    cohort_round_trips_add(&few, 300);
    cohort_round_trips_add(&few, 7);
    cohort_round_trips_add(&few, 9);
    cr_expect_eq(cohort_round_trips_percentile(&few, 50), 9, "the middle of three");
}

Test(round_trips, old_samples_leave_the_ring)
{
    cohort_round_trips_t rt = {0};
    for (int i = 0; i < 10; i++)
        cohort_round_trips_add(&rt, 5000);
    for (int i = 0; i < COHORT_ROUND_TRIPS; i++)
        cohort_round_trips_add(&rt, 20);
    cr_expect_eq(cohort_round_trips_p99(&rt), 20);
    cr_expect_eq(rt.n, COHORT_ROUND_TRIPS);
}
