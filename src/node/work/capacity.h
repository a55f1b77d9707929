/*
 * capacity.h - load-aware claiming: a node claims a task only while the weight it holds plus
 * the task's weight fits its capacity (the service's `capacity`, by default its worker
 * count), so heavy tasks go to nodes with room while a busy node still takes light ones.
 *
 * The weight held is the sum of the weights of the tasks this node has claimed and not
 * finished, those waiting in the ready queue included. A batch claim prefetches only light
 * tasks (weight 1) beyond the one its worker starts, so prefetch keeps short light work
 * flowing while weighted work is claimed only by a worker about to start it, when it fits;
 * the held weight may then pass the capacity by the light tasks waiting, and no claim starts
 * until it is below again. A claim in flight reserves all the room left, so two claims of
 * one node cannot both take a task that only one fits: a node's claims are made one at a
 * time (a worker waits for the claim in flight, it does not poll). A node holding nothing
 * claims any one task, however heavy (a task heavier than every node's capacity still runs,
 * alone). The workers call these at their claim and finish points; everything here is
 * guarded by the service's lock.
 */
#ifndef COHORT_CAPACITY_H
#define COHORT_CAPACITY_H

#include <stdbool.h>
#include <stdint.h>

#include "node/runtime.h"
#include "store/claims.h"

/* Lock held. True if a claim may start: none is in flight and some room is left. */
bool cohort_capacity_may_claim(const cohort_service_t *service);

/* Lock held, after cohort_capacity_may_claim(): reserves the room left for the claim that
 * starts now. */
void cohort_capacity_reserve(cohort_service_t *service);

/* Takes the lock. The weight fields of the claim's filter, from the reservation. */
void cohort_capacity_filter(cohort_service_t *service, cohort_claim_filter_t *filter);

/* Takes the lock. The claim in flight returned `docs[0..n)` (n may be 0): their weight is
 * held from now on and the reservation ends; waiting workers are woken. */
void cohort_capacity_claimed(cohort_service_t *service, const bson_t *docs, size_t n);

/* Lock held. True if the last claim found nothing only because it was limited to the room
 * left: not a sign that the queue has nothing due (the primary's `queue_due` hint). */
bool cohort_capacity_missed_by_weight(const cohort_service_t *service);

/* Takes the lock. A held task finished, or was given back untouched. */
void cohort_capacity_release(cohort_service_t *service, const bson_t *task);

/* Takes the lock. The capacity from now on (start, SIGHUP); 0: the worker count. */
void cohort_capacity_set(cohort_service_t *service, int64_t capacity);

/* Takes the lock. The capacity in effect and the weight held (for status and tests). */
void cohort_capacity_read(cohort_service_t *service, int64_t *capacity, int64_t *held);

#endif
