/*
 * internal_call.c - a handler that calls a function of the daemon that is not part of the
 * handler ABI (cohort_clock_monotonic_ms, from src/core/clock.h). cohortd exports only the
 * functions of cohort/handler.h, so loading it must fail with one line naming the function.
 */
#include <stdint.h>

#include <cohort/handler.h>

#include "test_handler.h"

/* Declared by hand, as a handler author reaching into the daemon would. */
int64_t cohort_clock_monotonic_ms(void);

static cohort_outcome_t process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)ctx;
    (void)state;
    (void)task;
    return cohort_clock_monotonic_ms() > 0 ? COHORT_TASK_SUCCEEDED : COHORT_TASK_FAILED;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "internal_call",
    .process_task = process,
};
