/*
 * status.c - the table of task states (see status.h): one name per state, and which are
 * final. The order is the enum's, so a status indexes the table.
 */
#include "core/status.h"

#include <string.h>

const char *const cohort_status_names[] = {
    [COHORT_STATUS_PENDING] = "pending",     [COHORT_STATUS_CLAIMED] = "claimed",
    [COHORT_STATUS_SUCCEEDED] = "succeeded", [COHORT_STATUS_FAILED] = "failed",
    [COHORT_STATUS_TIMED_OUT] = "timed_out", [COHORT_STATUS_CANCELLED] = "cancelled",
    [COHORT_STATUS_COUNT] = NULL,
};

const char *cohort_status_name(cohort_task_status_t status)
{
    return (unsigned)status < COHORT_STATUS_COUNT ? cohort_status_names[status] : "unknown";
}

bool cohort_status_parse(const char *name, cohort_task_status_t *status)
{
    for (int i = 0; i < COHORT_STATUS_COUNT; i++) {
        if (strcmp(cohort_status_names[i], name) == 0) {
            *status = (cohort_task_status_t)i;
            return true;
        }
    }
    return false;
}

bool cohort_status_is_final(cohort_task_status_t status)
{
    return status == COHORT_STATUS_SUCCEEDED || status == COHORT_STATUS_FAILED ||
           status == COHORT_STATUS_TIMED_OUT || status == COHORT_STATUS_CANCELLED;
}
