/*
 * clock.c - the cluster clock (src/core/clock.h): cluster time is the node's monotonic clock plus
 * an offset measured at the midpoint of a round trip to the server; samples with too long a
 * round trip are rejected; the uncertainty is half the round trip (+1 ms); a node whose wall
 * clock is off (COHORT_TEST_CLOCK_SKEW_MS) still computes the server's time.
 *
 * Criterion runs every test in a process of its own, so the clock's static state (and the
 * cached COHORT_TEST_CLOCK_SKEW_MS) starts fresh in each test.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <time.h>

#include "core/clock.h"

#define SERVER_MS 1800000000000LL /* 2027-01-15: any fixed server time */

static int64_t true_realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Asserts that the cluster clock reads server_ms + (now - midpoint) on the monotonic clock. */
static void assert_cluster_at(int64_t server_ms, int64_t midpoint)
{
    int64_t before = cohort_clock_monotonic_ms();
    int64_t cluster = cohort_clock_cluster_ms();
    int64_t after = cohort_clock_monotonic_ms();
    cr_assert_geq(cluster, server_ms + before - midpoint, "cluster %lld, want >= %lld",
                  (long long)cluster, (long long)(server_ms + before - midpoint));
    cr_assert_leq(cluster, server_ms + after - midpoint, "cluster %lld, want <= %lld",
                  (long long)cluster, (long long)(server_ms + after - midpoint));
}

TestSuite(clock, .init = cohort_clock_reset);

Test(clock, before_any_sample_it_is_the_wall_clock)
{
    cr_assert_not(cohort_clock_synced());
    cr_assert_eq(cohort_clock_uncertainty_ms(), 0);
    int64_t before = true_realtime_ms();
    int64_t cluster = cohort_clock_cluster_ms();
    int64_t after = true_realtime_ms();
    cr_assert(cluster >= before && cluster <= after, "cluster %lld outside [%lld, %lld]",
              (long long)cluster, (long long)before, (long long)after);
}

Test(clock, offset_is_taken_at_the_midpoint_of_the_round_trip)
{
    int64_t now = cohort_clock_monotonic_ms();
    int64_t sent = now - 100, received = now - 60; /* rtt 40: midpoint sent + 20 */
    cr_assert(cohort_clock_sync(SERVER_MS, sent, received, 50));
    cr_assert(cohort_clock_synced());
    assert_cluster_at(SERVER_MS, sent + 20);
    /* so "now" is about 80 ms after the server stamped SERVER_MS */
    int64_t ahead = cohort_clock_cluster_ms() - SERVER_MS;
    cr_assert(ahead >= 80 && ahead < 1080, "cluster is %lld ms past the sample", (long long)ahead);
}

Test(clock, uncertainty_is_half_the_round_trip_plus_one)
{
    int64_t now = cohort_clock_monotonic_ms();
    cr_assert(cohort_clock_sync(SERVER_MS, now - 41, now, 100));
    cr_assert_eq(cohort_clock_uncertainty_ms(), 21); /* 41 / 2 + 1 */
    assert_cluster_at(SERVER_MS, now - 41 + 20);

    cr_assert(cohort_clock_sync(SERVER_MS, now, now, 100));
    cr_assert_eq(cohort_clock_uncertainty_ms(), 1, "a zero round trip still has 1 ms error");
    assert_cluster_at(SERVER_MS, now);
}

Test(clock, samples_over_the_max_round_trip_are_rejected)
{
    int64_t now = cohort_clock_monotonic_ms();
    cr_assert_not(cohort_clock_sync(SERVER_MS, now - 51, now, 50));
    cr_assert_not(cohort_clock_synced(), "a rejected first sample must not sync the clock");
    cr_assert_eq(cohort_clock_uncertainty_ms(), 0);

    /* the boundary is inclusive */
    cr_assert(cohort_clock_sync(SERVER_MS, now - 50, now, 50));
    assert_cluster_at(SERVER_MS, now - 25);
    cr_assert_eq(cohort_clock_uncertainty_ms(), 26);

    /* a later slow sample leaves the good offset and its uncertainty in place */
    cr_assert_not(cohort_clock_sync(SERVER_MS + 3600000, now - 500, now, 50));
    assert_cluster_at(SERVER_MS, now - 25);
    cr_assert_eq(cohort_clock_uncertainty_ms(), 26);
}

Test(clock, a_negative_round_trip_is_rejected)
{
    int64_t now = cohort_clock_monotonic_ms();
    cr_assert_not(cohort_clock_sync(SERVER_MS, now, now - 1, 50));
    cr_assert_not(cohort_clock_synced());
}

Test(clock, a_newer_sample_replaces_the_offset)
{
    int64_t now = cohort_clock_monotonic_ms();
    cr_assert(cohort_clock_sync(SERVER_MS, now - 10, now - 10, 50));
    assert_cluster_at(SERVER_MS, now - 10);
    cr_assert(cohort_clock_sync(SERVER_MS + 5000, now - 4, now, 50));
    assert_cluster_at(SERVER_MS + 5000, now - 2);
    cr_assert_eq(cohort_clock_uncertainty_ms(), 3);
}

Test(clock, cluster_time_advances_with_the_monotonic_clock)
{
    int64_t now = cohort_clock_monotonic_ms();
    cr_assert(cohort_clock_sync(SERVER_MS, now, now, 50));
    int64_t first = cohort_clock_cluster_ms();
    struct timespec ts = {0, 30 * 1000000L};
    nanosleep(&ts, NULL);
    int64_t second = cohort_clock_cluster_ms();
    cr_assert_geq(second - first, 30, "cluster clock moved %lld ms in a 30 ms sleep",
                  (long long)(second - first));
    cr_assert_lt(second - first, 2000);
}

Test(clock, node_skew_is_wall_clock_minus_cluster_clock)
{
    /* the server is two minutes behind this machine */
    int64_t now = cohort_clock_monotonic_ms();
    int64_t server = true_realtime_ms() - 120000;
    cr_assert(cohort_clock_sync(server, now, now, 50));
    int64_t skew = cohort_clock_node_skew_ms();
    cr_assert(skew >= 120000 - 50 && skew <= 120000 + 50, "skew %lld, want about +120000",
              (long long)skew);
}

Test(clock, reset_forgets_every_sample)
{
    int64_t now = cohort_clock_monotonic_ms();
    cr_assert(cohort_clock_sync(SERVER_MS, now - 10, now, 50));
    cohort_clock_reset();
    cr_assert_not(cohort_clock_synced());
    cr_assert_eq(cohort_clock_uncertainty_ms(), 0);
    int64_t cluster = cohort_clock_cluster_ms();
    cr_assert_lt(llabs(cluster - true_realtime_ms()), 1000,
                 "after a reset the cluster clock "
                 "is the wall clock again");
}

/* ---- a node whose wall clock is five minutes slow ------------------------------------- */

#define SKEW_MS (-300000LL)

static void skew_wall_clock(void)
{
    cohort_clock_reset();
    cr_assert_eq(setenv("COHORT_TEST_CLOCK_SKEW_MS", "-300000", 1), 0);
}

TestSuite(skewed_clock, .init = skew_wall_clock);

Test(skewed_clock, the_wall_clock_is_shifted)
{
    int64_t shift = cohort_clock_realtime_ms() - true_realtime_ms();
    cr_assert(shift >= SKEW_MS - 5 && shift <= SKEW_MS + 5,
              "COHORT_TEST_CLOCK_SKEW_MS=-300000 shifted the wall clock by %lld ms",
              (long long)shift);
}

Test(skewed_clock, cluster_time_follows_the_server_not_the_node)
{
    /* the server's clock is right; this node's is 5 minutes slow */
    int64_t sent = cohort_clock_monotonic_ms();
    int64_t server = true_realtime_ms();
    int64_t received = cohort_clock_monotonic_ms();
    cr_assert(cohort_clock_sync(server, sent, received, 50));
    int64_t error = cohort_clock_cluster_ms() - true_realtime_ms();
    cr_assert_lt(llabs(error), 50, "cluster clock is %lld ms off the server's", (long long)error);
    int64_t skew = cohort_clock_node_skew_ms();
    cr_assert(skew >= SKEW_MS - 50 && skew <= SKEW_MS + 50, "node skew %lld, want about %lld",
              (long long)skew, (long long)SKEW_MS);
}
