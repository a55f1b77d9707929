/*
 * status.c - the task states (src/core/status.h): names as the database stores them
 * (docs/SCHEMA.md), round trips, and which states are final.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "core/status.h"

Test(status, names_are_the_stored_ones_and_round_trip)
{
    static const char *const stored[] = {"pending",   "claimed",  "succeeded",
                                         "failed",    "timed_out", "cancelled"};
    for (int i = 0; i < COHORT_STATUS_COUNT; i++) {
        cr_expect_str_eq(cohort_status_name((cohort_task_status_t)i), stored[i]);
        cohort_task_status_t back;
        cr_expect(cohort_status_parse(stored[i], &back));
        cr_expect_eq(back, i);
    }
    cr_expect_null(cohort_status_names[COHORT_STATUS_COUNT]);
    cohort_task_status_t none;
    cr_expect_not(cohort_status_parse("retry", &none), "retry is an outcome, not a status");
    cr_expect_str_eq(cohort_status_name(COHORT_STATUS_COUNT), "unknown");
}

Test(status, only_finished_states_are_final)
{
    cr_expect_not(cohort_status_is_final(COHORT_STATUS_PENDING));
    cr_expect_not(cohort_status_is_final(COHORT_STATUS_CLAIMED));
    cr_expect(cohort_status_is_final(COHORT_STATUS_SUCCEEDED));
    cr_expect(cohort_status_is_final(COHORT_STATUS_FAILED));
    cr_expect(cohort_status_is_final(COHORT_STATUS_TIMED_OUT));
    cr_expect(cohort_status_is_final(COHORT_STATUS_CANCELLED),
              "a cancelled task never runs again: purged, counted done in its batch");
}
