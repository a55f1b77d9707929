/*
 * workers.c - a service's worker threads (see workers.h): the claim budget, claims (one task,
 * or a batch sized by prefetch.h whose extras wait in the ready queue for any idle worker),
 * running each task (its run time feeds prefetch.h) and handing its outcome on.
 *
 * Workers share one mutex and condition per service. The lock guards only the budget and
 * flags, never a database call, so claiming and processing run in parallel.
 *
 * Suspects (tasks sent back with a node that may have died of one of them) run alone: no
 * other task runs in this process beside one, of its service or any other (a crash under
 * thread isolation ends every task of the process), so that if it crashes the node again the
 * release counts its attempt and no other's (store/upkeep.c). Within a service the lock and
 * condition say so; across services two process-wide counters do, and a worker held back by
 * another service looks again every PROCESS_POLL_MS (the other service does not signal it).
 */
#include "node/work/workers.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "node/handler/context.h"
#include "core/error.h"
#include "core/wake.h"
#include "node/work/capacity.h"
#include "node/work/filter.h"
#include "node/work/outcomes.h"
#include "node/work/prefetch.h"
#include "node/work/ready.h"
#include "node/work/task.h"
#include "node/work/timeouts.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/groups.h"
#include "store/outcomes.h"

typedef enum take {
    TAKE_STOP,  /* the service is stopping */
    TAKE_READY, /* a task a batch claim took: run it */
    TAKE_CLAIM, /* one claim from the budget: claim */
    TAKE_SOLO,  /* one claim from the budget, of suspects only, made alone */
    TAKE_WAIT,
    TAKE_WAIT_PROCESS, /* held back by another service's tasks: look again shortly */
} take_t;

#define PROCESS_POLL_MS 20

/* Claims in flight and tasks running in this process, every service's; and whether some
 * service holds the process's one suspect slot (claims or runs a suspect alone). */
static atomic_size_t process_running;
static atomic_bool process_solo;
/* The claims and runs of the process that count against running a suspect alone. */
static size_t process_busy(void)
{
    size_t running = atomic_load(&process_running), wedged = cohort_timeouts_wedged_in_process();
    return running > wedged ? running - wedged : 0;
}

/* A claim or run of `s` begins or ends (lock held): counted in the service and in the
 * process, always together. */
static void count_running(cohort_service_t *s, bool begins)
{
    if (begins) {
        s->running++;
        atomic_fetch_add(&process_running, 1);
    } else {
        s->running--;
        atomic_fetch_sub(&process_running, 1);
    }
}

/* Takes the process's suspect slot for `s` (lock held); false if another service has it. */
static bool solo_acquire(cohort_service_t *s)
{
    bool free_slot = false;
    if (!atomic_compare_exchange_strong(&process_solo, &free_slot, true))
        return false;
    s->solo = true;
    return true;
}

/* Gives the slot back (lock held). */
static void solo_release(cohort_service_t *s)
{
    s->solo = false;
    atomic_store(&process_solo, false);
}

/* Whether a claim made now would be alone (lock held): no other claim or task of the
 * service in flight on this node, none prefetched, and none of another service either. */
static bool alone(const cohort_service_t *s)
{
    return s->running == 0 && s->ready_n == 0 && process_busy() == 0;
}

/* What a worker may do now (lock held). Suspects: while one is wanted, tasks already
 * prefetched still run but no claim starts until the worker would be alone; a thread wedged
 * in a timed-out handler never ends, so it lets claims go on. */
static take_t next_take(cohort_service_t *s, size_t slot)
{
    bool want_solo = s->solo_wanted && atomic_load(&s->wedged_slots) == 0;
    if (s->stopping)
        return TAKE_STOP;
    if (slot >= s->target_workers || s->solo)
        return TAKE_WAIT;
    if (atomic_load(&process_solo))
        return TAKE_WAIT_PROCESS; /* another service runs a suspect alone */
    if (s->ready_n > 0)
        return TAKE_READY;
    if (s->drained || s->budget == 0 || s->stopped_all || (s->probing && !s->work_seen) ||
        !cohort_capacity_may_claim(s))
        return TAKE_WAIT;
    if (s->budget > 0 && s->claiming > 0)
        return TAKE_WAIT; /* a capped share: one claim at a time takes what is left of it */
    if (want_solo) {
        if (s->running > 0 || s->ready_n > 0)
            return TAKE_WAIT;
        return alone(s) && solo_acquire(s) ? TAKE_SOLO : TAKE_WAIT_PROCESS;
    }
    return TAKE_CLAIM;
}

/* The next piece of work for a worker: a task waiting in the ready queue, or else one claim
 * from the budget, waiting for a tick if there is none. A worker whose slot is beyond the
 * live worker count parks here until the count grows again, and every worker parks while
 * the whole service is paused or blocked (tasks already claimed still run). *suspects says
 * whether the claim may take a suspect: ONLY for TAKE_SOLO (s->solo is then set: no other
 * worker goes on until the suspect ran), ANY for a claim made while the service is idle here
 * (if it is a single one, settle_solo() decides once it sees what it took), else SKIP. */
static take_t take_work(cohort_service_t *s, size_t slot, bson_t **ready,
                        cohort_suspects_t *suspects)
{
    pthread_mutex_lock(&s->lock);
    take_t take;
    while ((take = next_take(s, slot)) == TAKE_WAIT || take == TAKE_WAIT_PROCESS) {
        if (take == TAKE_WAIT) {
            pthread_cond_wait(&s->wake, &s->lock);
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += PROCESS_POLL_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->wake, &s->lock, &until);
    }
    /* A single claim made alone may take a suspect too (cohort_claim_filter_t). */
    *suspects = take == TAKE_SOLO                  ? COHORT_SUSPECTS_ONLY
                : take == TAKE_CLAIM && alone(s) ? COHORT_SUSPECTS_ANY
                                                   : COHORT_SUSPECTS_SKIP;
    if (take == TAKE_READY) {
        *ready = s->ready[s->ready_head];
        s->ready_head = (s->ready_head + 1) % s->ready_cap;
        s->ready_n--;
    } else if (take == TAKE_CLAIM || take == TAKE_SOLO) {
        if (s->budget > 0)
            s->budget--;
        if (!s->work_seen)
            s->probing = true; /* this worker finds out whether there is work */
        cohort_capacity_reserve(s);
        s->claiming++;
    }
    if (take != TAKE_STOP) {
        count_running(s, true); /* from the claim on: shutdown waits for a claim in flight too */
    }
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
 * ready queue has room for them (reserved until push_ready()). The tick's probe (before any
 * claim found work) claims one task, unless the budget is capped: then it claims the whole
 * share, so that a capped tick is one claim, not a probe and a batch. */
static size_t take_more(cohort_service_t *s, size_t want)
{
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    size_t room = s->ready_cap - s->ready_n - s->ready_reserved;
    bool may = s->work_seen || s->budget > 0;
    while (n < want && n < room && s->budget != 0 && may && !s->stopping) {
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

/* A worker: its context and the outcomes it has not written yet. */
#define LOST_CLAIMS_MAX 16

typedef struct worker {
    cohort_service_t *service;
    size_t slot;
    cohort_ctx_t ctx;
    size_t batch;            /* the largest claim (cohort_prefetch_capacity) */
    bson_t *docs;            /* [batch] claimed documents */
    cohort_task_run_t *runs; /* [batch] outcomes waiting for the bulk write */
    bson_oid_t *held;        /* [batch] their ids, for check-ins */
    cohort_task_outcome_t *outcomes;
    size_t n_runs;
    int64_t first_run_ms; /* monotonic: when the oldest unwritten outcome was made */
    /* What the worker's claim may take (take_work()), and whether it holds s->solo: a claim
     * of suspects only, or a suspect it runs alone. */
    cohort_suspects_t suspects;
    bool solo;
    cohort_worker_filter_t filter;
    /* The tokens of claim calls that failed: their claims may have landed with the reply
     * lost, held by this node though no worker runs them. Given back once the database
     * answers again; beyond LOST_CLAIMS_MAX the oldest is left to the stall timeout. */
    char lost[LOST_CLAIMS_MAX][COHORT_CLAIM_TOKEN_SIZE];
    size_t n_lost;
} worker_t;

/* Writes the outcomes the worker holds (see outcomes.h). */
static void flush_outcomes(worker_t *w)
{
    cohort_outcomes_flush(w->service, &w->ctx, w->runs, w->outcomes, &w->n_runs);
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
                cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                            "cannot give back a task of busy group '%s': %s (it is reset "
                            "once its lease runs out)",
                            name, error.message);
            else
                atomic_fetch_sub(&s->stats.claimed, 1); /* undone, not run */
            cohort_filter_note_busy_group(s, name);
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
        cohort_timeouts_poke(s->timeouts);
    }

    int64_t run_started_us = bson_get_monotonic_time();
    cohort_task_run(&w->ctx, w->slot, doc, run);

    pthread_mutex_lock(&s->lock);
    cohort_prefetch_note_run(&s->prefetch, bson_get_monotonic_time() - run_started_us);
    bool timed_out = slot->timed_out;
    if (timed_out)
        cohort_timeouts_note_wedged(s, -1);
    slot->busy = slot->timed_out = false;
    slot->deadline_ms = 0;
    pthread_mutex_unlock(&s->lock);

    if (!run->valid)
        return;
    if (timed_out) { /* the watchdog recorded it timed_out: this late outcome is void */
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
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
        cohort_filter_forget_busy_group(s, run->task.group);
        bson_value_destroy(&run->task.id_value);
        return;
    }
    if (w->batch == 1 || run->task.attempts_bad || w->solo) {
        /* At once: a group's lock goes with its outcome; a hand-written attempts count
         * needs a write of its own; a suspect run alone is cleared before others run. */
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

static void remember_lost_claims(worker_t *w, const char *token)
{
    if (w->n_lost == LOST_CLAIMS_MAX) { /* the oldest is left to the stall timeout */
        memmove(w->lost[0], w->lost[1], sizeof w->lost[0] * (LOST_CLAIMS_MAX - 1));
        w->n_lost--;
    }
    memcpy(w->lost[w->n_lost++], token, COHORT_CLAIM_TOKEN_SIZE);
}

/* Gives back the claims of failed claim calls that landed after all (a lost reply), oldest
 * first, stopping at the first error: the database is still away, try again next time. */
static void release_lost_claims(worker_t *w)
{
    cohort_service_t *s = w->service;
    size_t done = 0;
    for (; done < w->n_lost; done++) {
        int64_t released = 0;
        bson_error_t error;
        if (!cohort_store_release_token(s->store, w->ctx.client, s->config->name, s->node_id,
                                        w->lost[done], &released, &error))
            break;
        if (released > 0)
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                        "gave back %lld task(s) claimed by a call whose reply was lost; they "
                        "run again at once instead of after stall_timeout_ms",
                        (long long)released);
    }
    memmove(w->lost[0], w->lost[done], sizeof w->lost[0] * (w->n_lost - done));
    w->n_lost -= done;
}

/* How long claims are taken to collide with other claimers' after one lost candidates to
 * them, in ticks: the node keeps its claims spread over the queue head meanwhile. */
#define CONTENDED_TICKS 5

/* The window of the queue head a batch claim takes (lock held; runtime.h): the first one,
 * from the node's base while its claims collide with others' (else from the head), that no
 * claim of this node in flight takes: this node's workers never race each other. */
static uint32_t window_take(cohort_service_t *s)
{
    uint32_t base = cohort_clock_monotonic_ms() < s->contended_until_ms ? s->window_base : 0;
    uint32_t k = base;
    for (uint32_t j = 0; j < COHORT_CLAIM_WINDOWS; j++) {
        k = (base + j) % COHORT_CLAIM_WINDOWS;
        if (s->window_claims[k] == 0)
            break;
    }
    s->window_claims[k]++;
    return k;
}

/* The claim in window `k` is done (takes the lock): it lost `lost` candidates to other
 * claimers. One that lost any moves the node's claims to another window, chosen at random
 * so that colliding nodes part (the window it lost in is never chosen again at once). */
static void window_done(cohort_service_t *s, uint32_t k, uint32_t lost)
{
    pthread_mutex_lock(&s->lock);
    s->window_claims[k]--;
    s->claiming--;
    if (lost > 0) {
        s->contended_until_ms = cohort_clock_monotonic_ms() + CONTENDED_TICKS * s->claim_tick_ms;
        s->window_base = (k + 1 + (uint32_t)random() % (COHORT_CLAIM_WINDOWS - 1)) %
                         COHORT_CLAIM_WINDOWS;
    }
    if (s->budget > 0)
        pthread_cond_broadcast(&s->wake); /* a worker waits for this claim (next_take()) */
    pthread_mutex_unlock(&s->lock);
}

/* Claims up to `want` tasks into w->docs: one findAndModify for one, three commands for more,
 * the batch passing over the first `skip` candidates (cohort_claim_filter_t). *n receives how
 * many; *suspect_seen whether a batch claim left a suspect that was due; *lost how many of
 * its candidates other claimers took first. */
static bool claim(worker_t *w, size_t want, uint32_t skip, size_t *n, bool *suspect_seen,
                  uint32_t *lost, bson_error_t *error)
{
    cohort_service_t *s = w->service;
    const cohort_handler_t *h = s->plugin->handler;
    size_t n_served = 0;
    while (h->kinds && h->kinds[n_served])
        n_served++;
    cohort_claim_filter_t filter = {
        .served_kinds = h->kinds,
        .n_served_kinds = n_served,
        .served_no_kind = true, /* a handler's kinds take the tasks without one too */
        .stopped_kinds = (const char *const *)w->filter.kinds,
        .n_stopped_kinds = w->filter.n_kinds,
        .busy_groups = (const char *const *)w->filter.groups,
        .n_busy_groups = w->filter.n_groups,
        .suspects = w->suspects,
        .suspect_seen = suspect_seen,
        .skip = skip,
        .lost = lost,
    };
    cohort_capacity_filter(s, &filter);
    int64_t now = cohort_clock_cluster_ms();
    char token[COHORT_CLAIM_TOKEN_SIZE];
    cohort_store_new_claim_token(token);
    bool ok;
    if (want > 1) {
        ok = cohort_store_claim_tasks(s->store, w->ctx.client, s->config->name, s->node_id, now,
                                      &filter, want, w->docs, n, token, error);
    } else {
        bool found = false;
        ok = cohort_store_claim_task(s->store, w->ctx.client, s->config->name, s->node_id, now,
                                     &filter, &w->docs[0], &found, token, error);
        if (!found)
            bson_destroy(&w->docs[0]);
        *n = found ? 1 : 0;
    }
    if (!ok)
        remember_lost_claims(w, token);
    return ok;
}

/* What prefetch.h decides from (lock held); `self` is 1 when the calling worker is counted
 * in `running` (a claim in flight) but is about to be idle. */
static cohort_prefetch_input_t prefetch_input(cohort_service_t *s, size_t self)
{
    size_t busy = s->running > self ? s->running - self : 0;
    return (cohort_prefetch_input_t){
        .claim_batch = s->config->claim_batch,
        .idle_workers = s->target_workers > busy ? s->target_workers - busy : 0,
        .ready_n = s->ready_n,
        .tick_ms = s->claim_tick_ms,
    };
}

/* How many tasks this claim asks for, the worker's own included (prefetch.h). */
static size_t claim_size(worker_t *w)
{
    cohort_service_t *s = w->service;
    pthread_mutex_lock(&s->lock);
    cohort_prefetch_input_t in = prefetch_input(s, 1);
    size_t want = cohort_prefetch_want(&s->prefetch, &in);
    pthread_mutex_unlock(&s->lock);
    return want < w->batch ? want : w->batch;
}

/* After a run: runs turned long, so the tasks a batch prefetched beyond one per idle worker
 * go back for other nodes (prefetch.h). */
static void give_back_surplus(worker_t *w)
{
    cohort_service_t *s = w->service;
    pthread_mutex_lock(&s->lock);
    cohort_prefetch_input_t in = prefetch_input(s, 0);
    size_t surplus = cohort_prefetch_surplus(&s->prefetch, &in);
    pthread_mutex_unlock(&s->lock);
    if (surplus > 0)
        cohort_ready_give_back_last(s, w->ctx.client, surplus);
}

int64_t cohort_workers_give_back_unstartable(cohort_service_t *s, mongoc_client_t *client)
{
    if (s->config->claim_batch != COHORT_CLAIM_BATCH_AUTO)
        return -1;
    /* A primary that counted no other live node for the service keeps them: nobody else
     * would run them sooner, and its own workers take them next. */
    if (s->peers == 0 && cohort_election_epoch(&s->election) > 0)
        return -1;
    int64_t now = cohort_clock_cluster_ms();
    pthread_mutex_lock(&s->lock);
    cohort_prefetch_input_t in = prefetch_input(s, 0);
    int64_t window_ms = cohort_prefetch_window_ms(in.tick_ms);
    /* Stuck: every worker runs a task begun more than a window ago. Otherwise look again
     * when the youngest run turns that old (or, with a worker idle, a window from now). */
    bool stuck = in.ready_n > 0 && in.idle_workers == 0 && s->slots;
    int64_t again = in.ready_n > 0 ? window_ms : -1;
    for (size_t i = 0; stuck && i < s->target_workers && i < s->n_threads; i++) {
        int64_t age = now - s->slots[i].started_at_ms;
        stuck = s->slots[i].busy && age > window_ms;
        if (s->slots[i].busy && age <= window_ms)
            again = window_ms - age + 1;
    }
    size_t n = stuck ? in.ready_n : 0;
    pthread_mutex_unlock(&s->lock);
    if (n == 0)
        return again;
    cohort_ready_give_back_last(s, client, n);
    return -1;
}

/* After a claim that may take a suspect, or saw one: a suspect runs only while nothing else
 * of the service runs here (s->solo keeps the others waiting until it ran). A suspect that a
 * single claim took while another worker started meanwhile is given back untouched, and the
 * workers want a claim alone, as after a batch claim that left one; a claim of suspects only
 * that found none ends that. Returns whether w->docs[0] must be given back. */
static bool settle_solo(worker_t *w, bool ok, size_t n, bool seen)
{
    cohort_service_t *s = w->service;
    bool suspect = n == 1 && w->suspects != COHORT_SUSPECTS_SKIP &&
                   cohort_store_task_suspect(&w->docs[0]);
    bool back = false;
    pthread_mutex_lock(&s->lock);
    if (suspect && !w->solo) {
        /* Alone in the process: this claim is the one task counted anywhere in it. */
        back = s->solo || s->running > 1 || s->ready_n > 0 ||
               process_busy() > 1 || !solo_acquire(s);
        if (!back)
            w->solo = true;
    }
    if (seen || back)
        s->solo_wanted = true;
    else if (ok && n == 0 && w->suspects == COHORT_SUSPECTS_ONLY)
        s->solo_wanted = false;
    if (w->solo && !suspect) {
        solo_release(s);
        w->solo = false;
        pthread_cond_broadcast(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
    return back;
}

/* Gives back the suspect in w->docs[0] (settle_solo()), untouched, and frees it. */
static void give_back_suspect(worker_t *w)
{
    cohort_service_t *s = w->service;
    bson_iter_t id, at;
    bson_error_t error;
    if (!bson_iter_init_find(&id, &w->docs[0], "_id") ||
        !bson_iter_init_find(&at, &w->docs[0], "attempts") || !BSON_ITER_HOLDS_NUMBER(&at) ||
        !cohort_store_unclaim(s->store, w->ctx.client, s->config->name, bson_iter_value(&id),
                              s->node_id, (int32_t)bson_iter_as_int64(&at),
                              coalesce_key(&w->docs[0]), &error))
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                    "cannot give back a suspect task claimed beside running ones (it is reset "
                    "once its claim runs out)");
    bson_destroy(&w->docs[0]);
}

/* Claims as many tasks as claim_size() says (as far as the budget and the ready queue
 * allow): the first into w->docs[0] for this worker, the rest into the ready queue. False if
 * none. */
static bool claim_some(worker_t *w, int64_t *last_error_log)
{
    cohort_service_t *s = w->service;
    size_t size = w->suspects == COHORT_SUSPECTS_ONLY ? 1 : claim_size(w);
    size_t extra = size > 1 ? take_more(s, size - 1) : 0;
    size_t want = 1 + extra;
    if (want > 1 && w->suspects == COHORT_SUSPECTS_ANY)
        w->suspects = COHORT_SUSPECTS_SKIP; /* a batch: it notes suspects, never takes one */
    cohort_filter_refresh(s, &w->filter);
    if (w->n_lost > 0)
        release_lost_claims(w);
    size_t n = 0;
    bool seen = false;
    uint32_t lost = 0;
    bson_error_t error;
    pthread_mutex_lock(&s->lock);
    uint32_t window = window_take(s);
    pthread_mutex_unlock(&s->lock);
    bool ok = claim(w, want, window * COHORT_PREFETCH_CAP, &n, &seen, &lost, &error);
    window_done(s, window, lost);
    if ((w->suspects != COHORT_SUSPECTS_SKIP || seen) && settle_solo(w, ok, n, seen)) {
        give_back_suspect(w);
        n = 0;
        seen = true; /* wanted alone: not a drained queue */
    }
    cohort_capacity_claimed(s, w->docs, n);
    if (want > n)
        give_back(s, want - n); /* nothing was claimed for these */
    push_ready(s, w->docs + (n > 1 ? 1 : 0), n > 1 ? n - 1 : 0, extra);
    if (n > 1 && s->prefetched)
        s->prefetched(s->prefetched_arg);
    if (!ok || n == 0) {
        pthread_mutex_lock(&s->lock);
        if (!ok || !(seen || w->suspects == COHORT_SUSPECTS_ONLY))
            s->drained = true; /* poll again next tick (else: suspects, or other work) */
        s->probing = false;
        count_running(s, false);
        pthread_cond_broadcast(&s->wake);
        pthread_mutex_unlock(&s->lock);
        if (!ok && error.domain == MONGOC_ERROR_SERVER)
            atomic_store(&s->type_check_wanted, true); /* a malformed task, perhaps */
        int64_t now = cohort_clock_monotonic_ms();
        if (!ok && now - *last_error_log > 5000) {
            *last_error_log = now;
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
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
        take_t take = take_work(s, w->slot, &doc, &w->suspects);
        w->solo = take == TAKE_SOLO;
        if (take == TAKE_STOP)
            break;
        if (take == TAKE_CLAIM || take == TAKE_SOLO) {
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
        cohort_capacity_release(s, doc);
        bson_destroy(doc);

        pthread_mutex_lock(&s->lock);
        count_running(s, false);
        if (w->solo) { /* the suspect ran: the others go on */
            solo_release(s);
            w->solo = false;
        }
        pthread_cond_broadcast(&s->wake);
        pthread_mutex_unlock(&s->lock);
        give_back_surplus(w);
    }
    flush_outcomes(w);
    hold(w);
    cohort_ready_give_back_all(s, w->ctx.client); /* prefetched, never started */
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
    w.batch = cohort_prefetch_capacity(s->config->claim_batch); /* the largest claim */
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
    cohort_filter_release(&w.filter);
    free(w.outcomes);
    free(w.held);
    free(w.runs);
    free(w.docs);
    return NULL;
}

bool cohort_service_set_workers(cohort_service_t *s, size_t workers, bson_error_t *error)
{
    if (workers < 1 || workers > COHORT_MAX_WORKERS) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "workers = %zu is out of range [1, %d]", workers, COHORT_MAX_WORKERS);
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
        if (arg)
            *arg = (worker_arg_t){s, s->n_threads};
        else
            cohort_error_nomem(error, "a worker thread's argument");
        if (!arg || !cohort_thread_start(&s->threads[s->n_threads], worker_main, arg, false,
                                         error, "worker thread %zu of service '%s'",
                                         s->n_threads + 1, s->config->name)) {
            free(arg);
            s->target_workers = s->n_threads;
            ok = false;
        } else {
            s->n_threads++;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

void cohort_service_stop_claiming(cohort_service_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void cohort_workers_refill(cohort_service_t *s)
{
    bool primary = cohort_election_has_lease(&s->election);
    pthread_mutex_lock(&s->lock);
    bool worked = s->work_seen;
    if (!cohort_clock_synced())
        s->budget = 0; /* no claims before the cluster clock is known: due times, history
                        * stamps and timeouts are all on it, and the node's own may be off */
    else if (primary)
        s->budget = s->peers == 0 ? -1 : s->eff.primary_task_count; /* alone: no cap */
    else
        s->budget = s->eff.secondary_task_count > 0 ? s->eff.secondary_task_count : -1;
    /* An idle secondary waits for the primary's word that work is due (or a wake-up). */
    s->drained = !primary && !worked && !s->election.queue_due;
    s->work_seen = false;
    s->probing = false;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

int cohort_workers_due_hint(cohort_service_t *s)
{
    if (s->config->external)
        return -1;
    pthread_mutex_lock(&s->lock);
    bool found_nothing = s->drained && !cohort_capacity_missed_by_weight(s);
    pthread_mutex_unlock(&s->lock);
    return found_nothing ? 0 : 1;
}

void cohort_workers_wake(cohort_service_t *s)
{
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->queue_grew, true); /* the batch may have grown too (batches.c) */
    if (!s->stopping && s->budget != 0) {
        s->drained = false;
        s->work_seen = false;
        s->probing = false;
        pthread_cond_broadcast(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
}

void cohort_workers_hold(cohort_service_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->budget = 0;
    pthread_mutex_unlock(&s->lock);
}

void cohort_workers_join(cohort_service_t *s)
{
    cohort_timeouts_stop(s->timeouts); /* it reads the slots freed below */
    s->timeouts = NULL;
    cohort_service_stop_claiming(s);
    for (size_t i = 0; i < s->n_threads; i++)
        pthread_join(s->threads[i], NULL);
    s->n_threads = 0;
    free(s->threads);
    free(s->slots);
    s->threads = NULL;
    s->slots = NULL;
    for (size_t i = 0; s->ready && i < s->ready_n; i++) /* not given back: released at exit */
        bson_destroy(s->ready[(s->ready_head + i) % s->ready_cap]);
    free(s->ready);
    s->ready = NULL;
    s->ready_n = 0;
}
