/*
 * spread.h - spreading primacy over the nodes: a node that already leads services lets a
 * vacant primacy wait a little for nodes that lead fewer.
 *
 * Without it every node tries every vacant primacy on its tick and the first node to tick
 * takes them all (20 nodes serving 5 services at start-up: one node led all five). With it a
 * node holding `held` primacies takes a vacant one only once it has seen it vacant for
 * `held` ticks: a node that leads nothing takes it at once, so with enough live nodes each
 * service lands on its own node, and no vacancy waits longer than `held` ticks even when
 * every live node leads some (a lone node still takes 5 services within 4 ticks, since it
 * saw them all vacant at the same tick). A live primary is never asked to give one up: the
 * spread is decided when primacy is vacant (start-up, failover, a clean step-down).
 *
 * The election (election.c) calls these on the main thread; the count is the node's (one
 * counter shared by its services' elections), NULL where an election is used alone.
 */
#ifndef COHORT_SPREAD_H
#define COHORT_SPREAD_H

#include <stdbool.h>
#include <stdint.h>

/* How long a node holding `held` primacies lets a vacancy wait before it tries it. */
int64_t cohort_spread_wait_ms(int64_t held, int64_t tick_ms);

/* Whether this round should leave the primacy alone: it is not vacant, or it is and this node
 * (holding *held primacies; NULL: counts nothing, never defers) has seen it vacant for less
 * than cohort_spread_wait_ms(). *vacant_since_ms (monotonic; 0: not vacant) is when this node
 * first saw the vacancy: set on the first vacant round, cleared on a round that is not. */
bool cohort_spread_defer(const int64_t *held, bool vacant, int64_t *vacant_since_ms,
                         int64_t now_ms, int64_t tick_ms);

/* Adds `delta` (+1 on becoming primary, -1 on losing or giving up primacy) to the node's
 * count; nothing if `held` is NULL. */
void cohort_spread_count(int64_t *held, int64_t delta);

#endif
