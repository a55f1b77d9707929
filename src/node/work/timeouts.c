/*
 * timeouts.c - the timeout watchdog thread (see timeouts.h): sleeps until the earliest
 * deadline of the service's worker slots (or until a worker sets a new one), then records
 * each run past its deadline timed_out. It reads the slots under the service's lock and
 * talks to the database without it.
 */
#include "node/work/timeouts.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/wake.h"
#include "node/work/task.h"

#define IDLE_MS 60000 /* no deadline: look again after this long anyway */

struct cohort_timeouts {
    cohort_service_t *service;
    pthread_t thread;
    cohort_wake_t wake;
};

#define MARK_MAX 64 /* overdue runs marked in one pass, before their writes */

/* A run the watchdog ended: its slot, task, attempt, when it started and was ended (cluster
 * clock), and how long after its deadline it was ended (monotonic clock). */
typedef struct overdue {
    size_t slot;
    bson_value_t id;
    int32_t attempt;
    int64_t started_ms, ended_ms;
    int64_t late_ms;
} overdue_t;

/* Records run `o` timed_out in the database; its slot is already marked. */
static void record(cohort_service_t *s, const overdue_t *o)
{
    char why[160];
    snprintf(why, sizeof why,
             "timed out after %lld ms (isolation = thread: the handler keeps its worker "
             "thread until it returns)",
             (long long)(o->ended_ms - o->started_ms));
    cohort_task_result_t result = {.finish = COHORT_FINISH_TIMED_OUT,
                                   .error = why,
                                   .started_at_ms = o->started_ms,
                                   .ended_at_ms = o->ended_ms};
    bool applied = false;
    bson_error_t error;
    char hex[25];
    bson_oid_to_string(&o->id.value.v_oid, hex);
    mongoc_client_t *client = cohort_store_pop(s->store);
    bool ok = cohort_store_finish_task_value(s->store, client, s->config->name, &o->id,
                                             s->node_id, o->attempt, &result, &applied, &error);
    cohort_store_push(s->store, client);
    const char *role = cohort_election_role(&s->election);
    if (!ok) {
        cohort_logf(COHORT_LOG_WARN, s->config->name, role, 0,
                    "task %s timed out, but recording it failed: %s (its claim runs out as for "
                    "a stalled task)",
                    hex, error.message);
    } else if (applied) {
        cohort_task_count(s, COHORT_FINISH_TIMED_OUT);
        cohort_logf(COHORT_LOG_WARN, s->config->name, role, 0,
                    "task %s attempt %d timed out (final), ended %lld ms past its deadline; "
                    "worker slot %zu is wedged until the handler returns",
                    hex, (int)o->attempt, (long long)o->late_ms, o->slot);
    } else {
        atomic_fetch_add(&s->stats.lost_claims, 1);
        cohort_logf(COHORT_LOG_WARN, s->config->name, role, 0,
                    "task %s attempt %d timed out; not recorded, this node no longer holds its "
                    "claim",
                    hex, (int)o->attempt);
    }
}

/* Under the lock, in one pass: marks up to MARK_MAX runs past their deadline timed_out (from
 * then their handler's outcome is void), copying them into out[0 .. *n). Returns when the
 * next deadline of a run left unmarked falls (monotonic). */
static int64_t mark_overdue(cohort_service_t *s, overdue_t *out, size_t *n)
{
    *n = 0;
    pthread_mutex_lock(&s->lock);
    int64_t now = cohort_clock_monotonic_ms(), ended = cohort_clock_cluster_ms();
    int64_t next = now + IDLE_MS;
    for (size_t i = 0; i < s->n_threads; i++) {
        cohort_slot_t *slot = &s->slots[i];
        if (!slot->busy || slot->deadline_ms <= 0 || slot->timed_out)
            continue;
        if (now < slot->deadline_ms || *n == MARK_MAX) {
            next = slot->deadline_ms < next ? slot->deadline_ms : next;
            continue;
        }
        slot->timed_out = true;
        cohort_timeouts_note_wedged(s, 1);
        overdue_t *o = &out[(*n)++];
        *o = (overdue_t){.slot = i,
                         .id = {.value_type = BSON_TYPE_OID},
                         .attempt = slot->attempt,
                         .started_ms = slot->started_at_ms,
                         .ended_ms = ended,
                         .late_ms = now - slot->deadline_ms};
        bson_oid_copy(&slot->task, &o->id.value.v_oid);
    }
    pthread_mutex_unlock(&s->lock);
    return next;
}

/* Ends every run past its deadline; returns when the next deadline falls (monotonic). */
static int64_t end_overdue_runs(cohort_service_t *s)
{
    overdue_t due[MARK_MAX];
    size_t n;
    int64_t next;
    do {
        next = mark_overdue(s, due, &n);
        for (size_t i = 0; i < n; i++)
            record(s, &due[i]);
    } while (n == MARK_MAX);
    return next;
}

static void *watchdog_main(void *arg)
{
    cohort_timeouts_t *t = arg;
    while (cohort_wake_sleep_until(&t->wake, end_overdue_runs(t->service)))
        ;
    return NULL;
}

cohort_timeouts_t *cohort_timeouts_start(cohort_service_t *service, bson_error_t *error)
{
    cohort_timeouts_t *t = calloc(1, sizeof *t);
    if (!t) {
        cohort_error_nomem(error, "the timeout watchdog");
        return NULL;
    }
    t->service = service;
    cohort_wake_init(&t->wake);
    if (!cohort_thread_start(&t->thread, watchdog_main, t, false, error,
                             "the timeout watchdog thread of service '%s'",
                             service->config->name)) {
        cohort_wake_destroy(&t->wake);
        free(t);
        return NULL;
    }
    return t;
}

void cohort_timeouts_poke(cohort_timeouts_t *t)
{
    if (t)
        cohort_wake_poke(&t->wake);
}

void cohort_timeouts_stop(cohort_timeouts_t *t)
{
    if (!t)
        return;
    cohort_wake_stop(&t->wake);
    pthread_join(t->thread, NULL);
    cohort_wake_destroy(&t->wake);
    free(t);
}

/* Wedged threads of every service of the process: they may never end, so they do not keep a
 * suspect from running alone (workers.c). */
static atomic_size_t process_wedged;

void cohort_timeouts_note_wedged(cohort_service_t *s, int delta)
{
    atomic_fetch_add(&s->wedged_slots, delta);
    if (delta > 0)
        atomic_fetch_add(&process_wedged, (size_t)delta);
    else
        atomic_fetch_sub(&process_wedged, (size_t)-delta);
}

size_t cohort_timeouts_wedged_in_process(void)
{
    return atomic_load(&process_wedged);
}
