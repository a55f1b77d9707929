/*
 * workers.h - a service's pool of worker threads and the per-tick claim budget.
 *
 * The main thread refills the budget once per tick (primary_task_count on the primary,
 * secondary_task_count elsewhere, 0 meaning no limit). Worker threads claim and run tasks
 * while budget remains and the queue had work; a claim that finds nothing parks the workers
 * until the next tick, or until an insert into the queue wakes them (watch.h). After a tick
 * (or a wake-up) one worker probes first and the others follow only if it found work, so an
 * idle service costs one query per tick.
 */
#ifndef COHORT_WORKERS_H
#define COHORT_WORKERS_H

#include <stdbool.h>
#include <stddef.h>

#include "node/runtime.h"

/* Changes the number of worker threads live (start, SIGHUP): new threads start at once;
 * surplus ones park after their current task until the count grows again. The service's
 * threads, slots and ready queue must be allocated (cohort_service_start()). False with the
 * reason in `error` (Cohort's error type, see errors.h) if the count is out of range or a
 * thread cannot start. */
bool cohort_service_set_workers(cohort_service_t *service, size_t workers, bson_error_t *error);

/* Stops claiming; running tasks go on. */
void cohort_service_stop_claiming(cohort_service_t *service);

/* Main thread, at the end of each tick: the claim budget for the next one, and every
 * parked worker woken to use it. A secondary whose workers claimed nothing since the last
 * refill, of a service whose primary's last claim found nothing due (the `queue_due` hint of
 * the config document), does not look at the queue this tick: an idle secondary sends no
 * claim (an enqueue's wake-up still starts one at once). */
void cohort_workers_refill(cohort_service_t *service);

/* Main thread, before the election round: the `queue_due` hint the primary's renewal writes.
 * 0 if the last claim since the refill found nothing due, 1 otherwise (tasks were claimed,
 * or no claim was tried: the workers were busy or had no budget, or the claim found nothing
 * light enough for the node's room, capacity.h), -1 for a service without
 * workers (handler = external). */
int cohort_workers_due_hint(cohort_service_t *service);

/* Any thread (the change stream watcher, watch.h): the queue gained a task, so parked
 * workers look again now, within what is left of this tick's budget, instead of on the next
 * tick. Does nothing while the service stops or its budget is used up. */
void cohort_workers_wake(cohort_service_t *service);

/* Main thread, each tick and soon after a batch claim left tasks in the ready queue (the
 * service's `prefetched` hook): with claim_batch = auto, when every worker is busy with a run
 * longer than the prefetch window and tasks wait in the ready queue, those tasks go back to
 * pending at once, for idle nodes, instead of after the first long run ends (prefetch.h);
 * not on a primary that counted no other live node serving the service (`peers` 0). Returns
 * in how many ms to look again (tasks still wait, behind runs not yet that long), or -1 when
 * nothing waits. */
int64_t cohort_workers_give_back_unstartable(cohort_service_t *service, mongoc_client_t *client);

/* Main thread, instead of a refill: no claims until the next refill (running tasks go on). */
void cohort_workers_hold(cohort_service_t *service);

/* Stops the timeout watchdog (timeouts.h) and claiming, joins every worker thread (they finish
 * their task and write its outcome first) and frees the pool; tasks left in the ready queue
 * are released at exit. */
void cohort_workers_join(cohort_service_t *service);

#endif
