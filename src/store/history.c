/*
 * history.c - the `history` collection (see history.h): one small document per service and
 * minute, written by the service's primary, read in time order by the dashboard.
 */
#include "store/history.h"

#include "store/internal.h"
#include "store/queries.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>

#include "core/status.h"

#define HISTORY "history"

/* An ObjectId that sorts before every id made at or after `ms` (to the second). */
static void oid_at(int64_t ms, bson_oid_t *oid)
{
    uint8_t bytes[12] = {0};
    uint32_t secs = (uint32_t)(ms / 1000);
    bytes[0] = (uint8_t)(secs >> 24);
    bytes[1] = (uint8_t)(secs >> 16);
    bytes[2] = (uint8_t)(secs >> 8);
    bytes[3] = (uint8_t)secs;
    bson_oid_init_from_data(oid, bytes);
}

static bool count(mongoc_collection_t *queue, bson_t *filter, int64_t *n, bson_error_t *error)
{
    *n = mongoc_collection_count_documents(queue, filter, NULL, NULL, NULL, error);
    bson_destroy(filter);
    return *n >= 0;
}

static bson_t *finished_in(const char *status, int64_t from, int64_t to)
{
    return BCON_NEW("status", BCON_UTF8(status), "finished_at", "{", "$gte",
                    BCON_DATE_TIME(from), "$lt", BCON_DATE_TIME(to), "}");
}

/* The run_at of the oldest pending task due at `now_ms` (0: none): the claim index's
 * {status, run_at} prefix, one document. */
static bool oldest_due(mongoc_collection_t *queue, int64_t now_ms, int64_t *run_at,
                       bson_error_t *error)
{
    *run_at = 0;
    bson_t *filter = BCON_NEW("status", BCON_UTF8("pending"), "run_at", "{", "$lte",
                              BCON_DATE_TIME(now_ms), "}");
    bson_t *opts = BCON_NEW("sort", "{", "run_at", BCON_INT32(1), "}", "limit", BCON_INT64(1),
                            "projection", "{", "run_at", BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(queue, filter, opts, NULL);
    const bson_t *doc;
    bson_iter_t it;
    if (mongoc_cursor_next(cursor, &doc) && bson_iter_init_find(&it, doc, "run_at") &&
        BSON_ITER_HOLDS_DATE_TIME(&it))
        *run_at = bson_iter_date_time(&it);
    bool ok = store_cursor_done(cursor, error);
    bson_destroy(opts);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_measure_minute(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, int64_t from_ms, int64_t now_ms,
                                 cohort_minute_t *minute, bson_error_t *error)
{
    memset(minute, 0, sizeof *minute);
    minute->at_ms = from_ms;
    int64_t to_ms = from_ms + COHORT_MINUTE_MS;
    bson_oid_t lo, hi;
    oid_at(from_ms, &lo);
    oid_at(to_ms, &hi);
    mongoc_collection_t *queue = store_queue(store, client, service);
    bool ok =
        count(queue, BCON_NEW("_id", "{", "$gte", BCON_OID(&lo), "$lt", BCON_OID(&hi), "}"),
              &minute->enqueued, error) &&
        count(queue, finished_in("succeeded", from_ms, to_ms), &minute->succeeded, error) &&
        count(queue, finished_in("failed", from_ms, to_ms), &minute->failed, error) &&
        count(queue, finished_in("timed_out", from_ms, to_ms), &minute->timed_out, error) &&
        oldest_due(queue, now_ms, &minute->oldest_due_ms, error);
    mongoc_collection_destroy(queue);
    return ok && cohort_store_count_tasks(store, client, service, &minute->counts, error);
}

bool cohort_store_record_minute(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, const cohort_minute_t *minute,
                                int64_t retention_ms, bson_error_t *error)
{
    mongoc_collection_t *coll = store_collection(store, client, HISTORY);
    bson_t *index = BCON_NEW("createIndexes", BCON_UTF8(HISTORY), "indexes", "[", "{", "key",
                             "{", "service", BCON_INT32(1), "at", BCON_INT32(1), "}", "name",
                             BCON_UTF8("service_at"), "}", "]");
    bool ok = mongoc_collection_write_command_with_opts(coll, index, NULL, NULL, error);
    bson_destroy(index);
    if (ok) {
        bson_t *old = BCON_NEW("service", BCON_UTF8(service), "at", "{", "$lt",
                               BCON_DATE_TIME(minute->at_ms - retention_ms), "}");
        ok = mongoc_collection_delete_many(coll, old, NULL, NULL, error);
        bson_destroy(old);
    }
    if (ok) {
        char id[100];
        snprintf(id, sizeof id, "%s/%lld", service, (long long)minute->at_ms);
        bson_t *filter = BCON_NEW("_id", BCON_UTF8(id));
        bson_t update = BSON_INITIALIZER, set, counts;
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
        BSON_APPEND_UTF8(&set, "service", service);
        BSON_APPEND_DATE_TIME(&set, "at", minute->at_ms);
        BSON_APPEND_DOCUMENT_BEGIN(&set, "counts", &counts);
        for (int i = 0; i < COHORT_STATUS_COUNT; i++)
            BSON_APPEND_INT64(&counts, cohort_status_names[i],
                              cohort_status_count(&minute->counts, (cohort_task_status_t)i));
        bson_append_document_end(&set, &counts);
        BSON_APPEND_INT64(&set, "enqueued", minute->enqueued);
        BSON_APPEND_INT64(&set, "succeeded", minute->succeeded);
        BSON_APPEND_INT64(&set, "failed", minute->failed);
        BSON_APPEND_INT64(&set, "timed_out", minute->timed_out);
        BSON_APPEND_INT64(&set, "epoch", minute->epoch);
        BSON_APPEND_UTF8(&set, "primary", minute->primary);
        if (minute->oldest_due_ms)
            BSON_APPEND_DATE_TIME(&set, "oldest_due_at", minute->oldest_due_ms);
        if (minute->kinds) {
            cohort_kinds_append(&set, "kinds", minute->kinds);
            if (minute->kinds->capped)
                BSON_APPEND_BOOL(&set, "kinds_capped", true);
        }
        bson_append_document_end(&update, &set);
        bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
        ok = mongoc_collection_update_one(coll, filter, &update, opts, NULL, error);
        bson_destroy(opts);
        bson_destroy(&update);
        bson_destroy(filter);
    }
    mongoc_collection_destroy(coll);
    return ok;
}

static void read_minute(const bson_t *doc, cohort_minute_t *m)
{
    memset(m, 0, sizeof *m);
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        m->at_ms = bson_iter_date_time(&it);
    m->enqueued = store_int64_field(doc, "enqueued", 0);
    m->succeeded = store_int64_field(doc, "succeeded", 0);
    m->failed = store_int64_field(doc, "failed", 0);
    m->timed_out = store_int64_field(doc, "timed_out", 0);
    m->epoch = store_int64_field(doc, "epoch", 0);
    if (bson_iter_init_find(&it, doc, "primary") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(m->primary, sizeof m->primary, "%s", bson_iter_utf8(&it, NULL));
    if (bson_iter_init_find(&it, doc, "oldest_due_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        m->oldest_due_ms = bson_iter_date_time(&it);
    m->counts.pending = store_int64_field(doc, "counts.pending", 0);
    m->counts.claimed = store_int64_field(doc, "counts.claimed", 0);
    m->counts.succeeded = store_int64_field(doc, "counts.succeeded", 0);
    m->counts.failed = store_int64_field(doc, "counts.failed", 0);
    m->counts.timed_out = store_int64_field(doc, "counts.timed_out", 0);
    m->counts.cancelled = store_int64_field(doc, "counts.cancelled", 0);
}

bool cohort_store_each_minute(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, int64_t since_ms, int64_t limit,
                              bool (*fn)(void *user, const cohort_minute_t *minute),
                              void *user, bson_error_t *error)
{
    mongoc_collection_t *coll = store_collection(store, client, HISTORY);
    bson_t *filter = BCON_NEW("service", BCON_UTF8(service), "at", "{", "$gte",
                              BCON_DATE_TIME(since_ms), "}");
    bson_t *opts = BCON_NEW("sort", "{", "at", BCON_INT32(1), "}", "limit", BCON_INT64(limit));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *doc;
    bool ok = true;
    while (ok && mongoc_cursor_next(cursor, &doc)) {
        cohort_minute_t m;
        read_minute(doc, &m);
        ok = fn(user, &m);
    }
    if (ok && mongoc_cursor_error(cursor, error))
        ok = false;
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return ok;
}

bool cohort_store_due_by_kind(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              int64_t now_ms, int64_t limit, cohort_due_kind_fn fn, void *user,
                              bool *more, bson_error_t *error)
{
    *more = false;
    bson_t *pipeline =
        BCON_NEW("pipeline", "[", "{", "$match", "{", "status", BCON_UTF8("pending"), "run_at", "{",
                 "$lte", BCON_DATE_TIME(now_ms), "}", "}", "}", "{", "$group", "{", "_id",
                 BCON_UTF8("$kind"), "due", "{", "$sum", BCON_INT32(1), "}", "oldest", "{", "$min",
                 BCON_UTF8("$run_at"), "}", "}", "}", "{", "$sort", "{", "due", BCON_INT32(-1),
                 "_id", BCON_INT32(1), "}", "}", "{", "$limit", BCON_INT64(limit + 1), "}", "]");
    bson_t *opts = BCON_NEW("allowDiskUse", BCON_BOOL(true));
    mongoc_collection_t *queue = store_queue(store, client, service);
    mongoc_cursor_t *cursor =
        mongoc_collection_aggregate(queue, MONGOC_QUERY_NONE, pipeline, opts, NULL);
    const bson_t *doc;
    int64_t n = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
        if (++n > limit) {
            *more = true;
            break;
        }
        bson_iter_t it;
        const char *kind = NULL;
        int64_t due = 0, oldest = 0;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it))
            kind = bson_iter_utf8(&it, NULL);
        if (bson_iter_init_find(&it, doc, "due") && BSON_ITER_HOLDS_NUMBER(&it))
            due = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, doc, "oldest") && BSON_ITER_HOLDS_DATE_TIME(&it))
            oldest = bson_iter_date_time(&it);
        fn(user, kind, due, oldest);
    }
    bool ok = store_cursor_done(cursor, error);
    mongoc_collection_destroy(queue);
    bson_destroy(opts);
    bson_destroy(pipeline);
    return ok;
}
