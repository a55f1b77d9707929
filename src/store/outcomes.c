/*
 * outcomes.c - writing what became of an attempt: success, retry, failure, timeout.
 *
 * Every outcome is conditional on the claim still being held by this node for this attempt,
 * so a node that lost a claim (reset as stalled, released as expired) writes nothing; each
 * keeps the last COHORT_HISTORY_MAX runs in the task's history.
 */
#include "store/outcomes.h"

#include "store/internal.h"
#include "store/store.h"

#include "core/status.h"

/* The status an outcome leaves the task in: a retry makes it pending again. */
static cohort_task_status_t finish_status(cohort_finish_t finish)
{
    switch (finish) {
    case COHORT_FINISH_SUCCEEDED:
        return COHORT_STATUS_SUCCEEDED;
    case COHORT_FINISH_RETRY:
        return COHORT_STATUS_PENDING;
    case COHORT_FINISH_FAILED:
        return COHORT_STATUS_FAILED;
    case COHORT_FINISH_TIMED_OUT:
        return COHORT_STATUS_TIMED_OUT;
    }
    return COHORT_STATUS_FAILED;
}

/* The history's `outcome`: "retry", or the final status the attempt left. */
static const char *finish_name(cohort_finish_t finish)
{
    return finish == COHORT_FINISH_RETRY ? "retry" : cohort_status_name(finish_status(finish));
}

/* The update that records one outcome (see cohort_store_finish_task_value). */
void store_append_history_push(bson_t *update, const bson_t *entry)
{
    bson_t push, history, each;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$push", &push);
    BSON_APPEND_DOCUMENT_BEGIN(&push, "history", &history);
    BSON_APPEND_ARRAY_BEGIN(&history, "$each", &each);
    BSON_APPEND_DOCUMENT(&each, "0", entry);
    bson_append_array_end(&history, &each);
    BSON_APPEND_INT32(&history, "$slice", -COHORT_HISTORY_MAX);
    bson_append_document_end(&push, &history);
    bson_append_document_end(update, &push);
}

void store_finish_update(bson_t *update, const char *node_id, int32_t attempt,
                          const cohort_task_result_t *result)
{
    bson_t set, entry = BSON_INITIALIZER, current, unset;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
    BSON_APPEND_UTF8(&set, "status", cohort_status_name(finish_status(result->finish)));
    if (result->finish == COHORT_FINISH_RETRY)
        BSON_APPEND_DATE_TIME(&set, "run_at", result->retry_at_ms);
    if (result->error)
        BSON_APPEND_UTF8(&set, "last_error", result->error);
    if (result->output)
        BSON_APPEND_DOCUMENT(&set, "result", result->output);
    bson_append_document_end(update, &set);

    BSON_APPEND_DOCUMENT_BEGIN(update, "$unset", &unset);
    BSON_APPEND_UTF8(&unset, "group_lock", "");
    BSON_APPEND_UTF8(&unset, "suspect", ""); /* it ran to an outcome: not the culprit */
    bson_append_document_end(update, &unset);

    if (result->finish != COHORT_FINISH_RETRY) {
        BSON_APPEND_DOCUMENT_BEGIN(update, "$currentDate", &current);
        BSON_APPEND_BOOL(&current, "finished_at", true);
        bson_append_document_end(update, &current);
    }

    if (result->crashed)
        BSON_APPEND_UTF8(&entry, "event", "crashed");
    BSON_APPEND_UTF8(&entry, "node", node_id);
    BSON_APPEND_INT32(&entry, "attempt", attempt);
    BSON_APPEND_DATE_TIME(&entry, "started_at", result->started_at_ms);
    BSON_APPEND_DATE_TIME(&entry, "ended_at", result->ended_at_ms);
    BSON_APPEND_UTF8(&entry, "outcome", finish_name(result->finish));
    if (result->error)
        BSON_APPEND_UTF8(&entry, "error", result->error);
    if (result->api_token)
        BSON_APPEND_UTF8(&entry, "token", result->api_token);
    store_append_history_push(update, &entry);
    bson_destroy(&entry);
}

/* One conditional outcome write; `attempts` is the claim's count as stored, `attempt` the
 * number the history records. */
static bool finish_one(cohort_store_t *store, mongoc_client_t *client, const char *service,
                       const bson_value_t *id, const char *node_id, const bson_value_t *attempts,
                       int32_t attempt, const cohort_task_result_t *result, bool *applied,
                       bson_error_t *error)
{
    bson_t *filter = bson_new();
    BSON_APPEND_VALUE(filter, "_id", id);
    BSON_APPEND_UTF8(filter, "status", "claimed");
    BSON_APPEND_UTF8(filter, "claimed_by", node_id);
    BSON_APPEND_VALUE(filter, "attempts", attempts);
    bson_t update = BSON_INITIALIZER;
    store_finish_update(&update, node_id, attempt, result);
    bool ok = store_update_task(store, client, service, filter, &update, applied, error);
    bson_destroy(&update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_finish_task_value(cohort_store_t *store, mongoc_client_t *client,
                                    const char *service, const bson_value_t *id,
                                    const char *node_id, int32_t attempt,
                                    const cohort_task_result_t *result, bool *applied,
                                    bson_error_t *error)
{
    bson_value_t attempts = {.value_type = BSON_TYPE_INT32, .value.v_int32 = attempt};
    return finish_one(store, client, service, id, node_id, &attempts, attempt, result, applied,
                      error);
}

bool cohort_store_finish_task_raw(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const bson_value_t *id,
                                  const char *node_id, const bson_value_t *attempts,
                                  const cohort_task_result_t *result, bool *applied,
                                  bson_error_t *error)
{
    return finish_one(store, client, service, id, node_id, attempts, 0, result, applied, error);
}

bool cohort_store_finish_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const char *node_id,
                               const cohort_task_outcome_t *outcomes, size_t n, size_t *applied,
                               bson_error_t *error)
{
    *applied = 0;
    if (n == 0)
        return true;
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
    mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(tasks, opts);
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        const cohort_task_outcome_t *o = &outcomes[i];
        bson_t *filter = store_held_claim(&o->id, node_id, o->attempt);
        bson_t update = BSON_INITIALIZER;
        store_finish_update(&update, node_id, o->attempt, &o->result);
        ok = mongoc_bulk_operation_update_one_with_opts(bulk, filter, &update, NULL, error);
        bson_destroy(&update);
        bson_destroy(filter);
    }
    int64_t matched = 0;
    if (ok) {
        ok = store_bulk_execute(bulk, "nMatched", &matched, error);
        *applied = (size_t)matched;
    }
    mongoc_bulk_operation_destroy(bulk);
    bson_destroy(opts);
    mongoc_collection_destroy(tasks);
    return ok;
}
