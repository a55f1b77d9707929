/*
 * service.c - a hosted service's life on the node (see service.h): create it, start its
 * workers, tick it, destroy it. Each step of a tick is its own module (check-ins, election,
 * live settings, claim filter, primary work, schedules, maintenance, batches, claim budget);
 * this file only says in which order they run.
 */
#include "node/service.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "core/error.h"
#include "node/primary/batches.h"
#include "node/work/checkins.h"
#include "node/handler/context.h"
#include "node/work/filter.h"
#include "node/primary/history.h"
#include "node/handler/isolate.h"
#include "node/primary/maintenance.h"
#include "node/work/ready.h"
#include "node/primary/schedules.h"
#include "node/work/timeouts.h"
#include "store/store.h"

cohort_service_t *cohort_service_new(const cohort_service_config_t *config, const char *node_id,
                                     const cohort_settings_t *file, cohort_store_t *store,
                                     mongoc_client_t *client, bson_error_t *error)
{
    return cohort_host_new(config, node_id, file, store, client, error);
}

bool cohort_service_start(cohort_service_t *s, bson_error_t *error)
{
    s->threads = calloc(COHORT_MAX_WORKERS, sizeof *s->threads);
    s->slots = calloc(COHORT_MAX_WORKERS, sizeof *s->slots);
    /* Room for two batch claims' extras at once; a claim asks only for the room left. */
    s->ready_cap = 2 * cohort_prefetch_capacity(s->config->claim_batch);
    cohort_prefetch_init(&s->prefetch);
    s->claim_tick_ms = s->eff.tick_ms;
    s->ready = calloc(s->ready_cap, sizeof *s->ready);
    if (!s->threads || !s->slots || !s->ready)
        return cohort_error_nomem(error, "the worker slots");
    if (s->config->external)
        return true; /* no workers: external workers claim over the HTTP API */
    /* Room for every slot SIGHUP may add; a slot's child starts on its first task. */
    if (s->config->isolation == COHORT_ISOLATION_PROCESS &&
        !(s->isolate = cohort_isolate_new(s, s->config_path, COHORT_MAX_WORKERS, error)))
        return false;
    if (s->config->isolation == COHORT_ISOLATION_THREAD &&
        !(s->timeouts = cohort_timeouts_start(s, error)))
        return false;
    if (!cohort_service_set_workers(s, (size_t)s->config->workers, error)) {
        cohort_service_stop_claiming(s);
        return false;
    }
    return true;
}

/* The handler's primary_work(), fenced, with primacy and liveness kept up meanwhile. */
static void primary_work(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    const cohort_handler_t *h = s->plugin->handler;
    if (!h->primary_work)
        return;
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, s, client, true);
    /* The main thread is busy in the handler but alive: the lease and heartbeat threads keep
     * primacy and liveness up meanwhile, for at most 10 takeover periods (election.h). */
    cohort_election_note_alive(&s->election);
    bool ok = h->primary_work(&ctx, s->handler_state);
    if (!ok)
        cohort_logf(COHORT_LOG_ERROR, s->config->name, "primary", epoch,
                    "primary_work failed: %s",
                    ctx.error[0] ? ctx.error : "(no message from the handler)");
}

void cohort_service_tick(cohort_service_t *s, mongoc_client_t *client, const bson_t *doc)
{
    bson_error_t error;
    cohort_checkins_run(s, client);
    s->election.due_hint = cohort_workers_due_hint(s);
    if (!cohort_election_tick(&s->election, s->store, client, doc, &error)) {
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                    "election round failed: %s", error.message);
        return;
    }
    cohort_live_settings_apply(s);
    pthread_mutex_lock(&s->lock);
    s->claim_tick_ms = s->eff.tick_ms; /* prefetch's window follows the tick */
    pthread_mutex_unlock(&s->lock);
    cohort_filter_apply_switches(s);
    cohort_ready_give_back_stopped(s, client);
    cohort_workers_give_back_unstartable(s, client);
    cohort_filter_refresh_busy_groups(s, client);
    int64_t epoch = cohort_election_epoch(&s->election);
    if (epoch > 0) {
        /* The renewal (or takeover) just read the batch state. */
        atomic_store(&s->batch_open, s->election.batches.open);
        s->batch_draining = s->election.batches.draining;
        primary_work(s, client, epoch);
    }
    if (epoch > 0 && cohort_election_epoch(&s->election) == epoch) {
        cohort_schedules_tick(s, client, epoch);
        if (s->config->external)
            cohort_maintenance_expire_leases(s, client, epoch);
        cohort_maintenance_run(s, client, epoch);
        cohort_batches_advance(s, client, epoch);
        cohort_maintenance_upkeep(s, client, epoch);
        cohort_history_tick(s, client, epoch);
    }
    cohort_workers_refill(s);
}

void cohort_service_stand_back(cohort_service_t *s, mongoc_client_t *client)
{
    cohort_checkins_run(s, client);
    cohort_election_step_down(&s->election, s->store, client);
    cohort_workers_hold(s);
}

void cohort_service_drain_round(cohort_service_t *s, mongoc_client_t *client)
{
    /* The main thread is alive, draining: the heartbeat thread keeps the node's document
     * fresh (else the node is expired, past 10 takeover periods, and its claims released). */
    cohort_election_note_alive(&s->election);
    cohort_checkins_run(s, client);
}

void cohort_service_destroy(cohort_service_t *s, mongoc_client_t *client)
{
    if (!s)
        return;
    cohort_workers_join(s);
    cohort_isolate_destroy(s->isolate); /* the children run the handler's destroy() */
    s->isolate = NULL;
    cohort_filter_clear(s);
    if (client)
        cohort_election_step_down(&s->election, s->store, client);
    cohort_host_destroy(s);
}
