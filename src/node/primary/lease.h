/*
 * lease.h - the lease thread: keeps each primacy this node holds renewed on a cadence set by
 * the lease, not by the tick.
 *
 * The main thread renews primacy once per tick, but a tick is a queue of commands (ping,
 * check-ins, maintenance, batches, counts), and on a slow database it can outlast the lease:
 * the primary then loses primacy although every single command was answered well within
 * takeover_ms. So one thread per node renews every primacy whose lease has less than half
 * left, on the store's primacy client (a connection nothing else uses, so a renewal queues
 * behind nobody), and logs a warning with the reason whenever a renewal comes late. With
 * renewals sent at half the lease, a round trip of up to half the lease (3/8 of takeover_ms)
 * keeps the lease unbroken, and up to 5/8 of takeover_ms keeps another node from taking over.
 *
 * It renews only under the epoch the main thread won, through cohort_election_renew() (one
 * fenced findAndModify each), and only while the main thread is alive (election.h), so it
 * neither claims primacy nor extends one the node lost or a wedged node holds.
 */
#ifndef COHORT_LEASE_H
#define COHORT_LEASE_H

#include <stdbool.h>
#include <stddef.h>

#include "node/primary/election.h"
#include "store/store.h"

typedef struct cohort_lease_keeper cohort_lease_keeper_t;

/* Starts the thread for the `n` elections (borrowed until cohort_lease_keeper_stop(); they
 * must outlive it) on the store's primacy client. Returns NULL with `error` set if the thread
 * cannot start. */
cohort_lease_keeper_t *cohort_lease_keeper_start(cohort_store_t *store,
                                                 cohort_election_t *const *elections, size_t n,
                                                 bson_error_t *error);

/* Stops and joins the thread, and frees it (NULL is fine). Call before stepping down, so no
 * renewal is in flight meanwhile. */
void cohort_lease_keeper_stop(cohort_lease_keeper_t *keeper);

/* Whether a renewal was late, and why (for the warning): it was sent well after it was due
 * (the thread was not scheduled in time: a busy machine, or the previous round trip took
 * long), or its reply came after the lease it was renewing had ended. Pure, for tests. */
typedef struct cohort_lease_lateness {
    int64_t sent_late_ms; /* how long after it was due the renewal was sent (>= 0) */
    int64_t rtt_ms;       /* the round trip */
    int64_t lapsed_ms;    /* how long the lease had ended when the reply came (>= 0) */
} cohort_lease_lateness_t;

/* Fills `out` for a renewal due at `due_ms` of a lease ending at `until_ms` (that lease is
 * `lease_ms` long), sent at `sent_ms` and answered at `received_ms` (all monotonic). Late: sent
 * more than a quarter of the lease after it was due, or answered after the lease ended. */
bool cohort_lease_renewal_late(int64_t due_ms, int64_t until_ms, int64_t lease_ms,
                               int64_t sent_ms, int64_t received_ms,
                               cohort_lease_lateness_t *out);

#endif
