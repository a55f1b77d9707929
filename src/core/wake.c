/*
 * wake.c - a helper thread's sleep that its owner can cut short (see wake.h).
 */
#include "core/wake.h"

#include <time.h>

#include "core/clock.h"

void cohort_wake_init(cohort_wake_t *w)
{
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &attr);
    pthread_condattr_destroy(&attr);
    w->done = false;
    w->poked = false;
}

void cohort_wake_destroy(cohort_wake_t *w)
{
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
}

bool cohort_wake_sleep_until(cohort_wake_t *w, int64_t until_ms)
{
    pthread_mutex_lock(&w->lock);
    int64_t ms = until_ms - cohort_clock_monotonic_ms();
    if (!w->done && !w->poked && ms > 0) {
        struct timespec at;
        clock_gettime(CLOCK_MONOTONIC, &at);
        int64_t ns = at.tv_nsec + (ms % 1000) * 1000000;
        at.tv_sec += ms / 1000 + ns / 1000000000;
        at.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&w->cond, &w->lock, &at);
    }
    w->poked = false;
    bool go_on = !w->done;
    pthread_mutex_unlock(&w->lock);
    return go_on;
}

void cohort_wake_poke(cohort_wake_t *w)
{
    pthread_mutex_lock(&w->lock);
    w->poked = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void cohort_wake_stop(cohort_wake_t *w)
{
    pthread_mutex_lock(&w->lock);
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}
