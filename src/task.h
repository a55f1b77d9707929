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

#include "service.h"

/* Delay before the retry that follows failed attempt `attempt` (1-based): retry n (n = 0 for
 * the first retry) waits base_ms * 2^n. Saturates instead of overflowing; never more than
 * COHORT_RETRY_DELAY_MAX_MS. */
#define COHORT_RETRY_DELAY_MAX_MS (7LL * 24 * 3600 * 1000)
int64_t cohort_task_retry_delay_ms(int64_t base_ms, int64_t attempt);

/* Runs the task in `claimed` (a document returned by cohort_store_claim_task) on the calling
 * worker thread and writes its outcome. `ctx` is the worker's context. */
void cohort_task_execute(cohort_ctx_t *ctx, const bson_t *claimed);

#endif
