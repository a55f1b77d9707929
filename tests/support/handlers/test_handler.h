/*
 * test_handler.h - what the test handlers share: a process_task that always succeeds (for the
 * handlers whose point is a defect elsewhere), reading a number from a task's data, and
 * sleeping. Static inline on purpose: each handler is a shared object built from its one .c
 * file (tests/CMakeLists.txt), so there is no library for them to share.
 */
#ifndef COHORT_TEST_HANDLER_H
#define COHORT_TEST_HANDLER_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

#include <cohort/handler.h>

/* A process_task callback that succeeds at once. */
static inline cohort_outcome_t test_handler_succeed(cohort_ctx_t *ctx, void *state,
                                                   cohort_task_t *task)
{
    (void)ctx;
    (void)state;
    (void)task;
    return COHORT_TASK_SUCCEEDED;
}

/* data.<key> as an int64 if it is a number, else fallback. */
static inline int64_t task_data_int(const bson_t *data, const char *key, int64_t fallback)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, data, key) && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return fallback;
}

/* Sleeps ms milliseconds (nothing if ms <= 0), resuming where a signal interrupted it. */
static inline void task_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

#endif
