/*
 * batches.c - the primary's side of tracked batches (see batches.h): the open batch closes
 * once every task in it finished, and completes once the handler's on_tasks_completed()
 * accepted it. Both steps are fenced by the epoch, so a batch is closed and completed exactly
 * once whatever happens to primacy meanwhile.
 */
#include "node/primary/batches.h"

#include "core/clock.h"
#include "core/log.h"
#include "node/handler/context.h"
#include "node/primary/maintenance.h"
#include "store/batches.h"
#include "store/upkeep.h"

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
        batch.cursor = cohort_store_batch_cursor(s->store, client, c->name, seq, true);
        /* Cursors send nothing until read: a handler that does not iterate costs nothing. */
        batch.unsuccessful = cohort_store_batch_cursor(s->store, client, c->name, seq, false);
        /* The main thread is busy in the handler but alive: the lease and heartbeat threads keep
         * primacy and liveness up meanwhile, for at most 10 takeover periods (election.h). */
        cohort_election_note_alive(&s->election);
        bool ok = h->on_tasks_completed(&ctx, s->handler_state, &batch);
        mongoc_cursor_destroy(batch.cursor);
        mongoc_cursor_destroy(batch.unsuccessful);
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

void cohort_batches_advance(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    const cohort_service_config_t *c = s->config;
    int64_t mono = cohort_clock_monotonic_ms();
    bool grew = atomic_exchange(&s->queue_grew, false);
    if (s->batch_quiet && !s->batch_draining && s->election.due_hint == 0 && !grew &&
        mono < s->next_batch_count_ms)
        return;
    s->next_batch_count_ms = mono + COHORT_UPKEEP_INTERVAL_MS;
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
    s->batch_quiet = counts.unfinished + counts.succeeded + counts.failed == 0;
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
