/*
 * context.h - what the opaque handles of the handler ABI are inside the node.
 *
 * A context is made for each callback call (init, primary_work) or once per worker thread
 * (process_task), and lives on the caller's stack. It carries the database client of the
 * calling thread, so handler calls never share a client between threads.
 */
#ifndef COHORT_CONTEXT_H
#define COHORT_CONTEXT_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>

#include "cohort/handler.h"
#include "node/runtime.h"

struct cohort_ctx {
    cohort_service_t *service;
    mongoc_client_t *client; /* NULL: no database (e.g. --check-config) */
    bool fenced;             /* primary_work: writes require the primary lease */
    bson_t *pending_sets;    /* on_tasks_completed: cohort_set() writes, applied atomically
                              * with marking the batch completed; owned by the caller */
    char error[256];
};

struct cohort_task {
    bson_value_t id_value; /* the _id as claimed (an ObjectId unless written by hand) */
    char id[25];           /* 24 hex digits for an ObjectId, "" otherwise */
    bson_t data; /* a view into the claimed document */
    int attempt;
    /* `attempts` was not a whole number from 1 to INT32_MAX (written by hand): the claimed
     * value as it is, for the write that quarantines the task. A number: nothing to free. */
    bool attempts_bad;
    bson_value_t attempts_raw;
    /* Of those attempts, the ones not counted against max_attempts: cut short by a node
     * that may have died of another task (the task's `uncounted`, store/upkeep.c). */
    int uncounted;
    const char *kind;   /* views into the claimed document; NULL if none */
    const char *group;
    int64_t priority;
    int64_t timeout_ms; /* the task's task_timeout_ms (0: none); -1: the service's default */
    const char *status;     /* views into the document; NULL if it has none */
    const char *last_error;
    char error[512];
};

struct cohort_batch {
    int64_t id;
    int64_t succeeded, failed;
    mongoc_cursor_t *cursor;      /* over the succeeded tasks; owned */
    mongoc_cursor_t *unsuccessful; /* over the other finished ones; owned */
    cohort_task_t task;      /* the current one, a view into the cursor's document */
    bool failed_iterating;
    bson_error_t error;
};

/* Fills `task` from a task document (a view: valid while `doc` is). False, with the reason
 * in `error` (Cohort's error type, see errors.h; it becomes the task's error when a claimed
 * task is quarantined), if the document is not a well-formed task. */
bool cohort_task_from_doc(const bson_t *doc, cohort_task_t *task, int64_t *claimed_at,
                          bson_error_t *error);

/* The task's attempts that count against max_attempts and its retry backoff: `attempt`
 * less `uncounted`, at least 1. */
int cohort_task_counted_attempts(const cohort_task_t *task);

void cohort_ctx_init(cohort_ctx_t *ctx, cohort_service_t *service, mongoc_client_t *client,
                     bool fenced);

#endif
