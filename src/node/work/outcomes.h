/*
 * outcomes.h - bulk outcomes: with claim_batch > 1 a worker keeps the outcomes of the tasks
 * it ran and writes them in one command (at most COHORT_OUTCOME_FLUSH_MS later, or before a
 * task that may be long). The tasks stay checked in meanwhile (the slot's `held` list).
 */
#ifndef COHORT_OUTCOMES_H
#define COHORT_OUTCOMES_H

#include <stddef.h>

#include "node/handler/context.h"
#include "node/handler/host.h"
#include "node/runtime.h"
#include "store/outcomes.h"

/* Writes runs[0 .. *n_runs) (their results, borrowed) in one bulk write, through `outcomes`
 * (scratch room for as many); if the database is away, one by one with the retries of
 * cohort_task_record(). Counts each outcome or reports it lost, frees the runs' ids and sets
 * *n_runs to 0. On the calling worker's client (ctx->client). */
void cohort_outcomes_flush(cohort_service_t *service, cohort_ctx_t *ctx, cohort_task_run_t *runs,
                           cohort_task_outcome_t *outcomes, size_t *n_runs);

#endif
