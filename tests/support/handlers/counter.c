/*
 * counter.c - a handler for cluster/data_totals: counts its tasks two ways, the way
 * docs/HANDLERS.md ("Counting: at least once, or exact") says to and not to.
 *
 *   process_task         cohort_data_inc("runs", 1) before its work (sleep data.sleep_ms),
 *                        so a task run again after a crash counts again: at least once.
 *   on_tasks_completed   adds cohort_batch_succeeded() to "total" with cohort_get +
 *                        cohort_set: the callback's writes are applied with the batch's
 *                        completion, exactly once, so "total" is exact.
 *
 * No options.
 */
#include <cohort/handler.h>

#include "test_handler.h"

static cohort_outcome_t process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)state;
    cohort_error_t error;
    if (!cohort_data_inc(ctx, "runs", 1, NULL, &error)) {
        cohort_task_set_error(task, "counter: %s", error.message);
        return COHORT_TASK_RETRY;
    }
    task_sleep_ms(task_data_int(cohort_task_data(task), "sleep_ms", 0));
    return COHORT_TASK_SUCCEEDED;
}

static bool completed(cohort_ctx_t *ctx, void *state, cohort_batch_t *batch)
{
    (void)state;
    bson_value_t total;
    cohort_error_t error;
    int64_t before = 0;
    if (cohort_get(ctx, "total", &total, &error)) {
        before = total.value_type == BSON_TYPE_INT64 ? total.value.v_int64 : 0;
        bson_value_destroy(&total);
    } else if (error.code != COHORT_OK) {
        cohort_ctx_set_error(ctx, "counter: %s", error.message);
        return false;
    }
    bson_value_t v = {.value_type = BSON_TYPE_INT64,
                      .value.v_int64 = before + cohort_batch_succeeded(batch)};
    return cohort_set(ctx, "total", &v, &error);
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "counter",
    .process_task = process,
    .on_tasks_completed = completed,
};
