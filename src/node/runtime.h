/*
 * runtime.h - the state of one hosted service that every module of the node layer shares:
 * its statistics, its worker slots and the service object itself (as Redis's server.h holds
 * the shared types, so no .c needs another .c's internals).
 *
 * Types only, plus the few thread-safe reads every module needs (runtime.c). This header
 * includes only lower layers and the node's leaf modules (election, plugin, histogram), so
 * any module of the node layer may include it without making a circle. Which thread owns
 * which field is said at the field; `lock` guards the ones marked "guarded by the lock".
 * Who does what with it: service.h (create, tick, destroy), workers.h (the pool),
 * live_settings.h (file and database settings), host.h (the handler).
 */
#ifndef COHORT_RUNTIME_H
#define COHORT_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cohort/handler.h"
#include "core/config.h"
#include "core/status.h"
#include "node/primary/election.h"
#include "node/work/histogram.h"
#include "node/handler/plugin.h"
#include "node/work/prefetch.h"
#include "store/store.h"

/* Windows a node's claims spread over (workers.c; COHORT_CLAIM_SKIP_MAX bounds the last). */
#define COHORT_CLAIM_WINDOWS 8

#define COHORT_MAX_WORKERS 1024 /* the config's upper bound for workers */

typedef struct cohort_service_stats {
    _Atomic uint64_t claimed;
    _Atomic uint64_t succeeded;
    _Atomic uint64_t failed;
    _Atomic uint64_t timed_out;
    _Atomic uint64_t retried;
    _Atomic uint64_t lost_claims; /* outcomes not written: the claim had moved on */
    _Atomic uint64_t stalled_reset;
    _Atomic uint64_t purged;
    _Atomic uint64_t batches_completed;
    /* External workers' calls answered by this node (api_workers.c). */
    _Atomic uint64_t ext_claimed;
    _Atomic uint64_t ext_succeeded;
    _Atomic uint64_t ext_failed;   /* failed for good */
    _Atomic uint64_t ext_retried;  /* failed, to be retried */
    _Atomic uint64_t ext_released; /* given back untouched */
    _Atomic uint64_t ext_lost;     /* outcomes refused: the lease was lost (409) */
    _Atomic uint64_t leases_expired; /* the primary's sweep: leases that ran out */
    cohort_histogram_t task_duration; /* time in the handler's process_task */
} cohort_service_stats_t;

/* What one worker thread is running, for check-ins and timeouts (guarded by the lock). */
typedef struct cohort_slot {
    bool busy;
    bson_oid_t task;
    int32_t attempt;
    int64_t started_at_ms; /* cluster clock: the claim */
    int64_t deadline_ms;   /* monotonic; 0: no timeout */
    int64_t checked_in_ms; /* monotonic */
    /* The watchdog ended this run (timed_out): its outcome is dropped when the handler
     * returns, and until then the slot is wedged (a thread cannot be killed). */
    bool timed_out;
    bson_oid_t *held; /* tasks whose outcome waits for the worker's bulk write */
    size_t n_held;
} cohort_slot_t;

#define COHORT_MAX_BUSY_GROUPS 256 /* groups a claim query excludes, at most */
/* With claim_batch > 1, outcomes wait at most this long for their bulk write. */
#define COHORT_OUTCOME_FLUSH_MS 100

typedef struct cohort_service {
    const cohort_service_config_t *config; /* borrowed from the node's config */
    const char *node_id;                   /* borrowed */
    cohort_store_t *store;                 /* borrowed */
    cohort_plugin_t *plugin;        /* owned: the handler host (host.c) loads and unloads it */
    void *handler_state;            /* the handler's own, from its init() */
    struct cohort_isolate *isolate; /* isolation = process: the child pool; else NULL */
    struct cohort_timeouts *timeouts; /* isolation = thread: the timeout watchdog; else NULL */
    const char *config_path;        /* borrowed: the node's config file (for child workers) */
    bool handler_ready; /* init() succeeded: destroy() is owed */
    bool prepared;      /* config document and indexes exist (main thread only) */
    cohort_election_t election;
    cohort_service_stats_t stats;
    /* Written by live_settings.c only (its one writer, with the election's takeover_ms): */
    cohort_settings_t file; /* the live settings as the config file gives them */
    cohort_settings_t eff;  /* main thread: in effect now (the database's override the file's) */
    /* The last invalid settings reported, to report them once. */
    char settings_problem[BSON_ERROR_BUFFER_SIZE];
    _Atomic int64_t batch_open; /* the batch tracked tasks join; refreshed by the primary */
    int64_t batch_draining;     /* main thread: the closed batch awaiting its callback, or 0 */
    bool batch_quiet;           /* main thread: the last count found the batch empty */
    atomic_bool queue_grew;     /* a wake-up saw an insert since the last batch count */
    int64_t next_batch_count_ms; /* main thread, monotonic: a quiet batch's next count */
    int64_t next_maintenance_ms;    /* main thread, monotonic: when maintain() runs next */
    int64_t next_upkeep_ms;         /* main thread, monotonic: cohort_maintenance_upkeep() */
    int64_t history_minute_ms;      /* main thread, cluster clock: the minute recorded last */
    int64_t next_type_check_ms;     /* main thread, monotonic: the malformed-task scan */
    int64_t next_purge_ms;          /* main thread, monotonic: the retention purge */
    _Atomic bool type_check_wanted; /* a claim failed on the server: scan for bad tasks */
    /* Queue depth for the metrics: with count_queue set (by the node, when it serves
     * metrics), the primary measures its queue (store/queue_counts.h) at most every
     * COHORT_UPKEEP_INTERVAL_MS, and after a slow measure less often (maintenance.h). */
    bool count_queue;
    int64_t next_count_ms; /* main thread, monotonic: the next measure */
    _Atomic int64_t queue_counts[COHORT_STATUS_COUNT]; /* by cohort_task_status_t */
    _Atomic int64_t queue_epoch; /* the epoch they were counted under; 0: never */
    /* Recurring tasks (node/primary/schedules.c; main thread): the schedules in force (the config's
     * `schedule.ID` lines; a SIGHUP moves them to the reloaded file's), and the epoch of this
     * node's primacy the last schedule round ran under, with when that primacy began
     * (elected_at, server time): slots before it were missed while no primary ran. */
    const cohort_schedule_config_t *schedules;
    size_t n_schedules;
    int64_t schedules_epoch;
    int64_t schedules_since_ms;

    /* What claims skip (guarded by the lock; the main thread refreshes it every tick, workers
     * copy it when `filter_version` moved): the pause and block switches of the config
     * document, and the groups whose lock is held somewhere. */
    bool stopped_all;        /* the whole service is paused or blocked */
    char **stopped_kinds;    /* kinds paused or blocked */
    size_t n_stopped_kinds;
    char **busy_groups;
    size_t n_busy_groups;
    uint64_t filter_version;
    char switches_summary[512]; /* main thread: the switches last logged */
    _Atomic bool uses_groups;      /* a grouped task was claimed: refresh busy groups each tick */
    /* Tasks a batch claim took beyond the claiming worker's own (guarded by the lock): any
     * idle worker runs them next, so a long task never makes them wait. A ring of twice
     * the largest claim (prefetch.h); check-ins cover them, and ready.h gives them back. */
    bson_t **ready;
    size_t ready_head, ready_n, ready_cap;
    size_t ready_reserved; /* room promised to batch claims in flight */
    cohort_prefetch_t prefetch; /* the workers' recent run times: sizes claims (guarded) */
    int64_t claim_tick_ms;      /* eff.tick_ms, copied each tick for the workers (guarded) */
    int64_t ready_checked_in_ms; /* monotonic: the ready queue's last check-in */
    /* Set by the node before the workers start: called by a worker (no lock held) when a
     * batch claim left tasks in the ready queue, so the main thread checks within the
     * prefetch window whether they can start here (cohort_workers_give_back_unstartable). */
    void (*prefetched)(void *arg);
    void *prefetched_arg;
    _Atomic int64_t wedged_slots;  /* thread isolation: slots still running a timed-out task */
    /* Main thread, as primary: other live nodes hosting the service, counted with the
     * maintenance; -1 until counted. primary_task_count caps the primary only while it has
     * peers: a lone node is primary and must run at full speed. */
    int64_t peers;

    pthread_mutex_t lock;
    pthread_cond_t wake;
    int64_t budget;       /* claims left this tick; -1: unlimited */
    bool drained;         /* a claim found nothing: wait for the next tick */
    bool work_seen;       /* a claim found a task this tick: every worker may claim */
    bool probing;         /* until then one worker probes; the others wait for its result */
    bool stopping;        /* no more claims */
    /* Suspects (workers.c; docs/ARCHITECTURE.md#suspects) run alone on a node: `solo` while a
     * worker claims or runs one, when no other worker takes work; `solo_wanted` once a batch
     * claim saw one due: no new claim starts until the service is idle here, then one worker
     * claims suspects alone until none is left. */
    bool solo;
    bool solo_wanted;
    pthread_t *threads;
    cohort_slot_t *slots; /* one per thread; room for COHORT_MAX_WORKERS */
    size_t n_threads;     /* threads started (joined at destroy) */
    size_t target_workers; /* threads with a slot below this claim; the rest park */
    size_t running;       /* claims in flight and tasks being processed right now */
    /* Claims in flight. A capped budget (primary_task_count, secondary_task_count) is claimed
     * by one worker at a time: one claim of the tick's share, not several small ones. */
    size_t claiming;
    /* Spreading claims over the queue head (workers.c): the claims in flight per window of
     * COHORT_PREFETCH_CAP candidates in claim order, the window this node starts from, and
     * until when (monotonic ms) claims are taken to collide with other claimers' (before
     * then, or with another claim of this node in flight, a claim skips the busy windows). */
    uint16_t window_claims[COHORT_CLAIM_WINDOWS];
    uint32_t window_base;
    int64_t contended_until_ms;
    /* Load-aware claiming (capacity.c): the weight of the tasks this node holds (claimed and
     * not finished, the ready queue's included), the room the claim in flight reserved (0:
     * none in flight), whether that claim may take a first task of any weight, whether the
     * last claim came back empty only for want of room, and the capacity (0: target_workers). */
    int64_t weight_held;
    int64_t weight_reserved;
    bool weight_any;
    bool weight_missed; /* the last claim found nothing that fits the room: heavier may be due */
    int64_t capacity;
    /* The cluster's feature level the node follows (core/version.h; set by node.c). */
    int64_t feature_level;
} cohort_service_t;

/* Claims in flight and tasks being processed right now (takes the lock). */
size_t cohort_service_running(cohort_service_t *service);

/* True once the service was told to stop claiming (takes the lock): a worker that cannot
 * write an outcome gives up sooner then. */
bool cohort_service_stopping(cohort_service_t *service);

#endif
