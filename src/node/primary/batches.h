/*
 * batches.h - tracked batches on the primary: close the open batch once all its tasks
 * finished (new tracked tasks then join the next), and a tick later, once nothing of it is
 * unfinished, run the handler's on_tasks_completed() and record the batch completed.
 */
#ifndef COHORT_BATCHES_H
#define COHORT_BATCHES_H

#include <mongoc/mongoc.h>
#include <stdint.h>

#include "node/runtime.h"

/* Main thread, primary under `epoch`, once per tick: moves late tracked tasks into the open
 * batch, then closes or completes a batch when it is due. Database errors are logged and the
 * step is tried again next tick. An idle primary (its last count found the batch empty, no
 * batch is draining, its workers' last claim found nothing due, and no wake-up reported an
 * insert) does this only every
 * COHORT_UPKEEP_INTERVAL_MS: tracked tasks that arrive meanwhile are due work, which its
 * next claim finds, and the counting resumes every tick from then. */
void cohort_batches_advance(cohort_service_t *service, mongoc_client_t *client, int64_t epoch);

#endif
