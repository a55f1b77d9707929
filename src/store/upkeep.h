/*
 * upkeep.h - check-ins and the primary's upkeep of a queue (upkeep.c): repairing tasks written by
 * hand, promoting overdue ones, releasing and resetting claims, purging finished tasks,
 * adopting tracked tasks that missed their batch.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_UPKEEP_H
#define COHORT_STORE_UPKEEP_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

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

#endif
