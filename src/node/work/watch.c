/*
 * watch.c - the change stream threads that wake a service's parked workers (see watch.h).
 *
 * Each thread owns its stream, its resume token and its logging state; it shares with the
 * rest of the node only the service it wakes (through cohort_workers_wake(), which takes the
 * service's lock) and two atomics read by metrics.
 */
#include "node/work/watch.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/wake.h"
#include "node/work/workers.h"
#include "store/store.h"
#include "store/watch.h"

#define RETRY_FIRST_MS 1000
#define RETRY_MAX_MS 30000
/* How long cohort_watcher_stop() waits for the threads before it leaves those still in a
 * getMore behind (see there). */
#define STOP_WAIT_MS 300

typedef struct stream {
    cohort_store_t *store;
    cohort_service_t *service;
    int64_t await_ms;
    int64_t poll_ms; /* a server that answers empty getMores at once is asked this often */
    pthread_t thread;
    bool started;
    /* Under `lock`: the node stopped without this thread (a getMore held it): it must not
     * touch the service, the stream or the store's objects again, only return. */
    pthread_mutex_t lock;
    bool abandoned;
    atomic_bool done; /* the thread returned */
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
    pthread_mutex_lock(&t->lock);
    if (!t->abandoned) {
        cohort_workers_wake(t->service);
        atomic_fetch_add_explicit(&t->wakeups, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&t->lock);
}

static bool abandoned(stream_t *t)
{
    pthread_mutex_lock(&t->lock);
    bool gone = t->abandoned;
    pthread_mutex_unlock(&t->lock);
    return gone;
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
    if (abandoned(t))
        return -1; /* the node has gone on without this thread */
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
     * that answered at once (mongo-java-server without deploy/localdb's hold) is asked again
     * after poll_ms (a tick), not after the whole await, or a wake-up would wait that long. */
    return started + (t->poll_ms < t->await_ms ? t->poll_ms : t->await_ms);
}

static void *stream_main(void *arg)
{
    stream_t *t = arg;
    int64_t at;
    while ((at = step(t)) >= 0 && cohort_wake_sleep_until(&t->stop, at))
        ;
    if (at >= 0) {
        cohort_store_watch_close(t->watch);
        t->watch = NULL;
        atomic_store(&t->up, false);
    }
    atomic_store(&t->done, true);
    return NULL;
}

cohort_watcher_t *cohort_watcher_start(cohort_store_t *store, cohort_service_t *const *services,
                                       size_t n, int64_t await_ms, int64_t poll_ms,
                                       bson_error_t *error)
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
        t->poll_ms = poll_ms;
        pthread_mutex_init(&t->lock, NULL);
        atomic_store(&t->done, false);
        t->retry_ms = RETRY_FIRST_MS;
        bson_init(&t->token);
        atomic_store(&t->wakeups, 0);
        atomic_store(&t->up, false);
        cohort_wake_init(&t->stop);
        w->n++;
        if (!cohort_thread_start(&t->thread, stream_main, t, false, error,
                                 "the change stream thread")) {
            cohort_watcher_stop(w);
            return NULL;
        }
        t->started = true;
    }
    return w;
}

/* A watcher whose threads were left in a getMore by cohort_watcher_stop(). */
static cohort_watcher_t *volatile left_behind; /* volatile: the store is kept */

static void nap(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000};
    nanosleep(&ts, NULL);
}

bool cohort_watcher_stop(cohort_watcher_t *w)
{
    if (!w)
        return true;
    for (size_t i = 0; i < w->n; i++) /* all at once: they end in parallel */
        cohort_wake_stop(&w->streams[i].stop);
    /* A thread asleep between getMores ends at once; one in a getMore that the server holds
     * for the await cannot be cut short (libmongoc has no way to), so after STOP_WAIT_MS it is
     * left behind: marked abandoned, it touches nothing when its getMore returns, and the
     * process exits meanwhile. Its stream, its client and the store stay allocated. */
    int64_t deadline = cohort_clock_monotonic_ms() + STOP_WAIT_MS;
    bool all = true;
    for (size_t i = 0; i < w->n; i++) {
        stream_t *t = &w->streams[i];
        while (t->started && !atomic_load(&t->done) && cohort_clock_monotonic_ms() < deadline)
            nap();
        pthread_mutex_lock(&t->lock);
        bool gone = t->started && !atomic_load(&t->done);
        t->abandoned = gone;
        pthread_mutex_unlock(&t->lock);
        if (gone) {
            pthread_detach(t->thread);
            all = false;
            continue;
        }
        if (t->started)
            pthread_join(t->thread, NULL);
    }
    if (!all) {
        cohort_log_node(COHORT_LOG_INFO, "stopping without waiting for the change streams' "
                                         "getMores in flight (up to wake_await_ms)");
        /* The abandoned threads still use the streams: nothing is freed, and the watcher stays
         * reachable from here until the process exits (not a leak to a checker at exit). */
        left_behind = w;
        return false;
    }
    for (size_t i = 0; i < w->n; i++) {
        cohort_wake_destroy(&w->streams[i].stop);
        bson_destroy(&w->streams[i].token);
        pthread_mutex_destroy(&w->streams[i].lock);
    }
    free(w->streams);
    free(w);
    return true;
}

uint64_t cohort_watcher_wakeups(const cohort_watcher_t *w, size_t service)
{
    return w && service < w->n ? atomic_load(&w->streams[service].wakeups) : 0;
}

bool cohort_watcher_up(const cohort_watcher_t *w, size_t service)
{
    return w && service < w->n && atomic_load(&w->streams[service].up);
}
