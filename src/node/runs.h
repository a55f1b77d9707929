/*
 * runs.h - one process per node_id.
 *
 * A node_id names one running process: its claims (claimed_by), its primacy (primary) and its
 * nodes document are all keyed by it. Two live processes with one node_id would renew each
 * other's primacy under new epochs every tick and share every claim. So each process draws a
 * random run id and records it in the node's document (store/runs.c):
 *   - at start-up, a run that finds another run of its node_id alive (its check-in younger
 *     than the liveness bound, liveness.h) is refused with an error naming that run. A run
 *     whose check-in is recent but does not advance (the process died a moment ago) is
 *     watched until it is stale, so restarts after a crash still start. A run's entry is
 *     kept fresh from its registration on (the heartbeat thread touches it while the main
 *     thread's first tick prepares the services), so "stale" means dead, not slow to start;
 *   - later (a clone started where the first's check-ins could not be seen, e.g. while it was
 *     stopped), every ping sees the other run: both log an ERROR naming the clash every tick,
 *     and the newer run (the later start, on the server's clock) stands back: it claims
 *     neither primacy nor tasks until the other is gone: until its entry is removed (a clean
 *     shutdown). A run that only stops checking in may be in a database outage with tasks
 *     still running, so the newer run keeps standing back (logged once) for good.
 * A clean shutdown removes its run's entry, so an orderly restart never waits.
 */
#ifndef COHORT_RUNS_H
#define COHORT_RUNS_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"
#include "store/runs.h"

typedef struct cohort_run {
    char run_id[COHORT_RUN_ID_LEN + 1];
    const char *node_id; /* borrowed */
    int64_t since_ms;    /* server time at which this run passed its start-up check */
    bool started;        /* the start-up check passed */
    bool clash;          /* main thread: another live run of this node_id at the last ping */
    bool standing_back;  /* main thread: ...and this run is the newer: it claims nothing */
} cohort_run_t;

typedef enum cohort_run_start {
    COHORT_RUN_STARTED, /* no other live run: this one is registered */
    COHORT_RUN_REFUSED, /* another live run of the node_id: `error` names it */
    COHORT_RUN_RETRY,   /* the database failed (`error`): try again on the next tick */
} cohort_run_start_t;

/* A new run of `node_id` (borrowed) with a fresh random id. */
void cohort_run_init(cohort_run_t *run, const char *node_id);

/* The start-up check (see above). Blocks while it watches a recent run that may be dead: at
 * most about `liveness_ms`, polling every `poll_ms`. */
cohort_run_start_t cohort_run_start(cohort_run_t *run, cohort_store_t *store,
                                    mongoc_client_t *client, int64_t liveness_ms,
                                    int64_t poll_ms, bson_error_t *error);

/* After each ping: `other` is the freshest other run the node document records, `server_ms`
 * the ping's server time. Sets clash and standing_back, and logs the clash (ERROR, every
 * tick) or its end. */
void cohort_run_judge(cohort_run_t *run, const cohort_node_run_t *other, int64_t server_ms,
                      int64_t liveness_ms);

/* A clean shutdown: removes this run's entry (logged, not fatal, if that fails). */
void cohort_run_end(cohort_run_t *run, cohort_store_t *store, mongoc_client_t *client);

#endif
