/*
 * task_data.h - what several test handlers do with a task: read a number from its data and
 * sleep for a while. Static inline on purpose: each handler is a shared object built from its
 * one .c file (tests/CMakeLists.txt), so there is no library for them to share.
 */
#ifndef COHORT_TEST_TASK_DATA_H
#define COHORT_TEST_TASK_DATA_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

#include <cohort/handler.h>

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
