/*
 * ready.h - giving back the tasks a batch claim prefetched into the service's ready queue
 * (runtime.h) that no worker has started: on shutdown all of them, when a kind or the whole
 * service is paused or blocked those the switches now stop, and when runs turn long those
 * beyond one per idle worker (so no node keeps tasks it cannot start while others idle). A
 * task given back is pending again, untouched, with its attempts as before its claim
 * (cohort_store_unclaim).
 */
#ifndef COHORT_READY_H
#define COHORT_READY_H

#include <mongoc/mongoc.h>
#include <stddef.h>

#include "node/runtime.h"

/* Takes every ready task out of the queue (under the lock) and gives it back with `client`.
 * Returns how many were given back (a task whose unclaim fails keeps its claim until the
 * stall timeout resets it). */
size_t cohort_ready_give_back_all(cohort_service_t *service, mongoc_client_t *client);

/* Main thread, each tick after cohort_filter_apply_switches(): gives back the ready tasks of
 * the kinds paused or blocked (all of them when the whole service is). Logs how many. */
size_t cohort_ready_give_back_stopped(cohort_service_t *service, mongoc_client_t *client);

/* Gives back up to `n` ready tasks, the last queued first (the ones a batch claim ranked
 * last): what a batch prefetched before its runs turned long (prefetch.h). Logs how many. */
size_t cohort_ready_give_back_last(cohort_service_t *service, mongoc_client_t *client, size_t n);

#endif
