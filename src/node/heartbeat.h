/*
 * heartbeat.h - the heartbeat thread: keeps the node's liveness up between ticks.
 *
 * Other nodes judge this one alive by its `nodes` document's seen_at (server time): the
 * primary of a service expires a node silent for takeover_ms and releases its claims
 * (maintenance.c). The main thread refreshes seen_at with its ping, once per tick; but on a
 * slow database a tick is a queue of slow commands that can outlast takeover_ms, and a
 * handler callback (primary_work, on_tasks_completed) holds the main thread too. A working
 * node would then be expired and its running tasks handed to others. So one thread touches
 * the document (seen_at and this run's runs.<id>.seen_at) on a connection of its own whenever
 * no ping or touch was sent for a quarter of the smallest live takeover_ms: with a round trip
 * of up to 3/4 of takeover_ms the node stays alive, whatever else the tick waits for.
 *
 * It touches only while the main thread is alive, by the lease thread's rule (election.h: an
 * election round or a handler callback started in the last 10 takeover periods), so a wedged
 * node still loses its primacy and, a little later, its liveness; and never while this run
 * stands back for another process with its node_id (runs.h), whose pings keep the node alive.
 */
#ifndef COHORT_HEARTBEAT_H
#define COHORT_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/primary/election.h"
#include "store/store.h"

typedef struct cohort_heartbeat cohort_heartbeat_t;

/* Starts the thread for node `node_id`, run `run_id` (both borrowed, like the `n` elections
 * whose takeover_ms and liveness it reads: they must outlive cohort_heartbeat_stop()), on a
 * client of its own from `store`. Returns NULL with `error` set if it cannot start. */
cohort_heartbeat_t *cohort_heartbeat_start(cohort_store_t *store, const char *node_id,
                                           const char *run_id,
                                           cohort_election_t *const *elections, size_t n,
                                           bson_error_t *error);

/* Stops and joins the thread, and frees it (NULL is fine). */
void cohort_heartbeat_stop(cohort_heartbeat_t *heartbeat);

/* Main thread: a ping sent at monotonic `sent_ms` succeeded, so no touch is due before a
 * quarter of takeover_ms after it. `standing_back`: this run now stands back (no touches). */
void cohort_heartbeat_note_ping(cohort_heartbeat_t *heartbeat, int64_t sent_ms,
                                bool standing_back);

/* When the next touch is due (monotonic ms), after the last ping or touch sent at
 * `last_sent_ms`, with `min_takeover_ms` the smallest live takeover_ms. Pure, for tests. */
int64_t cohort_heartbeat_due_ms(int64_t last_sent_ms, int64_t min_takeover_ms);

#endif
