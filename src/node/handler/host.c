/*
 * host.c - loading a handler, calling it and unloading it (see host.h). Shared by the
 * node's worker threads and its child worker processes, so a handler sees the same calls
 * whichever isolation its service uses.
 */
#include "node/handler/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "node/live_settings.h"
#include "store/store.h"
#include "store/outcomes.h"

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

int64_t cohort_task_timeout_ms(const cohort_service_config_t *config, const cohort_task_t *task)
{
    if (task->timeout_ms >= 0)
        return task->timeout_ms;
    return cohort_config_task_defaults(config, task->kind).task_timeout_ms;
}

cohort_service_t *cohort_host_new(const cohort_service_config_t *config, const char *node_id,
                                  const cohort_settings_t *file, cohort_store_t *store,
                                  mongoc_client_t *client, bson_error_t *error)
{
    cohort_plugin_t *plugin = cohort_plugin_load(config->handler_path, error);
    if (!plugin)
        return NULL;
    cohort_service_t *s = calloc(1, sizeof *s);
    if (!s) {
        cohort_plugin_unload(plugin);
        cohort_error_nomem(error, "a service's state");
        return NULL;
    }
    s->config = config;
    s->capacity = config->capacity;
    s->schedules = config->schedules;
    s->n_schedules = config->n_schedules;
    s->node_id = node_id;
    s->peers = -1; /* unknown until the primary counts them: primary_task_count applies */
    s->store = store;
    s->plugin = plugin;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    /* The lease length is the live settings' to set (the one writer of it): */
    cohort_election_init(&s->election, config->name, node_id, 0);
    cohort_service_set_file_settings(s, file);

    const cohort_handler_t *h = plugin->handler;
    if (h->init) {
        cohort_ctx_t ctx;
        cohort_ctx_init(&ctx, s, client, false);
        if (!h->init(&ctx, config->options, config->n_options, &s->handler_state)) {
            bson_set_error(error, COHORT_DOMAIN_HANDLER, COHORT_CODE_INVALID,
                           "[service:%s] handler '%s' rejected its configuration: %s",
                           config->name, h->name ? h->name : plugin->path,
                           ctx.error[0] ? ctx.error : "init() failed without a message");
            cohort_host_destroy(s);
            return NULL;
        }
    } else if (config->n_options > 0) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "line %d: [service:%s] unknown key '%s' (handler '%s' takes no options)",
                       config->options[0].line, config->name, config->options[0].key,
                       h->name ? h->name : plugin->path);
        cohort_host_destroy(s);
        return NULL;
    }
    s->handler_ready = true;
    return s;
}

bool cohort_host_reload(cohort_service_t *s, mongoc_client_t *client,
                        const cohort_service_config_t *config, bson_error_t *error)
{
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, s, client, false);
    if (s->plugin->handler->reload(&ctx, s->handler_state, config->options, config->n_options))
        return true;
    bson_set_error(error, COHORT_DOMAIN_HANDLER, COHORT_CODE_INVALID, "%s",
                   ctx.error[0] ? ctx.error : "no reason given");
    return false;
}

void cohort_host_retry(const cohort_service_config_t *config, int64_t attempt,
                       cohort_task_result_t *result)
{
    if (attempt >= config->max_attempts)
        return;
    result->finish = COHORT_FINISH_RETRY;
    result->retry_at_ms = cohort_clock_cluster_ms() +
                          cohort_task_retry_delay_ms(config->retry_base_ms, attempt);
}

void cohort_host_run_task(cohort_ctx_t *ctx, cohort_task_run_t *run)
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
        cohort_host_retry(config, cohort_task_counted_attempts(task), result);
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

void cohort_host_destroy(cohort_service_t *s)
{
    if (!s)
        return;
    if (s->handler_ready && s->plugin->handler->destroy)
        s->plugin->handler->destroy(s->handler_state);
    cohort_plugin_unload(s->plugin);
    cohort_election_destroy(&s->election);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
