/*
 * service.c - a hosted service's runtime (see service.h).
 *
 * Workers share one mutex and condition per service. The lock guards only the budget and
 * flags, never a database call, so claiming and processing run in parallel.
 */
#include "node/service.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "node/context.h"
#include "node/isolate.h"
#include "core/log.h"
#include "node/task.h"

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

typedef enum take {
    TAKE_STOP,  /* the service is stopping */
    TAKE_READY, /* a task a batch claim took: run it */
    TAKE_CLAIM, /* one claim from the budget: claim */
} take_t;

/* The next piece of work for a worker: a task waiting in the ready queue, or else one claim
 * from the budget, waiting for a tick if there is none. A worker whose slot is beyond the
 * live worker count parks here until the count grows again, and every worker parks while
 * the whole service is paused or blocked (tasks already claimed still run). */
static take_t take_work(cohort_service_t *s, size_t slot, bson_t **ready)
{
    pthread_mutex_lock(&s->lock);
    while (!s->stopping && (slot >= s->target_workers ||
                            (s->ready_n == 0 &&
                             (s->drained || s->budget == 0 || s->stopped_all ||
                              (s->probing && !s->work_seen)))))
        pthread_cond_wait(&s->wake, &s->lock);
    take_t take = s->stopping ? TAKE_STOP : s->ready_n > 0 ? TAKE_READY : TAKE_CLAIM;
    if (take == TAKE_READY) {
        *ready = s->ready[s->ready_head];
        s->ready_head = (s->ready_head + 1) % s->ready_cap;
        s->ready_n--;
    } else if (take == TAKE_CLAIM) {
        if (s->budget > 0)
            s->budget--;
        if (!s->work_seen)
            s->probing = true; /* this worker finds out whether there is work */
    }
    if (take != TAKE_STOP)
        s->running++; /* from the claim on: shutdown waits for a claim in flight too */
    pthread_mutex_unlock(&s->lock);
    return take;
}

/* Queues the tasks of a batch claim beyond the claimer's own for the idle workers, and
 * releases the room `reserved` for them. */
static void push_ready(cohort_service_t *s, bson_t *docs, size_t n, size_t reserved)
{
    pthread_mutex_lock(&s->lock);
    s->ready_reserved -= reserved;
    for (size_t i = 0; i < n; i++) {
        bson_t *copy = bson_copy(&docs[i]); /* a bson_t cannot be moved by value */
        bson_destroy(&docs[i]);
        if (!copy)
            continue; /* out of memory: its claim runs out and it is reset */
        size_t at = (s->ready_head + s->ready_n) % s->ready_cap;
        s->ready[at] = copy;
        s->ready_n++;
    }
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

static bool ready_empty(cohort_service_t *s)
{
    pthread_mutex_lock(&s->lock);
    bool empty = s->ready_n == 0;
    pthread_mutex_unlock(&s->lock);
    return empty;
}

/* Up to `want` more claims from the budget, without waiting (a batch claim), as far as the
 * ready queue has room for them (reserved until push_ready()). */
static size_t take_more(cohort_service_t *s, size_t want)
{
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    size_t room = s->ready_cap - s->ready_n - s->ready_reserved;
    while (n < want && n < room && s->budget != 0 && s->work_seen && !s->stopping) {
        if (s->budget > 0)
            s->budget--;
        n++;
    }
    s->ready_reserved += n;
    pthread_mutex_unlock(&s->lock);
    return n;
}

static void give_back(cohort_service_t *s, size_t n)
{
    pthread_mutex_lock(&s->lock);
    if (s->budget >= 0)
        s->budget += (int64_t)n;
    pthread_mutex_unlock(&s->lock);
}

/* A worker's own copy of the claim filter (the shared one changes under it). */
typedef struct worker_filter {
    uint64_t version;
    char **kinds;
    size_t n_kinds;
    char **groups;
    size_t n_groups;
} worker_filter_t;

static void free_strings(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static char **copy_strings(char *const *v, size_t n)
{
    char **out = n ? calloc(n, sizeof *out) : NULL;
    for (size_t i = 0; out && i < n; i++)
        out[i] = strdup(v[i]);
    return out;
}

static void refresh_filter(cohort_service_t *s, worker_filter_t *f)
{
    pthread_mutex_lock(&s->lock);
    if (f->version != s->filter_version) {
        free_strings(f->kinds, f->n_kinds);
        free_strings(f->groups, f->n_groups);
        f->kinds = copy_strings(s->stopped_kinds, s->n_stopped_kinds);
        f->n_kinds = f->kinds ? s->n_stopped_kinds : 0;
        f->groups = copy_strings(s->busy_groups, s->n_busy_groups);
        f->n_groups = f->groups ? s->n_busy_groups : 0;
        f->version = s->filter_version;
    }
    pthread_mutex_unlock(&s->lock);
}

/* Adds `group` to the groups claims skip until the next tick refreshes them. */
static void note_busy_group(cohort_service_t *s, const char *group)
{
    pthread_mutex_lock(&s->lock);
    bool known = false;
    for (size_t i = 0; i < s->n_busy_groups && !known; i++)
        known = strcmp(s->busy_groups[i], group) == 0;
    if (!known && s->n_busy_groups < COHORT_MAX_BUSY_GROUPS) {
        char **grown = realloc(s->busy_groups, (s->n_busy_groups + 1) * sizeof *grown);
        char *name = strdup(group);
        if (grown && name) {
            s->busy_groups = grown;
            s->busy_groups[s->n_busy_groups++] = name;
            s->filter_version++;
        } else {
            if (grown)
                s->busy_groups = grown;
            free(name);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

/* This node released `group`'s lock: its claims need not skip the group any more. */
static void forget_busy_group(cohort_service_t *s, const char *group)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_busy_groups; i++) {
        if (strcmp(s->busy_groups[i], group) != 0)
            continue;
        free(s->busy_groups[i]);
        s->busy_groups[i] = s->busy_groups[--s->n_busy_groups];
        s->filter_version++;
        break;
    }
    pthread_mutex_unlock(&s->lock);
}

/* A worker: its context and the outcomes it has not written yet. */
typedef struct worker {
    cohort_service_t *service;
    size_t slot;
    cohort_ctx_t ctx;
    size_t batch;            /* claim_batch */
    bson_t *docs;            /* [batch] claimed documents */
    cohort_task_run_t *runs; /* [batch] outcomes waiting for the bulk write */
    bson_oid_t *held;        /* [batch] their ids, for check-ins */
    cohort_task_outcome_t *outcomes;
    size_t n_runs;
    int64_t first_run_ms; /* monotonic: when the oldest unwritten outcome was made */
    worker_filter_t filter;
} worker_t;

/* After a bulk write that matched fewer outcomes than it carried: whether this run's outcome
 * is the task's last recorded run (counted) or was refused (logged as a lost claim). */
static void count_or_report_lost(worker_t *w, const cohort_task_run_t *run)
{
    cohort_service_t *s = w->service;
    bson_t doc;
    bool found = false, mine = false;
    bson_error_t error;
    if (cohort_store_read_task(s->store, w->ctx.client, s->config->name, run->task.id, &doc,
                               &found, &error) && found) {
        bson_iter_t it, entry;
        uint32_t len = 0;
        const uint8_t *data = NULL;
        if (bson_iter_init_find(&it, &doc, "history") && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_array(&it, &len, &data);
            bson_t history;
            if (bson_init_static(&history, data, len) && bson_iter_init(&entry, &history)) {
                const char *node = NULL;
                int64_t attempt = -1;
                while (bson_iter_next(&entry)) { /* the last entry is the latest run */
                    bson_iter_t field;
                    node = NULL;
                    attempt = -1;
                    if (BSON_ITER_HOLDS_DOCUMENT(&entry) && bson_iter_recurse(&entry, &field))
                        while (bson_iter_next(&field)) {
                            if (strcmp(bson_iter_key(&field), "node") == 0 &&
                                BSON_ITER_HOLDS_UTF8(&field))
                                node = bson_iter_utf8(&field, NULL);
                            else if (strcmp(bson_iter_key(&field), "attempt") == 0 &&
                                     BSON_ITER_HOLDS_NUMBER(&field))
                                attempt = bson_iter_as_int64(&field);
                        }
                }
                mine = node && strcmp(node, s->node_id) == 0 && attempt == run->task.attempt;
            }
        }
    }
    bson_destroy(&doc);
    if (mine) {
        cohort_task_count(s, run->result.finish);
        return;
    }
    atomic_fetch_add(&s->stats.lost_claims, 1);
    cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                "task %s attempt %d: outcome not recorded, this node no longer holds its claim",
                run->task.id, run->task.attempt);
}

/* Writes the outcomes waiting in the worker: one bulk write; if the database is away, one
 * by one with the retries of cohort_task_record(). */
static void flush_outcomes(worker_t *w)
{
    cohort_service_t *s = w->service;
    if (w->n_runs == 0)
        return;
    for (size_t i = 0; i < w->n_runs; i++)
        w->outcomes[i] = (cohort_task_outcome_t){.id = w->runs[i].task.id_value,
                                                 .attempt = w->runs[i].task.attempt,
                                                 .result = w->runs[i].result};
    size_t applied = 0;
    bson_error_t error;
    if (cohort_store_finish_tasks(s->store, w->ctx.client, s->config->name, s->node_id,
                                  w->outcomes, w->n_runs, &applied, &error)) {
        if (applied == w->n_runs) {
            for (size_t i = 0; i < w->n_runs; i++)
                cohort_task_count(s, w->runs[i].result.finish);
        } else {
            /* The reply counts matches, not which: a lost claim is rare (this node was
             * frozen or cut off and its claims were reset), so find out task by task. */
            for (size_t i = 0; i < w->n_runs; i++)
                count_or_report_lost(w, &w->runs[i]);
        }
    } else {
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                    "cannot record %zu outcome(s) in bulk (%s); recording them one by one",
                    w->n_runs, error.message);
        for (size_t i = 0; i < w->n_runs; i++)
            cohort_task_record(&w->ctx, &w->runs[i]);
    }
    for (size_t i = 0; i < w->n_runs; i++)
        bson_value_destroy(&w->runs[i].task.id_value);
    w->n_runs = 0;
}

static const char *coalesce_key(const bson_t *doc)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "coalesce_key") && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return NULL;
}

/* Runs one claimed task: takes its group's lock first (a busy group gives the claim back
 * untouched), runs it, then writes its outcome at once (claim_batch = 1) or queues it for
 * the bulk write. */
static void run_claimed(worker_t *w, const bson_t *doc)
{
    cohort_service_t *s = w->service;
    cohort_slot_t *slot = &s->slots[w->slot];
    cohort_task_run_t *run = &w->runs[w->n_runs];
    bson_iter_t it;
    int32_t attempt = 0;
    if (bson_iter_init_find(&it, doc, "attempts") && BSON_ITER_HOLDS_NUMBER(&it))
        attempt = (int32_t)bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, doc, "group") && BSON_ITER_HOLDS_UTF8(&it) &&
        bson_iter_init_find(&it, doc, "_id")) {
        bson_iter_t group;
        bson_iter_init_find(&group, doc, "group");
        const char *name = bson_iter_utf8(&group, NULL);
        atomic_store(&s->uses_groups, true);
        bool locked = false;
        bson_error_t error;
        if (!cohort_store_lock_group(s->store, w->ctx.client, s->config->name,
                                     bson_iter_value(&it), s->node_id, attempt, name, &locked,
                                     &error) ||
            !locked) {
            if (!cohort_store_unclaim(s->store, w->ctx.client, s->config->name,
                                      bson_iter_value(&it), s->node_id, attempt,
                                      coalesce_key(doc), &error))
                cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                            "cannot give back a task of busy group '%s': %s (it is reset "
                            "once its lease runs out)",
                            name, error.message);
            else
                atomic_fetch_sub(&s->stats.claimed, 1); /* undone, not run */
            note_busy_group(s, name);
            return;
        }
    }

    pthread_mutex_lock(&s->lock);
    if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it)) {
        slot->busy = true;
        bson_oid_copy(bson_iter_oid(&it), &slot->task);
        slot->attempt = attempt;
        slot->checked_in_ms = cohort_clock_monotonic_ms();
        slot->started_at_ms = cohort_clock_cluster_ms();
        slot->deadline_ms = 0;
        slot->timed_out = false;
    }
    pthread_mutex_unlock(&s->lock);

    /* The watchdog needs the timeout before the run starts; the run parses the task. */
    cohort_task_t peek;
    memset(&peek, 0, sizeof peek);
    peek.timeout_ms = -1;
    if (bson_iter_init_find(&it, doc, "kind") && BSON_ITER_HOLDS_UTF8(&it))
        peek.kind = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, doc, "task_timeout_ms") && BSON_ITER_HOLDS_NUMBER(&it))
        peek.timeout_ms = bson_iter_as_int64(&it);
    int64_t timeout = cohort_task_timeout_ms(s->config, &peek);
    if (timeout > 0 && s->config->isolation == COHORT_ISOLATION_THREAD) {
        pthread_mutex_lock(&s->lock);
        slot->deadline_ms = cohort_clock_monotonic_ms() + timeout;
        pthread_mutex_unlock(&s->lock);
    }

    cohort_task_run(&w->ctx, w->slot, doc, run);

    pthread_mutex_lock(&s->lock);
    bool timed_out = slot->timed_out;
    if (timed_out)
        atomic_fetch_sub(&s->wedged_slots, 1);
    slot->busy = slot->timed_out = false;
    slot->deadline_ms = 0;
    pthread_mutex_unlock(&s->lock);

    if (!run->valid)
        return;
    if (timed_out) { /* the watchdog recorded it timed_out: this late outcome is void */
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                    "task %s attempt %d: the handler returned after its timeout; outcome "
                    "dropped, worker slot %zu is free again",
                    run->task.id, run->task.attempt, w->slot);
        bson_value_destroy(&run->task.id_value);
        return;
    }
    cohort_task_log(s, run);
    if (run->task.group) {
        /* The outcome releases the group's lock: write it now, and let this node's next
         * claim try the group again rather than wait for the tick's busy-groups refresh. */
        cohort_task_record(&w->ctx, run);
        forget_busy_group(s, run->task.group);
        bson_value_destroy(&run->task.id_value);
        return;
    }
    if (w->batch == 1 || run->task.attempts_bad) {
        /* At once: a group's lock goes with its outcome; a hand-written attempts count
         * needs a write of its own. */
        cohort_task_record(&w->ctx, run);
        bson_value_destroy(&run->task.id_value);
        return;
    }
    if (w->n_runs++ == 0)
        w->first_run_ms = cohort_clock_monotonic_ms();
}

/* The tasks whose outcome waits for the bulk write, for check-ins (so a long task run
 * meanwhile cannot make them stall). */
static void hold(worker_t *w)
{
    cohort_service_t *s = w->service;
    size_t k = 0;
    for (size_t i = 0; i < w->n_runs; i++)
        if (w->runs[i].task.id_value.value_type == BSON_TYPE_OID)
            bson_oid_copy(&w->runs[i].task.id_value.value.v_oid, &w->held[k++]);
    pthread_mutex_lock(&s->lock);
    s->slots[w->slot].held = w->held;
    s->slots[w->slot].n_held = k;
    pthread_mutex_unlock(&s->lock);
}

/* Claims up to `want` tasks into w->docs: one findAndModify for one, three commands for more.
 * *n receives how many. */
static bool claim(worker_t *w, size_t want, size_t *n, bson_error_t *error)
{
    cohort_service_t *s = w->service;
    const cohort_handler_t *h = s->plugin->handler;
    size_t n_served = 0;
    while (h->kinds && h->kinds[n_served])
        n_served++;
    cohort_claim_filter_t filter = {
        .served_kinds = h->kinds,
        .n_served_kinds = n_served,
        .stopped_kinds = (const char *const *)w->filter.kinds,
        .n_stopped_kinds = w->filter.n_kinds,
        .busy_groups = (const char *const *)w->filter.groups,
        .n_busy_groups = w->filter.n_groups,
    };
    int64_t now = cohort_clock_cluster_ms();
    if (want > 1)
        return cohort_store_claim_tasks(s->store, w->ctx.client, s->config->name, s->node_id, now,
                                        &filter, want, w->docs, n, error);
    bool found = false;
    bool ok = cohort_store_claim_task(s->store, w->ctx.client, s->config->name, s->node_id, now,
                                      &filter, &w->docs[0], &found, error);
    if (!found)
        bson_destroy(&w->docs[0]);
    *n = found ? 1 : 0;
    return ok;
}

/* Gives back, untouched, the ready tasks no worker will start (shutdown). */
static void give_back_ready(worker_t *w)
{
    cohort_service_t *s = w->service;
    for (;;) {
        bson_t *doc = NULL;
        pthread_mutex_lock(&s->lock);
        bool any = s->ready_n > 0;
        if (any) {
            doc = s->ready[s->ready_head];
            s->ready_head = (s->ready_head + 1) % s->ready_cap;
            s->ready_n--;
        }
        pthread_mutex_unlock(&s->lock);
        if (!any)
            return;
        bson_iter_t id, at;
        bson_error_t error;
        if (bson_iter_init_find(&id, doc, "_id") && bson_iter_init_find(&at, doc, "attempts") &&
            BSON_ITER_HOLDS_NUMBER(&at) &&
            cohort_store_unclaim(s->store, w->ctx.client, s->config->name, bson_iter_value(&id),
                                 s->node_id, (int32_t)bson_iter_as_int64(&at), coalesce_key(doc),
                                 &error))
            atomic_fetch_sub(&s->stats.claimed, 1); /* undone */
        bson_destroy(doc);
    }
}

/* Claims up to claim_batch tasks (as far as the budget and the ready queue allow): the first
 * into w->docs[0] for this worker, the rest into the ready queue. False if none. */
static bool claim_some(worker_t *w, int64_t *last_error_log)
{
    cohort_service_t *s = w->service;
    size_t extra = w->batch > 1 ? take_more(s, w->batch - 1) : 0;
    size_t want = 1 + extra;
    refresh_filter(s, &w->filter);
    size_t n = 0;
    bson_error_t error;
    bool ok = claim(w, want, &n, &error);
    if (want > n)
        give_back(s, want - n); /* nothing was claimed for these */
    push_ready(s, w->docs + (n > 1 ? 1 : 0), n > 1 ? n - 1 : 0, extra);
    if (!ok || n == 0) {
        pthread_mutex_lock(&s->lock);
        s->drained = true; /* poll again next tick */
        s->probing = false;
        s->running--;
        pthread_cond_broadcast(&s->wake);
        pthread_mutex_unlock(&s->lock);
        if (!ok && error.domain == MONGOC_ERROR_SERVER)
            atomic_store(&s->type_check_wanted, true); /* a malformed task, perhaps */
        int64_t now = cohort_clock_monotonic_ms();
        if (!ok && now - *last_error_log > 5000) {
            *last_error_log = now;
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                        "cannot claim tasks: %s", error.message);
        }
        return false;
    }
    atomic_fetch_add(&s->stats.claimed, n);
    pthread_mutex_lock(&s->lock);
    if (!s->work_seen) {
        s->work_seen = true; /* the probe found work: let the others claim too */
        s->probing = false;
        pthread_cond_broadcast(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    return true;
}

static void worker_loop(worker_t *w)
{
    cohort_service_t *s = w->service;
    int64_t last_error_log = 0;
    for (;;) {
        /* Outcomes wait for the bulk write only while more work is at hand right away. */
        if (w->n_runs > 0 && ready_empty(s))
            flush_outcomes(w);
        bson_t *doc = NULL;
        take_t take = take_work(s, w->slot, &doc);
        if (take == TAKE_STOP)
            break;
        if (take == TAKE_CLAIM) {
            if (!claim_some(w, &last_error_log))
                continue;
            doc = &w->docs[0];
        }
        if (w->n_runs > 0 &&
            cohort_clock_monotonic_ms() - w->first_run_ms >= COHORT_OUTCOME_FLUSH_MS)
            flush_outcomes(w); /* before a task that may be long */
        hold(w);
        run_claimed(w, doc);
        if (w->n_runs == w->batch)
            flush_outcomes(w);
        bson_destroy(doc);

        pthread_mutex_lock(&s->lock);
        s->running--;
        pthread_cond_broadcast(&s->wake);
        pthread_mutex_unlock(&s->lock);
    }
    flush_outcomes(w);
    hold(w);
    give_back_ready(w);
}

typedef struct worker_arg {
    cohort_service_t *service;
    size_t slot;
} worker_arg_t;

static void *worker_main(void *arg)
{
    worker_arg_t *a = arg;
    worker_t w = {.service = a->service, .slot = a->slot};
    free(a);
    cohort_service_t *s = w.service;
    w.batch = (size_t)s->config->claim_batch;
    if (w.batch < 1)
        w.batch = 1;
    w.docs = calloc(w.batch, sizeof *w.docs);
    w.runs = calloc(w.batch, sizeof *w.runs);
    w.held = calloc(2 * w.batch, sizeof *w.held); /* not started + outcomes waiting */
    w.outcomes = calloc(w.batch, sizeof *w.outcomes);
    mongoc_client_t *client = cohort_store_pop(s->store);
    cohort_ctx_init(&w.ctx, s, client, false);
    if (w.docs && w.runs && w.held && w.outcomes) {
        worker_loop(&w);
    } else {
        cohort_logf(COHORT_LOG_ERROR, s->config->name, NULL, 0,
                    "worker %zu: out of memory for a claim batch of %zu", w.slot, w.batch);
    }
    cohort_store_push(s->store, client);
    free_strings(w.filter.kinds, w.filter.n_kinds);
    free_strings(w.filter.groups, w.filter.n_groups);
    free(w.outcomes);
    free(w.held);
    free(w.runs);
    free(w.docs);
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
    /* Room for two batch claims' extras at once; a claim asks only for the room left. */
    s->ready_cap = 2 * (size_t)s->config->claim_batch;
    s->ready = calloc(s->ready_cap, sizeof *s->ready);
    if (!s->threads || !s->slots || !s->ready) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    /* Room for every slot SIGHUP may add; a slot's child starts on its first task. */
    if (s->config->isolation == COHORT_ISOLATION_PROCESS &&
        !(s->isolate = cohort_isolate_new(s, s->config_path, COHORT_MAX_WORKERS, err, errlen)))
        return false;
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
    static const char *const statuses[] = {"succeeded", "failed", "timed_out"};
    const int64_t retention[] = {s->eff.succeeded_retention_ms, s->eff.failed_retention_ms,
                                 s->eff.failed_retention_ms};
    for (int i = 0; i < 3; i++) {
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

/* Check-ins: extends the leases of the tasks this node runs (and of those its batch claims
 * hold for later), every stall_timeout_ms / 3, in commands of up to CHECKIN_CHUNK ids. */
#define CHECKIN_CHUNK 256
static void check_in(cohort_service_t *s, mongoc_client_t *client)
{
    int64_t now = cohort_clock_monotonic_ms();
    int64_t every = s->eff.stall_timeout_ms / 3;
    bson_oid_t *ids = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_threads; i++) {
        cohort_slot_t *slot = &s->slots[i];
        if ((!slot->busy && slot->n_held == 0) || now - slot->checked_in_ms < every)
            continue;
        size_t need = n + 1 + slot->n_held;
        if (need > cap) {
            size_t grown_cap = need * 2;
            bson_oid_t *grown = realloc(ids, grown_cap * sizeof *grown);
            if (!grown)
                break;
            ids = grown;
            cap = grown_cap;
        }
        if (slot->busy)
            bson_oid_copy(&slot->task, &ids[n++]);
        for (size_t j = 0; j < slot->n_held; j++)
            bson_oid_copy(&slot->held[j], &ids[n++]);
        slot->checked_in_ms = now;
    }
    /* The ready queue's tasks, at every check-in round (they wait a short while only). */
    if (s->ready_n > 0 && now - s->ready_checked_in_ms >= every) {
        s->ready_checked_in_ms = now;
        bson_oid_t *grown = realloc(ids, (n + s->ready_n + 1) * sizeof *grown);
        if (grown) {
            ids = grown;
            for (size_t i = 0; i < s->ready_n; i++) {
                bson_iter_t it;
                const bson_t *doc = s->ready[(s->ready_head + i) % s->ready_cap];
                if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it))
                    bson_oid_copy(bson_iter_oid(&it), &ids[n++]);
            }
        }
    }
    pthread_mutex_unlock(&s->lock);
    for (size_t from = 0; from < n; from += CHECKIN_CHUNK) {
        size_t count = n - from < CHECKIN_CHUNK ? n - from : CHECKIN_CHUNK;
        bson_error_t error;
        if (!cohort_store_checkin_tasks(s->store, client, s->config->name, s->node_id,
                                        ids + from, count, &error)) {
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                        "check-in of %zu running task(s) failed: %s", n, error.message);
            break;
        }
    }
    free(ids);
}

/* Timeouts under thread isolation: a run past its deadline is recorded timed_out (if the
 * claim is still this node's) and its slot marked wedged until the handler returns. Process
 * isolation kills the child instead (isolate.c). */
static void watch_timeouts(cohort_service_t *s, mongoc_client_t *client)
{
    int64_t now = cohort_clock_monotonic_ms();
    for (size_t i = 0; i < s->n_threads; i++) {
        pthread_mutex_lock(&s->lock);
        cohort_slot_t *slot = &s->slots[i];
        bool due = slot->busy && slot->deadline_ms > 0 && now >= slot->deadline_ms &&
                   !slot->timed_out;
        bson_value_t id = {.value_type = BSON_TYPE_OID};
        bson_oid_copy(&slot->task, &id.value.v_oid);
        int32_t attempt = slot->attempt;
        int64_t started = slot->started_at_ms;
        if (due) {
            slot->timed_out = true;
            atomic_fetch_add(&s->wedged_slots, 1);
        }
        pthread_mutex_unlock(&s->lock);
        if (!due)
            continue;
        char why[160];
        snprintf(why, sizeof why,
                 "timed out after %lld ms (isolation = thread: the handler keeps its worker "
                 "thread until it returns)",
                 (long long)(cohort_clock_cluster_ms() - started));
        cohort_task_result_t result = {.finish = COHORT_FINISH_TIMED_OUT,
                                       .error = why,
                                       .started_at_ms = started,
                                       .ended_at_ms = cohort_clock_cluster_ms()};
        bool applied = false;
        bson_error_t error;
        char hex[25];
        bson_oid_to_string(&id.value.v_oid, hex);
        if (!cohort_store_finish_task_value(s->store, client, s->config->name, &id, s->node_id,
                                            attempt, &result, &applied, &error)) {
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                        "task %s timed out, but recording it failed: %s (its claim runs out "
                        "as for a stalled task)",
                        hex, error.message);
        } else if (applied) {
            cohort_task_count(s, COHORT_FINISH_TIMED_OUT);
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                        "task %s attempt %d timed out (final); worker slot %zu is wedged until "
                        "the handler returns",
                        hex, (int)attempt, i);
        }
    }
}

/* Reads the pause and block switches the election last saw into what claims skip; logs
 * each change once. */
static void apply_switches(cohort_service_t *s)
{
    bool all = false;
    char **kinds = NULL;
    size_t n = 0;
    char summary[512] = "";
    size_t used = 0;
    const bson_t *switches[2] = {&s->election.pause, &s->election.block};
    for (int i = 0; i < 2; i++) {
        bson_iter_t it;
        if (!bson_iter_init(&it, switches[i]))
            continue;
        while (bson_iter_next(&it)) {
            const char *kind = bson_iter_key(&it);
            const char *reason = NULL;
            bson_iter_t sub;
            if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) &&
                bson_iter_find(&sub, "reason") && BSON_ITER_HOLDS_UTF8(&sub))
                reason = bson_iter_utf8(&sub, NULL);
            if (used < sizeof summary)
                used += (size_t)snprintf(summary + used, sizeof summary - used, "%s%s %s%s%s",
                                         used ? "; " : "", i ? "blocked" : "paused",
                                         strcmp(kind, "*") == 0 ? "(all kinds)" : kind,
                                         reason ? ": " : "", reason ? reason : "");
            if (strcmp(kind, "*") == 0) {
                all = true;
                continue;
            }
            char **grown = realloc(kinds, (n + 1) * sizeof *grown);
            if (!grown)
                continue;
            kinds = grown;
            kinds[n] = strdup(kind);
            if (kinds[n])
                n++;
        }
    }
    if (strcmp(summary, s->switches_summary) != 0) {
        cohort_logf(COHORT_LOG_INFO, s->config->name, cohort_service_role(s), 0, "%s",
                    summary[0] ? summary : "running: nothing paused or blocked");
        snprintf(s->switches_summary, sizeof s->switches_summary, "%s", summary);
    }
    pthread_mutex_lock(&s->lock);
    free_strings(s->stopped_kinds, s->n_stopped_kinds);
    s->stopped_kinds = kinds;
    s->n_stopped_kinds = n;
    s->stopped_all = all;
    s->filter_version++;
    pthread_mutex_unlock(&s->lock);
}

/* Groups whose lock is held somewhere: claims skip them (one query, only for services that
 * have used groups). */
static void refresh_busy_groups(cohort_service_t *s, mongoc_client_t *client)
{
    if (!atomic_load(&s->uses_groups))
        return;
    char **groups = calloc(COHORT_MAX_BUSY_GROUPS, sizeof *groups);
    size_t n = 0;
    bson_error_t error;
    if (!groups)
        return;
    if (!cohort_store_busy_groups(s->store, client, s->config->name, groups,
                                  COHORT_MAX_BUSY_GROUPS, &n, &error)) {
        free(groups);
        return; /* keep what the workers learnt */
    }
    pthread_mutex_lock(&s->lock);
    free_strings(s->busy_groups, s->n_busy_groups);
    s->busy_groups = groups;
    s->n_busy_groups = n;
    s->filter_version++;
    pthread_mutex_unlock(&s->lock);
}

/* Primary, every tick: pending tasks past their not_after are promoted, in one write. */
static void promote_overdue(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
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
    const int64_t by_status[5] = {counts.pending, counts.claimed, counts.succeeded,
                                  counts.failed, counts.timed_out};
    for (int i = 0; i < 5; i++)
        atomic_store(&s->queue_counts[i], by_status[i]);
    atomic_store(&s->queue_epoch, epoch);
}

void cohort_service_tick(cohort_service_t *s, mongoc_client_t *client)
{
    bson_error_t error;
    check_in(s, client);
    if (s->config->isolation == COHORT_ISOLATION_THREAD)
        watch_timeouts(s, client);
    if (!cohort_election_tick(&s->election, s->store, client, &error)) {
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_service_role(s), 0,
                    "election round failed: %s", error.message);
        return;
    }
    apply_settings(s);
    apply_switches(s);
    refresh_busy_groups(s, client);
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
        promote_overdue(s, client, epoch);
        maintain(s, client, epoch);
        advance_batches(s, client, epoch);
        if (s->count_queue)
            count_queue(s, client, epoch);
    }

    pthread_mutex_lock(&s->lock);
    if (!cohort_clock_synced())
        s->budget = 0; /* no claims before the cluster clock is known: due times, history
                        * stamps and timeouts are all on it, and the node's own may be off */
    else if (cohort_election_has_lease(&s->election))
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
    cohort_isolate_destroy(s->isolate); /* the children run the handler's destroy() */
    s->isolate = NULL;
    free(s->threads);
    free(s->slots);
    for (size_t i = 0; s->ready && i < s->ready_n; i++) /* not given back: released at exit */
        bson_destroy(s->ready[(s->ready_head + i) % s->ready_cap]);
    free(s->ready);
    free_strings(s->stopped_kinds, s->n_stopped_kinds);
    free_strings(s->busy_groups, s->n_busy_groups);
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
