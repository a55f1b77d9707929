/*
 * maintenance.c - the primary's upkeep of its service's queue (see maintenance.h). Every
 * step is one command over the whole queue, logged when it changed something; a failed
 * step is tried again at the next run.
 */
#include "node/primary/maintenance.h"

#include "core/clock.h"
#include "core/log.h"
#include "core/status.h"
#include "store/leases.h"
#include "store/nodes.h"
#include "store/queries.h"
#include "store/queue_counts.h"
#include "store/upkeep.h"

/* A quarter of the shorter retention, between the maintenance's interval and
 * COHORT_PURGE_INTERVAL_MS: short test retentions purge promptly, days-long ones rarely. */
static int64_t purge_interval_ms(const cohort_settings_t *eff)
{
    int64_t shortest = eff->succeeded_retention_ms;
    if (shortest == 0 || (eff->failed_retention_ms > 0 && eff->failed_retention_ms < shortest))
        shortest = eff->failed_retention_ms;
    int64_t every = shortest / 4;
    if (every > COHORT_PURGE_INTERVAL_MS)
        every = COHORT_PURGE_INTERVAL_MS;
    return every;
}

void cohort_maintenance_run(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    const cohort_service_config_t *c = s->config;
    int64_t mono = cohort_clock_monotonic_ms();
    if (mono < s->next_maintenance_ms)
        return;
    s->next_maintenance_ms = mono + cohort_maintenance_interval_ms(&s->eff);
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
    /* Whether primary_task_count applies: only while other live nodes serve the service. */
    int64_t peers = 0;
    if (cohort_store_count_peers(s->store, client, c->name, s->node_id,
                                 now - s->eff.takeover_ms, &peers, &error)) {
        if (peers != s->peers && (peers == 0 || s->peers <= 0))
            cohort_logf(COHORT_LOG_INFO, c->name, "primary", epoch,
                        peers == 0 ? "no other live node serves the service: the primary "
                                     "claims without the primary_task_count cap"
                                   : "%lld other live node(s) serve the service: the primary "
                                     "claims at most primary_task_count per tick",
                        (long long)peers);
        s->peers = peers;
    }
    if (!c->external) /* a service of external workers sweeps its leases every tick */
        cohort_maintenance_expire_leases(s, client, epoch);
    if (!cohort_store_reset_stalled(s->store, client, c->name, now - s->eff.stall_timeout_ms,
                                    &reset, &error)) {
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

    if (mono < s->next_purge_ms)
        return;
    s->next_purge_ms = mono + purge_interval_ms(&s->eff);
    /* Tracked tasks of batches not completed yet stay: their callback has not seen them. */
    int64_t keep_from = s->batch_draining ? s->batch_draining : atomic_load(&s->batch_open);
    for (int i = 0; i < COHORT_STATUS_COUNT; i++) {
        if (!cohort_status_is_final((cohort_task_status_t)i))
            continue;
        const char *status = cohort_status_names[i];
        int64_t retention = i == COHORT_STATUS_SUCCEEDED ? s->eff.succeeded_retention_ms
                                                         : s->eff.failed_retention_ms;
        int64_t deleted = 0;
        if (retention == 0 || cohort_election_epoch(&s->election) == 0)
            continue;
        if (!cohort_store_purge(s->store, client, c->name, status, now - retention, keep_from,
                                COHORT_PURGE_PER_TICK, &deleted, &error)) {
            cohort_logf(COHORT_LOG_WARN, c->name, "primary", epoch, "purge of %s tasks failed: %s",
                        status, error.message);
            continue;
        }
        if (deleted >= COHORT_PURGE_PER_TICK)
            s->next_maintenance_ms = s->next_purge_ms = 0; /* a backlog: go on next tick */
        if (deleted > 0) {
            atomic_fetch_add(&s->stats.purged, (uint64_t)deleted);
            cohort_logf(COHORT_LOG_INFO, c->name, "primary", epoch,
                        "purged %lld %s task(s) older than %lld ms", (long long)deleted,
                        status, (long long)retention);
        }
    }
}

void cohort_maintenance_expire_leases(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    int64_t released = 0, workers = 0;
    bson_error_t error;
    int64_t now = cohort_clock_cluster_ms();
    if (!cohort_store_expire_leases(s->store, client, s->config->name, now, &released, &error)) {
        cohort_logf(COHORT_LOG_WARN, s->config->name, "primary", epoch,
                    "lease expiry failed: %s", error.message);
        return;
    }
    if (released > 0) {
        atomic_fetch_add(&s->stats.leases_expired, (uint64_t)released);
        cohort_logf(COHORT_LOG_WARN, s->config->name, "primary", epoch,
                    "%lld external worker lease(s) ran out: their task(s) are pending again "
                    "(the attempt counted)",
                    (long long)released);
    }
    if (!s->config->external)
        return; /* external workers only ever claim from services with handler = external */
    if (!cohort_store_expire_workers(s->store, client, now, &workers, &error))
        cohort_logf(COHORT_LOG_WARN, s->config->name, "primary", epoch,
                    "external worker expiry failed: %s", error.message);
    else if (workers > 0)
        cohort_logf(COHORT_LOG_INFO, s->config->name, "primary", epoch,
                    "%lld external worker(s) expired (no call within their wait or lease)",
                    (long long)workers);
}

void cohort_maintenance_promote_overdue(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    int64_t promoted = 0;
    bson_error_t error;
    if (!cohort_store_promote_overdue(s->store, client, s->config->name,
                                      cohort_clock_cluster_ms(), s->config->not_after_boost,
                                      &promoted, &error))
        cohort_logf(COHORT_LOG_WARN, s->config->name, "primary", epoch,
                    "not_after promotion failed: %s", error.message);
    else if (promoted > 0)
        cohort_logf(COHORT_LOG_INFO, s->config->name, "primary", epoch,
                    "promoted %lld overdue task(s) (not_after passed): priority + %lld",
                    (long long)promoted, (long long)s->config->not_after_boost);
}

void cohort_maintenance_count_queue(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    cohort_status_counts_t counts;
    bson_error_t error;
    bson_t snap;
    int64_t started = cohort_clock_monotonic_ms();
    bool ok = cohort_store_measure_counts(s->store, client, s->config->name,
                                          cohort_clock_cluster_ms(), epoch, &snap, &error);
    /* The server spends at most 1 / COHORT_COUNTS_COST_FACTOR of its time on these scans. */
    int64_t took = cohort_clock_monotonic_ms() - started;
    int64_t every = took * COHORT_COUNTS_COST_FACTOR > COHORT_UPKEEP_INTERVAL_MS
                        ? took * COHORT_COUNTS_COST_FACTOR
                        : COHORT_UPKEEP_INTERVAL_MS;
    s->next_count_ms = started + took + every;
    BSON_APPEND_INT64(&snap, "every_ms", every);
    ok = ok && cohort_store_publish_counts(s->store, client, s->config->name, &snap, &error);
    cohort_counts_status(&snap, &counts);
    bson_destroy(&snap);
    if (!ok) {
        cohort_logf(COHORT_LOG_DEBUG, s->config->name, "primary", epoch,
                    "cannot count the queue for the metrics and the dashboard: %s",
                    error.message);
        return;
    }
    for (int i = 0; i < COHORT_STATUS_COUNT; i++)
        atomic_store(&s->queue_counts[i], cohort_status_count(&counts, (cohort_task_status_t)i));
    atomic_store(&s->queue_epoch, epoch);
}

void cohort_maintenance_upkeep(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    int64_t mono = cohort_clock_monotonic_ms();
    if (mono < s->next_upkeep_ms)
        return;
    s->next_upkeep_ms = mono + COHORT_UPKEEP_INTERVAL_MS;
    cohort_maintenance_promote_overdue(s, client, epoch);
    if (s->count_queue && mono >= s->next_count_ms)
        cohort_maintenance_count_queue(s, client, epoch);
}

int64_t cohort_maintenance_interval_ms(const cohort_settings_t *settings)
{
    int64_t every = settings->stall_timeout_ms / 3;
    return every < COHORT_MAINTENANCE_INTERVAL_MS ? every : COHORT_MAINTENANCE_INTERVAL_MS;
}
