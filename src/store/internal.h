/*
 * internal.h - what the files of src/store share and nothing else may include: the store's
 * fields and the helpers for collections, replies and fenced writes.
 *
 * The layers above see only the store's headers (store/store.h and one per store file).
 * These helpers are not part of the store's API: they are hidden from the daemon's exported
 * symbols (handlers resolve cohort_* against the executable), and their names start with
 * store_ rather than cohort_.
 *
 * Every helper that talks to the server returns false with `error` filled on failure, like
 * the public calls; none takes ownership of its arguments unless it says so.
 */
#ifndef COHORT_STORE_INTERNAL_H
#define COHORT_STORE_INTERNAL_H

#include <stdatomic.h>

#include "store/doc.h" /* STORE_INTERNAL, and the readers of documents and replies */
#include "store/store.h"

/* The types of claims.h, outcomes.h and queries.h that the shared helpers below take, by
 * their struct names: this header includes no header of a file that includes it, so the
 * include graph stays free of circles (tests/layers). */
struct cohort_claim_filter;
struct cohort_task_result;
struct cohort_status_counts;

struct cohort_store {
    mongoc_client_pool_t *pool;
    mongoc_client_t *primacy_client; /* popped from the pool for renewals alone; NULL until used */
    mongoc_uri_t *uri;
    char *database; /* owned */
    _Atomic uint64_t commands;
    _Atomic uint64_t command_errors;
    /* Claim attempts by this process's workers (claims.c): see cohort_store_stats_t. */
    _Atomic uint64_t claims_attempted, claims_empty, claim_candidates_lost;
};

/* ---- clients ------------------------------------------------------------------------------ */

/* A client outside the pool, for a thread that holds one connection for a long time: the
 * store's URI with its socketTimeoutMS raised to at least `min_socket_timeout_ms`, its commands
 * counted like the pool's. NULL with `error` set on failure; mongoc_client_destroy() it. */
STORE_INTERNAL mongoc_client_t *store_client_new(cohort_store_t *store,
                                                 int32_t min_socket_timeout_ms,
                                                 bson_error_t *error);

/* ---- collections (the caller destroys what these return) ------------------------------- */

/* The collection `name` of the store's database. */
STORE_INTERNAL mongoc_collection_t *store_collection(cohort_store_t *store,
                                                     mongoc_client_t *client, const char *name);

/* The service's queue: queue_<service>. */
STORE_INTERNAL mongoc_collection_t *store_queue(cohort_store_t *store, mongoc_client_t *client,
                                                const char *service);

/* ---- commands -------------------------------------------------------------------------- */

/* The writes store_write() makes. */
typedef enum store_write_kind {
    STORE_UPDATE_ONE,
    STORE_UPDATE_MANY,
    STORE_DELETE_ONE,
    STORE_DELETE_MANY,
} store_write_kind_t;

/* One write on `coll`: an update (`update`) or a delete (`update` unused), with `opts` (may
 * be NULL). *count (may be NULL) receives the reply's `count_field` ("matchedCount",
 * "modifiedCount", "deletedCount"; NULL: none), 0 on failure. */
STORE_INTERNAL bool store_write(mongoc_collection_t *coll, store_write_kind_t kind,
                                const bson_t *filter, const bson_t *update, const bson_t *opts,
                                const char *count_field, int64_t *count, bson_error_t *error);

/* updateMany on the service's queue; *modified (may be NULL) receives the count. */
STORE_INTERNAL bool store_update_queue(cohort_store_t *store, mongoc_client_t *client,
                                       const char *service, const bson_t *filter,
                                       const bson_t *update, int64_t *modified,
                                       bson_error_t *error);

/* updateOne on the service's queue: the write fenced by `filter`; *matched says whether a
 * task matched (and so whether the write applied). */
STORE_INTERNAL bool store_update_task(cohort_store_t *store, mongoc_client_t *client,
                                      const char *service, const bson_t *filter,
                                      const bson_t *update, bool *matched, bson_error_t *error);

/* findAndModify. `out` is written only when a document came back (*found true): it then
 * receives a copy the caller destroys. `sort` and `fields` may be NULL. With `return_new`,
 * the document after the update, else the one before. */
STORE_INTERNAL bool store_find_and_modify(mongoc_collection_t *coll, const bson_t *query,
                                          const bson_t *sort, const bson_t *update,
                                          const bson_t *fields, bool return_new, bool upsert,
                                          bson_t *out, bool *found, bson_error_t *error);

/* The same with the caller's `opts` (a remove, say): `out` as above. */
STORE_INTERNAL bool store_find_and_modify_with(mongoc_collection_t *coll, const bson_t *query,
                                               const mongoc_find_and_modify_opts_t *opts,
                                               bson_t *out, bool *found, bson_error_t *error);

/* The first document `filter` matches, copied into `doc` (initialised by the call whatever
 * happens; the caller destroys it). *found tells whether there was one. */
STORE_INTERNAL bool store_find_one(mongoc_collection_t *coll, const bson_t *filter, bson_t *doc,
                                   bool *found, bson_error_t *error);

/* Executes `bulk` and reads the count `field` of its reply (nInserted, nMatched) into
 * *count: a bulk write that failed part-way counts what it did too. */
STORE_INTERNAL bool store_bulk_execute(mongoc_bulk_operation_t *bulk, const char *field,
                                       int64_t *count, bson_error_t *error);

/* Runs a find and appends the _id of every document to the array `ids`, numbering from *n
 * (*n counts them). */
STORE_INTERNAL bool store_find_ids(mongoc_collection_t *coll, const bson_t *filter,
                                   const bson_t *opts, bson_t *ids, uint32_t *n,
                                   bson_error_t *error);

/* Appends the match of the service's config document to `filter`: its _id and, with
 * `node_id`, that node's primacy under `epoch` (the fence of every primary-only write). */
STORE_INTERNAL void store_service_filter(bson_t *filter, const char *service,
                                         const char *node_id, int64_t epoch);

/* An update of the service's config document; with `node_id`, fenced on its primacy under
 * `epoch`; `extra_filter` (may be NULL) narrows it further. *applied: a document matched. */
STORE_INTERNAL bool store_fenced_update(cohort_store_t *store, mongoc_client_t *client,
                                        const char *service, const char *node_id, int64_t epoch,
                                        const bson_t *extra_filter, const bson_t *update,
                                        bool *applied, bson_error_t *error);

/* ---- building task filters and updates -------------------------------------------------- */

/* Appends the array `key` of the `n` strings `values`, after a null if `with_null`. */
STORE_INTERNAL void store_append_strings(bson_t *doc, const char *key, const char *const *values,
                                         size_t n, bool with_null);

/* Appends {_id: {$in: ids}} (`ids` an array) to `filter`. */
STORE_INTERNAL void store_append_id_in(bson_t *filter, const bson_t *ids);

/* Appends the clause that leaves alone the tracked tasks of batches numbered `keep_from` or
 * later (not completed yet: their callback has not seen them): {$or: [{tracked: {$ne: true}},
 * {batch: {$lt: keep_from}}, {batch: {$exists: false}}]}. Purges and deletes use it. */
STORE_INTERNAL void store_append_outside_open_batches(bson_t *filter, int64_t keep_from);

/* Drains `cursor` into `fn` (listing.h's callback: false stops the walk), then destroys it;
 * false on a cursor error too. */
typedef bool (*store_doc_fn)(void *user, const bson_t *doc, bson_error_t *error);
STORE_INTERNAL bool store_walk_cursor(mongoc_cursor_t *cursor, store_doc_fn fn, void *user,
                                      bson_error_t *error);

/* A find on `coll` (destroyed by the call) with `opts` (may be NULL), walked into `fn` as
 * store_walk_cursor() does. */
STORE_INTERNAL bool store_walk_find(mongoc_collection_t *coll, const bson_t *filter,
                                    const bson_t *opts, store_doc_fn fn, void *user,
                                    bson_error_t *error);

/* ---- reading errors (documents and replies: doc.h) ---------------------------------------- */

/* A task id given as text (24 hex digits) into *oid; false with `error` (COHORT_DOMAIN_USAGE,
 * naming the id) if it is not one. */
STORE_INTERNAL bool store_task_oid(const char *id, bson_oid_t *oid, bson_error_t *error);

/* Whether a failed write hit a unique index (E11000). */
STORE_INTERNAL bool store_is_duplicate_key(const bson_error_t *error);

/* {status: claimed, not checked in since cutoff_ms, no external lease}: the stalled-task
 * reset's filter (upkeep.c), also counted by doctor.c. The caller destroys it. */
STORE_INTERNAL bson_t *store_stalled_filter(int64_t cutoff_ms);

/* ---- shared by claims, outcomes, counts, upkeep (defined in claims.c, outcomes.c, queries.c,
 * upkeep.c) */

/* Appends to `update` the $push of `entry` onto the task's history, which keeps the last
 * COHORT_HISTORY_MAX entries. */
STORE_INTERNAL void store_append_history_push(bson_t *update, const bson_t *entry);

/* Sends the claimed tasks matching `filter` back to pending with `reason` as their
 * last_error and without their group lock: a claim lost by its node (expired, restarted,
 * stalled) or an external worker's lease that ran out. Unlike an unclaim, the attempt stays
 * counted, except under the suspect rule (`suspects`: a node's claims, which it may have died
 * of): there only a suspect's is, and every other task becomes a suspect, its attempt
 * recorded as `uncounted` (upkeep.c). *released (may be NULL) counts them. */
STORE_INTERNAL bool store_release_claims(cohort_store_t *store, mongoc_client_t *client,
                                         const char *service, const bson_t *filter,
                                         const char *reason, bool suspects, int64_t *released,
                                         bson_error_t *error);

/* cohort_store_claim_tasks() with a lease: an external worker's claim (leases.c) ends at
 * `lease_until_ms` (cluster clock) unless extended; 0 for a node's claim. */
STORE_INTERNAL bool store_claim_tasks(cohort_store_t *store, mongoc_client_t *client,
                                      const char *service, const char *node_id, int64_t now_ms,
                                      int64_t lease_until_ms,
                                      const struct cohort_claim_filter *filter, size_t max,
                                      bson_t *claimed, size_t *n, const char *token,
                                      bson_error_t *error);

/* {_id, status: claimed, claimed_by: node, attempts: attempt}: the claim still held.
 * Returns a new document the caller destroys. */
STORE_INTERNAL bson_t *store_held_claim(const bson_value_t *id, const char *node_id,
                                        int32_t attempt);

/* Appends to `update` the $set, $unset, $currentDate and history $push that record the
 * outcome `result` of attempt `attempt` run by `node_id` (outcomes.c). */
STORE_INTERNAL void store_finish_update(bson_t *update, const char *node_id, int32_t attempt,
                                        const struct cohort_task_result *result);

/* The update that gives a claim back untouched: pending, the attempt not counted, no lock,
 * token or lease; with `coalesce_key` (may be NULL) the task holds it for coalescing again
 * (claims.c; a new document to destroy). */
STORE_INTERNAL bson_t *store_unclaim_update(const char *coalesce_key);

/* Claim order: priority descending, then run_at, then _id (a new document to destroy). */
STORE_INTERNAL bson_t *store_claim_sort(void);

/* Counts tasks by status with one aggregation: all of them, or those matching `match`
 * (may be NULL). */
STORE_INTERNAL bool store_count_by_status(cohort_store_t *store, mongoc_client_t *client,
                                          const char *service, const bson_t *match,
                                          struct cohort_status_counts *counts,
                                          bson_error_t *error);

#endif
/* Ends a cursor: true unless it failed (then `error` says why); destroys it either way. */
STORE_INTERNAL bool store_cursor_done(mongoc_cursor_t *cursor, bson_error_t *error);

