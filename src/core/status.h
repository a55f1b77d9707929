/*
 * status.h - the states of a task, named once: the `status` field of a task document
 * (docs/SCHEMA.md), the counts of `cohortctl status`, the metrics' `status` label and the
 * maintenance's purges all spell them from here.
 *
 *   pending -> claimed -> succeeded | failed | timed_out      (claimed -> pending on a retry,
 *                                                             a stall or a given-back claim)
 *   pending -> cancelled                                      (an operator's `cohortctl cancel`)
 *
 * succeeded, failed, timed_out and cancelled are final: a task in them never runs again
 * (unless an operator retries it) and retention purges it.
 */
#ifndef COHORT_STATUS_H
#define COHORT_STATUS_H

#include <stdbool.h>

typedef enum cohort_task_status {
    COHORT_STATUS_PENDING = 0,
    COHORT_STATUS_CLAIMED,
    COHORT_STATUS_SUCCEEDED,
    COHORT_STATUS_FAILED,
    COHORT_STATUS_TIMED_OUT,
    COHORT_STATUS_CANCELLED,
    COHORT_STATUS_COUNT /* not a status: how many there are */
} cohort_task_status_t;

/* The names, indexed by cohort_task_status_t, NULL-terminated. Static. */
extern const char *const cohort_status_names[];

/* The name of `status` ("pending", ...); "unknown" for a value out of the enum. */
const char *cohort_status_name(cohort_task_status_t status);

/* The status named `name`; false if it names none. */
bool cohort_status_parse(const char *name, cohort_task_status_t *status);

/* True for succeeded, failed, timed_out and cancelled: the task never runs again. */
bool cohort_status_is_final(cohort_task_status_t status);

#endif
