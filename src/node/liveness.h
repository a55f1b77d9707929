/*
 * liveness.h - the node-wide time bounds that follow its services' live takeover_ms.
 *
 * A node hosts several services, each with a takeover_ms an operator may change while it
 * runs (cohortctl settings set). Two things the node does once for all of them must follow
 * the smallest one in effect, never the config file's value read at start-up:
 *   - the clock sample's round-trip bound: a sample's error must stay inside the lease guard
 *     of every service (election.h), so the tightest guard decides;
 *   - the liveness bound: the primary of a service expires nodes silent for its takeover_ms
 *     (maintenance.c), so a node is "live" only while its last check-in is younger than the
 *     smallest takeover_ms.
 */
#ifndef COHORT_LIVENESS_H
#define COHORT_LIVENESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/runtime.h"

/* The smallest takeover_ms in effect among `services` (borrowed), or `fallback` (the config
 * file's) if there are none. Main thread (it reads the services' `eff`). */
int64_t cohort_liveness_min_takeover_ms(cohort_service_t *const *services, size_t n_services,
                                        int64_t fallback);

/* The largest round trip a clock sample may have to be accepted now. */
int64_t cohort_liveness_max_clock_rtt_ms(cohort_service_t *const *services, size_t n_services,
                                         int64_t fallback);

#endif
