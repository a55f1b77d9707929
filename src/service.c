/*
 * service.c - a hosted service's runtime (see service.h).
 *
 * Workers share one mutex and condition per service. The lock guards only the budget and
 * flags, never a database call, so claiming and processing run in parallel.
 */
#include "service.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    cohort_settings_t file = {
        .tick_ms = 1000,
        .takeover_ms = takeover_ms,
        .primary_task_count = config->primary_task_count,
        .secondary_task_count = config->secondary_task_count,
        .stall_timeout_ms = config->stall_timeout_ms,
        .succeeded_retention_ms = config->succeeded_retention_ms,
        .failed_retention_ms = config->failed_retention_ms,
    };
    cohort_service_set_file_settings(s, &file);

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

/* Takes one claim from the budget, waiting for a tick if there is none. A worker whose slot
 * is beyond the live worker count parks here until the count grows again. False: stop. */
static bool take_claim(cohort_service_t *s, size_t slot)
{
    pthread_mutex_lock(&s->lock);
    while (!s->stopping && (slot >= s->target_workers || s->drained || s->budget == 0 ||
                            (s->probing && !s->work_seen)))
        pthread_cond_wait(&s->wake, &s->lock);
    bool go = !s->stopping;
    if (go && s->budget > 0)
        s->budget--;
    if (go && !s->work_seen)
        s->probing = true; /* this worker finds out whether there is work */
    if (go)
        s->running++; /* from the claim on: shutdown waits for a claim in flight too */
    pthread_mutex_unlock(&s->lock);
    return go;
}

typedef struct worker_arg {
    cohort_service_t *service;
    size_t slot;
} worker_arg_t;

static void *worker_main(void *arg)
{
    worker_arg_t *w = arg;
    cohort_service_t *s = w->service;
    size_t slot = w->slot;
    free(w);
    mongoc_client_t *client = cohort_store_pop(s->store);
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, s, client, false);
    int64_t last_error_log = 0;

    while (take_claim(s, slot)) {
        bson_t task;
        bool found = false;
        bson_error_t error;
        bool ok = cohort_store_claim_task(s->store, client, s->config->name, s->node_id,
                                          cohort_clock_cluster_ms(), &task, &found, &error);
        if (!ok || !found) {
            bson_destroy(&task);
            pthread_mutex_lock(&s->lock);
            s->drained = true; /* poll again next tick */
            s->probing = false;
            s->running--;
            if (s->budget >= 0)
                s->budget++;   /* nothing was claimed: give the claim back */
            pthread_cond_broadcast(&s->wake);
            pthread_mutex_unlock(&s->lock);
            if (!ok && error.domain == MONGOC_ERROR_SERVER)
                atomic_store(&s->type_check_wanted, true); /* a malformed task, perhaps */
            int64_t now = cohort_clock_monotonic_ms();
            if (!ok && now - last_error_log > 5000) {
                last_error_log = now;
                cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                            "cannot claim tasks: %s", error.message);
            }
            continue;
        }
        atomic_fetch_add(&s->stats.claimed, 1);
        bson_iter_t id;
        pthread_mutex_lock(&s->lock);
        if (!s->work_seen) {
            s->work_seen = true; /* the probe found work: let the others claim too */
            s->probing = false;
            pthread_cond_broadcast(&s->wake);
        }
        if (bson_iter_init_find(&id, &task, "_id") && BSON_ITER_HOLDS_OID(&id)) {
            s->slots[slot].busy = true;
            bson_oid_copy(bson_iter_oid(&id), &s->slots[slot].task);
            s->slots[slot].checked_in_ms = cohort_clock_monotonic_ms();
        }
        pthread_mutex_unlock(&s->lock);

        cohort_task_execute(&ctx, &task);
        bson_destroy(&task);

        pthread_mutex_lock(&s->lock);
        s->slots[slot].busy = false;
        s->running--;
        pthread_cond_broadcast(&s->wake);
        pthread_mutex_unlock(&s->lock);
    }
    cohort_store_push(s->store, client);
    return NULL;
}

bool cohort_service_set_workers(cohort_service_t *s, size_t workers, char *err, size_t errlen)
{
    if (workers < 1 || workers > COHORT_MAX_WORKERS) {
        snprintf(err, errlen, "workers = %zu is out of range [1, %d]", workers,
                 COHORT_MAX_WORKERS);
        return false;
    }
    pthread_mutex_lock(&s->lock);
    s->target_workers = workers;
    pthread_cond_broadcast(&s->wake); /* parked workers below the new count resume */
    bool ok = true;
    /* Threads are never stopped before shutdown (surplus ones park), so growing only starts
     * threads for slots that never had one. */
    while (ok && s->n_threads < workers) {
        worker_arg_t *arg = malloc(sizeof *arg);
        int rc = arg ? 0 : ENOMEM;
        if (arg) {
            *arg = (worker_arg_t){s, s->n_threads};
            rc = pthread_create(&s->threads[s->n_threads], NULL, worker_main, arg);
        }
        if (rc != 0) {
            free(arg);
            snprintf(err, errlen, "[service:%s] cannot start worker thread %zu: %s",
                     s->config->name, s->n_threads + 1, strerror(rc));
            s->target_workers = s->n_threads;
            ok = false;
        } else {
            s->n_threads++;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

bool cohort_service_start(cohort_service_t *s, char *err, size_t errlen)
{
    s->threads = calloc(COHORT_MAX_WORKERS, sizeof *s->threads);
    s->slots = calloc(COHORT_MAX_WORKERS, sizeof *s->slots);
    if (!s->threads || !s->slots) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    if (!cohort_service_set_workers(s, (size_t)s->config->workers, err, errlen)) {
        cohort_service_stop_claiming(s);
        return false;
    }
    return true;
}

/* Primary maintenance: tasks written by other programs (see cohort_store_repair_tasks()),
 * stalled claims, and finished tasks past their retention. */
static void maintain(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    const cohort_service_config_t *c = s->config;
    int64_t mono = cohort_clock_monotonic_ms();
    if (mono < s->next_maintenance_ms)
        return;
    s->next_maintenance_ms = mono + cohort_service_maintenance_interval_ms(&s->eff);
    bool check_types = atomic_exchange(&s->type_check_wanted, false) ||
                       mono >= s->next_type_check_ms;
    if (check_types)
        s->next_type_check_ms = mono + COHORT_TYPE_CHECK_INTERVAL_MS;
    bson_error_t error;
    int64_t made_due, quarantined, reset;
    if (!cohort_store_repair_tasks(s->store, client, c->name, check_types, &made_due,
                                   &quarantined, &error)) {
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch, "task maintenance failed: %s",
                    error.message);
        return;
    }
    if (made_due > 0)
        cohort_logf(COHORT_LOG_INFO, c->name, "primary", epoch,
                    "%lld pending task(s) had no run_at: made due now", (long long)made_due);
    if (quarantined > 0)
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch,
                    "%lld malformed pending task(s) failed (attempts not a number or run_at "
                    "not a date)",
                    (long long)quarantined);

    int64_t now = cohort_clock_cluster_ms();
    if (cohort_election_epoch(&s->election) == 0)
        return;
    /* Nodes silent for longer than a lease lose their claims now, not at the stall timeout. */
    int64_t expired_nodes, released;
    if (!cohort_store_expire_nodes(s->store, client, c->name, now - s->eff.takeover_ms,
                                   &expired_nodes, &released, &error)) {
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch, "node expiry failed: %s",
                    error.message);
        return;
    }
    if (expired_nodes > 0 || released > 0) {
        atomic_fetch_add(&s->stats.stalled_reset, (uint64_t)released);
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch,
                    "%lld node(s) expired (no ping for %lld ms); released %lld of their claimed "
                    "task(s) to pending",
                    (long long)expired_nodes, (long long)s->eff.takeover_ms, (long long)released);
    }
    if (!cohort_store_reset_stalled(s->store, client, c->name, now - s->eff.stall_timeout_ms, &reset,
                                    &error)) {
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch, "stalled-task reset failed: %s",
                    error.message);
        return;
    }
    if (reset > 0) {
        atomic_fetch_add(&s->stats.stalled_reset, (uint64_t)reset);
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch,
                    "reset %lld stalled task(s) to pending: no check-in for %lld ms",
                    (long long)reset, (long long)s->eff.stall_timeout_ms);
    }

    /* Tracked tasks of batches not completed yet stay: their callback has not seen them. */
    int64_t keep_from = s->batch_draining ? s->batch_draining : atomic_load(&s->batch_open);
    static const char *const statuses[] = {"succeeded", "failed"};
    const int64_t retention[] = {s->eff.succeeded_retention_ms, s->eff.failed_retention_ms};
    for (int i = 0; i < 2; i++) {
        int64_t deleted = 0;
        if (retention[i] == 0 || cohort_election_epoch(&s->election) == 0)
            continue;
        if (!cohort_store_purge(s->store, client, c->name, statuses[i], now - retention[i],
                                keep_from, COHORT_PURGE_PER_TICK, &deleted, &error)) {
            cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch, "purge of %s tasks failed: %s",
                        statuses[i], error.message);
            continue;
        }
        if (deleted >= COHORT_PURGE_PER_TICK)
            s->next_maintenance_ms = 0; /* a backlog: go on next tick */
        if (deleted > 0) {
            atomic_fetch_add(&s->stats.purged, (uint64_t)deleted);
            cohort_logf(COHORT_LOG_INFO, c->name, "primary", epoch,
                        "purged %lld %s task(s) older than %lld ms", (long long)deleted,
                        statuses[i], (long long)retention[i]);
        }
    }
}

/* Keep-alive: while the main thread runs handler code (primary_work, on_tasks_completed),
 * it cannot renew primacy or ping. A long callback would then lose primacy inside itself,
 * over and over, and get its node expired. So a helper thread renews the lease and touches
 * the node document every tick until the callback returns, for at most 10 takeover periods
 * (a wedged handler must not hold primacy forever). */
typedef struct keepalive {
    cohort_service_t *service;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool done, started;
} keepalive_t;

static void *keepalive_main(void *arg)
{
    keepalive_t *k = arg;
    cohort_service_t *s = k->service;
    mongoc_client_t *client = cohort_store_pop(s->store);
    int64_t give_up = cohort_clock_monotonic_ms() + 10 * s->eff.takeover_ms;
    pthread_mutex_lock(&k->lock);
    while (!k->done && cohort_clock_monotonic_ms() < give_up) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        int64_t ns = until.tv_nsec + (s->eff.tick_ms % 1000) * 1000000;
        until.tv_sec += s->eff.tick_ms / 1000 + ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&k->wake, &k->lock, &until);
        if (k->done)
            break;
        pthread_mutex_unlock(&k->lock);
        bool renewed = cohort_election_renew_from_helper(&s->election, s->store, client);
        bson_error_t error;
        cohort_store_touch_node(s->store, client, s->node_id, &error);
        pthread_mutex_lock(&k->lock);
        if (!renewed)
            break; /* lost, or the database is away: the lease runs out as it would */
    }
    pthread_mutex_unlock(&k->lock);
    cohort_store_push(s->store, client);
    return NULL;
}

static void keepalive_start(keepalive_t *k, cohort_service_t *s)
{
    *k = (keepalive_t){.service = s};
    pthread_mutex_init(&k->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&k->wake, &attr);
    pthread_condattr_destroy(&attr);
    k->started = s->store && pthread_create(&k->thread, NULL, keepalive_main, k) == 0;
}

static void keepalive_stop(keepalive_t *k)
{
    if (k->started) {
        pthread_mutex_lock(&k->lock);
        k->done = true;
        pthread_cond_signal(&k->wake);
        pthread_mutex_unlock(&k->lock);
        pthread_join(k->thread, NULL);
    }
    pthread_cond_destroy(&k->wake);
    pthread_mutex_destroy(&k->lock);
}

/* Runs the handler's callback for the draining batch and records its completion. */
static void complete_batch(cohort_service_t *s, mongoc_client_t *client, int64_t epoch,
                           const cohort_batch_counts_t *counts)
{
    const cohort_service_config_t *c = s->config;
    int64_t seq = s->batch_draining;
    bson_error_t error;
    if (!cohort_store_acknowledge_batch(s->store, client, c->name, seq, &error)) {
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch,
                    "batch %lld: cannot acknowledge its tasks: %s", (long long)seq,
                    error.message);
        return;
    }
    bson_t sets = BSON_INITIALIZER;
    const cohort_handler_t *h = s->plugin->handler;
    if (h->on_tasks_completed) {
        cohort_ctx_t ctx;
        cohort_ctx_init(&ctx, s, client, true);
        ctx.pending_sets = &sets;
        cohort_batch_t batch = {.id = seq, .succeeded = counts->succeeded,
                                .failed = counts->failed};
        batch.cursor = cohort_store_batch_cursor(s->store, client, c->name, seq);
        keepalive_t keepalive;
        keepalive_start(&keepalive, s);
        bool ok = h->on_tasks_completed(&ctx, s->handler_state, &batch);
        keepalive_stop(&keepalive);
        mongoc_cursor_destroy(batch.cursor);
        if (!ok) {
            cohort_logf(COHORT_LOG_ERROR, c->name, "primary", epoch,
                        "batch %lld: on_tasks_completed failed (%s); retrying next tick",
                        (long long)seq, ctx.error[0] ? ctx.error : "no message");
            bson_destroy(&sets);
            return;
        }
    }
    bool completed = false;
    /* Fenced: if primacy moved on meanwhile, this matches nothing and the new primary runs
     * the callback again; the batch is recorded completed exactly once. */
    if (!cohort_store_complete_batch(s->store, client, c->name, s->node_id, epoch, seq, counts,
                                     &sets, &completed, &error)) {
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch,
                    "batch %lld: cannot record completion: %s; retrying next tick",
                    (long long)seq, error.message);
    } else if (completed) {
        s->batch_draining = 0;
        atomic_fetch_add(&s->stats.batches_completed, 1);
        cohort_logf(COHORT_LOG_INFO, c->name, "primary", epoch,
                    "batch %lld completed: %lld succeeded, %lld failed", (long long)seq,
                    (long long)counts->succeeded, (long long)counts->failed);
    } else {
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch,
                    "batch %lld: primacy moved on before its completion was recorded; the new "
                    "primary finishes it",
                    (long long)seq);
    }
    bson_destroy(&sets);
}

/* Tracked batches: close the open batch once all its tasks finished (new tracked tasks then
 * join the next), and a tick later, once nothing of it is unfinished, complete it. */
static void advance_batches(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    const cohort_service_config_t *c = s->config;
    bson_error_t error;
    cohort_batch_counts_t counts;
    int64_t seq = s->batch_draining ? s->batch_draining : atomic_load(&s->batch_open);
    int64_t moved = 0;
    if (!cohort_store_adopt_stragglers(s->store, client, c->name, seq,
                                       atomic_load(&s->batch_open), &moved, &error))
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch,
                    "cannot move late tracked tasks into batch %lld: %s",
                    (long long)atomic_load(&s->batch_open), error.message);
    else if (moved > 0)
        cohort_logf(COHORT_LOG_INFO, c->name, "primary", epoch,
                    "%lld tracked task(s) outside any open batch joined batch %lld",
                    (long long)moved, (long long)atomic_load(&s->batch_open));
    if (!cohort_store_count_batch(s->store, client, c->name, seq, &counts, &error)) {
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch, "batch %lld: cannot count: %s",
                    (long long)seq, error.message);
        return;
    }
    if (counts.unfinished > 0 || cohort_election_epoch(&s->election) == 0)
        return;
    if (s->batch_draining) {
        complete_batch(s, client, epoch, &counts);
        return;
    }
    if (counts.succeeded + counts.failed == 0)
        return; /* nothing tracked yet */
    bool closed = false;
    if (!cohort_store_close_batch(s->store, client, c->name, s->node_id, epoch, seq, &closed,
                                  &error)) {
        cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch, "batch %lld: cannot close: %s",
                    (long long)seq, error.message);
    } else if (closed) {
        s->batch_draining = seq;
        atomic_store(&s->batch_open, seq + 1);
        cohort_logf(COHORT_LOG_INFO, c->name, "primary", epoch,
                    "batch %lld drained (%lld succeeded, %lld failed); completing it next tick",
                    (long long)seq, (long long)counts.succeeded, (long long)counts.failed);
    }
}

/* Check-ins: extends the leases of the tasks this node runs, every stall_timeout_ms / 3. */
static void check_in(cohort_service_t *s, mongoc_client_t *client)
{
    bson_oid_t ids[64];
    size_t n = 0;
    int64_t now = cohort_clock_monotonic_ms();
    int64_t every = s->eff.stall_timeout_ms / 3;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_threads && n < 64; i++) {
        if (s->slots[i].busy && now - s->slots[i].checked_in_ms >= every) {
            bson_oid_copy(&s->slots[i].task, &ids[n++]);
            s->slots[i].checked_in_ms = now;
        }
    }
    pthread_mutex_unlock(&s->lock);
    bson_error_t error;
    if (n > 0 &&
        !cohort_store_checkin_tasks(s->store, client, s->config->name, s->node_id, ids, n, &error))
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                    "check-in of %zu running task(s) failed: %s", n, error.message);
}

bool cohort_service_reload_options(cohort_service_t *s, mongoc_client_t *client,
                                   const cohort_service_config_t *config, char *err,
                                   size_t errlen)
{
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, s, client, false);
    if (s->plugin->handler->reload(&ctx, s->handler_state, config->options, config->n_options))
        return true;
    snprintf(err, errlen, "%s", ctx.error[0] ? ctx.error : "no reason given");
    return false;
}

void cohort_service_reload_file_settings(cohort_service_t *s, const cohort_settings_t *file)
{
    s->file = *file;
}

void cohort_service_set_file_settings(cohort_service_t *s, const cohort_settings_t *file)
{
    s->file = *file;
    s->eff = *file;
    s->election.takeover_ms = file->takeover_ms;
    s->election.tick_ms = file->tick_ms;
}

/* Applies the settings the election just read from the config document: each key set there
 * overrides the file; a key unset returns to the file. Invalid combinations (edited by hand)
 * are reported once and ignored. */
static void apply_settings(cohort_service_t *s)
{
    cohort_settings_t next = s->file;
    bson_iter_t it;
    if (bson_iter_init(&it, &s->election.settings)) {
        while (bson_iter_next(&it)) {
            int64_t *field = cohort_settings_field(&next, bson_iter_key(&it));
            if (field && BSON_ITER_HOLDS_NUMBER(&it))
                *field = bson_iter_as_int64(&it);
        }
    }
    char why[256];
    if (!cohort_settings_check(&next, why, sizeof why)) {
        if (strcmp(why, s->settings_problem) != 0) {
            snprintf(s->settings_problem, sizeof s->settings_problem, "%s", why);
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                        "ignoring the settings in the database: %s", why);
        }
        return;
    }
    s->settings_problem[0] = '\0';
    for (size_t i = 0; cohort_setting_names[i]; i++) {
        const char *key = cohort_setting_names[i];
        int64_t was = *cohort_settings_field(&s->eff, key);
        int64_t now = *cohort_settings_field(&next, key);
        if (was != now)
            cohort_logf(COHORT_LOG_INFO, s->config->name, cohort_service_role(s), 0,
                        "setting %s = %lld (was %lld; %s)", key, (long long)now, (long long)was,
                        now == *cohort_settings_field(&s->file, key) ? "the config file's value"
                                                                     : "set in the database");
    }
    s->eff = next;
    s->election.takeover_ms = next.takeover_ms;
    s->election.tick_ms = next.tick_ms;
}

/* Queue depth for the metrics (one aggregation), kept with the epoch it was counted under so
 * that a count from an earlier primacy is never shown as current. */
static void count_queue(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    cohort_status_counts_t counts;
    bson_error_t error;
    if (!cohort_store_count_tasks(s->store, client, s->config->name, &counts, &error)) {
        cohort_logf(COHORT_LOG_DEBUG, s->config->name, "primary", epoch,
                    "cannot count the queue for the metrics: %s", error.message);
        return;
    }
    const int64_t by_status[4] = {counts.pending, counts.claimed, counts.succeeded,
                                  counts.failed};
    for (int i = 0; i < 4; i++)
        atomic_store(&s->queue_counts[i], by_status[i]);
    atomic_store(&s->queue_epoch, epoch);
}

void cohort_service_tick(cohort_service_t *s, mongoc_client_t *client)
{
    bson_error_t error;
    check_in(s, client);
    if (!cohort_election_tick(&s->election, s->store, client, &error)) {
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                    "election round failed: %s", error.message);
        return;
    }
    apply_settings(s);
    int64_t epoch = cohort_election_epoch(&s->election);
    if (epoch > 0) {
        /* The renewal (or takeover) just read the batch state. */
        atomic_store(&s->batch_open, s->election.batches.open);
        s->batch_draining = s->election.batches.draining;
    }
    const cohort_handler_t *h = s->plugin->handler;
    if (epoch > 0 && h->primary_work) {
        cohort_ctx_t ctx;
        cohort_ctx_init(&ctx, s, client, true);
        keepalive_t keepalive;
        keepalive_start(&keepalive, s);
        bool ok = h->primary_work(&ctx, s->handler_state);
        keepalive_stop(&keepalive);
        if (!ok)
            cohort_logf(COHORT_LOG_ERROR, s->config->name, "primary", epoch,
                        "primary_work failed: %s",
                        ctx.error[0] ? ctx.error : "(no message from the handler)");
    }
    if (epoch > 0 && cohort_election_epoch(&s->election) == epoch) {
        maintain(s, client, epoch);
        advance_batches(s, client, epoch);
        if (s->count_queue)
            count_queue(s, client, epoch);
    }

    pthread_mutex_lock(&s->lock);
    if (cohort_election_has_lease(&s->election))
        s->budget = s->eff.primary_task_count;
    else
        s->budget = s->eff.secondary_task_count > 0 ? s->eff.secondary_task_count : -1;
    s->drained = false;
    s->work_seen = false;
    s->probing = false;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

int64_t cohort_service_maintenance_interval_ms(const cohort_settings_t *settings)
{
    int64_t every = settings->stall_timeout_ms / 3;
    return every < COHORT_MAINTENANCE_INTERVAL_MS ? every : COHORT_MAINTENANCE_INTERVAL_MS;
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
    free(s->slots);
    if (client)
        cohort_election_step_down(&s->election, s->store, client);
    if (s->handler_ready && s->plugin->handler->destroy)
        s->plugin->handler->destroy(s->handler_state);
    cohort_plugin_unload(s->plugin);
    cohort_election_destroy(&s->election);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
