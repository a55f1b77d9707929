/*
 * wake.c - a helper thread's sleep that its owner can cut short, starting a thread, draining
 * an eventfd (see wake.h).
 */
#include "core/wake.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"

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

bool cohort_thread_start(pthread_t *thread, void *(*main)(void *), void *arg, bool no_signals,
                         bson_error_t *error, const char *what_fmt, ...)
{
    sigset_t all, old;
    if (no_signals) {
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
    }
    int rc = pthread_create(thread, NULL, main, arg);
    if (no_signals)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        return true;
    char what[256];
    va_list ap;
    va_start(ap, what_fmt);
    vsnprintf(what, sizeof what, what_fmt, ap);
    va_end(ap);
    bson_set_error(error, COHORT_DOMAIN_SYSTEM, rc == ENOMEM ? COHORT_CODE_NO_MEMORY : COHORT_CODE_IO,
                   "cannot start %s: %s", what, strerror(rc));
    return false;
}

void cohort_eventfd_drain(int fd)
{
    uint64_t count;
    ssize_t r = read(fd, &count, sizeof count);
    (void)r;
}
