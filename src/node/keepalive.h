/*
 * keepalive.h - primacy and registration kept alive through long handler callbacks.
 *
 * While the main thread runs handler code (primary_work, on_tasks_completed), it cannot
 * ping. A long callback would then get its node expired. So a helper thread touches the node
 * document every tick until the callback returns, for at most 10 takeover periods. Starting
 * it also tells the election that the main thread is alive, so the lease thread (lease.h)
 * renews primacy through the callback for those 10 periods too: a callback that takes longer
 * than takeover_ms must not lose primacy inside itself over and over, and a wedged handler
 * must not hold primacy forever.
 */
#ifndef COHORT_KEEPALIVE_H
#define COHORT_KEEPALIVE_H

#include <pthread.h>
#include <stdbool.h>

#include "node/runtime.h"

typedef struct cohort_keepalive {
    cohort_service_t *service;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool done, started;
} cohort_keepalive_t;

/* Starts the helper for `service` (borrowed until cohort_keepalive_stop()); `k` lives on the
 * caller's stack. Without a store (tests, --check-config) nothing starts. */
void cohort_keepalive_start(cohort_keepalive_t *k, cohort_service_t *service);

/* Stops and joins the helper; call once the handler's callback returned. */
void cohort_keepalive_stop(cohort_keepalive_t *k);

#endif
