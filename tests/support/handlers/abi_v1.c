/*
 * abi_v1.c - a handler built for handler ABI 1, as a plugin from the first release would be:
 * the loader must still accept it, and must not read the fields ABI 1 did not have (set here
 * as if the struct went on with unrelated bytes).
 */
#include <cohort/handler.h>

#include "test_handler.h"

static bool not_in_abi_1(cohort_ctx_t *ctx, void *state, cohort_batch_t *batch)
{
    (void)ctx;
    (void)state;
    (void)batch;
    return true;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = 1,
    .name = "abi_v1",
    .process_task = test_handler_succeed,
    .on_tasks_completed = not_in_abi_1,
};
