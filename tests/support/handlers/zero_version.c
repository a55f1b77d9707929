/*
 * zero_version.c - a handler whose abi_version was left at 0 (an uninitialised table), which
 * the loader must refuse: no ABI version 0 ever existed.
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
    .abi_version = 0,
    .name = "zero_version",
    .process_task = process,
};
