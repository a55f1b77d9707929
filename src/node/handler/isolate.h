/*
 * isolate.h - `isolation = process`: a service's tasks run in child worker processes that
 * the node supervises, one child per worker slot.
 *
 * The worker thread of slot i hands each claimed task to child i and waits for its result.
 * A child is `cohortd --worker`: it loads the service's handler, calls its init() with the
 * service's options, then runs the tasks it is sent, one at a time, through the same code as
 * thread isolation (the handler host, host.h), with its own database client for the handler's
 * cohort_* calls. The parent keeps every database write about the claim (outcome, check-ins).
 *
 * A child that dies mid-task (segfault, abort(), exit) costs only that task's attempt: it is
 * retried or failed by the usual rules, with the signal or exit status as the error, and the
 * child is started again for the next task. A task that runs past its timeout has its child
 * killed (SIGKILL) and ends timed_out.
 */
#ifndef COHORT_ISOLATE_H
#define COHORT_ISOLATE_H

#include <stddef.h>

#include "node/handler/host.h"
#include "node/runtime.h"

typedef struct cohort_isolate cohort_isolate_t;

/* A pool of `slots` child slots for `service` (children start on first use). `config_path`
 * is the node's configuration file, which children load. NULL with the reason in `error` (Cohort's
 * error type, see errors.h). */
cohort_isolate_t *cohort_isolate_new(cohort_service_t *service, const char *config_path,
                                     size_t slots, bson_error_t *error);

/* Runs the parsed task `run->task` (claimed as `claimed`) in slot `slot`'s child and fills
 * run->result (and run->why); writes nothing to the database. Called by that slot's worker
 * thread only. */
void cohort_isolate_run(cohort_isolate_t *pool, size_t slot, const bson_t *claimed,
                        cohort_task_run_t *run);

/* Stops every child (closes its pipe, waits briefly, then SIGKILL) and frees the pool. */
void cohort_isolate_destroy(cohort_isolate_t *pool);

#endif
