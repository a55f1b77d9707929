/*
 * kinds.c - a handler that declares the task kinds it serves (handler ABI 3), for the
 * scheduling tests: it serves "email" and "sms" (and, as every handler does, tasks without
 * a kind). process_task succeeds at once and counts its calls per kind; a test reads the
 * counts through the exported kinds_handler_calls(kind) (kind NULL: tasks without a kind;
 * any other kind: the calls for kinds it should never have been given).
 */
#include <stdatomic.h>
#include <string.h>

#include <cohort/handler.h>

static _Atomic long long email_calls, sms_calls, kindless_calls, other_calls;

COHORT_HANDLER_EXPORT long long kinds_handler_calls(const char *kind);
long long kinds_handler_calls(const char *kind)
{
    if (!kind)
        return atomic_load(&kindless_calls);
    if (strcmp(kind, "email") == 0)
        return atomic_load(&email_calls);
    if (strcmp(kind, "sms") == 0)
        return atomic_load(&sms_calls);
    return atomic_load(&other_calls);
}

static cohort_outcome_t process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)ctx;
    (void)state;
    const char *kind = cohort_task_kind(task);
    if (!kind)
        atomic_fetch_add(&kindless_calls, 1);
    else if (strcmp(kind, "email") == 0)
        atomic_fetch_add(&email_calls, 1);
    else if (strcmp(kind, "sms") == 0)
        atomic_fetch_add(&sms_calls, 1);
    else
        atomic_fetch_add(&other_calls, 1);
    return COHORT_TASK_SUCCEEDED;
}

static const char *const served[] = {"email", "sms", NULL};

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "kinds",
    .process_task = process,
    .kinds = served,
};
