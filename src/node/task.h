/*
 * task.h - running one claimed task through the handler and recording its outcome.
 *
 * Outcomes: success -> succeeded; retryable failure -> pending again after
 * cohort_task_retry_delay_ms(), or failed once max_attempts is used up; permanent failure,
 * an invalid outcome or an exhausted attempt count -> failed. The attempt count is raised at
 * claim time, so a task that kills its node on every run still ends failed.
 */
#ifndef COHORT_TASK_H
#define COHORT_TASK_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdint.h>

#include "node/context.h"
#include "node/service.h"

/* Delay before the retry that follows failed attempt `attempt` (1-based): retry n (n = 0 for
 * the first retry) waits base_ms * 2^n. Saturates instead of overflowing; never more than
 * COHORT_RETRY_DELAY_MAX_MS. */
#define COHORT_RETRY_DELAY_MAX_MS (7LL * 24 * 3600 * 1000)
int64_t cohort_task_retry_delay_ms(int64_t base_ms, int64_t attempt);

/* What one run of a claimed task came to, before it is written. */
typedef struct cohort_task_run {
    cohort_task_t task;          /* parsed from the claimed document (views into it) */
    cohort_task_result_t result; /* result.error points into `why` or task.error */
    char why[512];
    bool valid; /* false: the document had no _id at all; nothing to record */
} cohort_task_run_t;

/* The timeout that applies to a claimed task: its own task_timeout_ms, else the service's
 * default for its kind; 0 means none. */
int64_t cohort_task_timeout_ms(const cohort_service_config_t *config, const cohort_task_t *task);

/* Parses the task in `claimed` (a document returned by a claim) and runs it: through the
 * handler on the calling thread (isolation = thread, or inside a worker process), or in one
 * of the service's worker processes (isolation = process, see isolate.h). A malformed task
 * or one over max_attempts is failed without running. Writes nothing. `claimed` must outlive
 * `run`. */
void cohort_task_run(cohort_ctx_t *ctx, size_t slot, const bson_t *claimed,
                     cohort_task_run_t *run);

/* The handler call itself, on the calling thread: fills run->result from the outcome. */
void cohort_task_run_here(cohort_ctx_t *ctx, cohort_task_run_t *run);

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
