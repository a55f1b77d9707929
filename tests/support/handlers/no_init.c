/*
 * no_init.c - a minimal valid handler with no init(): it takes no options, so a service that
 * gives it some must be refused with the offending key and its line.
 */
#include <cohort/handler.h>

static cohort_outcome_t process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)ctx;
    (void)state;
    (void)task;
    return COHORT_TASK_SUCCEEDED;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "no_init",
    .process_task = process,
};
