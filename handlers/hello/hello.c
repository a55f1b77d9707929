/* hello.c - a complete Cohort handler: the primary creates one task per tick,
 * every node greets whoever the task names. */
#include <stdio.h>
#include <cohort/handler.h>

static bool make_work(cohort_ctx_t *ctx, void *state)
{
    (void)state;
    bson_t *data = BCON_NEW("name", BCON_UTF8("world"));
    cohort_error_t error;
    bool ok = cohort_task_create(ctx, data, NULL, NULL, &error); /* tracked by default */
    if (!ok)
        cohort_ctx_set_error(ctx, "%s", error.message);
    bson_destroy(data);
    return ok;
}

static cohort_outcome_t greet(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)state;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cohort_task_data(task), "name") || !BSON_ITER_HOLDS_UTF8(&it)) {
        cohort_task_set_error(task, "data.name must be a string");
        return COHORT_TASK_FAILED; /* permanent: retrying cannot fix bad data */
    }
    cohort_log(ctx, COHORT_LOG_INFO, "hello, %s (task %s)", bson_iter_utf8(&it, NULL),
               cohort_task_id(task));
    return COHORT_TASK_SUCCEEDED;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "hello",
    .primary_work = make_work,
    .process_task = greet,
};
