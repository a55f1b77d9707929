/*
 * outcome.c - a handler that does what each task's data tells it, for the outcome tests:
 *
 *   { "outcome": N }      return N from process_task (default 0, succeeded); any int, so a
 *                         test can return garbage such as 42
 *   { "error": "text" }   report "text" with cohort_task_set_error()
 *   { "sleep_ms": N }     sleep N ms first (to act while the task is running)
 *
 * It counts its process_task calls; tests read the count through the exported function
 * outcome_handler_calls() (dlsym on the already loaded object), to prove that a task was
 * or was not handed to the handler.
 */
#include <stdatomic.h>

#include <cohort/handler.h>

#include "test_handler.h"

static _Atomic long long calls;

COHORT_HANDLER_EXPORT long long outcome_handler_calls(void);
long long outcome_handler_calls(void)
{
    return atomic_load(&calls);
}

static cohort_outcome_t process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)ctx;
    (void)state;
    atomic_fetch_add(&calls, 1);
    const bson_t *data = cohort_task_data(task);
    task_sleep_ms(task_data_int(data, "sleep_ms", 0));
    bson_iter_t it;
    if (bson_iter_init_find(&it, data, "error") && BSON_ITER_HOLDS_UTF8(&it))
        cohort_task_set_error(task, "%s", bson_iter_utf8(&it, NULL));
    return (cohort_outcome_t)task_data_int(data, "outcome", COHORT_TASK_SUCCEEDED);
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "outcome",
    .process_task = process,
};
