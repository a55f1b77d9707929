/*
 * watch.h - wake-ups instead of polling: change streams on the node's queues.
 *
 * Workers that found their queue empty park until the next tick (workers.h). With
 * `wake = change_stream`, one thread per hosted service watches the inserts into its queue
 * (store.h: cohort_store_watch_*) and wakes the parked workers at once
 * (cohort_workers_wake()), so a task enqueued into an idle cluster starts within a round trip
 * or two instead of up to a tick later. Every insert wakes; the claim itself decides whether
 * a task is due, so a delayed task costs one empty claim.
 *
 * When the server refuses change streams (no replica set) or a stream breaks, the thread logs
 * it once (warn), the ticks go on finding new tasks as with `wake = poll`, and it reopens the
 * stream after 1 s, doubling up to 30 s; once open again it logs that (info), resumes after the
 * last resume token it saw and wakes the workers once for inserts made meanwhile.
 *
 * Cost and stopping: each getMore waits up to wake_await_ms on the server, so an idle node
 * sends one getMore per hosted queue per wake_await_ms (one per second by default), and
 * stopping waits at most for the getMore in flight (wake_await_ms plus a round trip): no
 * libmongoc call can be cut short from another thread, so the await bounds the shutdown.
 */
#ifndef COHORT_WATCH_H
#define COHORT_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/runtime.h"

typedef struct cohort_watcher cohort_watcher_t;

/* Starts one thread per service of `services` (borrowed, like `store`: they must outlive
 * cohort_watcher_stop()), each on a client of its own. NULL with `error` set if a thread
 * cannot start. */
cohort_watcher_t *cohort_watcher_start(cohort_store_t *store, cohort_service_t *const *services,
                                       size_t n, int64_t await_ms, bson_error_t *error);

/* Stops and joins every thread (waiting for the getMores in flight) and frees the watcher
 * (NULL is fine). */
void cohort_watcher_stop(cohort_watcher_t *watcher);

/* For metrics, by the service's index in `services` (any thread): the wake-ups the stream
 * caused, and whether it is open now. A NULL watcher (wake = poll) has neither. */
uint64_t cohort_watcher_wakeups(const cohort_watcher_t *watcher, size_t service);
bool cohort_watcher_up(const cohort_watcher_t *watcher, size_t service);

#endif
