/*
 * service.c - a hosted service's runtime (see service.h).
 *
 * Workers share one mutex and condition per service. The lock guards only the budget and
 * flags, never a database call, so claiming and processing run in parallel.
 */
#include "service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "context.h"
#include "log.h"
#include "task.h"

const char *cohort_service_role(const cohort_service_t *service)
{
    return cohort_election_has_lease(&service->election) ? "primary" : "secondary";
}

cohort_service_t *cohort_service_new(const cohort_service_config_t *config, const char *node_id,
                                     int64_t takeover_ms, cohort_store_t *store,
                                     mongoc_client_t *client, char *err, size_t errlen)
{
    cohort_plugin_t *plugin = cohort_plugin_load(config->handler_path, err, errlen);
    if (!plugin)
        return NULL;
    cohort_service_t *s = calloc(1, sizeof *s);
    if (!s) {
        cohort_plugin_unload(plugin);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->config = config;
    s->node_id = node_id;
    s->store = store;
    s->plugin = plugin;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    cohort_election_init(&s->election, config->name, node_id, takeover_ms);

    const cohort_handler_t *h = plugin->handler;
    if (h->init) {
        cohort_ctx_t ctx;
        cohort_ctx_init(&ctx, s, client, false);
        if (!h->init(&ctx, config->options, config->n_options, &s->handler_state)) {
            snprintf(err, errlen, "[service:%s] handler '%s' rejected its configuration: %s",
                     config->name, h->name ? h->name : plugin->path,
                     ctx.error[0] ? ctx.error : "init() failed without a message");
            cohort_service_destroy(s, NULL);
            return NULL;
        }
    } else if (config->n_options > 0) {
        snprintf(err, errlen,
                 "line %d: [service:%s] unknown key '%s' (handler '%s' takes no options)",
                 config->options[0].line, config->name, config->options[0].key,
                 h->name ? h->name : plugin->path);
        cohort_service_destroy(s, NULL);
        return NULL;
    }
    s->handler_ready = true;
    return s;
}

/* Takes one claim from the budget, waiting for a tick if there is none. False: stop. */
static bool take_claim(cohort_service_t *s)
{
    pthread_mutex_lock(&s->lock);
    while (!s->stopping && (s->drained || s->budget == 0))
        pthread_cond_wait(&s->wake, &s->lock);
    bool go = !s->stopping;
    if (go && s->budget > 0)
        s->budget--;
    pthread_mutex_unlock(&s->lock);
    return go;
}

static void *worker_main(void *arg)
{
    cohort_service_t *s = arg;
    mongoc_client_t *client = cohort_store_pop(s->store);
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, s, client, false);
    int64_t last_error_log = 0;

    while (take_claim(s)) {
        bson_t task;
        bool found = false;
        bson_error_t error;
        bool ok = cohort_store_claim_task(s->store, client, s->config->name, s->node_id,
                                          cohort_clock_cluster_ms(), &task, &found, &error);
        if (!ok || !found) {
            bson_destroy(&task);
            pthread_mutex_lock(&s->lock);
            s->drained = true; /* poll again next tick */
            if (s->budget >= 0)
                s->budget++;   /* nothing was claimed: give the claim back */
            pthread_mutex_unlock(&s->lock);
            int64_t now = cohort_clock_monotonic_ms();
            if (!ok && now - last_error_log > 5000) {
                last_error_log = now;
                cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                            "cannot claim tasks: %s", error.message);
            }
            continue;
        }
        atomic_fetch_add(&s->stats.claimed, 1);
        pthread_mutex_lock(&s->lock);
        s->running++;
        pthread_mutex_unlock(&s->lock);

        cohort_task_execute(&ctx, &task);
        bson_destroy(&task);

        pthread_mutex_lock(&s->lock);
        s->running--;
        pthread_cond_broadcast(&s->wake);
        pthread_mutex_unlock(&s->lock);
    }
    cohort_store_push(s->store, client);
    return NULL;
}

bool cohort_service_start(cohort_service_t *s, char *err, size_t errlen)
{
    size_t n = (size_t)s->config->workers;
    s->threads = calloc(n, sizeof *s->threads);
    if (!s->threads) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = pthread_create(&s->threads[i], NULL, worker_main, s);
        if (rc != 0) {
            snprintf(err, errlen, "[service:%s] cannot start worker thread %zu: %s",
                     s->config->name, i + 1, strerror(rc));
            cohort_service_stop_claiming(s);
            return false;
        }
        s->n_threads++;
    }
    return true;
}

/* Primary maintenance: see cohort_store_repair_tasks(). Fenced by the lease like every
 * primary duty. */
static void repair_tasks(cohort_service_t *s, mongoc_client_t *client)
{
    int64_t epoch = cohort_election_epoch(&s->election);
    if (epoch == 0)
        return;
    int64_t made_due, quarantined;
    bson_error_t error;
    if (!cohort_store_repair_tasks(s->store, client, s->config->name, &made_due, &quarantined,
                                   &error)) {
        cohort_logf(COHORT_LOG_WARN, s->config->name, "primary", epoch,
                    "task maintenance failed: %s", error.message);
        return;
    }
    if (made_due > 0)
        cohort_logf(COHORT_LOG_INFO, s->config->name, "primary", epoch,
                    "%lld pending task(s) had no run_at: made due now", (long long)made_due);
    if (quarantined > 0)
        cohort_logf(COHORT_LOG_WARN, s->config->name, "primary", epoch,
                    "%lld malformed pending task(s) failed (attempts not a number or run_at "
                    "not a date)",
                    (long long)quarantined);
}

void cohort_service_tick(cohort_service_t *s, mongoc_client_t *client)
{
    bson_error_t error;
    if (!cohort_election_tick(&s->election, s->store, client, &error)) {
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                    "election round failed: %s", error.message);
        return;
    }
    int64_t epoch = cohort_election_epoch(&s->election);
    const cohort_handler_t *h = s->plugin->handler;
    if (epoch > 0 && h->primary_work) {
        cohort_ctx_t ctx;
        cohort_ctx_init(&ctx, s, client, true);
        if (!h->primary_work(&ctx, s->handler_state))
            cohort_logf(COHORT_LOG_ERROR, s->config->name, "primary", epoch,
                        "primary_work failed: %s",
                        ctx.error[0] ? ctx.error : "(no message from the handler)");
    }

    if (epoch > 0)
        repair_tasks(s, client);

    pthread_mutex_lock(&s->lock);
    if (epoch > 0)
        s->budget = s->config->primary_task_count;
    else
        s->budget = s->config->secondary_task_count > 0 ? s->config->secondary_task_count : -1;
    s->drained = false;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void cohort_service_stop_claiming(cohort_service_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

size_t cohort_service_running(cohort_service_t *s)
{
    pthread_mutex_lock(&s->lock);
    size_t running = s->running;
    pthread_mutex_unlock(&s->lock);
    return running;
}

void cohort_service_destroy(cohort_service_t *s, mongoc_client_t *client)
{
    if (!s)
        return;
    cohort_service_stop_claiming(s);
    for (size_t i = 0; i < s->n_threads; i++)
        pthread_join(s->threads[i], NULL);
    free(s->threads);
    if (client)
        cohort_election_step_down(&s->election, s->store, client);
    if (s->handler_ready && s->plugin->handler->destroy)
        s->plugin->handler->destroy(s->handler_state);
    cohort_plugin_unload(s->plugin);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
