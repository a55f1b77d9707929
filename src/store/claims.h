/*
 * claims.h - claiming pending tasks (claims.c): the claim filter, one claim, batch claims, claim
 * tokens, and giving a claim back untouched. Group locks are groups.h's.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_CLAIMS_H
#define COHORT_STORE_CLAIMS_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

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
    /* Every task carries `weight` (schema migration 2 ran and the cluster's feature level is
     * 2 or more: store/migrate.h): the room is the plain range {weight: {$lte: room}}. False:
     * {weight: {$not: {$gt: room}}}, which also matches a task without one. */
    bool weight_always_set;
    /* Suspects (docs/SCHEMA.md `suspect`: tasks sent back with a node that may have died of
     * one of them) run alone, so that the next crash names its culprit. COHORT_SUSPECTS_ANY
     * (the default: external workers) claims them like any task; _SKIP (a node's claim beside
     * other tasks) leaves them, and a batch claim that found one among its candidates sets
     * *suspect_seen (may be NULL); _ONLY claims nothing else (a node's claim made alone). */
    cohort_suspects_t suspects;
    bool *suspect_seen;
    /* Spreading claimers over the queue head (node/work/workers.c): a batch claim's first
     * round passes over the first `skip` candidates of the top priority in claim order (at
     * most COHORT_CLAIM_SKIP_MAX; never into a lower priority while more of the top one are
     * due than it would take), so that claims made at the same time take different tasks
     * instead of racing for the same ones. 0 (the default): the head, strict claim order.
     * *lost (may be NULL) receives the candidates the call saw but others claimed first. */
    uint32_t skip;
    uint32_t *lost;
} cohort_claim_filter_t;

/* The most candidates a batch claim's first round passes over (cohort_claim_filter_t.skip). */
#define COHORT_CLAIM_SKIP_MAX 512

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

#endif
