/*
 * batches.c - tracked batches: their numbers in the config document, counting a batch's
 * tasks, closing it, acknowledging and reading its succeeded tasks, completing it.
 *
 * Closing and completing are fenced on primacy under the caller's epoch and on the batch
 * number, so exactly one primary closes and completes each batch once.
 */
#include "store/batches.h"

#include "store/internal.h"
#include "store/queries.h"
#include "store/services.h"
#include "store/store.h"

#include "core/status.h"

#include <stdio.h>

void cohort_store_parse_batch_state(const bson_t *doc, cohort_batch_state_t *state)
{
    state->open = store_int64_field(doc, "batch_seq", 1);
    state->draining = store_int64_field(doc, "draining.seq", 0);
}

bool cohort_store_batch_state(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, cohort_batch_state_t *state,
                              bson_error_t *error)
{
    bson_t doc;
    bool found = false;
    bool ok = cohort_store_read_service(store, client, service, &doc, &found, error);
    state->open = 1;
    state->draining = 0;
    if (ok && found)
        cohort_store_parse_batch_state(&doc, state);
    bson_destroy(&doc);
    return ok;
}

bool cohort_store_count_batch(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              int64_t batch, cohort_batch_counts_t *counts, bson_error_t *error)
{
    bson_t *match = BCON_NEW("batch", BCON_INT64(batch), "tracked", BCON_BOOL(true));
    cohort_status_counts_t by_status;
    bool ok = store_count_by_status(store, client, service, match, &by_status, error);
    bson_destroy(match);
    /* Anything not finished (including statuses written by hand) keeps the batch open; every
     * final status but succeeded (failed, timed_out, cancelled) counts as failed, so a batch
     * drains whatever ended its tasks, and the count matches cohort_batch_next_unsuccessful. */
    counts->unfinished = by_status.pending + by_status.claimed + by_status.other;
    counts->succeeded = by_status.succeeded;
    counts->failed = 0;
    for (int i = 0; i < COHORT_STATUS_COUNT; i++) {
        cohort_task_status_t status = (cohort_task_status_t)i;
        if (cohort_status_is_final(status) && status != COHORT_STATUS_SUCCEEDED)
            counts->failed += cohort_status_count(&by_status, status);
    }
    return ok;
}

bool cohort_store_close_batch(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              const char *node_id, int64_t epoch, int64_t batch, bool *closed,
                              bson_error_t *error)
{
    bson_t *filter = BCON_NEW("batch_seq", BCON_INT64(batch), "draining", BCON_NULL);
    bson_t *update = BCON_NEW("$set", "{", "draining", "{", "seq", BCON_INT64(batch), "epoch",
                              BCON_INT64(epoch), "}", "}", "$inc", "{", "batch_seq",
                              BCON_INT64(1), "}");
    bool ok = store_fenced_update(store, client, service, node_id, epoch, filter, update, closed,
                                  error);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_acknowledge_batch(cohort_store_t *store, mongoc_client_t *client,
                                    const char *service, int64_t batch, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("batch", BCON_INT64(batch), "tracked", BCON_BOOL(true), "status",
                              BCON_UTF8("succeeded"), "acknowledged", "{", "$ne", BCON_BOOL(true),
                              "}");
    bson_t *update = BCON_NEW("$set", "{", "acknowledged", BCON_BOOL(true), "}");
    bool ok = store_update_queue(store, client, service, filter, update, NULL, error);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

/* {$in: [every final status but succeeded]}: a final status added to status.h joins. */
static void append_unsuccessful(bson_t *filter)
{
    bson_t status, in;
    BSON_APPEND_DOCUMENT_BEGIN(filter, "status", &status);
    BSON_APPEND_ARRAY_BEGIN(&status, "$in", &in);
    uint32_t n = 0;
    for (int i = 0; i < COHORT_STATUS_COUNT; i++) {
        if (!cohort_status_is_final((cohort_task_status_t)i) || i == COHORT_STATUS_SUCCEEDED)
            continue;
        char key[16];
        const char *k;
        bson_uint32_to_string(n++, &k, key, sizeof key);
        BSON_APPEND_UTF8(&in, k, cohort_status_name((cohort_task_status_t)i));
    }
    bson_append_array_end(&status, &in);
    bson_append_document_end(filter, &status);
}

mongoc_cursor_t *cohort_store_batch_cursor(cohort_store_t *store, mongoc_client_t *client,
                                           const char *service, int64_t batch, bool succeeded)
{
    bson_t *filter = BCON_NEW("batch", BCON_INT64(batch), "tracked", BCON_BOOL(true));
    if (succeeded)
        BSON_APPEND_UTF8(filter, "status", cohort_status_name(COHORT_STATUS_SUCCEEDED));
    else
        append_unsuccessful(filter);
    bson_t *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}", "projection", "{", "data",
                            BCON_INT32(1), "attempts", BCON_INT32(1), "status", BCON_INT32(1),
                            "last_error", BCON_INT32(1), "}", "batchSize", BCON_INT32(500));
    mongoc_collection_t *tasks = store_queue(store, client, service);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, filter, opts, NULL);
    mongoc_collection_destroy(tasks); /* the cursor keeps what it needs */
    bson_destroy(opts);
    bson_destroy(filter);
    return cursor;
}

bool cohort_store_complete_batch(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *node_id, int64_t epoch,
                                 int64_t batch, const cohort_batch_counts_t *counts,
                                 const bson_t *data_sets, bool *completed, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("draining.seq", BCON_INT64(batch));
    bson_t update = BSON_INITIALIZER, set, unset, current;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    BSON_APPEND_NULL(&set, "draining");
    /* Dotted paths, so $currentDate can fill last_batch.completed_at beside them. */
    BSON_APPEND_INT64(&set, "last_batch.seq", batch);
    BSON_APPEND_INT64(&set, "last_batch.succeeded", counts->succeeded);
    BSON_APPEND_INT64(&set, "last_batch.failed", counts->failed);
    BSON_APPEND_UTF8(&set, "last_batch.completed_by", node_id);
    BSON_APPEND_INT64(&set, "last_batch.epoch", epoch);
    bool any_unset = false;
    bson_iter_t it;
    if (data_sets && bson_iter_init(&it, data_sets)) {
        while (bson_iter_next(&it)) {
            if (BSON_ITER_HOLDS_NULL(&it)) {
                any_unset = true;
                continue;
            }
            char key[128];
            snprintf(key, sizeof key, "data.%s", bson_iter_key(&it));
            bson_append_value(&set, key, -1, bson_iter_value(&it));
        }
    }
    bson_append_document_end(&update, &set);
    if (any_unset) {
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$unset", &unset);
        bson_iter_init(&it, data_sets);
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_NULL(&it))
                continue;
            char key[128];
            snprintf(key, sizeof key, "data.%s", bson_iter_key(&it));
            BSON_APPEND_UTF8(&unset, key, "");
        }
        bson_append_document_end(&update, &unset);
    }
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$currentDate", &current);
    BSON_APPEND_BOOL(&current, "last_batch.completed_at", true);
    bson_append_document_end(&update, &current);
    bson_t inc;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
    BSON_APPEND_INT64(&inc, "batches_completed", 1);
    bson_append_document_end(&update, &inc);

    bool ok = store_fenced_update(store, client, service, node_id, epoch, filter, &update,
                                  completed, error);
    bson_destroy(&update);
    bson_destroy(filter);
    return ok;
}
