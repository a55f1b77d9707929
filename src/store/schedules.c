/*
 * schedules.c - the state of recurring tasks: schedules.<ID> in the service's config
 * document (docs/SCHEMA.md), and finding the task a slot's unique key names.
 *
 * The primary's record is one update of the config document, fenced twice: on its primacy
 * ({primary: me, epoch: E}, like every primary-only write) and on the last slot it read
 * (a compare-and-set), so a deposed primary's late record and a record based on a stale
 * read both change nothing. The tasks themselves are inserted by insert.c under the
 * queue's unique index on unique_key, which settles two creators of the same slot.
 */
#include "store/schedules.h"

#include "store/internal.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>

static void path(char *buf, size_t len, const char *id, const char *field)
{
    snprintf(buf, len, "schedules.%s%s%s", id, field ? "." : "", field ? field : "");
}

void cohort_store_schedule_state(const bson_t *doc, const char *id,
                                 cohort_schedule_state_t *state)
{
    memset(state, 0, sizeof *state);
    char at[128];
    path(at, sizeof at, id, NULL);
    bson_iter_t it, child;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, at, &child) ||
        !BSON_ITER_HOLDS_DOCUMENT(&child))
        return;
    state->found = true;
    bson_iter_t f;
    if (!bson_iter_recurse(&child, &f))
        return;
    while (bson_iter_next(&f)) {
        const char *key = bson_iter_key(&f);
        if (strcmp(key, "series") == 0 && BSON_ITER_HOLDS_UTF8(&f))
            snprintf(state->series, sizeof state->series, "%s", bson_iter_utf8(&f, NULL));
        else if (strcmp(key, "last_slot") == 0 && BSON_ITER_HOLDS_DATE_TIME(&f))
            state->last_slot_ms = bson_iter_date_time(&f);
        else if (strcmp(key, "last_task_slot") == 0 && BSON_ITER_HOLDS_DATE_TIME(&f))
            state->last_task_slot_ms = bson_iter_date_time(&f);
        else if (strcmp(key, "last_task") == 0 && BSON_ITER_HOLDS_OID(&f)) {
            bson_oid_copy(bson_iter_oid(&f), &state->last_task);
            state->has_last_task = true;
        } else if (strcmp(key, "paused") == 0 && BSON_ITER_HOLDS_BOOL(&f))
            state->paused = bson_iter_bool(&f);
        else if (strcmp(key, "last_epoch") == 0 && BSON_ITER_HOLDS_NUMBER(&f))
            state->last_epoch = bson_iter_as_int64(&f);
        else if (strcmp(key, "created") == 0 && BSON_ITER_HOLDS_NUMBER(&f))
            state->created = bson_iter_as_int64(&f);
        else if (strcmp(key, "existed") == 0 && BSON_ITER_HOLDS_NUMBER(&f))
            state->existed = bson_iter_as_int64(&f);
        else if (strcmp(key, "skipped") == 0 && BSON_ITER_HOLDS_NUMBER(&f))
            state->skipped = bson_iter_as_int64(&f);
    }
    state->damaged = state->last_slot_ms == 0;
}

bool cohort_store_record_schedule(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const char *node_id, int64_t epoch,
                                  const cohort_schedule_record_t *r, bool *applied,
                                  bson_error_t *error)
{
    char at[160];
    bson_t cas = BSON_INITIALIZER;
    if (r->from_found) {
        path(at, sizeof at, r->id, "last_slot");
        BSON_APPEND_DATE_TIME(&cas, at, r->from_slot_ms);
    } else {
        /* No state, or one whose last_slot is not a date: the first date written wins. */
        path(at, sizeof at, r->id, "last_slot");
        bson_t not, type;
        BSON_APPEND_DOCUMENT_BEGIN(&cas, at, &not);
        BSON_APPEND_DOCUMENT_BEGIN(&not, "$not", &type);
        BSON_APPEND_UTF8(&type, "$type", "date");
        bson_append_document_end(&not, &type);
        bson_append_document_end(&cas, &not);
    }
    bson_t update = BSON_INITIALIZER, set, inc;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    path(at, sizeof at, r->id, "series");
    BSON_APPEND_UTF8(&set, at, r->series);
    path(at, sizeof at, r->id, "last_slot");
    BSON_APPEND_DATE_TIME(&set, at, r->to_slot_ms);
    path(at, sizeof at, r->id, "last_epoch");
    BSON_APPEND_INT64(&set, at, epoch);
    path(at, sizeof at, r->id, "last_node");
    BSON_APPEND_UTF8(&set, at, node_id);
    if (r->last_task) {
        path(at, sizeof at, r->id, "last_task");
        BSON_APPEND_OID(&set, at, r->last_task);
        path(at, sizeof at, r->id, "last_task_slot");
        BSON_APPEND_DATE_TIME(&set, at, r->last_task_slot_ms);
    }
    bson_append_document_end(&update, &set);
    const struct {
        const char *field;
        int64_t n;
    } counts[] = {{"created", r->created}, {"existed", r->existed}, {"skipped", r->skipped}};
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        path(at, sizeof at, r->id, counts[i].field);
        BSON_APPEND_INT64(&inc, at, counts[i].n);
    }
    bson_append_document_end(&update, &inc);
    bool ok = store_fenced_update(store, client, service, node_id, epoch, &cas, &update, applied,
                                  error);
    bson_destroy(&update);
    bson_destroy(&cas);
    return ok;
}

bool cohort_store_pause_schedule(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *id, bool paused, bool *found,
                                 bson_error_t *error)
{
    char at[160];
    bson_t filter = BSON_INITIALIZER, exists;
    path(at, sizeof at, id, NULL);
    BSON_APPEND_DOCUMENT_BEGIN(&filter, at, &exists);
    BSON_APPEND_BOOL(&exists, "$exists", true);
    bson_append_document_end(&filter, &exists);
    bson_t update = BSON_INITIALIZER, set;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    path(at, sizeof at, id, "paused");
    BSON_APPEND_BOOL(&set, at, paused);
    bson_append_document_end(&update, &set);
    bool ok = store_fenced_update(store, client, service, NULL, 0, &filter, &update, found,
                                  error);
    bson_destroy(&update);
    bson_destroy(&filter);
    return ok;
}

bool cohort_store_find_unique_task(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, const char *unique_key, bson_oid_t *oid,
                                   bool *found, bson_error_t *error)
{
    *found = false;
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t *filter = BCON_NEW("unique_key", BCON_UTF8(unique_key));
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "limit",
                            BCON_INT64(1));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, filter, opts, NULL);
    const bson_t *doc;
    bson_iter_t it;
    if (mongoc_cursor_next(cursor, &doc) && bson_iter_init_find(&it, doc, "_id") &&
        BSON_ITER_HOLDS_OID(&it)) {
        bson_oid_copy(bson_iter_oid(&it), oid);
        *found = true;
    }
    bool ok = store_cursor_done(cursor, error);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(tasks);
    return ok;
}
