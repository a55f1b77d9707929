/*
 * task.c - executes claimed tasks and applies the retry schedule (see task.h).
 *
 * An outcome is written with a filter on the claim (status claimed, this node, this
 * attempt): if the task was reset and claimed elsewhere meanwhile, the write matches nothing
 * and the node just counts a lost claim. A write that fails because the database is away is
 * retried with backoff until it lands, the claim is gone, or the node is told to stop.
 */
#include "task.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "context.h"
#include "log.h"

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
    if (bson_iter_init_find(&it, doc, "attempts") && BSON_ITER_HOLDS_NUMBER(&it))
        task->attempt = (int)bson_iter_as_int64(&it);

    *claimed_at = cohort_clock_cluster_ms();
    if (bson_iter_init_find(&it, doc, "claimed_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        *claimed_at = bson_iter_date_time(&it);

    if (!oid) {
        snprintf(why, whylen, "task _id is not an ObjectId (Cohort creates ObjectIds; insert "
                              "tasks without an _id or with an ObjectId)");
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

static void record(cohort_ctx_t *ctx, cohort_task_t *task, cohort_task_result_t *result)
{
    cohort_service_t *service = ctx->service;
    const char *name = service->config->name;
    result->ended_at_ms = cohort_clock_cluster_ms();
    int64_t backoff = 100;
    for (;;) {
        bool applied = false;
        bson_error_t error;
        if (cohort_store_finish_task_value(service->store, ctx->client, name, &task->id_value,
                                           service->node_id, task->attempt, result, &applied,
                                           &error)) {
            if (!applied) {
                atomic_fetch_add(&service->stats.lost_claims, 1);
                cohort_logf(COHORT_LOG_WARN, name, cohort_service_role(service), 0,
                            "task %s attempt %d: outcome not recorded, this node no longer "
                            "holds its claim",
                            task->id, task->attempt);
                return;
            }
            switch (result->finish) {
            case COHORT_FINISH_SUCCEEDED:
                atomic_fetch_add(&service->stats.succeeded, 1);
                break;
            case COHORT_FINISH_RETRY:
                atomic_fetch_add(&service->stats.retried, 1);
                break;
            case COHORT_FINISH_FAILED:
                atomic_fetch_add(&service->stats.failed, 1);
                break;
            }
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

void cohort_task_execute(cohort_ctx_t *ctx, const bson_t *claimed)
{
    cohort_service_t *service = ctx->service;
    const cohort_service_config_t *config = service->config;
    cohort_task_t task;
    memset(&task, 0, sizeof task);
    int64_t claimed_at = 0;
    char why[256] = "";
    cohort_task_result_t result = {.finish = COHORT_FINISH_FAILED};
    bool well_formed = cohort_task_from_doc(claimed, &task, &claimed_at, why, sizeof why);
    result.started_at_ms = claimed_at;
    if (task.id_value.value_type == BSON_TYPE_EOD)
        return;

    if (!well_formed) {
        result.error = why; /* quarantined: bad data never reaches the handler */
    } else if (task.attempt > config->max_attempts) {
        snprintf(why, sizeof why,
                 "attempt %d exceeds max_attempts %lld: earlier runs never reported an outcome "
                 "(did the handler crash its node?)",
                 task.attempt, (long long)config->max_attempts);
        result.error = why;
    } else {
        int64_t started_us = bson_get_monotonic_time();
        cohort_outcome_t outcome =
            service->plugin->handler->process_task(ctx, service->handler_state, &task);
        cohort_histogram_observe(&service->stats.task_duration,
                                 bson_get_monotonic_time() - started_us);
        const char *message = task.error[0] ? task.error : NULL;
        switch (outcome) {
        case COHORT_TASK_SUCCEEDED:
            result.finish = COHORT_FINISH_SUCCEEDED;
            break;
        case COHORT_TASK_RETRY:
            if (task.attempt < config->max_attempts) {
                result.finish = COHORT_FINISH_RETRY;
                result.retry_at_ms = cohort_clock_cluster_ms() +
                                     cohort_task_retry_delay_ms(config->retry_base_ms,
                                                                task.attempt);
            }
            result.error = message ? message : "handler asked for a retry";
            break;
        case COHORT_TASK_FAILED:
            result.error = message ? message : "handler reported a permanent failure";
            break;
        default:
            snprintf(why, sizeof why, "handler returned invalid outcome %d", (int)outcome);
            result.error = why;
            break;
        }
    }
    if (result.finish != COHORT_FINISH_SUCCEEDED)
        cohort_logf(result.finish == COHORT_FINISH_RETRY ? COHORT_LOG_INFO : COHORT_LOG_WARN,
                    config->name, cohort_service_role(service), 0, "task %s attempt %d %s: %s",
                    task.id, task.attempt,
                    result.finish == COHORT_FINISH_RETRY ? "will be retried" : "failed",
                    result.error);
    record(ctx, &task, &result);
    bson_value_destroy(&task.id_value);
}
