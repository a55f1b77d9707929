/*
 * leases.h - external workers, the HTTP API's `work` scope (leases.c): their entries in `nodes`,
 * claims with a lease, heartbeats that extend it, outcomes and releases fenced on the claim,
 * and the primary's sweep of the leases that ran out.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_LEASES_H
#define COHORT_STORE_LEASES_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/outcomes.h"

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

#endif
