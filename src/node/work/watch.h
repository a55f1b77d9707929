/*
 * watch.h - wake-ups instead of polling: change streams on the node's queues.
 *
 * Workers that found their queue empty park until the next tick (workers.h). With
 * `wake = change_stream`, one thread per hosted service watches the inserts into its queue
 * (and the updates that make a task pending again: a claim given back, a retry)
 * (store/watch.h: cohort_store_watch_*) and wakes the parked workers at once
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
 * sends one getMore per hosted queue per wake_await_ms (one per 30 s by default). A server
 * that answers an empty getMore at once (mongo-java-server itself; deploy/localdb holds them)
 * is asked again after a tick instead. No libmongoc call can be cut short from another thread,
 * so stopping does not wait for a getMore in flight: after a short wait the threads still in
 * one are left behind, marked so that they touch nothing, and the process exits.
 */
#ifndef COHORT_WATCH_H
#define COHORT_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/runtime.h"
#include "store/store.h"

typedef struct cohort_watcher cohort_watcher_t;

/* Starts one thread per service of `services` (borrowed, like `store`: they must outlive
 * cohort_watcher_stop()), each on a client of its own. NULL with `error` set if a thread
 * cannot start. */
cohort_watcher_t *cohort_watcher_start(cohort_store_t *store, cohort_service_t *const *services,
                                       size_t n, int64_t await_ms, int64_t poll_ms,
                                       bson_error_t *error);

/* Stops every thread and frees the watcher (NULL is fine), waiting a moment for them. False
 * if some were still in a getMore and were left behind: then the watcher is not freed, and
 * the store (whose counters their getMores still reach) must not be destroyed nor libmongoc
 * cleaned up before the process exits. After this call no thread touches a service. */
bool cohort_watcher_stop(cohort_watcher_t *watcher);

/* For metrics, by the service's index in `services` (any thread): the wake-ups the stream
 * caused, and whether it is open now. A NULL watcher (wake = poll) has neither. */
uint64_t cohort_watcher_wakeups(const cohort_watcher_t *watcher, size_t service);
bool cohort_watcher_up(const cohort_watcher_t *watcher, size_t service);

#endif
