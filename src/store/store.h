/*
 * store.h - every MongoDB read and write Cohort makes, in one place: the store layer's API.
 *
 * Collections (see docs/SCHEMA.md):
 *   services        one config document per service: primacy, epoch, last_active
 *   nodes           one document per node: identity and its last ping (server time)
 *   queue_<service> the service's tasks
 *
 * One file per collection or concern implements it: client.c (the pool, command counting),
 * services.c, primacy.c, nodes.c, insert.c, claims.c, outcomes.c, upkeep.c, batches.c,
 * data.c, queries.c, operator.c; internal.h holds what they share and no other layer
 * includes it.
 *
 * A store owns a client pool; a thread pops a client for as long as it runs and passes it
 * to every call. Every call returns false and fills `error` (Cohort's one error type: the
 * driver's domain and code for a database failure) and none aborts. Strings and documents
 * passed in stay the caller's; what a call hands back is said at the call. Commands are
 * counted through libmongoc's APM callbacks.
 */
#ifndef COHORT_STORE_H
#define COHORT_STORE_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "core/taskopts.h"

#define COHORT_HISTORY_MAX 10 /* runs kept per task */

/* ---- client.c: the store and its client pool -------------------------------------------- */

typedef struct cohort_store cohort_store_t;

typedef struct cohort_store_stats {
    uint64_t commands;       /* commands started */
    uint64_t command_errors; /* commands that failed */
    /* Contention at the queue head (claims.c): claim attempts (a findAndModify, or one round
     * of a batch claim), those that claimed nothing, and a batch round's candidates another
     * claimer took between its find and its update. A findAndModify that loses its first
     * candidate to another claimer is retried inside the server, which these do not see. */
    uint64_t claims_attempted;
    uint64_t claims_empty;
    uint64_t claim_candidates_lost;
} cohort_store_stats_t;

/* Connects lazily (libmongoc connects on first use). Applies short default timeouts unless
 * the URI sets its own; copies what it keeps of its arguments. Returns NULL with `error` set
 * for a malformed URI or when out of memory. Destroy the store (NULL is fine) after every
 * client popped from it is pushed back. */
cohort_store_t *cohort_store_new(const char *uri, const char *database, const char *appname,
                                 bson_error_t *error);
void cohort_store_destroy(cohort_store_t *store);

/* A client for the calling thread; give it back with cohort_store_push(). */
mongoc_client_t *cohort_store_pop(cohort_store_t *store);
void cohort_store_push(cohort_store_t *store, mongoc_client_t *client);

/* The connection kept for primacy renewal alone (node/primary/lease.c's thread): a client of the
 * pool that nothing else uses, so a renewal never waits behind the tick's, the workers' or a
 * cursor's commands for a connection. Owned by the store: popped on the first call, pushed
 * back by cohort_store_destroy(). One thread at a time may use it. */
mongoc_client_t *cohort_store_primacy_client(cohort_store_t *store);

cohort_store_stats_t cohort_store_stats(const cohort_store_t *store);

/* ---- services.c: the service's config document ------------------------------------------ */

/* Creates the service's config document (if missing) and the queue's indexes. Idempotent. */
bool cohort_store_ensure_service(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, bson_error_t *error);

/* The same for a document that went missing while nodes ran (a dropped collection or
 * database, a restore): created with epoch = `epoch_floor`, above every epoch handed out
 * before (node.c: the cluster clock), so the next primary's epoch is new. Idempotent. */
bool cohort_store_recreate_service(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, int64_t epoch_floor,
                                   bson_error_t *error);

/* Reads the service's config document into `doc` (initialised by this call; destroy it).
 * *found is false if the service has no document yet. */
bool cohort_store_read_service(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, bson_t *doc, bool *found,
                               bson_error_t *error);

/* Reads the config documents of `n` services in one find: the node's one read of a tick for
 * all the services it does not lead. docs[i] is initialised by this call (destroy each) and
 * found[i] says whether names[i] has a document. Generic data and schedules are left out. */
bool cohort_store_read_services(cohort_store_t *store, mongoc_client_t *client,
                                const char *const *names, size_t n, bson_t *docs, bool *found,
                                bson_error_t *error);

/* Sets (value >= 0) or removes (value < 0) settings.<key> in the service's config document.
 * *found is false if the service has no document. */
bool cohort_store_set_setting(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              const char *key, int64_t value, bool *found, bson_error_t *error);

/* The service's switches: `which` is "pause" (the owner's) or "block" (the operator's), for
 * `kind` ("*": the whole service). With `on`, sets pause.<kind> / block.<kind> to {at: server
 * time, reason (may be NULL), by}; otherwise removes it. *found is false if the service has
 * no config document. */
bool cohort_store_set_switch(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *which, const char *kind, bool on, const char *reason,
                             const char *by, bool *found, bson_error_t *error);

/* Clears primacy if still held under `epoch` (a clean step-down), and any step-down request.
 * `asked_by` (may be NULL: a shutdown) is who requested it (`cohortctl step-down`): it is
 * recorded as stepped_down {node_id, epoch, by, at: server time}, which keeps this node from
 * taking the primacy back at once (node/primary/election.c). */
bool cohort_store_step_down(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *node_id, int64_t epoch, const char *asked_by,
                            bson_error_t *error);

/* Asks the primary `node_id` of `service` to step down on its next tick: sets step_down
 * {epoch, by, at: server time} if the document still names that primary under `epoch`
 * (*applied: it did). `withdraw` removes such a request instead (fenced the same way). */
bool cohort_store_request_step_down(cohort_store_t *store, mongoc_client_t *client,
                                    const char *service, const char *node_id, int64_t epoch,
                                    const char *by, bool withdraw, bool *applied,
                                    bson_error_t *error);

/* ---- primacy.c: the lease on primacy ---------------------------------------------------- */

typedef struct cohort_batch_state {
    int64_t open;     /* the batch tracked tasks join now */
    int64_t draining; /* the closed batch awaiting its callback, 0 if none */
} cohort_batch_state_t;

/* Renews primacy held under `epoch`: sets last_active to server time if the document still
 * names this node and epoch (one findAndModify), and declares `lease_ms`, the takeover time
 * the node holds itself to, in the same write (and its tick_ms, for tools). *renewed tells
 * whether it did; `doc` (initialised by the call; destroy it) receives the renewed document
 * (settings, switches, batch state), which saves the primary a read every tick. `doc` may be
 * NULL when only the lease matters (the lease thread's renewals). `queue_due` (0 or 1; -1
 * leaves it) writes the hint `queue_due`: whether the primary's last claim found due work,
 * which tells the secondaries whether to look at the queue at all (workers.h). */
bool cohort_store_renew_lease(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const char *node_id, int64_t epoch,
                              int64_t lease_ms, int64_t tick_ms, int queue_due, bool *renewed,
                              bson_t *doc, bson_error_t *error);

typedef struct cohort_takeover {
    bool taken;
    int64_t epoch;                /* the new epoch, if taken */
    char previous[129];           /* the previous primary's id, "" if none */
    cohort_batch_state_t batches; /* if taken */
} cohort_takeover_t;

/* Claims primacy if the primary is null, this node, or last active before `cutoff_ms`
 * (cluster clock, computed from the lease the current primary declared), and only if that
 * declaration is still `seen_lease_ms` (0: none declared; < 0: whatever it is), so a renewal
 * that changed it in the meantime makes the takeover match nothing. Increments the epoch and
 * declares `lease_ms` (if > 0) for the new primacy. One atomic findAndModify. */
bool cohort_store_take_lease(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *node_id, int64_t cutoff_ms, int64_t seen_lease_ms,
                             int64_t lease_ms, cohort_takeover_t *result, bson_error_t *error);

/* ---- nodes.c: nodes and the cluster clock ----------------------------------------------- */

#define COHORT_RUN_ID_LEN 32 /* a run id: 128 random bits in hex */

typedef struct cohort_node_info {
    const char *node_id;
    const char *host;
    int64_t pid;
    const char *version;   /* its release, written as `version` and `release` */
    int64_t schema;        /* the schema version it writes (0: not published) */
    int64_t started_at_ms; /* cluster clock; 0: not written (the clock is not synced yet) */
    const char *const *services; /* the services it hosts (may be NULL) */
    const int64_t *workers;      /* their worker counts */
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

/* One run (process) of a node_id, as its document records it (runs.c). */
typedef struct cohort_node_run {
    char run_id[COHORT_RUN_ID_LEN + 1]; /* "": none */
    char host[256];
    int64_t pid;
    int64_t since_ms;   /* server time at which it started */
    int64_t seen_at_ms; /* server time of its last ping (or heartbeat touch) */
} cohort_node_run_t;

/* Upserts the node's document with seen_at = the server's $currentDate and reads it back:
 * *server_ms is the server's time during the call. With node->run_id, also refreshes the
 * run's entry, and *other (may be NULL) receives the freshest other run of the same node_id
 * recorded there (run_id "" if none). A run standing back writes only its entry (and
 * *server_ms is its seen_at). */
bool cohort_store_ping_node(cohort_store_t *store, mongoc_client_t *client,
                            const cohort_node_info_t *node, const bson_t *stats,
                            int64_t *server_ms, bool *expired, cohort_node_run_t *other,
                            bson_error_t *error);

/* ---- runs.c: one process per node_id ------------------------------------------------------ */

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

/* ---- insert.c: creating tasks ----------------------------------------------------------- */

/* cohort_new_task_t (core/taskopts.h): the task to create, its options applied. */

/* How many partitions a queue's tasks are spread over: 1, so every task is in partition 0 and
 * nothing claims by partition. A sharded queue (docs/SCALING.md) would shard on
 * {partition, _id} and let each node claim in its own partition first. */
#define COHORT_TASK_PARTITIONS 1

/* The partition of a new task among `partitions` (>= 1): the tasks that share a key whose
 * uniqueness the server enforces (unique_key, idempotency_key, coalesce_key, group lock) share
 * a partition, chosen by a hash of that key, since a unique index of a sharded collection
 * holds only within one shard key prefix; a task without one is placed by its id. The first
 * of unique_key, idempotency_key, coalesce_key and group decides (docs/SCALING.md: a task
 * with two of them keeps only the first one's guarantee across partitions). Written into
 * every task document as `partition` (int32). Pure. */
int32_t cohort_store_task_partition(const cohort_new_task_t *task, const bson_oid_t *oid,
                                    int32_t partitions);

/* Inserts one task; `oid` (may be NULL) receives its id. With a unique_key that exists
 * already, returns false with *exists true (and nothing inserted). With a coalesce_key that
 * a pending task holds, that task takes the new data instead (*coalesced true, `oid` its id). */
bool cohort_store_insert_task(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const cohort_new_task_t *task, bson_oid_t *oid,
                              bool *exists, bool *coalesced, bson_error_t *error);

/* Inserts `count` copies of `task` with unordered bulk writes of at most 10,000 documents
 * each, so memory stays bounded. *inserted counts what the server acknowledged. */
bool cohort_store_insert_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const cohort_new_task_t *task, int64_t count,
                               int64_t *inserted, bson_error_t *error);

/* Inserts `n` different tasks (none with a coalesce key: those go one by one through
 * cohort_store_insert_task) in one unordered bulk write; *inserted counts what the server
 * acknowledged. The caller bounds `n` and the tasks' size. */
bool cohort_store_insert_task_list(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, const cohort_new_task_t *tasks, size_t n,
                                   int64_t *inserted, bson_error_t *error);

/* ---- watch.c: change streams on the queues' inserts ------------------------------------ */

/* A change stream on the inserts into one service's queue, on a client of its own (made
 * from the store's URI, its commands counted in the store's stats). One thread uses it. */
typedef struct cohort_store_watch cohort_store_watch_t;

/* Opens the stream on `service`'s queue: each getMore waits up to `await_ms` on the server
 * (maxAwaitTimeMS) and the client's socket timeout is raised above that. With `resume_after`
 * (may be NULL; copied), it starts after that resume token, so inserts made while no stream
 * was open are seen too. NULL with `error` set when the server refuses (change streams need a
 * replica set, or the local server's oplog) or cannot be reached. Close it with
 * cohort_store_watch_close(). */
cohort_store_watch_t *cohort_store_watch_open(cohort_store_t *store, const char *service,
                                              int64_t await_ms, const bson_t *resume_after,
                                              bson_error_t *error);

/* The stream's next insert: *inserted tells whether there was one. Without an event left
 * from the last batch it sends one getMore, which the server holds up to await_ms (the local
 * test server answers at once). False with `error` set when the stream broke (after the
 * driver's own single resume attempt): close it and open another. */
bool cohort_store_watch_next(cohort_store_watch_t *watch, bool *inserted, bson_error_t *error);

/* The stream's resume token, copied into `token` (initialised by the call); false (and
 * `token` empty) if it has none yet, or none worth resuming after: the queue was dropped or
 * renamed, which ends the stream (cohort_store_watch_next() said so with an error). */
bool cohort_store_watch_resume_token(cohort_store_watch_t *watch, bson_t *token);

/* Closes the stream (killCursors) and its client (NULL is fine). */
void cohort_store_watch_close(cohort_store_watch_t *watch);

/* ---- claims.c: claiming tasks ----------------------------------------------------------- */

typedef enum cohort_suspects {
    COHORT_SUSPECTS_ANY = 0,
    COHORT_SUSPECTS_SKIP,
    COHORT_SUSPECTS_ONLY,
} cohort_suspects_t;

/* Which pending tasks a node may claim, beyond "due": kinds it serves, kinds paused or
 * blocked, groups known to be running. Empty lists filter nothing. */
typedef struct cohort_claim_filter {
    const char *const *served_kinds; /* NULL: every kind; else exactly these kinds, */
    size_t n_served_kinds;
    bool served_no_kind; /* and, if set, the tasks without a kind (a handler's `kinds`) */
    const char *const *stopped_kinds; /* paused or blocked */
    size_t n_stopped_kinds;
    const char *const *busy_groups;
    size_t n_busy_groups;
    /* Claim only in partition `partition` (see cohort_store_task_partition()); false (the
     * default): in any partition, and the claim query does not name the field. */
    bool by_partition;
    int32_t partition;
    /* Load-aware claiming (node/work/capacity.h). weight_room > 0: the first task claimed weighs
     * at most weight_room (a task without `weight`, written before weights existed, weighs
     * 1), or anything with weight_any_first (a node holding nothing); the further tasks of a
     * batch claim (prefetched for idle workers) weigh 1: weighted work is claimed only by a
     * worker about to start it. 0: no limit (external workers). */
    int64_t weight_room;
    bool weight_any_first;
    /* Suspects (docs/SCHEMA.md `suspect`: tasks sent back with a node that may have died of
     * one of them) run alone, so that the next crash names its culprit. COHORT_SUSPECTS_ANY
     * (the default: external workers) claims them like any task; _SKIP (a node's claim beside
     * other tasks) leaves them, and a batch claim that found one among its candidates sets
     * *suspect_seen (may be NULL); _ONLY claims nothing else (a node's claim made alone). */
    cohort_suspects_t suspects;
    bool *suspect_seen;
} cohort_claim_filter_t;

/* A task document's weight: its `weight` field in [1, COHORT_WEIGHT_MAX], 1 if it has none
 * (written before weights existed) or a bad one. */
int64_t cohort_store_task_weight(const bson_t *task);

/* Whether a task document is a suspect (its `suspect` field is true). */
bool cohort_store_task_suspect(const bson_t *task);

/* A claim token and its NUL. Each claim call marks what it claims with one: a node's is an
 * ObjectId's 24 hex digits (cohort_store_new_claim_token(): unique, cheap, not secret); an
 * external worker's is 32 hex digits from getrandom() (core/token.h: its lease token's
 * secret). */
#define COHORT_CLAIM_TOKEN_SIZE 33

/* A fresh claim token into `token`. */
void cohort_store_new_claim_token(char token[COHORT_CLAIM_TOKEN_SIZE]);

/* Claims the first due pending task in claim order (priority descending, then run_at, then
 * _id): pending -> claimed by `node_id` under `token` (NULL: a fresh one), claimed_at and
 * heartbeat_at = server time, attempts + 1, its coalesce key released. *claimed is
 * initialised by this call; if a task was claimed, *found is true and the caller must
 * bson_destroy(claimed). One findAndModify.
 *
 * On an error the claim may still have landed (the server applied it and the reply was lost):
 * the caller that wants such a task back at once, rather than after stall_timeout_ms, keeps
 * the token and calls cohort_store_release_token() once the database answers again. */
bool cohort_store_claim_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *node_id, int64_t now_ms,
                             const cohort_claim_filter_t *filter, bson_t *claimed, bool *found,
                             const char *token, bson_error_t *error);

/* Claims up to `max` tasks (max <= COHORT_CLAIM_BATCH_MAX) the same way, in three commands
 * whatever `max` is: find the candidates, claim those still pending with one updateMany under
 * `token` (NULL: a fresh one), read back what the token won. `claimed[0..*n)` are initialised
 * by the call (in claim order); the caller destroys them. On an error, as for
 * cohort_store_claim_task(). */
bool cohort_store_claim_tasks(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const char *node_id, int64_t now_ms,
                              const cohort_claim_filter_t *filter, size_t max, bson_t *claimed,
                              size_t *n, const char *token, bson_error_t *error);

/* Gives back, untouched (pending again, the attempt not counted), every task still claimed
 * by `node_id` under `token`: the claims of a call that failed after they landed. *released
 * (may be NULL) receives how many. One updateMany. */
bool cohort_store_release_token(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, const char *node_id, const char *token,
                                int64_t *released, bson_error_t *error);

/* Gives a claim back untouched (pending again, the attempt not counted): a grouped task whose
 * group turned out to be busy, or a batch's task not started at shutdown. A task with a
 * `coalesce_key` (may be NULL) takes it back for coalescing, unless a newer pending task holds
 * it by now. */
bool cohort_store_unclaim(cohort_store_t *store, mongoc_client_t *client, const char *service,
                          const bson_value_t *id, const char *node_id, int32_t attempt,
                          const char *coalesce_key, bson_error_t *error);

/* ---- groups.c: group locks -------------------------------------------------------------- */

/* A claimed task of a group takes the group's lock: group_lock = `group` on the task, under
 * a unique index, so at most one claimed task per group exists. *locked is false if another
 * task of the group holds it (nothing changed then). */
bool cohort_store_lock_group(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const bson_value_t *id, const char *node_id, int32_t attempt,
                             const char *group, bool *locked, bson_error_t *error);

/* The groups whose lock is held right now (at most `max`; `groups` receives strdup()ed names
 * the caller frees). One query on the group_lock index. On failure (the database, or out of
 * memory) *n is 0 and nothing is left to free. */
bool cohort_store_busy_groups(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              char **groups, size_t max, size_t *n, bson_error_t *error);

/* ---- outcomes.c: finishing tasks -------------------------------------------------------- */

typedef enum cohort_finish {
    COHORT_FINISH_SUCCEEDED,
    COHORT_FINISH_RETRY,
    COHORT_FINISH_FAILED,
    COHORT_FINISH_TIMED_OUT, /* final, never retried */
} cohort_finish_t;

typedef struct cohort_task_result {
    cohort_finish_t finish;
    const char *error;       /* NULL on success */
    int64_t retry_at_ms;     /* for COHORT_FINISH_RETRY: when it becomes due again */
    int64_t started_at_ms;   /* the claim time */
    int64_t ended_at_ms;     /* cluster clock */
    bool crashed;            /* the attempt died with its worker process (history: "crashed") */
    const bson_t *output;    /* NULL, or stored as the task's `result` (an external worker's) */
    const char *api_token;   /* NULL, or the name of the API token that reported it (an
                                external worker's outcome): recorded in the history */
} cohort_task_result_t;

/* Writes the outcome of the attempt `attempt` of task `id` (any _id type: an ObjectId, or a
 * value written by hand or by another program), conditional on this node still holding the
 * claim. *applied is false if the claim was lost (nothing written). */
bool cohort_store_finish_task_value(cohort_store_t *store, mongoc_client_t *client,
                                    const char *service, const bson_value_t *id,
                                    const char *node_id, int32_t attempt,
                                    const cohort_task_result_t *result, bool *applied,
                                    bson_error_t *error);

/* The same, for a claimed task whose `attempts` is not a whole int32 (written by hand): the
 * filter matches the claimed value as it is, and the history records attempt 0. */
bool cohort_store_finish_task_raw(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const bson_value_t *id,
                                  const char *node_id, const bson_value_t *attempts,
                                  const cohort_task_result_t *result, bool *applied,
                                  bson_error_t *error);

/* One outcome of a bulk write. */
typedef struct cohort_task_outcome {
    bson_value_t id;
    int32_t attempt;
    cohort_task_result_t result;
} cohort_task_outcome_t;

/* Writes `n` outcomes in one bulk write (each conditional on the claim, as above).
 * *applied counts those written; the rest had lost their claim. */
bool cohort_store_finish_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const char *node_id,
                               const cohort_task_outcome_t *outcomes, size_t n, size_t *applied,
                               bson_error_t *error);

/* ---- leases.c: external workers (the HTTP API's work scope) ----------------------------- */

/* What a lease token names: the service, the task, the attempt its claim raised, and the
 * claim token of that claim (node/http/api_parse.c writes and reads it as text). */
typedef struct cohort_lease_ref {
    char service[65];
    char task_id[25]; /* 24 hex digits */
    int32_t attempt;
    char claim[COHORT_CLAIM_TOKEN_SIZE];
} cohort_lease_ref_t;

/* Registers or refreshes the external worker `name` in `nodes` ({kind: "external"},
 * seen_at = server time, alive_until, the services it claims from). A name that a cohortd
 * node uses is refused (*clash true, COHORT_CODE_CONFLICT). */
bool cohort_store_touch_worker(cohort_store_t *store, mongoc_client_t *client, const char *name,
                               const char *service, int64_t alive_until_ms, bool *clash,
                               bson_error_t *error);

/* Claims up to `max` tasks as cohort_store_claim_tasks() does, for the external worker
 * `worker`, each with lease_expires_at = `lease_until_ms` (cluster clock). */
bool cohort_store_claim_leased(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const char *worker, int64_t now_ms,
                               int64_t lease_until_ms, const cohort_claim_filter_t *filter,
                               size_t max, bson_t *claimed, size_t *n, const char *token,
                               bson_error_t *error);

/* A heartbeat: lease_expires_at = `lease_until_ms`, heartbeat_at = server time, `progress`
 * (may be NULL) stored on the task, if the lease still holds (one findAndModify). *held says
 * whether it did; *cancel_requested is the task's cancel_requested flag. */
bool cohort_store_extend_lease(cohort_store_t *store, mongoc_client_t *client,
                               const cohort_lease_ref_t *ref, int64_t lease_until_ms,
                               const bson_t *progress, bool *held, bool *cancel_requested,
                               bson_error_t *error);

/* What became of the claim a lease names. */
typedef struct cohort_lease_state {
    bool found;      /* the task exists */
    bool held;       /* still claimed under this claim */
    bool same_claim; /* the task's attempt and claim token are the lease's, and it is an
                        external claim (it has lease_expires_at): held, or its outcome was
                        written (a replay) */
    cohort_task_status_t status;
    char claimed_by[129];
    int64_t claimed_at_ms;
    char coalesce_key[1025];
} cohort_lease_state_t;

/* Reads the task the lease names (one find by _id). */
bool cohort_store_read_lease(cohort_store_t *store, mongoc_client_t *client,
                             const cohort_lease_ref_t *ref, cohort_lease_state_t *state,
                             bson_error_t *error);

/* The outcome stored under the claim the lease names, as {result, last_error} (each only if
 * the task has it; empty if the task is not under that claim): what a replayed outcome is
 * compared with. `outcome` is initialised by the call; the caller destroys it. */
bool cohort_store_read_outcome(cohort_store_t *store, mongoc_client_t *client,
                               const cohort_lease_ref_t *ref, bson_t *outcome,
                               bson_error_t *error);

/* Gives back every task still claimed by external worker `worker` under claim `token` as its
 * release would (pending, the attempt not counted, its coalesce key taken back; each write
 * fenced on the claim): the claim's reply never reached the worker. *given counts them. */
bool cohort_store_give_back_claim(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const char *worker, const char *token,
                                  int64_t *given, bson_error_t *error);

/* Writes the outcome of the leased attempt (run by `worker`, for the history), conditional on
 * the lease still holding: *applied is false, and nothing changed, if it does not. */
bool cohort_store_finish_leased(cohort_store_t *store, mongoc_client_t *client,
                                const cohort_lease_ref_t *ref, const char *worker,
                                const cohort_task_result_t *result, bool *applied,
                                bson_error_t *error);

/* Gives the leased claim back untouched (pending, the attempt not counted; the task takes
 * `coalesce_key` back, may be NULL), if the lease still holds. */
bool cohort_store_release_lease(cohort_store_t *store, mongoc_client_t *client,
                                const cohort_lease_ref_t *ref, const char *coalesce_key,
                                bool *applied, bson_error_t *error);

/* Primary maintenance: claims whose lease ran out before `now_ms` (cluster clock) go back to
 * pending, the attempt counted, with a "crashed" history entry. */
bool cohort_store_expire_leases(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, int64_t now_ms, int64_t *released,
                                bson_error_t *error);

/* ---- upkeep.c: check-ins and primary maintenance ---------------------------------------- */

/* Check-in: heartbeat_at = server time for these tasks, where this node still holds them. */
bool cohort_store_checkin_tasks(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, const char *node_id, const bson_oid_t *ids,
                                size_t n_ids, bson_error_t *error);

/* Primary maintenance for tasks written by hand or by other programs: pending tasks without
 * run_at become due now (server time; index-served). With `check_types`, pending tasks whose
 * attempts or run_at have the wrong type (which would make every claim fail or never match)
 * are also failed with the reason; that query reads every pending task, so it runs only
 * when a claim failed on the server or every few minutes. */
bool cohort_store_repair_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, bool check_types, int64_t *made_due,
                               int64_t *quarantined, bson_error_t *error);

/* Primary maintenance: pending tasks whose not_after has passed get the service's boost added
 * to their priority, once (promoted_at records it). One updateMany. */
bool cohort_store_promote_overdue(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, int64_t now_ms, int64_t boost,
                                  int64_t *promoted, bson_error_t *error);

/* Sets every task of `service` claimed by `node_id` back to pending (a node starting under
 * an id an earlier process used). */
bool cohort_store_release_claims(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *node_id, int64_t *released,
                                 bson_error_t *error);

/* Resets claimed tasks whose last check-in is older than `cutoff_ms` to pending. */
bool cohort_store_reset_stalled(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, int64_t cutoff_ms, int64_t *reset,
                                bson_error_t *error);

/* Deletes up to `limit` tasks in `status` finished before `cutoff_ms`, leaving tracked tasks
 * of batches numbered `keep_batch_from` or later (not completed yet) alone. Two commands:
 * find the ids (bounded), delete them. */
bool cohort_store_purge(cohort_store_t *store, mongoc_client_t *client, const char *service,
                        const char *status, int64_t cutoff_ms, int64_t keep_batch_from,
                        int64_t limit, int64_t *deleted, bson_error_t *error);

/* Tracked tasks that no callback would see join the open batch `open`: unfinished or
 * unacknowledged-succeeded ones in one of the few batches numbered just below
 * `completed_before` (written there by a writer that read batch_seq before the close) or
 * without a batch (written by another program). One updateMany. */
bool cohort_store_adopt_stragglers(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, int64_t completed_before, int64_t open,
                                   int64_t *moved, bson_error_t *error);

/* ---- batches.c: tracked batches --------------------------------------------------------- */

/* The batch numbers in a config document (read, renewed or taken over). */
void cohort_store_parse_batch_state(const bson_t *doc, cohort_batch_state_t *state);

/* Reads the batch numbers from the service's config document. */
bool cohort_store_batch_state(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, cohort_batch_state_t *state,
                              bson_error_t *error);

typedef struct cohort_batch_counts {
    int64_t unfinished; /* pending or claimed */
    int64_t succeeded;
    int64_t failed; /* every other final status: failed, timed_out, cancelled */
} cohort_batch_counts_t;

/* Counts the batch's tracked tasks by state with one aggregation. */
bool cohort_store_count_batch(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              int64_t batch, cohort_batch_counts_t *counts, bson_error_t *error);

/* Closes the open batch `batch` (new tracked tasks join batch + 1) if this node is still
 * primary under `epoch` and nothing is draining. *closed tells whether it did. */
bool cohort_store_close_batch(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              const char *node_id, int64_t epoch, int64_t batch, bool *closed,
                              bson_error_t *error);

/* Marks the succeeded tasks of `batch` acknowledged (idempotent). */
bool cohort_store_acknowledge_batch(cohort_store_t *store, mongoc_client_t *client,
                                    const char *service, int64_t batch, bson_error_t *error);

/* A cursor over the tracked tasks of `batch` in creation order (caller destroys it): the
 * succeeded ones, or (`succeeded` false) those in any other final status (status.h), with
 * their status and last_error. */
mongoc_cursor_t *cohort_store_batch_cursor(cohort_store_t *store, mongoc_client_t *client,
                                           const char *service, int64_t batch, bool succeeded);

/* Marks the draining batch `batch` completed, and applies `data_sets` (a document of
 * generic-data keys to set; a null value unsets) in the same atomic write, if this node is
 * still primary under `epoch`. *completed tells whether it did: exactly one call per batch
 * can succeed. */
bool cohort_store_complete_batch(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *node_id, int64_t epoch,
                                 int64_t batch, const cohort_batch_counts_t *counts,
                                 const bson_t *data_sets, bool *completed, bson_error_t *error);

/* ---- data.c: generic data --------------------------------------------------------------- */

/* Reads data.<key> of the service's config document. *found is false if unset. */
bool cohort_store_get_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, bson_value_t *value, bool *found,
                           bson_error_t *error);

/* Sets (value != NULL) or unsets data.<key>. With `node_id` non-NULL the write is fenced:
 * it applies only while the document names that node as primary under `epoch`; *applied
 * says whether it did. */
bool cohort_store_set_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, const bson_value_t *value, const char *node_id,
                           int64_t epoch, bool *applied, bson_error_t *error);

/* Adds `delta` to the integer data.<key> (an absent key counts from 0) in one findAndModify
 * and puts the new value in *result. Fenced like cohort_store_set_data. *applied is false,
 * and nothing changed, if the document did not match: no such service, not primary under
 * `epoch`, a value that is not an int32/int64, or a sum that would overflow an int64. */
bool cohort_store_inc_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, int64_t delta, const char *node_id, int64_t epoch,
                           int64_t *result, bool *applied, bson_error_t *error);

/* Sets data.<key> to `value` (NULL: unsets it) in one findAndModify, only if it holds
 * `expected` now (NULL: only if it is absent), compared as the aggregation $eq does (whole
 * values; numbers by value whatever their type). Fenced like cohort_store_set_data.
 * *applied says whether it did. */
bool cohort_store_cas_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, const bson_value_t *expected,
                           const bson_value_t *value, const char *node_id, int64_t epoch,
                           bool *applied, bson_error_t *error);

/* ---- schedules.c: the state of recurring tasks (schedules.<ID> in the config document) -- */

/* One schedule's state as the config document keeps it. */
typedef struct cohort_schedule_state {
    bool found;            /* the document has schedules.<ID> */
    bool damaged;          /* ... but its last_slot is not a date (edited by hand) */
    char series[320];      /* the cron expression and zone its last slot belongs to */
    int64_t last_slot_ms;  /* every slot up to this one is settled (created or skipped) */
    int64_t last_epoch;    /* the epoch that recorded it */
    bool has_last_task;
    bson_oid_t last_task;  /* the task of the latest slot created (or found existing) */
    int64_t last_task_slot_ms;
    bool paused;           /* cohortctl schedules pause: slots are skipped, not created */
    int64_t created, existed, skipped; /* counts since the schedule was first seen */
} cohort_schedule_state_t;

/* Reads schedules.<id> out of a config document (no I/O). */
void cohort_store_schedule_state(const bson_t *service_doc, const char *id,
                                 cohort_schedule_state_t *state);

/* A primary's record of slots settled: the last slot moves from `from` (as read: the write
 * is a compare-and-set on it) to `to_slot_ms`, with counts added. */
typedef struct cohort_schedule_record {
    const char *id;
    const char *series;
    bool from_found;       /* the state existed, with a date as last_slot, when read ... */
    int64_t from_slot_ms;  /* ... with this last slot */
    int64_t to_slot_ms;
    const bson_oid_t *last_task; /* NULL: unchanged */
    int64_t last_task_slot_ms;
    int64_t created, existed, skipped;
} cohort_schedule_record_t;

/* Writes `record` fenced on the primacy of `node_id` under `epoch` and on the last slot
 * read. *applied is false if either moved on (the write changed nothing). */
bool cohort_store_record_schedule(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const char *node_id, int64_t epoch,
                                  const cohort_schedule_record_t *record, bool *applied,
                                  bson_error_t *error);

/* Sets schedules.<id>.paused (an operator's switch, not fenced). *found is false if the
 * service's document has no state for `id` (no primary has run that schedule yet). */
bool cohort_store_pause_schedule(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *id, bool paused, bool *found,
                                 bson_error_t *error);

/* The _id of the task holding `unique_key` into *oid; *found false if none does. */
bool cohort_store_find_unique_task(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, const char *unique_key, bson_oid_t *oid,
                                   bool *found, bson_error_t *error);

/* ---- operator.c: an operator's changes to tasks (cohortctl retry, cancel, delete) ------- */

/* How many task ids a bulk change finds, and changes with one command, at a time: its memory
 * is one page's whatever the queue's size. */
#define COHORT_OPERATOR_PAGE 1000

typedef enum cohort_task_action {
    COHORT_ACTION_RETRY,  /* failed, timed_out or cancelled -> pending, attempts 0 */
    COHORT_ACTION_CANCEL, /* pending -> cancelled (final) */
    COHORT_ACTION_DELETE, /* any final status -> gone */
} cohort_task_action_t;

/* Whether `action` applies to a task in `status`. */
bool cohort_task_action_applies(cohort_task_action_t action, cohort_task_status_t status);

typedef struct cohort_task_change {
    cohort_task_action_t action;
    const char *by; /* who asked, for the history ("cohortctl USER@HOST") */
    int64_t now_ms; /* server time, for the history */
    bool dry_run;   /* count what would change; change nothing */
    /* A selection's progress (may be NULL): called after each page with the count so far. */
    void (*progress)(void *arg, int64_t changed);
    void *progress_arg;
} cohort_task_change_t;

typedef struct cohort_task_selection {
    cohort_task_status_t status; /* one the action applies to */
    const char *kind, *group;    /* NULL: any */
    int64_t finished_before_ms;  /* > 0: only tasks whose finished_at is earlier */
    int64_t limit;               /* > 0: at most this many tasks */
} cohort_task_selection_t;

/* Applies `change` to the task `id` (24 hex digits), conditional on the status it was read
 * in. Refusals return false with `error` in COHORT_DOMAIN_USAGE, naming the reason: no such
 * task (COHORT_CODE_NOT_FOUND); a status the action does not apply to, a tracked task whose
 * batch callback has not run yet (for delete), or a task that changed meanwhile
 * (COHORT_CODE_CONFLICT). A database failure keeps the driver's domain. With dry_run, true
 * means it would apply. */
bool cohort_store_change_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              const cohort_task_change_t *change, const char *id,
                              bson_error_t *error);

/* A cancel asked for a task that is running (claimed): sets its cancel_requested flag, with a
 * "cancel_requested" history entry by `by`, in one findAndModify on {_id, status: claimed}.
 * The claimer learns it from its next heartbeat (an external worker's) and decides; the claim
 * and its outcome are untouched. *requested is false if the task is not claimed (any more);
 * `claimed_by` (may be NULL with len 0) receives its claimer. */
bool cohort_store_request_cancel(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const char *id, const char *by,
                                  int64_t now_ms, bool *requested, char *claimed_by,
                                  size_t claimed_by_len, bson_error_t *error);

/* Applies `change` to every task `selection` matches, COHORT_OPERATOR_PAGE at a time (find
 * the ids, then one update or delete of those still in the status). *changed counts the
 * tasks changed (with dry_run: those that match now). Tracked tasks of a batch whose
 * callback has not run yet are never deleted. */
bool cohort_store_change_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const cohort_task_change_t *change,
                               const cohort_task_selection_t *selection, int64_t *changed,
                               bson_error_t *error);

/* ---- queries.c: counts and listings ----------------------------------------------------- */

typedef struct cohort_status_counts {
    int64_t pending, claimed, succeeded, failed, timed_out, cancelled;
    int64_t other; /* any other status (written by hand) */
} cohort_status_counts_t;

/* The count of `status` in `counts` (the field of that name). */
int64_t cohort_status_count(const cohort_status_counts_t *counts, cohort_task_status_t status);

/* Counts the service's tasks by status and by `field` ("kind" or "group"): one aggregation
 * whose rows stream to `row` (value NULL: tasks without the field), so memory stays constant
 * whatever the number of groups. */
typedef void (*cohort_count_row_fn)(void *user, const char *value, const char *status, int64_t n);
bool cohort_store_count_by(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *field, cohort_count_row_fn row, void *user,
                           bson_error_t *error);

/* Counts the tasks in each of `n` statuses with one count command each (an index count on
 * {status}). */
bool cohort_store_count_statuses(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *const *statuses, size_t n,
                                 int64_t *counts, bson_error_t *error);

/* Reads one task by id (24 hex digits) into `doc` (initialised; destroy it). */
bool cohort_store_read_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *id, bson_t *doc, bool *found, bson_error_t *error);

/* A cursor over the service's tasks (status NULL: any) in claim order, at most `limit`. */
mongoc_cursor_t *cohort_store_list_tasks(cohort_store_t *store, mongoc_client_t *client,
                                         const char *service, const char *status, int64_t limit);

/* Counts the service's tasks by status with one aggregation. */
bool cohort_store_count_tasks(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              cohort_status_counts_t *counts, bson_error_t *error);

#endif
