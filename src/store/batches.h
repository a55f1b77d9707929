/*
 * batches.h - tracked batches (batches.c): their numbers in the config document, counting a
 * batch's tasks, closing, acknowledging and completing it, and the cursor its callback reads.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_BATCHES_H
#define COHORT_STORE_BATCHES_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

typedef struct cohort_batch_state {
    int64_t open;     /* the batch tracked tasks join now */
    int64_t draining; /* the closed batch awaiting its callback, 0 if none */
} cohort_batch_state_t;

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

#endif
