/*
 * checkins.c - the main thread's watch over the tasks this node runs (see checkins.h). It
 * reads the worker slots under the lock and talks to the database without it.
 */
#include "node/checkins.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/clock.h"
#include "core/log.h"
#include "node/task.h"

#define CHECKIN_CHUNK 256
void cohort_checkins_run(cohort_service_t *s, mongoc_client_t *client)
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
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                        "check-in of %zu running task(s) failed: %s", n, error.message);
            break;
        }
    }
    free(ids);
}

void cohort_checkins_watch_timeouts(cohort_service_t *s, mongoc_client_t *client)
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
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                        "task %s timed out, but recording it failed: %s (its claim runs out "
                        "as for a stalled task)",
                        hex, error.message);
        } else if (applied) {
            cohort_task_count(s, COHORT_FINISH_TIMED_OUT);
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                        "task %s attempt %d timed out (final); worker slot %zu is wedged until "
                        "the handler returns",
                        hex, (int)attempt, i);
        }
    }
}
