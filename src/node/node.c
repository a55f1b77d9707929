/*
 * node.c - the node's main thread: a libevent loop with the tick and drain timers and the
 * SIGTERM, SIGINT and SIGHUP events (SIGHUP's reload is reload.c's).
 *
 * Each tick: ping (register, and sync the cluster clock from the server's $currentDate) when
 * due, the one read of the config documents of the services the node does not lead, then
 * every service's tick. An idle node sends one command per tick: its ping every
 * takeover_ms/4 replaces that tick's read (see ping_due()). If the database cannot be
 * reached the node logs it once, backs off (doubling the tick interval, at most 8 ticks and
 * 10 s), and resumes when it answers again; workers keep what they hold and retry their
 * outcome writes.
 *
 * Primacy is claimed and renewed on the tick, and renewed between ticks by the lease thread
 * (lease.h), so a tick slowed by the database does not cost the lease.
 *
 * Shutdown: stop ticking, stop claiming, step down from every primacy (so another node
 * takes over within a tick), wait for running tasks up to shutdown_grace_ms, then exit.
 * While it waits, the drain rounds keep the running tasks checked in and the node alive (no
 * tick runs then), and the timeout watchdogs keep ending runs past their timeout, so a drain
 * never gets a task reset and run twice elsewhere.
 */
#include "node/node.h"

#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/version.h"
#include "node/http/api.h"
#include "node/http/api_pool.h"
#include "node/work/handback.h"
#include "node/heartbeat.h"
#include "node/http/http.h"
#include "node/primary/lease.h"
#include "node/live_settings.h"
#include "node/liveness.h"
#include "node/http/metrics.h"
#include "node/work/watch.h"
#include "node/work/workers.h"
#include "core/log.h"
#include "node/notify.h"
#include "node/work/ready.h"
#include "node/reload.h"
#include "node/round_trips.h"
#include "node/runs.h"
#include "node/service.h"
#include "store/meta.h"
#include "store/store.h"
#include "store/nodes.h"
#include "store/runs.h"
#include "store/services.h"
#include "store/upkeep.h"

#ifndef COHORT_VERSION
#define COHORT_VERSION "0.0.0"
#endif

#define DRAIN_ROUND_MS 50

typedef struct node {
    const cohort_config_t *config;
    char node_id[COHORT_NODE_ID_MAX + 1];
    char host[256];
    int64_t started_at_ms;  /* the node's wall clock: for /metrics, never the database */
    int64_t started_mono_ms; /* monotonic, at the same moment */
    int64_t registered_start_ms; /* cluster clock: started_at in the database, 0 until synced */
    cohort_store_t *store;
    mongoc_client_t *client; /* the main thread's */
    cohort_service_t **services;
    size_t n_services;
    cohort_lease_keeper_t *lease; /* renews the primacies between ticks (lease.h) */
    cohort_heartbeat_t *heartbeat; /* keeps the node alive between pings (heartbeat.h) */
    cohort_watcher_t *watcher; /* wakes idle workers on inserts (watch.h); NULL: wake = poll */
    cohort_handback_t *handback; /* looks at prefetched tasks after batch claims (handback.h) */
    bool streams_left; /* stopped with change stream getMores in flight (watch.h) */

    struct event_base *base;
    struct event *tick;
    struct event *drain;
    struct event *watchdog; /* WATCHDOG=1 (notify.h); NULL: the unit set no WatchdogSec */
    struct event *sigterm, *sigint, *sighup;
    cohort_http_t *http; /* NULL: no http_listen */
    cohort_api_t *api;   /* the HTTP API, with the listener */
    cohort_api_pool_t *api_pool; /* its threads and held claims */
    int64_t backoff_ms; /* 0: database healthy */
    bool stopping;
    int64_t stop_deadline_ms;
    bool clock_warned;
    cohort_round_trips_t round_trips; /* main thread: the pings' round trips */
    const cohort_config_t *current; /* the configuration in force (for SIGHUP comparisons) */
    cohort_config_t *reloaded;      /* owned: the last one SIGHUP loaded */
    cohort_run_t run;               /* this process's run of node_id (runs.h) */
    bool refused;                   /* another live process has node_id: exit non-zero */
    bool schema_checked;            /* the database's schema version is one this node serves */
    int64_t pinged_ms;              /* monotonic: when the last successful ping was sent, 0 */
    int64_t feature_level;          /* the cluster's level it follows (0: not read yet) */
    int64_t level_read_ms;          /* monotonic: when it was last read */
    uint64_t work_at_ping;          /* what it had done by then (node_work()) */
    int64_t ticks;                  /* ticks run (stats.ticks: commands per tick) */
    bool read_skipped;              /* the last tick pinged instead of reading */
    int64_t primacies; /* main thread: services this node leads (spread.h) */
} node_t;

void cohort_node_default_id(char *out, size_t len)
{
    char host[200] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    char *dot = strchr(host, '.');
    if (dot)
        *dot = '\0';
    uint32_t rnd;
    bson_oid_t oid;
    bson_oid_init(&oid, NULL); /* random per process, plus a counter */
    memcpy(&rnd, oid.bytes + 8, sizeof rnd);
    snprintf(out, len, "%s-%ld-%04x", host, (long)getpid(), rnd & 0xffff);
}

static void add_stat(bson_t *doc, const char *key, _Atomic uint64_t *value)
{
    BSON_APPEND_INT64(doc, key, (int64_t)atomic_load(value));
}

static void build_stats(node_t *n, bson_t *stats)
{
    cohort_store_stats_t db = cohort_store_stats(n->store);
    BSON_APPEND_INT64(stats, "db_commands", (int64_t)db.commands);
    BSON_APPEND_INT64(stats, "db_command_errors", (int64_t)db.command_errors);
    BSON_APPEND_INT64(stats, "ticks", n->ticks);
    /* Contention at the queue head (store/store.h, docs/SCALING.md). */
    BSON_APPEND_INT64(stats, "claims_attempted", (int64_t)db.claims_attempted);
    BSON_APPEND_INT64(stats, "claims_empty", (int64_t)db.claims_empty);
    BSON_APPEND_INT64(stats, "claim_candidates_lost", (int64_t)db.claim_candidates_lost);
    bson_t services, one;
    BSON_APPEND_DOCUMENT_BEGIN(stats, "services", &services);
    for (size_t i = 0; i < n->n_services; i++) {
        cohort_service_t *s = n->services[i];
        BSON_APPEND_DOCUMENT_BEGIN(&services, s->config->name, &one);
        add_stat(&one, "claimed", &s->stats.claimed);
        add_stat(&one, "succeeded", &s->stats.succeeded);
        add_stat(&one, "failed", &s->stats.failed);
        add_stat(&one, "timed_out", &s->stats.timed_out);
        add_stat(&one, "retried", &s->stats.retried);
        add_stat(&one, "lost_claims", &s->stats.lost_claims);
        add_stat(&one, "stalled_reset", &s->stats.stalled_reset);
        add_stat(&one, "purged", &s->stats.purged);
        add_stat(&one, "batches_completed", &s->stats.batches_completed);
        BSON_APPEND_INT64(&one, "epoch", cohort_election_epoch(&s->election));
        bson_append_document_end(&services, &one);
    }
    bson_append_document_end(stats, &services);
}

static void schedule_tick(node_t *n, int64_t ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    evtimer_add(n->tick, &tv);
}

/* The database failed: log it once, and double the tick interval (at most 8 ticks, 10 s). */
static void back_off(node_t *n, const bson_error_t *error)
{
    if (n->backoff_ms == 0)
        cohort_log_node(COHORT_LOG_ERROR,
                        "database unreachable: %s; staying up and retrying with backoff",
                        error->message);
    int64_t cap = 8 * n->config->tick_ms < 10000 ? 8 * n->config->tick_ms : 10000;
    if (cap < n->config->tick_ms)
        cap = n->config->tick_ms;
    n->backoff_ms = n->backoff_ms ? n->backoff_ms * 2 : n->config->tick_ms * 2;
    if (n->backoff_ms > cap)
        n->backoff_ms = cap;
}

/* When the process started, on the cluster clock (a time the database keeps must not come from
 * this node's wall clock); 0 (not written) until the clock is synced. */
static int64_t started_at_in_cluster_time(node_t *n)
{
    if (!n->registered_start_ms && cohort_clock_synced())
        n->registered_start_ms =
            cohort_clock_cluster_ms() - (cohort_clock_monotonic_ms() - n->started_mono_ms);
    return n->registered_start_ms;
}

/* The highest feature level this build knows (core/version.h). COHORT_TEST_FEATURE_LEVEL, for
 * tests only, makes it claim a lower one, as a node of an older release would. */
static int64_t known_level(void)
{
    const char *env = getenv("COHORT_TEST_FEATURE_LEVEL");
    long level = env ? strtol(env, NULL, 10) : 0;
    return level >= 1 && level < COHORT_FEATURE_LEVEL ? level : COHORT_FEATURE_LEVEL;
}

/* Reads the cluster's feature level (store/meta.h) at start and every LEVEL_READ_MS after:
 * `cohortctl upgrade finish` takes effect without a restart, for one find per half minute.
 * A level above the one this build knows is followed as the highest it knows (finish refuses
 * to raise it while such a node is live). A failed read keeps the level it follows. */
#define LEVEL_READ_MS 30000
static void follow_level(node_t *n, bool now)
{
    int64_t mono = cohort_clock_monotonic_ms();
    if (!now && n->level_read_ms && mono - n->level_read_ms < LEVEL_READ_MS)
        return;
    n->level_read_ms = mono;
    int64_t level = 0;
    bson_error_t error;
    if (!cohort_store_read_level(n->store, n->client, &level, &error)) {
        cohort_log_node(COHORT_LOG_WARN, "%s; keeping feature level %lld", error.message,
                        (long long)n->feature_level);
        return;
    }
    if (level > known_level())
        level = known_level();
    if (level != n->feature_level)
        cohort_log_node(COHORT_LOG_INFO, "feature level %lld in use (this release knows %lld)",
                        (long long)level, (long long)known_level());
    n->feature_level = level;
    for (size_t i = 0; i < n->n_services; i++) {
        cohort_service_t *s = n->services[i];
        pthread_mutex_lock(&s->lock);
        s->feature_level = level;
        pthread_mutex_unlock(&s->lock);
    }
}

/* Registers the node and measures the cluster clock. False: the database is away. */
static bool ping(node_t *n)
{
    cohort_node_info_t info = {
        .node_id = n->node_id,
        .host = n->host,
        .pid = getpid(),
        .version = COHORT_VERSION,
        .schema = COHORT_SCHEMA_VERSION,
        .feature_level = known_level(),
        .level_in_use = n->feature_level,
        .started_at_ms = started_at_in_cluster_time(n),
        .run_id = n->run.run_id,
        .run_since_ms = n->run.since_ms,
        .standing_back = n->run.standing_back,
    };
    const char *names[n->n_services ? n->n_services : 1];
    int64_t workers[n->n_services ? n->n_services : 1];
    const char *const *kinds[n->n_services ? n->n_services : 1];
    for (size_t i = 0; i < n->n_services; i++) {
        names[i] = n->services[i]->config->name;
        workers[i] = (int64_t)n->services[i]->target_workers; /* live: SIGHUP may change it */
        const cohort_plugin_t *plugin = n->services[i]->plugin;
        kinds[i] = plugin && plugin->handler ? plugin->handler->kinds : NULL; /* NULL: all */
    }
    info.services = names;
    info.workers = workers;
    info.kinds = kinds;
    info.n_services = n->n_services;
    bson_t stats = BSON_INITIALIZER, settings = BSON_INITIALIZER;
    build_stats(n, &stats);
    for (size_t i = 0; i < n->n_services; i++)
        cohort_live_settings_publish(n->services[i], &settings);
    info.settings = &settings;
    info.db_rtt_p99_ms = cohort_round_trips_p99(&n->round_trips);
    info.db_rtt_p50_ms = cohort_round_trips_percentile(&n->round_trips, 50);
    info.clock_synced = cohort_clock_synced(); /* the skew of the previous ping's sample */
    info.clock_skew_ms = cohort_clock_node_skew_ms();
    bson_error_t error;
    int64_t server_ms = 0;
    bool expired = false;
    cohort_node_run_t other_run;
    int64_t sent = cohort_clock_monotonic_ms();
    bool ok = cohort_store_ping_node(n->store, n->client, &info, &stats, &server_ms, &expired,
                                     &other_run, &error);
    int64_t received = cohort_clock_monotonic_ms();
    bson_destroy(&stats);
    bson_destroy(&settings);

    if (!ok) {
        back_off(n, &error);
        return false;
    }
    /* The first ping also connects (TCP, handshake): not a round trip of the database's. */
    if (n->pinged_ms)
        cohort_round_trips_add(&n->round_trips, received - sent);
    if (n->backoff_ms) {
        cohort_log_node(COHORT_LOG_INFO, "database reachable again");
        n->backoff_ms = 0;
    }
    if (expired) {
        /* The Izenda "alive ping returns false": the cluster gave this node up while it was
         * silent and released its tasks; whatever it still runs will not be recorded. */
        cohort_log_node(COHORT_LOG_WARN,
                        "this node was expired by the cluster (no ping for longer than its "
                        "lease); its claimed tasks were released to other nodes; "
                        "re-registering");
        bson_error_t rerr;
        if (!cohort_store_reregister_node(n->store, n->client, n->node_id, &rerr))
            cohort_log_node(COHORT_LOG_WARN, "re-registration failed: %s", rerr.message);
    }
    cohort_run_judge(&n->run, &other_run, server_ms,
                     cohort_liveness_min_takeover_ms(n->services, n->n_services,
                                                     n->config->takeover_ms));
    cohort_heartbeat_note_ping(n->heartbeat, sent, n->run.standing_back);
    n->pinged_ms = sent;
    /* The live takeover (cohortctl settings set may lower it), not the file's. */
    int64_t max_rtt =
        cohort_liveness_max_clock_rtt_ms(n->services, n->n_services, n->config->takeover_ms);
    if (!cohort_clock_sync(server_ms, sent, received, max_rtt))
        cohort_log_node(COHORT_LOG_WARN,
                        "clock sample ignored: round trip %lld ms exceeds %lld ms "
                        "(the smallest live takeover_ms/8); keeping the previous offset",
                        (long long)(received - sent), (long long)max_rtt);
    int64_t skew = cohort_clock_node_skew_ms();
    if (!n->clock_warned && (skew > 1000 || skew < -1000)) {
        n->clock_warned = true;
        cohort_log_node(COHORT_LOG_WARN,
                        "this node's clock is %lld ms %s the database server's; Cohort uses "
                        "the server's time, but fix NTP on this host",
                        (long long)(skew < 0 ? -skew : skew), skew > 0 ? "ahead of" : "behind");
    }
    return true;
}

/* Creates the service's config document and indexes once; until that succeeds the
 * service takes no part (its workers have no claim budget). */
static bool prepare(node_t *n, cohort_service_t *s)
{
    if (s->prepared)
        return true;
    /* The release below stamps the tasks' history with the cluster clock: not before it is
     * measured (a restarted node's own clock may be minutes off). */
    if (!cohort_clock_synced())
        return false;
    bson_error_t error;
    if (!cohort_store_ensure_service_after(n->store, n->client, s->config->name,
                                           s->election.highest_epoch, NULL, &error)) {
        cohort_logf(COHORT_LOG_ERROR, s->config->name, NULL, 0,
                    "cannot prepare the service in the database (config document, indexes): "
                    "%s; retrying next tick",
                    error.message);
        return false;
    }
    /* Claims held under this node id belong to an earlier process with the same configured
     * node_id (killed, or past its grace period): nothing here runs them, so release them
     * now rather than after stall_timeout_ms. (node_id must be unique per running process.) */
    int64_t released = 0;
    if (!cohort_store_release_claims(n->store, n->client, s->config->name, n->node_id, &released,
                                     &error)) {
        cohort_logf(COHORT_LOG_ERROR, s->config->name, NULL, 0,
                    "cannot release the claims of this node's previous run: %s; retrying next "
                    "tick",
                    error.message);
        return false;
    }
    if (released > 0)
        cohort_logf(COHORT_LOG_WARN, s->config->name, NULL, 0,
                    "released %lld task(s) claimed by an earlier run of node %s",
                    (long long)released, n->node_id);
    s->prepared = true;
    return true;
}

/* The service's config document went missing while the node ran (a dropped collection or
 * database, an in-memory server restarted, a restore): recreate it at once, as at start-up,
 * with an epoch above every one handed out, so that a primary is elected again on the next
 * tick under a new epoch. Its claims are this run's own: unlike prepare(), release nothing. */
static void recreate_if_missing(node_t *n, cohort_service_t *s)
{
    if (!s->election.document_missing)
        return;
    bson_error_t error;
    /* The epoch floor is the server's clock (services.h), not only the largest epoch this
     * node saw: a node that missed a newer one would hand it out a second time. */
    int64_t floor = 0;
    if (!cohort_store_ensure_service_after(n->store, n->client, s->config->name,
                                           s->election.highest_epoch, &floor, &error)) {
        cohort_logf(COHORT_LOG_ERROR, s->config->name, NULL, 0,
                    "the service's config document is missing and cannot be recreated: %s; "
                    "retrying next tick",
                    error.message);
        return;
    }
    s->election.document_missing = false;
    cohort_logf(COHORT_LOG_WARN, s->config->name, NULL, 0,
                "the service's config document was missing (dropped, or the database lost its "
                "data): recreated it with its indexes; epochs continue after %lld (the "
                "database server's clock, above every epoch handed out before)",
                (long long)floor);
}

/* The node ticks as often as its most demanding service wants (tick_ms may be set live). */
static int64_t tick_ms(node_t *n)
{
    int64_t tick = n->config->tick_ms;
    for (size_t i = 0; i < n->n_services; i++)
        if (i == 0 || n->services[i]->eff.tick_ms < tick)
            tick = n->services[i]->eff.tick_ms;
    return tick;
}

/* Pinged and every service prepared, with its config document there as last read: the
 * node is ready (READY=1 for a service manager). */
static bool all_prepared(node_t *n)
{
    for (size_t i = 0; i < n->n_services; i++)
        if (!n->services[i]->prepared || n->services[i]->election.document_missing)
            return false;
    return true;
}

/* Before anything is written: the database's schema version (store/meta.h) must be one this
 * build serves. A newer one refuses the start, naming both versions. */
static cohort_run_start_t check_schema(node_t *n, bson_error_t *error)
{
    cohort_schema_state_t db;
    if (!cohort_store_read_schema(n->store, n->client, COHORT_SCHEMA_VERSION, n->node_id, &db,
                                  error))
        return COHORT_RUN_RETRY;
    if (db.version > COHORT_SCHEMA_VERSION || db.version < COHORT_SCHEMA_VERSION_OLDEST) {
        bson_set_error(
            error, COHORT_DOMAIN_STORE, COHORT_CODE_INVALID,
            "the database's schema version is %lld, %s than schema version %d that "
            "cohortd %s serves%s",
            (long long)db.version, db.version > COHORT_SCHEMA_VERSION ? "newer" : "older",
            db.version > COHORT_SCHEMA_VERSION ? COHORT_SCHEMA_VERSION
                                               : COHORT_SCHEMA_VERSION_OLDEST,
            COHORT_VERSION,
            db.version > COHORT_SCHEMA_VERSION ? "; run the release that wrote it, or a later one"
                                               : "");
        return COHORT_RUN_REFUSED;
    }
    if (db.written)
        cohort_log_node(COHORT_LOG_INFO, "new database: recorded schema version %lld",
                        (long long)db.version);
    else if (!db.recorded)
        cohort_log_node(COHORT_LOG_INFO,
                        "the database records no schema version (written before 0.2.0): "
                        "serving it as schema version 1, left unrecorded for a migration");
    else if (db.version < COHORT_SCHEMA_VERSION)
        cohort_log_node(COHORT_LOG_INFO,
                        "the database's schema version %lld is older than this release's %d: "
                        "serving it",
                        (long long)db.version, COHORT_SCHEMA_VERSION);
    n->schema_checked = true;
    follow_level(n, true);
    return COHORT_RUN_STARTED;
}

/* Before the first ping: no other live process may have this node_id (runs.h). False
 * while that is not known yet (the database failed) or once the node is refused. */
static bool start_run(node_t *n)
{
    if (n->run.started)
        return true;
    bson_error_t error;
    int64_t liveness =
        cohort_liveness_min_takeover_ms(n->services, n->n_services, n->config->takeover_ms);
    cohort_run_start_t start = n->schema_checked ? COHORT_RUN_STARTED : check_schema(n, &error);
    if (start == COHORT_RUN_STARTED)
        start = cohort_run_start(&n->run, n->store, n->client, liveness, tick_ms(n), &error);
    switch (start) {
    case COHORT_RUN_STARTED:
        cohort_log_node(COHORT_LOG_INFO, "run %s registered", n->run.run_id);
        /* The main thread is alive from here on, though its first tick (preparing each
         * service on a slow database) may take longer than a run's liveness: the heartbeat
         * thread keeps the run's entry fresh meanwhile, so a second process with this
         * node_id started now still sees this one alive and is refused (runs.h). */
        for (size_t i = 0; i < n->n_services; i++)
            cohort_election_note_alive(&n->services[i]->election);
        return true;
    case COHORT_RUN_REFUSED:
        cohort_log_node(COHORT_LOG_ERROR, "cannot start: %s", error.message);
        n->refused = true;
        event_base_loopbreak(n->base);
        return false;
    case COHORT_RUN_RETRY:
        break;
    }
    back_off(n, &error); /* the first ping's "database reachable again" ends it */
    return false;
}

/* What this node's workers and external workers did so far, over all its services (claims
 * and outcomes): whether it worked since its last ping. */
static uint64_t node_work(node_t *n)
{
    uint64_t work = 0;
    for (size_t i = 0; i < n->n_services; i++) {
        cohort_service_stats_t *st = &n->services[i]->stats;
        work += atomic_load(&st->claimed) + atomic_load(&st->succeeded) +
                atomic_load(&st->failed) + atomic_load(&st->retried) +
                atomic_load(&st->timed_out) + atomic_load(&st->ext_claimed) +
                atomic_load(&st->ext_succeeded) + atomic_load(&st->ext_failed) +
                atomic_load(&st->ext_retried);
    }
    return work;
}

/* Whether an idle node's tick pings: as often as its liveness needs, every quarter of the
 * smallest takeover_ms (the heartbeat thread's cadence, heartbeat.h), less a tick so that
 * the heartbeat thread has nothing to add. (A node that worked pings every tick, so its
 * statistics in `nodes` stay fresh; the first tick and a run standing back ping too.) */
static bool ping_due(node_t *n)
{
    if (n->pinged_ms == 0 || n->run.standing_back || !cohort_clock_synced())
        return true;
    int64_t takeover =
        cohort_liveness_min_takeover_ms(n->services, n->n_services, n->config->takeover_ms);
    return cohort_clock_monotonic_ms() - n->pinged_ms >= takeover / 4 - tick_ms(n);
}

/* The node's one read of a tick: the config documents of the prepared services it does not
 * lead, in one find, into docs[0..*n_docs), with read[i] pointing at service i's (empty if
 * missing; NULL where not read). False: the database is away (backed off). */
static bool read_services(node_t *n, bson_t *docs, size_t *n_docs, const bson_t **read)
{
    const char *names[n->n_services ? n->n_services : 1];
    size_t at[n->n_services ? n->n_services : 1];
    size_t k = 0;
    for (size_t i = 0; i < n->n_services; i++) {
        read[i] = NULL;
        cohort_service_t *s = n->services[i];
        if (s->prepared && !s->election.primary) {
            at[k] = i;
            names[k++] = s->config->name;
        }
    }
    *n_docs = 0;
    if (k == 0)
        return true; /* it leads every service it has: the renewals read for it */
    bool found[k];
    bson_error_t error;
    if (!cohort_store_read_services(n->store, n->client, names, k, docs, found, &error)) {
        for (size_t j = 0; j < k; j++)
            bson_destroy(&docs[j]);
        back_off(n, &error);
        return false;
    }
    for (size_t j = 0; j < k; j++)
        read[at[j]] = &docs[j];
    *n_docs = k;
    return true;
}

/* Every service's tick, after the ping (if any). With `read`, the node first reads the config
 * documents of its secondary services (one find); an idle tick that pinged does not, and its
 * secondaries act on the next tick's read: an idle node sends one command per tick. */
static void tick_services(node_t *n, bool read)
{
    size_t ns = n->n_services ? n->n_services : 1;
    bson_t docs[ns];
    const bson_t *docs_of[ns];
    size_t n_docs = 0;
    for (size_t i = 0; i < n->n_services; i++) {
        docs_of[i] = NULL;
        if (!n->run.standing_back && !n->stopping)
            prepare(n, n->services[i]);
    }
    if (read && !n->run.standing_back && !read_services(n, docs, &n_docs, docs_of))
        return;
    for (size_t i = 0; i < n->n_services && !n->stopping; i++) {
        cohort_service_t *s = n->services[i];
        if (n->run.standing_back) {
            cohort_service_stand_back(s, n->client);
        } else if (s->prepared) {
            cohort_service_tick(s, n->client, docs_of[i]);
            recreate_if_missing(n, s);
        }
    }
    for (size_t j = 0; j < n_docs; j++)
        bson_destroy(&docs[j]);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    node_t *n = arg;
    if (n->stopping)
        return;
    if (!start_run(n)) {
        if (!n->refused)
            schedule_tick(n, n->backoff_ms);
        return;
    }
    n->ticks++;
    uint64_t work = node_work(n);
    bool worked = work != n->work_at_ping, first = n->pinged_ms == 0;
    bool pinging = worked || ping_due(n);
    if (!pinging || ping(n)) {
        if (pinging)
            n->work_at_ping = work;
        /* An idle ping replaces the read, but never two in a row (a takeover_ms under 8
         * ticks has a ping due every tick). */
        bool read = !pinging || worked || first || n->read_skipped;
        n->read_skipped = !read;
        tick_services(n, read);
        follow_level(n, false);
        if (!n->stopping && all_prepared(n) && cohort_notify_ready())
            cohort_notify_status("running %zu service(s) on database '%s'", n->n_services,
                                 n->config->database);
    }
    if (n->api)
        cohort_api_set_token_ttl(n->api, tick_ms(n)); /* a token is trusted for one tick */
    cohort_api_pool_wake(n->api_pool, NULL); /* held claims look again at least every tick */
    schedule_tick(n, n->backoff_ms ? n->backoff_ms : tick_ms(n));
}

static size_t running_tasks(node_t *n)
{
    size_t running = 0;
    for (size_t i = 0; i < n->n_services; i++)
        running += cohort_service_running(n->services[i]);
    return running;
}

/* Of those, the handlers still running a task the timeout watchdog already ended (timed_out,
 * final): no outcome of theirs counts any more, so the drain need not wait for them. */
static size_t wedged_tasks(node_t *n)
{
    size_t wedged = 0;
    for (size_t i = 0; i < n->n_services; i++)
        wedged += (size_t)atomic_load(&n->services[i]->wedged_slots);
    return wedged;
}

/* Every DRAIN_ROUND_MS after SIGTERM: the running tasks keep their check-ins (and the node
 * its liveness) while no tick runs, until the last task that still counts ends or the grace
 * period is over. */
static void on_drain(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    node_t *n = arg;
    size_t running = running_tasks(n);
    if (running <= wedged_tasks(n) || cohort_clock_monotonic_ms() >= n->stop_deadline_ms) {
        event_base_loopbreak(n->base);
        return;
    }
    for (size_t i = 0; i < n->n_services; i++)
        cohort_service_drain_round(n->services[i], n->client);
    struct timeval tv = {0, DRAIN_ROUND_MS * 1000};
    evtimer_add(n->drain, &tv);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    node_t *n = arg;
    if (n->stopping) {
        cohort_log_node(COHORT_LOG_WARN, "second %s: exiting now", strsignal((int)sig));
        event_base_loopbreak(n->base);
        return;
    }
    n->stopping = true;
    cohort_notify_stopping();
    cohort_log_node(COHORT_LOG_INFO,
                    "%s: stopping claims, stepping down, letting running tasks finish "
                    "(grace %lld ms)",
                    strsignal((int)sig), (long long)n->config->shutdown_grace_ms);
    evtimer_del(n->tick);
    for (size_t i = 0; i < n->n_services; i++) {
        cohort_service_stop_claiming(n->services[i]);
        /* Prefetched tasks no worker started go back now, for the other nodes to run
         * during the grace (workers give back any a claim in flight still adds). */
        cohort_ready_give_back_all(n->services[i], n->client);
        cohort_election_step_down(&n->services[i]->election, n->store, n->client);
    }
    n->stop_deadline_ms = cohort_clock_monotonic_ms() + n->config->shutdown_grace_ms;
    on_drain(-1, 0, n);
}

/* Sent from the loop itself, so only a loop that still runs its timers keeps the service
 * manager's watchdog quiet: a callback that never returns (a wedged tick) stops the pings and
 * systemd restarts the node. It goes on through the drain after SIGTERM. */
static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    cohort_notify_watchdog();
}

static void on_hup(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    node_t *n = arg;
    if (n->stopping)
        return;
    cohort_config_t *next = cohort_reload(n->current, n->services, n->n_services, n->client);
    if (next) {
        /* The services keep pointing into the configuration they started with (workers
         * read it without locks); the reloaded one is the base of the next comparison. */
        cohort_config_destroy(n->reloaded);
        n->reloaded = next;
        n->current = next;
    }
}

static void log_summary(node_t *n)
{
    cohort_store_stats_t db = cohort_store_stats(n->store);
    uint64_t claimed = 0, succeeded = 0, failed = 0, retried = 0, timed_out = 0;
    for (size_t i = 0; i < n->n_services; i++) {
        cohort_service_stats_t *st = &n->services[i]->stats;
        claimed += atomic_load(&st->claimed);
        succeeded += atomic_load(&st->succeeded);
        failed += atomic_load(&st->failed);
        retried += atomic_load(&st->retried);
        timed_out += atomic_load(&st->timed_out);
    }
    cohort_log_node(COHORT_LOG_INFO,
                    "stopped: claimed=%llu succeeded=%llu failed=%llu retried=%llu "
                    "db_commands=%llu db_command_errors=%llu timed_out=%llu "
                    "claims_attempted=%llu claims_empty=%llu claim_candidates_lost=%llu",
                    (unsigned long long)claimed, (unsigned long long)succeeded,
                    (unsigned long long)failed, (unsigned long long)retried,
                    (unsigned long long)db.commands, (unsigned long long)db.command_errors,
                    (unsigned long long)timed_out, (unsigned long long)db.claims_attempted,
                    (unsigned long long)db.claims_empty,
                    (unsigned long long)db.claim_candidates_lost);
}

/* /readyz: the last ping reached the database and every service is prepared there. */
static bool http_ready(void *arg, char *why, size_t whylen)
{
    node_t *n = arg;
    if (n->stopping)
        snprintf(why, whylen, "shutting down");
    else if (n->backoff_ms)
        snprintf(why, whylen, "database unreachable (the last ping failed)");
    else if (n->run.standing_back)
        snprintf(why, whylen, "another live process has this node_id: standing back");
    else if (!all_prepared(n))
        snprintf(why, whylen, "a service's config document is missing in the database (not "
                              "prepared yet, or being recreated)");
    else
        return true;
    return false;
}

static char *http_metrics(void *arg, size_t *len)
{
    node_t *n = arg;
    cohort_metrics_source_t source = {.services = n->services,
                                      .n_services = n->n_services,
                                      .store = n->store,
                                      .watcher = n->watcher,
                                      .started_at_ms = n->started_at_ms,
                                      .version = COHORT_VERSION};
    return cohort_metrics_render(&source, len);
}

/* The HTTP API's requests go to its threads (api_pool.h); their replies come back here. */
static void http_api(void *arg, const cohort_api_request_t *request, void *origin)
{
    node_t *n = arg;
    cohort_api_pool_submit(n->api_pool, request, origin);
}

static bool api_deliver(void *arg, void *origin, const cohort_api_reply_t *reply)
{
    (void)arg;
    return cohort_http_api_reply(origin, reply);
}

static bool api_client_gone(void *arg, void *origin)
{
    (void)arg;
    return cohort_http_api_client_gone(origin);
}

/* The listener saw a client leave: a claim it held ends. */
static void http_api_gone(void *arg, void *origin)
{
    cohort_api_pool_gone(((node_t *)arg)->api_pool, origin);
}

/* The HTTP listener, if configured; the primaries then count their queues for it. */
static bool start_http(node_t *n)
{
    if (!n->config->http_listen)
        return true;
    bson_error_t err;
    cohort_api_options_t api = {.store = n->store,
                                .config = n->config,
                                .token_ttl_ms = tick_ms(n),
                                .services = n->services,
                                .n_services = n->n_services,
                                .max_wait_ms = n->config->api_max_wait_ms};
    if (!(n->api = cohort_api_new(&api))) {
        cohort_log_node(COHORT_LOG_ERROR, "cannot start: out of memory");
        return false;
    }
    n->api_pool = cohort_api_pool_start(n->base, n->api, n->store,
                                        (size_t)n->config->api_threads, api_deliver,
                                        api_client_gone, n, &err);
    if (!n->api_pool) {
        cohort_log_node(COHORT_LOG_ERROR, "cannot start: %s", err.message);
        return false;
    }
    cohort_http_callbacks_t callbacks = {.ready = http_ready,
                                         .metrics = http_metrics,
                                         .api = http_api,
                                         .api_gone = http_api_gone,
                                         .arg = n,
                                         .api_max_body = (size_t)n->config->api_max_body,
                                         .max_connections =
                                             (size_t)n->config->http_max_connections};
    n->http = cohort_http_start(n->base, n->config->http_listen, &callbacks, &err);
    if (!n->http) {
        cohort_log_node(COHORT_LOG_ERROR, "cannot start: %s", err.message);
        return false;
    }
    for (size_t i = 0; i < n->n_services; i++)
        n->services[i]->count_queue = true;
    cohort_log_node(COHORT_LOG_INFO,
                    "serving /healthz, /readyz, /metrics and /api/v1/ on http://%s",
                    n->config->http_listen);
    return true;
}

/* The lease and heartbeat threads, which keep primacy and liveness up between ticks, and the
 * change stream threads that wake idle workers between them. */
static bool start_keepers(node_t *n)
{
    cohort_election_t *elections[n->n_services ? n->n_services : 1];
    for (size_t i = 0; i < n->n_services; i++)
        elections[i] = &n->services[i]->election;
    bson_error_t err;
    n->lease = cohort_lease_keeper_start(n->store, elections, n->n_services, &err);
    if (n->lease)
        n->heartbeat = cohort_heartbeat_start(n->store, n->node_id, n->run.run_id, elections,
                                              n->n_services, &err);
    bool ok = n->heartbeat != NULL;
    if (ok && n->config->wake == COHORT_WAKE_CHANGE_STREAM) {
        n->watcher = cohort_watcher_start(n->store, n->services, n->n_services,
                                          n->config->wake_await_ms, tick_ms(n), &err);
        ok = n->watcher != NULL;
    }
    if (!ok)
        cohort_log_node(COHORT_LOG_ERROR, "cannot start: %s", err.message);
    return ok;
}

/* Before the elections they read are freed, and before the run's entry is removed (a touch
 * after that would write it again). */
static void stop_keepers(node_t *n)
{
    n->streams_left = !cohort_watcher_stop(n->watcher);
    n->watcher = NULL;
    cohort_heartbeat_stop(n->heartbeat);
    n->heartbeat = NULL;
    cohort_lease_keeper_stop(n->lease);
    n->lease = NULL;
}

int cohort_node_run(const cohort_config_t *config, bool *abandoned)
{
    *abandoned = false;
    node_t n = {.config = config, .current = config};
    int rc = 1;
    if (config->node_id)
        snprintf(n.node_id, sizeof n.node_id, "%s", config->node_id);
    else
        cohort_node_default_id(n.node_id, sizeof n.node_id);
    gethostname(n.host, sizeof n.host - 1);
    n.started_at_ms = cohort_clock_realtime_ms();
    n.started_mono_ms = cohort_clock_monotonic_ms();
    cohort_run_init(&n.run, n.node_id);
    cohort_log_set_node(n.node_id);
    cohort_log_set_level(config->log_level);
    cohort_log_set_json(config->log_json);
    signal(SIGPIPE, SIG_IGN);
    /* A reload asked for while the node is still starting would kill it (SIGHUP's default
     * action) before the loop's handler is installed: the file was just read anyway. */
    signal(SIGHUP, SIG_IGN);

    bson_error_t error;
    n.store = cohort_store_new(config->mongodb_uri, config->database, "cohortd", &error);
    if (!n.store) {
        cohort_log_node(COHORT_LOG_ERROR, "invalid mongodb_uri: %s", error.message);
        return 1;
    }
    n.client = cohort_store_pop(n.store);
    n.services = calloc(config->n_services, sizeof *n.services);
    if (!n.services)
        goto out;
    for (size_t i = 0; i < config->n_services; i++) {
        cohort_settings_t file;
        cohort_settings_from_config(config, &config->services[i], &file);
        bson_error_t err;
        cohort_service_t *s = cohort_service_new(&config->services[i], n.node_id, &file, n.store,
                                                 n.client, &err);
        if (!s) {
            cohort_log_node(COHORT_LOG_ERROR, "%s", err.message);
            goto out;
        }
        s->config_path = config->path; /* isolation = process: the children load it */
        s->election.node_primacies = &n.primacies; /* spread primacy over nodes (spread.h) */
        cohort_logf(COHORT_LOG_INFO, s->config->name, NULL, 0,
                    "handler '%s' loaded from %s (ABI version %d)",
                    s->plugin->handler->name ? s->plugin->handler->name : "(unnamed)",
                    s->plugin->path, s->plugin->handler->abi_version);
        n.services[n.n_services++] = s;
    }
    if (!(n.handback = cohort_handback_new(n.services, n.n_services, &error))) {
        cohort_log_node(COHORT_LOG_ERROR, "%s", error.message);
        goto out;
    }
    for (size_t i = 0; i < n.n_services; i++) {
        bson_error_t err;
        if (!cohort_service_start(n.services[i], &err)) {
            cohort_log_node(COHORT_LOG_ERROR, "%s", err.message);
            goto out;
        }
    }

    if (!start_keepers(&n))
        goto out;
    n.base = event_base_new();
    if (!n.base || !start_http(&n))
        goto out;
    if (!cohort_handback_attach(n.handback, n.base, n.client, &error)) {
        cohort_log_node(COHORT_LOG_ERROR, "%s", error.message);
        goto out;
    }
    n.tick = evtimer_new(n.base, on_tick, &n);
    n.drain = evtimer_new(n.base, on_drain, &n);
    n.sigterm = evsignal_new(n.base, SIGTERM, on_signal, &n);
    n.sigint = evsignal_new(n.base, SIGINT, on_signal, &n);
    n.sighup = evsignal_new(n.base, SIGHUP, on_hup, &n);
    evsignal_add(n.sighup, NULL);
    evsignal_add(n.sigterm, NULL);
    evsignal_add(n.sigint, NULL);
    int64_t watchdog_ms = cohort_notify_watchdog_interval_ms();
    if (watchdog_ms > 0) {
        n.watchdog = event_new(n.base, -1, EV_PERSIST, on_watchdog, &n);
        struct timeval every = {watchdog_ms / 1000, (watchdog_ms % 1000) * 1000};
        event_add(n.watchdog, &every);
    }
    cohort_log_node(COHORT_LOG_INFO,
                    "cohortd %s started: %zu service(s), database '%s', tick %lld ms, "
                    "takeover %lld ms",
                    COHORT_VERSION, n.n_services, config->database, (long long)config->tick_ms,
                    (long long)config->takeover_ms);
    on_tick(-1, 0, &n);
    if (!n.refused)
        event_base_dispatch(n.base);
    rc = n.refused ? 1 : 0;

out:;
    if (n.api_pool) {
        /* Before the services its threads read: answers the claims it holds (no tasks) and
         * the requests it queued (503), and lets the loop write them out. That last run of the
         * loop may read new requests too: the stopped pool answers them 503, so it is freed
         * only with the listener. */
        cohort_api_pool_stop(n.api_pool);
        event_base_loop(n.base, EVLOOP_NONBLOCK);
    }
    size_t still_running = n.base ? running_tasks(&n) : 0;
    if (still_running > 0) {
        size_t wedged = wedged_tasks(&n);
        /* Their threads are inside the handler and cannot be joined. Hand their tasks back
         * now, so other nodes run them at once instead of after an expiry or a stall reset;
         * the threads' own outcome writes will then match nothing. */
        int64_t released = 0;
        for (size_t i = 0; i < n.n_services; i++) {
            int64_t one = 0;
            if (cohort_store_release_claims(n.store, n.client, n.services[i]->config->name,
                                            n.node_id, &one, &error))
                released += one;
            else
                cohort_logf(COHORT_LOG_WARN, n.services[i]->config->name, NULL, 0,
                            "cannot release the running tasks: %s", error.message);
        }
        if (still_running > wedged)
            cohort_log_node(COHORT_LOG_WARN,
                            "%zu task(s) still running after shutdown_grace_ms; released %lld "
                            "to pending; exiting",
                            still_running - wedged, (long long)released);
        if (wedged > 0)
            cohort_log_node(COHORT_LOG_WARN,
                            "%zu handler(s) still running a task that already timed out "
                            "(recorded timed_out); exiting without waiting for them",
                            wedged);
        cohort_heartbeat_stop(n.heartbeat); /* its touches would write the run's entry again */
        cohort_run_end(&n.run, n.store, n.client);
        log_summary(&n);
        /* Nothing may be freed under the threads still in handler code: the caller ends the
         * process at once (cohortd does, with _exit()). */
        *abandoned = true;
        return rc;
    }
    /* The summary reads the services' counters: after the workers are joined (a worker that
     * finished its last task may still be writing the outcomes it batched, and counts them
     * only once they are written) and before the services are freed. */
    for (size_t i = 0; i < n.n_services; i++)
        cohort_workers_join(n.services[i]);
    if (n.store && n.n_services)
        log_summary(&n);
    stop_keepers(&n);
    for (size_t i = 0; i < n.n_services; i++)
        cohort_service_destroy(n.services[i], n.client);
    cohort_handback_destroy(n.handback); /* after the workers that poke it */
    cohort_run_end(&n.run, n.store, n.client);
    free(n.services);
    if (n.tick)
        event_free(n.tick);
    if (n.drain)
        event_free(n.drain);
    if (n.watchdog)
        event_free(n.watchdog);
    if (n.sigterm)
        event_free(n.sigterm);
    if (n.sigint)
        event_free(n.sigint);
    if (n.sighup)
        event_free(n.sighup);
    cohort_config_destroy(n.reloaded);
    cohort_http_destroy(n.http);
    cohort_api_pool_destroy(n.api_pool); /* after the listener that submits to it */
    cohort_api_destroy(n.api);
    if (n.base)
        event_base_free(n.base);
    cohort_store_push(n.store, n.client);
    if (n.streams_left) {
        /* Change stream threads still wait in getMores that reach the store's counters: the
         * caller ends the process without freeing it (cohortd does, with _exit()). */
        *abandoned = true;
        return rc;
    }
    cohort_store_destroy(n.store);
    return rc;
}
