/*
 * no_process.c - a handler without the required process_task callback, which the loader must
 * refuse at load time rather than crash on the first task.
 */
#include <cohort/handler.h>

static bool primary_work(cohort_ctx_t *ctx, void *state)
{
    (void)ctx;
    (void)state;
    return true;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "no_process",
    .primary_work = primary_work,
};
