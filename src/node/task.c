/*
 * task.c - executes claimed tasks and applies the retry schedule (see task.h).
 *
 * An outcome is written with a filter on the claim (status claimed, this node, this
 * attempt): if the task was reset and claimed elsewhere meanwhile, the write matches nothing
 * and the node just counts a lost claim. A write that fails because the database is away is
 * retried with backoff until it lands, the claim is gone, or the node is told to stop.
 */
#include "node/task.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "node/context.h"
#include "node/isolate.h"
#include "core/log.h"

int64_t cohort_task_retry_delay_ms(int64_t base_ms, int64_t attempt)
{
    if (base_ms <= 0)
        return 0;
    int64_t n = attempt > 1 ? attempt - 1 : 0;
    int64_t delay = base_ms;
    while (n-- > 0) {
        if (delay > COHORT_RETRY_DELAY_MAX_MS / 2)
            return COHORT_RETRY_DELAY_MAX_MS;
        delay *= 2;
    }
    return delay < COHORT_RETRY_DELAY_MAX_MS ? delay : COHORT_RETRY_DELAY_MAX_MS;
}

const char *cohort_task_id(const cohort_task_t *task)
{
    return task->id;
}

const bson_t *cohort_task_data(const cohort_task_t *task)
{
    return &task->data;
}

int cohort_task_attempt(const cohort_task_t *task)
{
    return task->attempt;
}

const char *cohort_task_kind(const cohort_task_t *task)
{
    return task->kind;
}

const char *cohort_task_group(const cohort_task_t *task)
{
    return task->group;
}

int64_t cohort_task_priority(const cohort_task_t *task)
{
    return task->priority;
}

void cohort_task_set_error(cohort_task_t *task, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(task->error, sizeof task->error, fmt, ap);
    va_end(ap);
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Reads the fields of a task document; false if it is not a well-formed task (a claimed one
 * is then failed without running, with `why` as the reason). */
bool cohort_task_from_doc(const bson_t *doc, cohort_task_t *task, int64_t *claimed_at, char *why,
                          size_t whylen)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id"))
        return false; /* cannot happen: MongoDB gives every document an _id */
    bson_value_copy(bson_iter_value(&it), &task->id_value);
    bool oid = BSON_ITER_HOLDS_OID(&it);
    if (oid)
        bson_oid_to_string(bson_iter_oid(&it), task->id);
    else
        snprintf(task->id, sizeof task->id, "(not an ObjectId)");

    task->attempt = 1;
    task->attempts_bad = false;
    if (bson_iter_init_find(&it, doc, "attempts") && BSON_ITER_HOLDS_NUMBER(&it)) {
        double as_double = BSON_ITER_HOLDS_DOUBLE(&it) ? bson_iter_double(&it) : 0;
        int64_t n = bson_iter_as_int64(&it);
        bool whole = BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it) ||
                     (BSON_ITER_HOLDS_DOUBLE(&it) && as_double == (double)n);
        if (whole && n >= 1 && n <= INT32_MAX) {
            task->attempt = (int)n;
        } else if (!BSON_ITER_HOLDS_DECIMAL128(&it)) {
            task->attempts_bad = true;
            bson_value_copy(bson_iter_value(&it), &task->attempts_raw); /* a number: no heap */
        }
    }

    task->kind = task->group = NULL;
    task->priority = 0;
    task->timeout_ms = -1;
    if (bson_iter_init_find(&it, doc, "kind") && BSON_ITER_HOLDS_UTF8(&it))
        task->kind = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, doc, "group") && BSON_ITER_HOLDS_UTF8(&it))
        task->group = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, doc, "priority") && BSON_ITER_HOLDS_NUMBER(&it))
        task->priority = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, doc, "task_timeout_ms") && BSON_ITER_HOLDS_NUMBER(&it))
        task->timeout_ms = bson_iter_as_int64(&it);

    *claimed_at = cohort_clock_cluster_ms();
    if (bson_iter_init_find(&it, doc, "claimed_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        *claimed_at = bson_iter_date_time(&it);

    if (!oid) {
        snprintf(why, whylen, "task _id is not an ObjectId (Cohort creates ObjectIds; insert "
                              "tasks without an _id or with an ObjectId)");
        return false;
    }
    if (task->attempts_bad) {
        bson_init(&task->data);
        snprintf(why, whylen, "task attempts is not a whole number from 1 to 2147483647 (it "
                              "was written by hand; Cohort counts attempts itself)");
        return false;
    }
    if (!bson_iter_init_find(&it, doc, "data")) {
        bson_init(&task->data);
        return true;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_init(&task->data);
        snprintf(why, whylen, "task data is a %s, not a document",
                 BSON_ITER_HOLDS_NULL(&it) ? "null" : "non-document value");
        return false;
    }
    uint32_t len;
    const uint8_t *bytes;
    bson_iter_document(&it, &len, &bytes);
    if (!bson_init_static(&task->data, bytes, len)) {
        bson_init(&task->data);
        snprintf(why, whylen, "task data is not valid BSON");
        return false;
    }
    return true;
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
                service->config->name, cohort_service_role(service), 0,
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
                cohort_logf(COHORT_LOG_WARN, name, cohort_service_role(service), 0,
                            "task %s attempt %d: outcome not recorded, this node no longer "
                            "holds its claim",
                            task->id, task->attempt);
                return;
            }
            cohort_task_count(service, run->result.finish);
            return;
        }
        /* The database is away: the outcome is the only record of the work, keep it. */
        pthread_mutex_lock(&service->lock);
        bool stopping = service->stopping;
        pthread_mutex_unlock(&service->lock);
        cohort_logf(COHORT_LOG_WARN, name, cohort_service_role(service), 0,
                    "task %s: cannot record outcome (%s); retrying in %lld ms", task->id,
                    error.message, (long long)backoff);
        if (stopping && backoff >= 2000) {
            cohort_logf(COHORT_LOG_ERROR, name, cohort_service_role(service), 0,
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

int64_t cohort_task_timeout_ms(const cohort_service_config_t *config, const cohort_task_t *task)
{
    if (task->timeout_ms >= 0)
        return task->timeout_ms;
    return cohort_config_task_defaults(config, task->kind).task_timeout_ms;
}

void cohort_task_run_here(cohort_ctx_t *ctx, cohort_task_run_t *run)
{
    cohort_service_t *service = ctx->service;
    const cohort_service_config_t *config = service->config;
    cohort_task_t *task = &run->task;
    cohort_task_result_t *result = &run->result;
    int64_t started_us = bson_get_monotonic_time();
    cohort_outcome_t outcome =
        service->plugin->handler->process_task(ctx, service->handler_state, task);
    cohort_histogram_observe(&service->stats.task_duration,
                             bson_get_monotonic_time() - started_us);
    const char *message = task->error[0] ? task->error : NULL;
    switch (outcome) {
    case COHORT_TASK_SUCCEEDED:
        result->finish = COHORT_FINISH_SUCCEEDED;
        break;
    case COHORT_TASK_RETRY:
        if (task->attempt < config->max_attempts) {
            result->finish = COHORT_FINISH_RETRY;
            result->retry_at_ms = cohort_clock_cluster_ms() +
                                  cohort_task_retry_delay_ms(config->retry_base_ms,
                                                             task->attempt);
        }
        result->error = message ? message : "handler asked for a retry";
        break;
    case COHORT_TASK_FAILED:
        result->error = message ? message : "handler reported a permanent failure";
        break;
    default:
        snprintf(run->why, sizeof run->why, "handler returned invalid outcome %d", (int)outcome);
        result->error = run->why;
        break;
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
    bool well_formed =
        cohort_task_from_doc(claimed, &run->task, &claimed_at, run->why, sizeof run->why);
    run->result.started_at_ms = claimed_at;
    run->valid = run->task.id_value.value_type != BSON_TYPE_EOD;
    if (!run->valid)
        return;
    if (!well_formed) {
        run->result.error = run->why; /* quarantined: bad data never reaches the handler */
    } else if (run->task.attempt > config->max_attempts) {
        snprintf(run->why, sizeof run->why,
                 "attempt %d exceeds max_attempts %lld: earlier runs never reported an outcome "
                 "(did the handler crash its node?)",
                 run->task.attempt, (long long)config->max_attempts);
        run->result.error = run->why;
    } else if (config->isolation == COHORT_ISOLATION_PROCESS && service->isolate) {
        cohort_isolate_run(service->isolate, slot, claimed, run);
    } else {
        cohort_task_run_here(ctx, run);
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
