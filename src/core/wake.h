/*
 * wake.h - a helper thread's sleep that its owner can cut short.
 *
 * The node's helper threads (node/primary/lease.c, node/heartbeat.c) sleep until their next
 * deadline on the monotonic clock, so a wall-clock jump neither wakes them early nor holds them
 * late, and stop as soon as their owner asks instead of after the sleep. This is the mutex, the
 * condition variable on CLOCK_MONOTONIC and the `done` flag they share.
 */
#ifndef COHORT_WAKE_H
#define COHORT_WAKE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

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

#endif
