/*
 * api_pool.h - the HTTP API's threads: requests are answered off the node's loop, and claims
 * that found nothing are held without a thread until work arrives or their wait ends.
 *
 * The loop thread submits each request under /api/ with an opaque `origin` (http.c's
 * request); one of `threads` threads, each with its own database client, runs
 * cohort_api_handle() on it; the reply comes back to the loop thread through an eventfd, and
 * `deliver` sends it there (evhttp is not touched from any other thread).
 *
 * A reply with `hold_ms` > 0 (an external worker's claim that found nothing and may wait) is
 * not delivered: the request is held, costing a timer and its copy, no thread and no
 * database command, and runs again when cohort_api_pool_wake() names its service (a task
 * enqueued through this node, or the node's tick), until its wait ends and the last (empty)
 * reply is delivered, or its client leaves (cohort_api_pool_gone()).
 */
#ifndef COHORT_API_POOL_H
#define COHORT_API_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "node/http/api.h"
#include "store/store.h"

struct event_base;

typedef struct cohort_api_pool cohort_api_pool_t;

/* Sends `reply` for the request submitted with `origin`, on the loop thread. The reply is
 * the pool's: the callee reads it and does not keep it. False if the client is gone (it will
 * never read the reply): a claim's tasks in it are then given back (cohort_api_give_back()). */
typedef bool (*cohort_api_deliver_fn)(void *arg, void *origin, const cohort_api_reply_t *reply);

/* Whether the client of the unanswered request `origin` is gone (closed its connection), on
 * the loop thread: such a request is answered at once instead of being held or run again. */
typedef bool (*cohort_api_gone_fn)(void *arg, void *origin);

/* Starts `threads` threads answering with `api` on `base`'s loop. NULL with `error` set if a
 * thread, the eventfd or memory cannot be had. */
cohort_api_pool_t *cohort_api_pool_start(struct event_base *base, cohort_api_t *api,
                                         cohort_store_t *store, size_t threads,
                                         cohort_api_deliver_fn deliver, cohort_api_gone_fn gone,
                                         void *arg, bson_error_t *error);

/* Queues `request` (copied) for a thread. Loop thread only. On failure (out of memory) the
 * request is answered at once with a 503 through `deliver`. */
void cohort_api_pool_submit(cohort_api_pool_t *pool, const cohort_api_request_t *request,
                            void *origin);

/* Runs again the held requests of `service` (NULL: all of them). Loop thread only. */
void cohort_api_pool_wake(cohort_api_pool_t *pool, const char *service);

/* The client of `origin` left: if that request is held, it ends now (its empty reply is
 * dropped) instead of claiming for nobody at its next wake. Loop thread only. */
void cohort_api_pool_gone(cohort_api_pool_t *pool, void *origin);

/* How many requests are held now (for /metrics and tests). */
size_t cohort_api_pool_held(const cohort_api_pool_t *pool);

/* Stops the threads after the request each is running, and answers every other request: held
 * ones with their last reply, queued ones with a 503. A request submitted after this (the
 * loop may still read some while it writes those answers out) is answered 503 at once. Loop
 * thread; NULL and a second call are fine. */
void cohort_api_pool_stop(cohort_api_pool_t *pool);

/* cohort_api_pool_stop(), then frees the pool. Loop thread; NULL is fine. */
void cohort_api_pool_destroy(cohort_api_pool_t *pool);

#endif
