/*
 * checkins.c - the main thread's watch over the tasks this node runs (see checkins.h). It
 * reads the worker slots under the lock and talks to the database without it.
 */
#include "node/work/checkins.h"

#include <stdlib.h>

#include "core/clock.h"
#include "core/log.h"
#include "store/upkeep.h"

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
