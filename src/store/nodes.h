/*
 * nodes.h - the `nodes` collection and the cluster clock (nodes.c): a node's ping with its
 * identity, liveness touches, expiry of nodes and external workers, the peers of a service,
 * the server's time, and the writes on a node_id's runs (one process per node_id), whose
 * entries' shape is runs.h's.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_NODES_H
#define COHORT_STORE_NODES_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"
#include "store/runs.h"

typedef struct cohort_node_info {
    const char *node_id;
    const char *host;
    int64_t pid;
    const char *version;   /* its release, written as `version` and `release` */
    int64_t schema;        /* the schema version it writes (0: not published) */
    int64_t feature_level; /* the highest feature level it knows (0: not published) */
    int64_t level_in_use;  /* the cluster's level it follows (0: not read yet) */
    int64_t started_at_ms; /* cluster clock; 0: not written (the clock is not synced yet) */
    const char *const *services; /* the services it hosts (may be NULL) */
    const int64_t *workers;      /* their worker counts */
    /* Per service (may be NULL): the NULL-terminated kinds its handler declares (handler ABI
     * 3), or NULL for a handler that takes every kind; written as kinds: {service: [...]}. */
    const char *const *const *kinds;
    size_t n_services;
    const char *run_id;   /* this process's run (NULL: not recorded; tools and tests) */
    int64_t run_since_ms; /* server time at which the run started */
    /* The run stands back for another live process with its node_id (node/runs.h): its ping
     * writes only its own runs.<id> entry, so the document keeps showing the other process
     * (host, pid, seen_at: the node's liveness) and cohortctl nodes shows the clash. */
    bool standing_back;
    /* Published with the identity (may be NULL / -1): each service's live settings as this
     * node runs them (node/live_settings.h) and its database round trip's p99 in ms. */
    const bson_t *settings;
    int64_t db_rtt_p99_ms;
    int64_t db_rtt_p50_ms; /* -1: none yet */
    bool clock_synced;     /* then clock_skew_ms: its wall clock minus the server's, in ms */
    int64_t clock_skew_ms;
} cohort_node_info_t;

/* Upserts the node's document with seen_at = the server's $currentDate and reads it back:
 * *server_ms is the server's time during the call. With node->run_id, also refreshes the
 * run's entry, and *other (may be NULL) receives the freshest other run of the same node_id
 * recorded there (run_id "" if none). A run standing back writes only its entry (and
 * *server_ms is its seen_at). */
bool cohort_store_ping_node(cohort_store_t *store, mongoc_client_t *client,
                            const cohort_node_info_t *node, const bson_t *stats,
                            int64_t *server_ms, bool *expired, cohort_node_run_t *other,
                            bson_error_t *error);

/* A bare liveness ping (seen_at, and runs.<run_id>.seen_at if run_id is not NULL, = server
 * time) between the main thread's pings (node/heartbeat.c). */
bool cohort_store_touch_node(cohort_store_t *store, mongoc_client_t *client, const char *node_id,
                             const char *run_id, bson_error_t *error);

/* After a ping reported *expired: clears the mark and records the re-registration. */
bool cohort_store_reregister_node(cohort_store_t *store, mongoc_client_t *client,
                                  const char *node_id, bson_error_t *error);

/* Primary maintenance: nodes not seen since `cutoff_ms` (but seen in the last day) are
 * expired: their claimed tasks in `service`'s queue go back to pending at once, and they are
 * marked expired so that they learn it when they ping again. */
bool cohort_store_expire_nodes(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, int64_t cutoff_ms, int64_t *nodes_expired,
                               int64_t *released, bson_error_t *error);

/* How many cohortd nodes other than `node_id` host `service` and pinged since `since_ms`
 * (server time): the primary's peers, which decide whether primary_task_count applies. */
bool cohort_store_count_peers(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              const char *node_id, int64_t since_ms, int64_t *peers,
                              bson_error_t *error);

/* Primary maintenance: external workers (leases.c) whose alive_until passed before `now_ms`
 * are marked expired (their claims end with their leases). */
bool cohort_store_expire_workers(cohort_store_t *store, mongoc_client_t *client, int64_t now_ms,
                                 int64_t *expired, bson_error_t *error);

/* The server's current time, from the localTime of the hello (or legacy isMaster) reply. */
bool cohort_store_server_time(cohort_store_t *store, mongoc_client_t *client, int64_t *server_ms,
                              bson_error_t *error);

/* ---- the runs of a node_id in its document (the entries' shape: runs.h) ----------------- */

/* The server's time now, and the freshest run of `node_id` other than `run_id` that its
 * document records (run_id "" if none, or no document). */
bool cohort_store_other_run(cohort_store_t *store, mongoc_client_t *client, const char *node_id,
                            const char *run_id, int64_t *server_ms, cohort_node_run_t *other,
                            bson_error_t *error);

/* Removes every run entry of `node_id`: a new run does so once it found none of them alive. */
bool cohort_store_forget_runs(cohort_store_t *store, mongoc_client_t *client,
                              const char *node_id, bson_error_t *error);

/* Removes the entry of `run_id` (a clean shutdown): the next run need not wait for it. */
bool cohort_store_end_run(cohort_store_t *store, mongoc_client_t *client, const char *node_id,
                          const char *run_id, bson_error_t *error);

#endif
