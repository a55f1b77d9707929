/*
 * keepalive.c - the helper thread that keeps the node's registration alive while the main
 * thread runs handler code (see keepalive.h); the lease thread keeps primacy.
 */
#include "node/keepalive.h"

#include <time.h>

#include "core/clock.h"

static void *keepalive_main(void *arg)
{
    cohort_keepalive_t *k = arg;
    cohort_service_t *s = k->service;
    mongoc_client_t *client = cohort_store_pop(s->store);
    int64_t give_up = cohort_clock_monotonic_ms() + 10 * s->eff.takeover_ms;
    pthread_mutex_lock(&k->lock);
    while (!k->done && cohort_clock_monotonic_ms() < give_up) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        int64_t ns = until.tv_nsec + (s->eff.tick_ms % 1000) * 1000000;
        until.tv_sec += s->eff.tick_ms / 1000 + ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&k->wake, &k->lock, &until);
        if (k->done)
            break;
        pthread_mutex_unlock(&k->lock);
        bson_error_t error;
        cohort_store_touch_node(s->store, client, s->node_id, &error);
        pthread_mutex_lock(&k->lock);
    }
    pthread_mutex_unlock(&k->lock);
    cohort_store_push(s->store, client);
    return NULL;
}

void cohort_keepalive_start(cohort_keepalive_t *k, cohort_service_t *s)
{
    *k = (cohort_keepalive_t){.service = s};
    cohort_election_note_alive(&s->election); /* the lease thread renews through the call */
    pthread_mutex_init(&k->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&k->wake, &attr);
    pthread_condattr_destroy(&attr);
    k->started = s->store && pthread_create(&k->thread, NULL, keepalive_main, k) == 0;
}

void cohort_keepalive_stop(cohort_keepalive_t *k)
{
    if (k->started) {
        pthread_mutex_lock(&k->lock);
        k->done = true;
        pthread_cond_signal(&k->wake);
        pthread_mutex_unlock(&k->lock);
        pthread_join(k->thread, NULL);
    }
    pthread_cond_destroy(&k->wake);
    pthread_mutex_destroy(&k->lock);
}
