/*
 * task.c - runs claimed tasks where their service says and records their outcomes (see
 * task.h).
 *
 * An outcome is written with a filter on the claim (status claimed, this node, this
 * attempt): if the task was reset and claimed elsewhere meanwhile, the write matches nothing
 * and the node just counts a lost claim. A write that fails because the database is away is
 * retried with backoff until it lands, the claim is gone, or the node is told to stop.
 */
#include "node/work/task.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/error.h"
#include "node/handler/isolate.h"
#include "store/outcomes.h"

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

void cohort_task_count(cohort_service_t *service, cohort_finish_t finish)
{
    switch (finish) {
    case COHORT_FINISH_SUCCEEDED:
        atomic_fetch_add(&service->stats.succeeded, 1);
        break;
    case COHORT_FINISH_RETRY:
        atomic_fetch_add(&service->stats.retried, 1);
        break;
    case COHORT_FINISH_FAILED:
        atomic_fetch_add(&service->stats.failed, 1);
        break;
    case COHORT_FINISH_TIMED_OUT:
        atomic_fetch_add(&service->stats.timed_out, 1);
        break;
    }
}

void cohort_task_log(cohort_service_t *service, const cohort_task_run_t *run)
{
    const cohort_task_result_t *result = &run->result;
    if (result->finish == COHORT_FINISH_SUCCEEDED)
        return;
    const char *what = result->finish == COHORT_FINISH_RETRY       ? "will be retried"
                       : result->finish == COHORT_FINISH_TIMED_OUT ? "timed out"
                                                                   : "failed";
    cohort_logf(result->finish == COHORT_FINISH_RETRY ? COHORT_LOG_INFO : COHORT_LOG_WARN,
                service->config->name, cohort_election_role(&service->election), 0,
                "task %s attempt %d %s: %s", run->task.id, run->task.attempt, what,
                result->error ? result->error : "");
}

void cohort_task_record(cohort_ctx_t *ctx, cohort_task_run_t *run)
{
    cohort_service_t *service = ctx->service;
    const char *name = service->config->name;
    cohort_task_t *task = &run->task;
    int64_t backoff = 100;
    for (;;) {
        bool applied = false;
        bson_error_t error;
        bool ok = task->attempts_bad
                      ? cohort_store_finish_task_raw(service->store, ctx->client, name,
                                                     &task->id_value, service->node_id,
                                                     &task->attempts_raw, &run->result, &applied,
                                                     &error)
                      : cohort_store_finish_task_value(service->store, ctx->client, name,
                                                       &task->id_value, service->node_id,
                                                       task->attempt, &run->result, &applied,
                                                       &error);
        if (ok) {
            if (!applied) {
                atomic_fetch_add(&service->stats.lost_claims, 1);
                cohort_logf(COHORT_LOG_WARN, name, cohort_election_role(&service->election), 0,
                            "task %s attempt %d: outcome not recorded, this node no longer "
                            "holds its claim",
                            task->id, task->attempt);
                return;
            }
            cohort_task_count(service, run->result.finish);
            return;
        }
        /* The database is away: the outcome is the only record of the work, keep it. */
        bool stopping = cohort_service_stopping(service);
        cohort_logf(COHORT_LOG_WARN, name, cohort_election_role(&service->election), 0,
                    "task %s: cannot record outcome (%s); retrying in %lld ms", task->id,
                    error.message, (long long)backoff);
        if (stopping && backoff >= 2000) {
            cohort_logf(COHORT_LOG_ERROR, name, cohort_election_role(&service->election), 0,
                        "task %s: giving up on recording its outcome at shutdown; it will run "
                        "again once its claim is reset",
                        task->id);
            return;
        }
        sleep_ms(backoff);
        if (backoff < 2000)
            backoff *= 2;
    }
}

void cohort_task_run(cohort_ctx_t *ctx, size_t slot, const bson_t *claimed,
                     cohort_task_run_t *run)
{
    cohort_service_t *service = ctx->service;
    const cohort_service_config_t *config = service->config;
    memset(run, 0, sizeof *run);
    int64_t claimed_at = 0;
    run->result.finish = COHORT_FINISH_FAILED;
    bson_error_t malformed;
    bool well_formed = cohort_task_from_doc(claimed, &run->task, &claimed_at, &malformed);
    run->result.started_at_ms = claimed_at;
    run->valid = run->task.id_value.value_type != BSON_TYPE_EOD;
    if (!run->valid)
        return;
    if (!well_formed) {
        /* Quarantined: bad data never reaches the handler. */
        snprintf(run->why, sizeof run->why, "%s", malformed.message);
        run->result.error = run->why;
    } else if (cohort_task_counted_attempts(&run->task) > config->max_attempts) {
        snprintf(run->why, sizeof run->why,
                 "attempt %d exceeds max_attempts %lld: earlier runs never reported an outcome "
                 "(did the handler crash its node?)",
                 cohort_task_counted_attempts(&run->task), (long long)config->max_attempts);
        run->result.error = run->why;
    } else if (config->isolation == COHORT_ISOLATION_PROCESS && service->isolate) {
        cohort_isolate_run(service->isolate, slot, claimed, run);
    } else {
        cohort_host_run_task(ctx, run);
    }
    run->result.ended_at_ms = cohort_clock_cluster_ms();
}

void cohort_task_execute(cohort_ctx_t *ctx, size_t slot, const bson_t *claimed)
{
    cohort_task_run_t run;
    cohort_task_run(ctx, slot, claimed, &run);
    if (run.valid) {
        cohort_task_log(ctx->service, &run);
        cohort_task_record(ctx, &run);
    }
    bson_value_destroy(&run.task.id_value);
}
