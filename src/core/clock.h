/*
 * clock.h - the one clock the cluster agrees on.
 *
 * Nodes never compare their own wall clocks. Every tick a node asks the database server for
 * its time (the node ping writes $currentDate and reads it back) and keeps the offset between
 * that time and its own monotonic clock, measured at the midpoint of the round trip. "Now" on
 * the cluster clock is then monotonic + offset: a node whose wall clock is minutes off, or
 * jumps, still agrees with every other node to within half a round trip.
 *
 * COHORT_TEST_CLOCK_SKEW_MS (tests only) shifts this node's wall clock, which is only used
 * for log timestamps and for reporting how far the node's clock is from the server's.
 */
#ifndef COHORT_CLOCK_H
#define COHORT_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

/* Milliseconds on CLOCK_MONOTONIC: for durations, leases and timeouts on this node. */
int64_t cohort_clock_monotonic_ms(void);

/* The node's wall clock (CLOCK_REALTIME plus the test skew), in ms since the epoch. */
int64_t cohort_clock_realtime_ms(void);

/* Records one measurement: the server said `server_ms` for a request sent at monotonic time
 * `sent_mono_ms` and answered at `recv_mono_ms`. Samples whose round trip exceeds
 * `max_rtt_ms` are ignored (returns false) because their error would be too large. */
bool cohort_clock_sync(int64_t server_ms, int64_t sent_mono_ms, int64_t recv_mono_ms,
                       int64_t max_rtt_ms);

/* True once at least one sample was accepted. */
bool cohort_clock_synced(void);

/* Now on the cluster (server) clock, in ms since the epoch. Before the first sync this is
 * the node's wall clock. */
int64_t cohort_clock_cluster_ms(void);

/* Half the round trip of the sample in use: the bound on cohort_clock_cluster_ms()'s error. */
int64_t cohort_clock_uncertainty_ms(void);

/* Node wall clock minus cluster clock (positive: the node's clock is ahead). */
int64_t cohort_clock_node_skew_ms(void);

/* Forget every sample (tests). */
void cohort_clock_reset(void);

#endif
