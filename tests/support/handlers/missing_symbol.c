/*
 * missing_symbol.c - a shared object that looks like a handler but does not export the
 * `cohort_handler` symbol (its table has another name), for the loader's error tests.
 */
#include <cohort/handler.h>

static cohort_outcome_t process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)ctx;
    (void)state;
    (void)task;
    return COHORT_TASK_SUCCEEDED;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler_misspelt = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "missing_symbol",
    .process_task = process,
};
