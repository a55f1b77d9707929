/*
 * wake.h - a helper thread's sleep that its owner can cut short.
 *
 * The node's helper threads (node/primary/lease.c, node/heartbeat.c) sleep until their next
 * deadline on the monotonic clock, so a wall-clock jump neither wakes them early nor holds them
 * late, and stop as soon as their owner asks instead of after the sleep. This is the mutex, the
 * condition variable on CLOCK_MONOTONIC and the `done` flag they share, and the one way the
 * node starts a thread (cohort_thread_start()) and drains an eventfd that pokes its loop.
 */
#ifndef COHORT_WAKE_H
#define COHORT_WAKE_H

#include <bson/bson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cohort/handler.h" /* COHORT_PRINTF */

typedef struct cohort_wake {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;  /* under `lock`: the owner asked the thread to stop */
    bool poked; /* under `lock`: someone asked the thread to look again now */
} cohort_wake_t;

void cohort_wake_init(cohort_wake_t *wake);
void cohort_wake_destroy(cohort_wake_t *wake);

/* The thread: sleeps until monotonic `until_ms`, cohort_wake_poke() (also one made before the
 * call) or cohort_wake_stop(). Returns false once the thread is to stop (at once if it
 * already was). */
bool cohort_wake_sleep_until(cohort_wake_t *wake, int64_t until_ms);

/* Any thread: wakes the thread now, or makes its next sleep return at once. */
void cohort_wake_poke(cohort_wake_t *wake);

/* The owner: tells the thread to stop and wakes it (join it afterwards). */
void cohort_wake_stop(cohort_wake_t *wake);

/* Starts `thread` on `main(arg)`, with every signal blocked in it when `no_signals` (signals
 * then stay with the threads that handle them). On failure fills `error` (domain SYSTEM, code
 * NO_MEMORY or IO) with "cannot start " and `what_fmt`'s text, and returns false; the caller
 * still owns `arg`. */
bool cohort_thread_start(pthread_t *thread, void *(*main)(void *), void *arg, bool no_signals,
                         bson_error_t *error, const char *what_fmt, ...) COHORT_PRINTF(6, 7);

/* Reads an eventfd's counter back to zero (a nonblocking fd: nothing to read is no error). */
void cohort_eventfd_drain(int fd);

#endif
