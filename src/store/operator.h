/*
 * operator.h - an operator's changes to tasks (operator.c; cohortctl retry, cancel, delete and the
 * API's): one task by id, or every task a selection matches, a page at a time.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_OPERATOR_H
#define COHORT_STORE_OPERATOR_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "store/store.h"

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

#endif
