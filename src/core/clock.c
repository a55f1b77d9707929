/*
 * clock.c - cluster time as monotonic time plus a measured offset (see clock.h).
 *
 * The offset is written by the main thread once per tick and read by worker threads, so it
 * lives in atomics; a torn pair (offset of one sample, uncertainty of another) is harmless.
 */
#include "core/clock.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

static _Atomic int64_t offset_ms;      /* cluster = monotonic + offset */
static _Atomic int64_t uncertainty_ms;
static _Atomic bool synced;

static int64_t timespec_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t test_skew_ms(void)
{
    static _Atomic int64_t cached = INT64_MIN;
    int64_t skew = atomic_load(&cached);
    if (skew == INT64_MIN) {
        const char *env = getenv("COHORT_TEST_CLOCK_SKEW_MS");
        skew = env ? strtoll(env, NULL, 10) : 0;
        atomic_store(&cached, skew);
    }
    return skew;
}

int64_t cohort_clock_monotonic_ms(void)
{
    return timespec_ms(CLOCK_MONOTONIC);
}

int64_t cohort_clock_realtime_ms(void)
{
    return timespec_ms(CLOCK_REALTIME) + test_skew_ms();
}

bool cohort_clock_sync(int64_t server_ms, int64_t sent_mono_ms, int64_t recv_mono_ms,
                       int64_t max_rtt_ms)
{
    int64_t rtt = recv_mono_ms - sent_mono_ms;
    if (rtt < 0 || rtt > max_rtt_ms)
        return false;
    /* The server stamped its time somewhere inside the round trip; the midpoint bounds the
     * error by rtt/2. Date fields have millisecond resolution, so add 1 ms. */
    int64_t midpoint = sent_mono_ms + rtt / 2;
    atomic_store(&offset_ms, server_ms - midpoint);
    atomic_store(&uncertainty_ms, rtt / 2 + 1);
    atomic_store(&synced, true);
    return true;
}

bool cohort_clock_synced(void)
{
    return atomic_load(&synced);
}

int64_t cohort_clock_cluster_ms(void)
{
    if (!atomic_load(&synced))
        return cohort_clock_realtime_ms();
    return cohort_clock_monotonic_ms() + atomic_load(&offset_ms);
}

int64_t cohort_clock_uncertainty_ms(void)
{
    return atomic_load(&uncertainty_ms);
}

int64_t cohort_clock_node_skew_ms(void)
{
    return cohort_clock_realtime_ms() - cohort_clock_cluster_ms();
}

void cohort_clock_reset(void)
{
    atomic_store(&synced, false);
    atomic_store(&offset_ms, 0);
    atomic_store(&uncertainty_ms, 0);
}
