/*
 * outcomes.c - writing the outcomes a worker holds for its bulk write (see outcomes.h).
 *
 * Each outcome is written with a filter on its claim (this node, this attempt), so an
 * outcome of a claim that moved on matches nothing: it is then counted as a lost claim,
 * never as a result.
 */
#include "node/work/outcomes.h"

#include <string.h>

#include "core/log.h"
#include "node/work/task.h"
#include "store/outcomes.h"
#include "store/queries.h"

/* Whether the history entry `entry` (a document) records run `run` of this node as reported:
 * its node and attempt, and an `outcome`. A reset (stall, node expiry, release) writes an
 * entry with the same node and attempt but no outcome: the run's outcome was refused. */
static bool reports_run(cohort_service_t *s, bson_iter_t *entry, const cohort_task_run_t *run)
{
    bson_iter_t field;
    const char *node = NULL;
    int64_t attempt = -1;
    bool outcome = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(entry) || !bson_iter_recurse(entry, &field))
        return false;
    while (bson_iter_next(&field)) {
        const char *key = bson_iter_key(&field);
        if (strcmp(key, "node") == 0 && BSON_ITER_HOLDS_UTF8(&field))
            node = bson_iter_utf8(&field, NULL);
        else if (strcmp(key, "attempt") == 0 && BSON_ITER_HOLDS_NUMBER(&field))
            attempt = bson_iter_as_int64(&field);
        else if (strcmp(key, "outcome") == 0)
            outcome = true;
    }
    return outcome && node && strcmp(node, s->node_id) == 0 && attempt == run->task.attempt;
}

/* After a bulk write that matched fewer outcomes than it carried: whether this run's outcome
 * is the task's last recorded run (counted) or was refused (logged as a lost claim). */
static void count_or_report_lost(cohort_service_t *s, cohort_ctx_t *ctx,
                                 const cohort_task_run_t *run)
{
    bson_t doc;
    bool found = false, mine = false;
    bson_error_t error;
    if (cohort_store_read_task(s->store, ctx->client, s->config->name, run->task.id, &doc,
                               &found, &error) && found) {
        bson_iter_t it, entry;
        uint32_t len = 0;
        const uint8_t *data = NULL;
        if (bson_iter_init_find(&it, &doc, "history") && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_array(&it, &len, &data);
            bson_t history;
            if (bson_init_static(&history, data, len) && bson_iter_init(&entry, &history))
                while (bson_iter_next(&entry)) /* the last entry is the latest run */
                    mine = reports_run(s, &entry, run);
        }
    }
    bson_destroy(&doc);
    if (mine) {
        cohort_task_count(s, run->result.finish);
        return;
    }
    atomic_fetch_add(&s->stats.lost_claims, 1);
    cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                "task %s attempt %d: outcome not recorded, this node no longer holds its claim",
                run->task.id, run->task.attempt);
}

void cohort_outcomes_flush(cohort_service_t *s, cohort_ctx_t *ctx, cohort_task_run_t *runs,
                           cohort_task_outcome_t *outcomes, size_t *n_runs)
{
    size_t n = *n_runs;
    if (n == 0)
        return;
    for (size_t i = 0; i < n; i++)
        outcomes[i] = (cohort_task_outcome_t){.id = runs[i].task.id_value,
                                                 .attempt = runs[i].task.attempt,
                                                 .result = runs[i].result};
    size_t applied = 0;
    bson_error_t error;
    if (cohort_store_finish_tasks(s->store, ctx->client, s->config->name, s->node_id,
                                  outcomes, n, &applied, &error)) {
        if (applied == n) {
            for (size_t i = 0; i < n; i++)
                cohort_task_count(s, runs[i].result.finish);
        } else {
            /* The reply counts matches, not which: a lost claim is rare (this node was
             * frozen or cut off and its claims were reset), so find out task by task. */
            for (size_t i = 0; i < n; i++)
                count_or_report_lost(s, ctx, &runs[i]);
        }
    } else {
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                    "cannot record %zu outcome(s) in bulk (%s); recording them one by one",
                    n, error.message);
        for (size_t i = 0; i < n; i++)
            cohort_task_record(ctx, &runs[i]);
    }
    for (size_t i = 0; i < n; i++)
        bson_value_destroy(&runs[i].task.id_value);
    *n_runs = 0;
}
