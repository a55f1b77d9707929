/*
 * election.h - per-service primacy: claim or renew it once per tick, and know at any moment
 * whether this node may act as primary.
 *
 * Acting as primary needs a lease, measured on this node's monotonic clock from the moment
 * the winning command was sent: lease = takeover_ms - guard. Other nodes may take over only
 * once the config document's last_active (server time) is takeover_ms old on the cluster
 * clock, which is never earlier than the lease's end as long as clock errors stay below the
 * guard; clock samples with a larger error are rejected (see clock.h). So a primary that is
 * paused, partitioned or slow stops acting before anyone else can start: the epoch it acted
 * under is never shared.
 */
#ifndef COHORT_ELECTION_H
#define COHORT_ELECTION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

typedef struct cohort_election {
    const char *service; /* borrowed */
    const char *node_id; /* borrowed */
    int64_t takeover_ms;
    int64_t tick_ms; /* declared with the lease, so operators' tools know the cluster's tick */
    bool primary; /* main thread only: this node believes it holds primacy */
    _Atomic int64_t epoch;          /* epoch of the held primacy, 0 if none */
    _Atomic int64_t lease_until_ms; /* monotonic; 0 if none */
    cohort_batch_state_t batches;   /* main thread: as of the last renewal or takeover */
    bson_t settings;                /* main thread: the document's live settings, as last read */
    bson_t pause, block;            /* main thread: its pause and block switches, likewise */
    _Atomic uint64_t leader_changes; /* times this node became primary or stopped being it */
    /* Main thread: the last read found no config document (dropped, or the database lost
     * it): the node recreates it (node.c). */
    bool document_missing;
    int64_t highest_epoch; /* main thread: the largest epoch seen in the document */
} cohort_election_t;

void cohort_election_init(cohort_election_t *election, const char *service, const char *node_id,
                          int64_t takeover_ms);

/* The guard kept between the end of a lease and the earliest takeover by another node. */
int64_t cohort_election_guard_ms(int64_t takeover_ms);

/* The largest clock-sample round trip that keeps the clock error inside the guard. */
int64_t cohort_election_max_rtt_ms(int64_t takeover_ms);

/* One election round: renew held primacy, or read the document and, if its primary is gone
 * (null, this node, or silent for longer than the lease it declared), take it. Every
 * renewal and takeover declares this node's takeover_ms as the lease (lease_ms) in the same
 * write as last_active, and a takeover waits for the lease the current primary declared:
 * so a live change of takeover_ms cannot make two nodes disagree about when a primary may
 * be replaced. Logs every change of role. Returns false on a database error (the lease then
 * simply runs out). */
bool cohort_election_tick(cohort_election_t *election, cohort_store_t *store,
                          mongoc_client_t *client, bson_error_t *error);

/* Renews the lease held under the current epoch, from another thread while the main thread
 * is busy in handler code (see keepalive.h). Touches only the lease. Returns
 * whether it was renewed; false also on a database error. */
bool cohort_election_renew_from_helper(cohort_election_t *election, cohort_store_t *store,
                                       mongoc_client_t *client);

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
