/*
 * heartbeat.c - the heartbeat thread (see heartbeat.h): sleeps until a touch of the node
 * document is due, touches it if the main thread is alive and the run does not stand back,
 * and logs the first failure of a run of failures.
 *
 * The main thread's pings count as touches (cohort_heartbeat_note_ping()), so while ticks
 * are short the thread sends nothing at all.
 */
#include "node/heartbeat.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/wake.h"

struct cohort_heartbeat {
    cohort_store_t *store;
    mongoc_client_t *client; /* this thread's own */
    const char *node_id, *run_id;
    cohort_election_t **elections;
    size_t n;
    _Atomic int64_t last_sent_ms; /* monotonic: the last successful ping or touch was sent */
    atomic_bool standing_back;
    bool failing; /* the last touch failed (its failure was logged) */
    pthread_t thread;
    cohort_wake_t wake;
};

int64_t cohort_heartbeat_due_ms(int64_t last_sent_ms, int64_t min_takeover_ms)
{
    return last_sent_ms + min_takeover_ms / 4;
}

/* Records a successful liveness write sent at `sent_ms`, unless a later one is recorded. */
static void note_sent(cohort_heartbeat_t *h, int64_t sent_ms)
{
    int64_t last = atomic_load(&h->last_sent_ms);
    while (last < sent_ms && !atomic_compare_exchange_weak(&h->last_sent_ms, &last, sent_ms))
        ;
}

/* The smallest takeover_ms in effect now, and whether the main thread is alive. */
static int64_t min_takeover_ms(cohort_heartbeat_t *h, bool *main_alive)
{
    int64_t smallest = INT64_MAX;
    *main_alive = false;
    for (size_t i = 0; i < h->n; i++) {
        int64_t takeover = atomic_load(&h->elections[i]->takeover_ms);
        if (takeover < smallest)
            smallest = takeover;
        *main_alive = *main_alive || cohort_election_main_alive(h->elections[i]);
    }
    return smallest;
}

static void touch(cohort_heartbeat_t *h, int64_t sent_ms)
{
    bson_error_t error;
    if (!cohort_store_touch_node(h->store, h->client, h->node_id, h->run_id, &error)) {
        if (!h->failing)
            cohort_log_node(COHORT_LOG_WARN,
                            "cannot keep this node alive between ticks: %s; its pings still "
                            "do, once per tick",
                            error.message);
        h->failing = true;
        return;
    }
    h->failing = false;
    note_sent(h, sent_ms);
}

/* Touches the document if that is due and allowed; returns when to look again. */
static int64_t beat(cohort_heartbeat_t *h)
{
    bool main_alive;
    int64_t takeover = min_takeover_ms(h, &main_alive);
    int64_t now = cohort_clock_monotonic_ms();
    int64_t due = cohort_heartbeat_due_ms(atomic_load(&h->last_sent_ms), takeover);
    if (due > now)
        return due;
    if (main_alive && !atomic_load(&h->standing_back)) {
        touch(h, now);
        now = cohort_clock_monotonic_ms();
    }
    /* A touch just sent is due again a quarter of takeover_ms after it was sent, which may
     * be now already; a touch failed or not allowed: look again after a quarter anyway. */
    due = cohort_heartbeat_due_ms(atomic_load(&h->last_sent_ms), takeover);
    return due > now ? due : cohort_heartbeat_due_ms(now, takeover);
}

static void *heartbeat_main(void *arg)
{
    cohort_heartbeat_t *h = arg;
    /* Connect now rather than on the first touch, which is needed when the database is slow. */
    int64_t server_ms;
    bson_error_t error;
    cohort_store_server_time(h->store, h->client, &server_ms, &error);
    while (cohort_wake_sleep_until(&h->wake, beat(h)))
        ;
    return NULL;
}

static void heartbeat_free(cohort_heartbeat_t *h)
{
    cohort_wake_destroy(&h->wake);
    cohort_store_push(h->store, h->client);
    free(h->elections);
    free(h);
}

cohort_heartbeat_t *cohort_heartbeat_start(cohort_store_t *store, const char *node_id,
                                           const char *run_id,
                                           cohort_election_t *const *elections, size_t n,
                                           bson_error_t *error)
{
    cohort_heartbeat_t *h = calloc(1, sizeof *h);
    cohort_election_t **copy = calloc(n ? n : 1, sizeof *copy);
    if (!h || !copy) {
        free(h);
        free(copy);
        cohort_error_nomem(error, "the heartbeat thread");
        return NULL;
    }
    memcpy(copy, elections, n * sizeof *elections);
    *h = (cohort_heartbeat_t){.store = store, .node_id = node_id, .run_id = run_id,
                              .elections = copy, .n = n};
    atomic_store(&h->last_sent_ms, 0);
    atomic_store(&h->standing_back, false);
    cohort_wake_init(&h->wake);
    h->client = cohort_store_pop(store);
    if (!cohort_thread_start(&h->thread, heartbeat_main, h, false, error,
                             "the heartbeat thread")) {
        heartbeat_free(h);
        return NULL;
    }
    return h;
}

void cohort_heartbeat_stop(cohort_heartbeat_t *h)
{
    if (!h)
        return;
    cohort_wake_stop(&h->wake);
    pthread_join(h->thread, NULL);
    heartbeat_free(h);
}

void cohort_heartbeat_note_ping(cohort_heartbeat_t *h, int64_t sent_ms, bool standing_back)
{
    if (!h)
        return;
    atomic_store(&h->standing_back, standing_back);
    note_sent(h, sent_ms);
}
