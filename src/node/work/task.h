/*
 * task.h - running one claimed task where its service says (on the calling thread through
 * the handler host, or in the slot's worker process) and recording its outcome.
 *
 * The retry schedule and the handler call itself are the handler host's (host.h), shared
 * with the child worker processes; this module sits above the host and the process pool and
 * picks between them.
 */
#ifndef COHORT_TASK_H
#define COHORT_TASK_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdint.h>

#include "node/handler/context.h"
#include "node/handler/host.h"
#include "node/runtime.h"
#include "store/outcomes.h"

/* Parses the task in `claimed` (a document returned by a claim) and runs it: through the
 * handler on the calling thread (isolation = thread), or in one of the service's worker
 * processes (isolation = process, see isolate.h). A malformed task or one over max_attempts
 * is failed without running. Writes nothing. `claimed` must outlive `run`. */
void cohort_task_run(cohort_ctx_t *ctx, size_t slot, const bson_t *claimed,
                     cohort_task_run_t *run);

/* Logs a result that is not a success. */
void cohort_task_log(cohort_service_t *service, const cohort_task_run_t *run);

/* Writes a result (retrying with backoff while the database is away, until it lands, the
 * claim is gone or the node is stopping) and counts it. */
void cohort_task_record(cohort_ctx_t *ctx, cohort_task_run_t *run);

/* Counts a written outcome in the service's statistics. */
void cohort_task_count(cohort_service_t *service, cohort_finish_t finish);

/* Runs, logs and records: cohort_task_run(), cohort_task_log(), cohort_task_record(). */
void cohort_task_execute(cohort_ctx_t *ctx, size_t slot, const bson_t *claimed);

#endif
