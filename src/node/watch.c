/*
 * watch.c - the change stream threads that wake a service's parked workers (see watch.h).
 *
 * Each thread owns its stream, its resume token and its logging state; it shares with the
 * rest of the node only the service it wakes (through cohort_workers_wake(), which takes the
 * service's lock) and two atomics read by metrics.
 */
#include "node/watch.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/wake.h"
#include "node/workers.h"

#define RETRY_FIRST_MS 1000
#define RETRY_MAX_MS 30000

typedef struct stream {
    cohort_store_t *store;
    cohort_service_t *service;
    int64_t await_ms;
    pthread_t thread;
    bool started;
    cohort_wake_t stop; /* its sleeps, cut short by cohort_watcher_stop() */
    _Atomic uint64_t wakeups;
    atomic_bool up;
    /* The thread's own: */
    cohort_store_watch_t *watch;
    bson_t token; /* the last resume token seen; empty until one is */
    bool falling_back; /* the stream is down and that was logged */
    int64_t retry_ms;
} stream_t;

struct cohort_watcher {
    stream_t *streams;
    size_t n;
};

static const char *name_of(const stream_t *t)
{
    return t->service->config->name;
}

/* Opens the stream after the saved resume token. A token the server no longer knows (its
 * history was cut, or the local server restarted without it) would refuse every reopen, so
 * then it opens without one: the wake-up on opening covers the gap. */
static bool open_stream(stream_t *t, bson_error_t *error)
{
    t->watch = cohort_store_watch_open(t->store, name_of(t), t->await_ms, &t->token, error);
    if (!t->watch && !bson_empty(&t->token)) {
        bson_error_t again;
        t->watch = cohort_store_watch_open(t->store, name_of(t), t->await_ms, NULL, &again);
        if (t->watch) {
            cohort_logf(COHORT_LOG_INFO, name_of(t), NULL, 0,
                        "the change stream could not resume after its last event (%s); it "
                        "watches from now on",
                        error->message);
            bson_reinit(&t->token);
        }
    }
    return t->watch != NULL;
}

/* The stream is down (refused or broken): logged once until it is back. */
static void fall_back(stream_t *t, const bson_error_t *error)
{
    cohort_store_watch_close(t->watch);
    t->watch = NULL;
    atomic_store(&t->up, false);
    if (!t->falling_back)
        cohort_logf(COHORT_LOG_WARN, name_of(t), NULL, 0,
                    "%s; new tasks are found on each tick (polling) until the change stream "
                    "is back; retrying every %d s at most",
                    error->message, RETRY_MAX_MS / 1000);
    t->falling_back = true;
}

static void back_up(stream_t *t)
{
    if (t->falling_back)
        cohort_logf(COHORT_LOG_INFO, name_of(t), NULL, 0,
                    "the change stream on queue_%s is back%s; new tasks wake idle workers "
                    "again",
                    name_of(t), bson_empty(&t->token) ? "" : ", resumed after its last event");
    t->falling_back = false;
    t->retry_ms = RETRY_FIRST_MS;
    atomic_store(&t->up, true);
    cohort_workers_wake(t->service); /* for inserts made while it was down */
}

/* Keeps the stream's latest resume token for the next open: none after the queue was
 * dropped (the next stream starts from then); the last one if the stream has none yet. */
static void save_token(stream_t *t, bool ok)
{
    bson_t token;
    if (cohort_store_watch_resume_token(t->watch, &token)) {
        bson_destroy(&t->token);
        bson_copy_to(&token, &t->token);
    } else if (!ok) {
        bson_reinit(&t->token);
    }
    bson_destroy(&token);
}

static void wake_service(stream_t *t)
{
    cohort_workers_wake(t->service);
    atomic_fetch_add_explicit(&t->wakeups, 1, memory_order_relaxed);
}

/* One step: open the stream, or wait for its next insert. Returns when to step again
 * (monotonic ms; now for at once). */
static int64_t step(stream_t *t)
{
    bson_error_t error;
    int64_t started = cohort_clock_monotonic_ms();
    if (!t->watch) {
        if (open_stream(t, &error)) {
            back_up(t);
            return started;
        }
        fall_back(t, &error);
        int64_t at = started + t->retry_ms;
        t->retry_ms = t->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : t->retry_ms * 2;
        return at;
    }
    bool inserted = false;
    bool ok = cohort_store_watch_next(t->watch, &inserted, &error);
    save_token(t, ok);
    if (!ok) {
        fall_back(t, &error);
        return started + t->retry_ms;
    }
    if (inserted) {
        wake_service(t);
        return started;
    }
    /* An empty answer: a server that held the getMore for the await asks again at once; one
     * that answered at once (the local test server ignores maxAwaitTimeMS) after the rest. */
    return started + t->await_ms;
}

static void *stream_main(void *arg)
{
    stream_t *t = arg;
    while (cohort_wake_sleep_until(&t->stop, step(t)))
        ;
    cohort_store_watch_close(t->watch);
    t->watch = NULL;
    atomic_store(&t->up, false);
    return NULL;
}

cohort_watcher_t *cohort_watcher_start(cohort_store_t *store, cohort_service_t *const *services,
                                       size_t n, int64_t await_ms, bson_error_t *error)
{
    cohort_watcher_t *w = calloc(1, sizeof *w);
    stream_t *streams = calloc(n ? n : 1, sizeof *streams);
    if (!w || !streams) {
        free(w);
        free(streams);
        cohort_error_nomem(error, "the change stream threads");
        return NULL;
    }
    w->streams = streams;
    for (size_t i = 0; i < n; i++) {
        stream_t *t = &streams[i];
        t->store = store;
        t->service = services[i];
        t->await_ms = await_ms;
        t->retry_ms = RETRY_FIRST_MS;
        bson_init(&t->token);
        atomic_store(&t->wakeups, 0);
        atomic_store(&t->up, false);
        cohort_wake_init(&t->stop);
        w->n++;
        int rc = pthread_create(&t->thread, NULL, stream_main, t);
        if (rc != 0) {
            cohort_watcher_stop(w);
            cohort_error_set(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_IO,
                             "cannot start the change stream thread: %s", strerror(rc));
            return NULL;
        }
        t->started = true;
    }
    return w;
}

void cohort_watcher_stop(cohort_watcher_t *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++) /* all at once: their getMores end in parallel */
        cohort_wake_stop(&w->streams[i].stop);
    for (size_t i = 0; i < w->n; i++) {
        stream_t *t = &w->streams[i];
        if (t->started)
            pthread_join(t->thread, NULL);
        cohort_wake_destroy(&t->stop);
        bson_destroy(&t->token);
    }
    free(w->streams);
    free(w);
}

uint64_t cohort_watcher_wakeups(const cohort_watcher_t *w, size_t service)
{
    return w && service < w->n ? atomic_load(&w->streams[service].wakeups) : 0;
}

bool cohort_watcher_up(const cohort_watcher_t *w, size_t service)
{
    return w && service < w->n && atomic_load(&w->streams[service].up);
}
