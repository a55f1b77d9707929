/*
 * outcomes.h - finishing tasks (outcomes.c): the outcome of an attempt, written conditional on the
 * claim, one at a time or in one bulk write; and the task history each outcome extends.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_OUTCOMES_H
#define COHORT_STORE_OUTCOMES_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* The entries a task's `history` keeps: its last runs and operator events (each outcome,
 * release and change pushes one; the oldest fall off). */
#define COHORT_HISTORY_MAX 10

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

#endif
