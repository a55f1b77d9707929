/*
 * api_pool.c - the HTTP API's threads and held requests (see api_pool.h).
 *
 * A job is one request: its copy, its origin, its last reply. It is in exactly one place at a
 * time: the queue (threads take from it), a thread, the done list (the loop takes from it),
 * or the held list (loop thread only, with its deadline timer). The queue and the done list
 * share one mutex; nothing else is shared, so the loop never waits on a database call.
 *
 * A client that leaves costs nothing: a held job whose client is gone ends (its reply is
 * dropped) when the listener says so (cohort_api_pool_gone()), and is checked again before it
 * is held or run again, so it never claims for nobody. A claim's reply that cannot be
 * delivered (the client left while a thread claimed) goes back to a thread as a give-back job
 * (no origin): cohort_api_give_back() hands its tasks back, their attempts not counted.
 */
#include "node/http/api_pool.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/wake.h"

typedef struct job job_t;
struct job {
    cohort_api_pool_t *pool;
    cohort_api_request_t request; /* its strings are `text`'s */
    char *text;                   /* one allocation for every string of the request */
    void *origin;
    cohort_api_reply_t reply;
    bool has_reply;
    bool give_back; /* runs cohort_api_give_back() on `reply`; no origin, never delivered */
    int64_t deadline_ms; /* monotonic; 0 until first held */
    char service[65];    /* held for this service's work */
    struct event *timer; /* while held */
    job_t *next, *prev;  /* in the queue, the done list or the held list */
};

typedef struct job_list {
    job_t *head, *tail;
    size_t n;
} job_list_t;

struct cohort_api_pool {
    struct event_base *base;
    cohort_api_t *api;
    cohort_store_t *store;
    cohort_api_deliver_fn deliver;
    cohort_api_gone_fn gone;
    void *arg;

    pthread_mutex_t lock;
    pthread_cond_t work;
    job_list_t queue; /* guarded by lock */
    job_list_t done;  /* guarded by lock */
    bool stopping;    /* guarded by lock */
    bool stopped;     /* loop thread only: the threads are joined, requests get a 503 */
    int efd;
    struct event *done_event;

    job_list_t held; /* loop thread only */
    pthread_t *threads;
    size_t n_threads;
};

static void list_push(job_list_t *l, job_t *j)
{
    j->next = NULL;
    j->prev = l->tail;
    if (l->tail)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
    l->n++;
}

static void list_remove(job_list_t *l, job_t *j)
{
    if (j->prev)
        j->prev->next = j->next;
    else
        l->head = j->next;
    if (j->next)
        j->next->prev = j->prev;
    else
        l->tail = j->prev;
    j->next = j->prev = NULL;
    l->n--;
}

static job_t *list_pop(job_list_t *l)
{
    job_t *j = l->head;
    if (j)
        list_remove(l, j);
    return j;
}

static void job_free(job_t *j)
{
    if (j->timer)
        event_free(j->timer);
    if (j->has_reply)
        bson_destroy(&j->reply.body);
    free(j->text);
    free(j);
}

static void submit_job(cohort_api_pool_t *pool, job_t *j);

/* Answers the job's origin with its last reply and frees it; if the reply hands out tasks
 * and its client is gone, the job goes back to a thread to give them back. */
static void finish(cohort_api_pool_t *pool, job_t *j)
{
    if (!pool->deliver(pool->arg, j->origin, &j->reply) && j->reply.claimed.service[0]) {
        j->give_back = true;
        j->origin = NULL; /* answered (evhttp frees it) */
        submit_job(pool, j);
        return;
    }
    job_free(j);
}

/* Answers `origin` with an error of our own (no thread ran it). */
static void answer_error(cohort_api_pool_t *pool, void *origin, int status, const char *code,
                         const char *message)
{
    cohort_api_reply_t reply = {.status = status};
    bson_init(&reply.body);
    bson_t e;
    BSON_APPEND_DOCUMENT_BEGIN(&reply.body, "error", &e);
    BSON_APPEND_UTF8(&e, "code", code);
    BSON_APPEND_UTF8(&e, "message", message);
    bson_append_document_end(&reply.body, &e);
    pool->deliver(pool->arg, origin, &reply);
    bson_destroy(&reply.body);
}

static void *thread_main(void *arg)
{
    cohort_api_pool_t *pool = arg;
    mongoc_client_t *client = cohort_store_pop(pool->store);
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->stopping && !pool->queue.head)
            pthread_cond_wait(&pool->work, &pool->lock);
        if (pool->stopping)
            break;
        job_t *j = list_pop(&pool->queue);
        pthread_mutex_unlock(&pool->lock);

        if (j->give_back) {
            cohort_api_give_back(pool->api, client, &j->reply);
        } else {
            if (j->has_reply)
                bson_destroy(&j->reply.body);
            cohort_api_handle(pool->api, client, &j->request, &j->reply);
            j->has_reply = true;
        }

        pthread_mutex_lock(&pool->lock);
        list_push(&pool->done, j);
        uint64_t one = 1;
        ssize_t w = write(pool->efd, &one, sizeof one); /* wakes the loop (on_done) */
        (void)w; /* a full counter already wakes it */
    }
    pthread_mutex_unlock(&pool->lock);
    cohort_store_push(pool->store, client);
    return NULL;
}

static void submit_job(cohort_api_pool_t *pool, job_t *j)
{
    pthread_mutex_lock(&pool->lock);
    list_push(&pool->queue, j);
    pthread_cond_signal(&pool->work);
    pthread_mutex_unlock(&pool->lock);
}

/* A held job's wait ended: its last reply (no tasks) goes out. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    job_t *j = arg;
    list_remove(&j->pool->held, j);
    finish(j->pool, j);
}

/* Holds `j` until its deadline (set on its first hold), or answers it if that has passed or
 * its client is gone. */
static void hold(cohort_api_pool_t *pool, job_t *j)
{
    int64_t now = cohort_clock_monotonic_ms();
    if (pool->gone(pool->arg, j->origin)) {
        finish(pool, j);
        return;
    }
    if (!j->deadline_ms) {
        j->deadline_ms = now + j->reply.hold_ms;
        bson_strncpy(j->service, j->reply.held_service, sizeof j->service);
        j->request.again = true; /* the worker is registered; later runs only claim */
    }
    if (now >= j->deadline_ms || (!j->timer && !(j->timer = evtimer_new(pool->base, on_deadline,
                                                                        j)))) {
        finish(pool, j);
        return;
    }
    int64_t left = j->deadline_ms - now;
    struct timeval tv = {.tv_sec = left / 1000, .tv_usec = (left % 1000) * 1000};
    evtimer_add(j->timer, &tv);
    list_push(&pool->held, j);
}

/* The loop's side: replies to send, requests to hold, held claims to wake. */
static void on_done(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    cohort_api_pool_t *pool = arg;
    cohort_eventfd_drain(fd);
    pthread_mutex_lock(&pool->lock);
    job_list_t done = pool->done;
    pool->done = (job_list_t){0};
    pthread_mutex_unlock(&pool->lock);
    job_t *j;
    while ((j = list_pop(&done))) {
        char wake[sizeof j->reply.wake];
        bson_strncpy(wake, j->reply.wake, sizeof wake);
        if (j->give_back)
            job_free(j);
        else if (j->reply.hold_ms > 0)
            hold(pool, j);
        else
            finish(pool, j);
        if (wake[0])
            cohort_api_pool_wake(pool, wake);
    }
}

void cohort_api_pool_wake(cohort_api_pool_t *pool, const char *service)
{
    if (!pool)
        return;
    job_t *j = pool->held.head;
    while (j) {
        job_t *next = j->next;
        if (!service || strcmp(service, j->service) == 0) {
            list_remove(&pool->held, j);
            evtimer_del(j->timer);
            if (pool->gone(pool->arg, j->origin))
                finish(pool, j); /* nobody waits: no claim for it */
            else
                submit_job(pool, j);
        }
        j = next;
    }
}

void cohort_api_pool_gone(cohort_api_pool_t *pool, void *origin)
{
    if (!pool)
        return;
    for (job_t *j = pool->held.head; j; j = j->next) {
        if (j->origin == origin) {
            list_remove(&pool->held, j);
            evtimer_del(j->timer);
            finish(pool, j);
            return;
        }
    }
}

size_t cohort_api_pool_held(const cohort_api_pool_t *pool)
{
    return pool ? pool->held.n : 0;
}

/* A copy of the `len` bytes at `s` and a NUL at *at (NULL stays NULL). */
static const char *copy_in(char **at, const char *s, size_t len)
{
    if (!s)
        return NULL;
    char *out = *at;
    memcpy(out, s, len);
    out[len] = '\0';
    *at += len + 1;
    return out;
}

/* The same for a string. */
static const char *dup_in(char **at, const char *s)
{
    return copy_in(at, s, s ? strlen(s) : 0);
}

static size_t len_of(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

void cohort_api_pool_submit(cohort_api_pool_t *pool, const cohort_api_request_t *request,
                            void *origin)
{
    if (pool->stopped) {
        answer_error(pool, origin, 503, "unavailable", "the node is shutting down");
        return;
    }
    const cohort_api_request_t *r = request;
    size_t size = len_of(r->method) + len_of(r->path) + len_of(r->query) +
                  len_of(r->authorization) + len_of(r->idempotency_key) + len_of(r->cookie) +
                  len_of(r->sec_fetch_site) + len_of(r->origin_header) + len_of(r->host) +
                  r->body_len + 1;
    job_t *j = calloc(1, sizeof *j);
    char *text = j ? malloc(size) : NULL;
    if (!text) {
        free(j);
        answer_error(pool, origin, 503, "unavailable", "the node is out of memory");
        return;
    }
    char *at = text;
    j->pool = pool;
    j->text = text;
    j->origin = origin;
    j->request = *r;
    j->request.method = dup_in(&at, r->method);
    j->request.path = dup_in(&at, r->path);
    j->request.query = dup_in(&at, r->query);
    j->request.authorization = dup_in(&at, r->authorization);
    j->request.idempotency_key = dup_in(&at, r->idempotency_key);
    j->request.cookie = dup_in(&at, r->cookie);
    j->request.sec_fetch_site = dup_in(&at, r->sec_fetch_site);
    j->request.origin_header = dup_in(&at, r->origin_header);
    j->request.host = dup_in(&at, r->host);
    j->request.body = copy_in(&at, r->body ? r->body : "", r->body_len);
    submit_job(pool, j);
}

cohort_api_pool_t *cohort_api_pool_start(struct event_base *base, cohort_api_t *api,
                                         cohort_store_t *store, size_t threads,
                                         cohort_api_deliver_fn deliver, cohort_api_gone_fn gone,
                                         void *arg, bson_error_t *error)
{
    cohort_api_pool_t *pool = calloc(1, sizeof *pool);
    if (!pool || !(pool->threads = calloc(threads, sizeof *pool->threads))) {
        free(pool);
        cohort_error_nomem(error, "the API's threads");
        return NULL;
    }
    pool->base = base;
    pool->api = api;
    pool->store = store;
    pool->deliver = deliver;
    pool->gone = gone;
    pool->arg = arg;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->work, NULL);
    pool->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (pool->efd < 0 ||
        !(pool->done_event = event_new(base, pool->efd, EV_READ | EV_PERSIST, on_done, pool)) ||
        event_add(pool->done_event, NULL) != 0) {
        bson_set_error(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_IO,
                       "cannot set up the API's threads: %s", strerror(errno));
        cohort_api_pool_destroy(pool);
        return NULL;
    }
    for (size_t i = 0; i < threads; i++) {
        if (!cohort_thread_start(&pool->threads[i], thread_main, pool, false, error,
                                 "API thread %zu", i + 1)) {
            cohort_api_pool_destroy(pool);
            return NULL;
        }
        pool->n_threads++;
    }
    return pool;
}

void cohort_api_pool_stop(cohort_api_pool_t *pool)
{
    if (!pool || pool->stopped)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->lock);
    for (size_t i = 0; i < pool->n_threads; i++)
        pthread_join(pool->threads[i], NULL);
    pool->stopped = true;
    /* No thread runs now: whatever is left is answered from here. A give-back that cannot
     * run now leaves its tasks to their leases (finish() may queue one: the queue goes last). */
    job_t *j;
    while ((j = list_pop(&pool->done))) {
        if (j->give_back)
            job_free(j);
        else
            finish(pool, j);
    }
    while ((j = list_pop(&pool->held)))
        finish(pool, j);
    while ((j = list_pop(&pool->queue))) {
        if (!j->give_back)
            answer_error(pool, j->origin, 503, "unavailable", "the node is shutting down");
        job_free(j);
    }
}

void cohort_api_pool_destroy(cohort_api_pool_t *pool)
{
    if (!pool)
        return;
    cohort_api_pool_stop(pool);
    if (pool->done_event)
        event_free(pool->done_event);
    if (pool->efd >= 0)
        close(pool->efd);
    pthread_cond_destroy(&pool->work);
    pthread_mutex_destroy(&pool->lock);
    free(pool->threads);
    free(pool);
}
