/*
 * election.h - per-service primacy: claim it or renew it on every tick, renew it between
 * ticks too (node/primary/lease.c), and know at any moment whether this node may act as primary.
 *
 * Acting as primary needs a lease, measured on this node's monotonic clock from the moment
 * the winning command was sent: lease = takeover_ms - guard. Other nodes may take over only
 * once the config document's last_active (server time) is takeover_ms old on the cluster
 * clock, which is never earlier than the lease's end as long as clock errors stay below the
 * guard; clock samples with a larger error are rejected (see clock.h). So a primary that is
 * paused, partitioned or slow stops acting before anyone else can start: the epoch it acted
 * under is never shared.
 *
 * Every claim and every renewal is one atomic findAndModify: a renewal matches only
 * {primary: me, epoch: E} and a takeover always increments the epoch. Two threads renew: the
 * main thread in its election round, and the lease thread (lease.h) whenever less than half
 * of the lease is left, on a connection of its own, so a tick made long by a slow database
 * does not let the lease run out. Both may extend the lease, never shorten it, and each
 * extension rests on its own successful renewal: the server wrote last_active at or after
 * the renewal was sent, so no takeover can match before sent + takeover_ms (minus the clock
 * error), whichever thread sent it and in whatever order the replies arrive. The lease thread
 * renews only while the main thread is alive (it started an election round or a handler
 * callback in the last 10 takeover periods), so a wedged node does not hold primacy forever.
 */
#ifndef COHORT_ELECTION_H
#define COHORT_ELECTION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/batches.h"
#include "store/store.h"

typedef struct cohort_election {
    const char *service; /* borrowed */
    const char *node_id; /* borrowed */
    _Atomic int64_t takeover_ms; /* set live by the main thread, read by the lease thread */
    _Atomic int64_t tick_ms; /* declared with the lease, so operators' tools know the tick */
    bool primary; /* main thread only: this node believes it holds primacy */
    _Atomic int64_t epoch;          /* epoch of the held primacy, 0 if none */
    _Atomic int64_t lease_until_ms; /* monotonic; 0 if none (or found lost by the lease thread) */
    _Atomic int64_t alive_until_ms; /* monotonic: the lease thread renews until then */
    cohort_batch_state_t batches;   /* main thread: as of the last renewal or takeover */
    bson_t settings;                /* main thread: the document's live settings, as last read */
    bson_t pause, block;            /* main thread: its pause and block switches, likewise */
    _Atomic uint64_t leader_changes; /* times this node became primary or stopped being it */
    /* Main thread: the last read found no config document (dropped, or the database lost
     * it): the node recreates it (node.c). */
    bool document_missing;
    int64_t highest_epoch; /* main thread: the largest epoch seen in the document */
    /* Main thread: the document's `queue_due` hint as last read (true when there is none):
     * whether the primary's last claim found due work. */
    bool queue_due;
    /* Main thread, set before each round: the hint a renewal writes (0 or 1; -1 writes none). */
    int due_hint;
    /* Main thread: spreading primacy over nodes (spread.h). The node's count of primacies
     * held, one counter shared by its services' elections (NULL: no spreading), and when this
     * node first found this primacy vacant (monotonic; 0: not vacant). */
    int64_t *node_primacies;
    int64_t vacant_since_ms;
} cohort_election_t;

void cohort_election_init(cohort_election_t *election, const char *service, const char *node_id,
                          int64_t takeover_ms);

/* The guard kept between the end of a lease and the earliest takeover by another node. */
int64_t cohort_election_guard_ms(int64_t takeover_ms);

/* The largest clock-sample round trip that keeps the clock error inside the guard. */
int64_t cohort_election_max_rtt_ms(int64_t takeover_ms);

/* The smallest takeover_ms in effect among `elections` (borrowed), or `fallback` if there are
 * none: the node-wide bounds follow it (liveness.h, heartbeat.h). Any thread (it reads the
 * atomic takeover_ms). */
int64_t cohort_election_min_takeover_ms(cohort_election_t *const *elections, size_t n,
                                        int64_t fallback);

/* One election round: renew held primacy, or look at the document and, if its primary is gone
 * (null, this node, or silent for longer than the lease it declared), take it. A secondary
 * looks at `doc`, the node's read of this tick (node.c reads the documents of all its
 * secondary services in one find; an empty `doc`: the document is missing), or, when `doc`
 * is NULL (no read this tick), does nothing, unless it lost primacy in this very round and
 * reads the document itself. Every
 * renewal and takeover declares this node's takeover_ms as the lease (lease_ms) in the same
 * write as last_active, and a takeover waits for the lease the current primary declared:
 * so a live change of takeover_ms cannot make two nodes disagree about when a primary may
 * be replaced. Logs every change of role. Returns false on a database error (the lease then
 * simply runs out). */
bool cohort_election_tick(cohort_election_t *election, cohort_store_t *store,
                          mongoc_client_t *client, const bson_t *doc, bson_error_t *error);

/* The main thread is making progress (an election round, a handler callback starting): the
 * lease thread may renew for 10 more takeover periods. Called by the main thread. */
void cohort_election_note_alive(cohort_election_t *election);

/* Whether the main thread showed life (see above) in the last 10 takeover periods: the lease
 * thread renews, and the heartbeat thread (heartbeat.h) touches the node, only while it did.
 * Safe from any thread. */
bool cohort_election_main_alive(const cohort_election_t *election);

/* When the lease thread should next renew (monotonic ms): once less than half of the lease
 * is left. 0 if there is nothing to renew (no primacy, lost, or the main thread is silent).
 * Safe from any thread. */
int64_t cohort_election_renew_due_ms(const cohort_election_t *election);

/* What one renewal from the lease thread found. */
typedef struct cohort_renewal {
    int64_t epoch;          /* the epoch it renewed, 0 if there was none to renew */
    bool renewed;           /* the document still named this node and epoch */
    int64_t sent_ms;        /* monotonic */
    int64_t received_ms;    /* monotonic */
    int64_t lease_until_ms; /* the lease before the renewal (0: lost) */
} cohort_renewal_t;

/* Renews the lease held under the current epoch from the lease thread (see lease.h), on that
 * thread's own client. Touches only the lease: on success extends it; if the document no
 * longer names this node and epoch, ends the lease at once (the main thread's next round
 * logs the loss). Returns false on a database error (the lease then runs out on its own). */
bool cohort_election_renew(cohort_election_t *election, cohort_store_t *store,
                           mongoc_client_t *client, cohort_renewal_t *out, bson_error_t *error);

/* True while primary with an unexpired lease. Safe from any thread. */
bool cohort_election_has_lease(const cohort_election_t *election);

/* The epoch under which this node may act now, or 0. Safe from any thread. */
int64_t cohort_election_epoch(const cohort_election_t *election);

/* The role name for log lines: "primary" while the lease holds, else "secondary". Safe
 * from any thread (modules below the service log with it instead of asking the service). */
const char *cohort_election_role(const cohort_election_t *election);

/* Frees what the election holds (its settings copy). */
void cohort_election_destroy(cohort_election_t *election);

/* Gives primacy up (clears it in the database if still held). */
void cohort_election_step_down(cohort_election_t *election, cohort_store_t *store,
                               mongoc_client_t *client);

#endif
