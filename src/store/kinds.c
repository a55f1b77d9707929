/*
 * kinds.c - per-kind run statistics (see kinds.h): the minute's aggregation, the histogram's
 * arithmetic, their stored form in `history` and `history_hours`, and the hourly rollup.
 */
#include "store/kinds.h"

#include <stdio.h>
#include <string.h>

#include "core/status.h"
#include "store/internal.h"

#define HISTORY "history"
#define HOURS "history_hours"

const int64_t cohort_kind_bucket_ms[COHORT_KIND_BUCKETS - 1] = {
    10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000, 300000, 1000000};

/* The bucket expression from bound `i` on: {$cond: [{$lt: ["$ms", bound_i]}, i, <next>]}
 * ($switch and $log's base are missing from the development server; $cond is everywhere). */
static void append_bucket(bson_t *doc, const char *key, int i)
{
    if (i == COHORT_KIND_BUCKETS - 1) {
        BSON_APPEND_INT32(doc, key, i);
        return;
    }
    bson_t cond, args, lt;
    BSON_APPEND_DOCUMENT_BEGIN(doc, key, &cond);
    BSON_APPEND_ARRAY_BEGIN(&cond, "$cond", &args);
    BSON_APPEND_DOCUMENT_BEGIN(&args, "0", &lt);
    bson_t pair;
    BSON_APPEND_ARRAY_BEGIN(&lt, "$lt", &pair);
    BSON_APPEND_UTF8(&pair, "0", "$ms");
    BSON_APPEND_INT64(&pair, "1", cohort_kind_bucket_ms[i]);
    bson_append_array_end(&lt, &pair);
    bson_append_document_end(&args, &lt);
    BSON_APPEND_INT32(&args, "1", i);
    append_bucket(&args, "2", i + 1);
    bson_append_array_end(&cond, &args);
    bson_append_document_end(doc, &cond);
}

/* The stats of `kind` in `kinds`, added if new; NULL (and `capped`) when full. */
static cohort_kind_stats_t *kind_slot(cohort_kinds_t *kinds, const char *kind)
{
    for (size_t i = 0; i < kinds->n; i++)
        if (strcmp(kinds->kind[i].kind, kind) == 0)
            return &kinds->kind[i];
    if (kinds->n == COHORT_KINDS_MAX) {
        kinds->capped = true;
        return NULL;
    }
    cohort_kind_stats_t *k = &kinds->kind[kinds->n++];
    memset(k, 0, sizeof *k);
    snprintf(k->kind, sizeof k->kind, "%s", kind);
    return k;
}

static int64_t *status_slot(cohort_kind_stats_t *k, const char *status)
{
    if (strcmp(status, "succeeded") == 0)
        return &k->succeeded;
    if (strcmp(status, "failed") == 0)
        return &k->failed;
    return strcmp(status, "timed_out") == 0 ? &k->timed_out : NULL;
}

/* One row of the aggregation: {_id: {k: kind, s: status, b: bucket}, n}. */
static void add_row(cohort_kinds_t *kinds, const bson_t *row)
{
    bson_iter_t it;
    const char *kind = "", *status = "";
    int64_t bucket = 0, n = store_int64_field(row, "n", 0);
    if (bson_iter_init_find(&it, row, "_id") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_t id;
        bson_iter_recurse(&it, &id);
        while (bson_iter_next(&id)) {
            const char *key = bson_iter_key(&id);
            if (strcmp(key, "k") == 0 && BSON_ITER_HOLDS_UTF8(&id))
                kind = bson_iter_utf8(&id, NULL);
            else if (strcmp(key, "s") == 0 && BSON_ITER_HOLDS_UTF8(&id))
                status = bson_iter_utf8(&id, NULL);
            else if (strcmp(key, "b") == 0 && BSON_ITER_HOLDS_NUMBER(&id))
                bucket = bson_iter_as_int64(&id);
        }
    }
    cohort_kind_stats_t *k = kind_slot(kinds, kind);
    int64_t *count = k ? status_slot(k, status) : NULL;
    if (!count || bucket < 0 || bucket >= COHORT_KIND_BUCKETS)
        return;
    *count += n;
    k->ms[bucket] += n;
}

bool cohort_store_measure_kinds(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, int64_t from_ms, int64_t to_ms,
                                cohort_kinds_t *kinds, bson_error_t *error)
{
    memset(kinds, 0, sizeof *kinds);
    /* $match on the {status, finished_at} index; the duration; its bucket; the groups. A run
     * without claimed_at (null duration) lands in the first bucket. */
    bson_t *match = BCON_NEW("$match", "{", "status", "{", "$in", "[", BCON_UTF8("succeeded"),
                             BCON_UTF8("failed"), BCON_UTF8("timed_out"), "]", "}",
                             "finished_at", "{", "$gte", BCON_DATE_TIME(from_ms), "$lt",
                             BCON_DATE_TIME(to_ms), "}", "}");
    bson_t *duration = BCON_NEW("$project", "{", "_id", BCON_INT32(0), "kind", BCON_INT32(1),
                                "status", BCON_INT32(1), "ms", "{", "$subtract", "[",
                                BCON_UTF8("$finished_at"), BCON_UTF8("$claimed_at"), "]", "}",
                                "}");
    bson_t *group = BCON_NEW("$group", "{", "_id", "{", "k", BCON_UTF8("$kind"), "s",
                             BCON_UTF8("$status"), "b", BCON_UTF8("$b"), "}", "n", "{", "$sum",
                             BCON_INT32(1), "}", "}");
    bson_t pipeline = BSON_INITIALIZER, stages, bucket, project;
    BSON_APPEND_ARRAY_BEGIN(&pipeline, "pipeline", &stages);
    BSON_APPEND_DOCUMENT(&stages, "0", match);
    BSON_APPEND_DOCUMENT(&stages, "1", duration);
    BSON_APPEND_DOCUMENT_BEGIN(&stages, "2", &bucket);
    BSON_APPEND_DOCUMENT_BEGIN(&bucket, "$project", &project);
    BSON_APPEND_INT32(&project, "kind", 1);
    BSON_APPEND_INT32(&project, "status", 1);
    append_bucket(&project, "b", 0);
    bson_append_document_end(&bucket, &project);
    bson_append_document_end(&stages, &bucket);
    BSON_APPEND_DOCUMENT(&stages, "3", group);
    bson_append_array_end(&pipeline, &stages);
    mongoc_collection_t *queue = store_queue(store, client, service);
    mongoc_cursor_t *cursor =
        mongoc_collection_aggregate(queue, MONGOC_QUERY_NONE, &pipeline, NULL, NULL);
    const bson_t *row;
    while (mongoc_cursor_next(cursor, &row))
        add_row(kinds, row);
    bool ok = store_cursor_done(cursor, error);
    mongoc_collection_destroy(queue);
    bson_destroy(&pipeline);
    bson_destroy(group);
    bson_destroy(duration);
    bson_destroy(match);
    return ok;
}

void cohort_kinds_add(cohort_kinds_t *sum, const cohort_kinds_t *add)
{
    sum->capped = sum->capped || add->capped;
    for (size_t i = 0; i < add->n; i++) {
        const cohort_kind_stats_t *a = &add->kind[i];
        cohort_kind_stats_t *k = kind_slot(sum, a->kind);
        if (!k)
            continue;
        k->succeeded += a->succeeded;
        k->failed += a->failed;
        k->timed_out += a->timed_out;
        for (int b = 0; b < COHORT_KIND_BUCKETS; b++)
            k->ms[b] += a->ms[b];
    }
}

bool cohort_kind_percentile(const cohort_kind_stats_t *k, int pct, int64_t *from_ms,
                            int64_t *to_ms)
{
    int64_t total = 0;
    for (int b = 0; b < COHORT_KIND_BUCKETS; b++)
        total += k->ms[b];
    if (total <= 0)
        return false;
    /* The rank of the percentile, rounded up: the p50 of 3 runs is the 2nd, of 4 the 2nd. */
    int64_t rank = (total * pct + 99) / 100, seen = 0;
    int b = 0;
    for (; b < COHORT_KIND_BUCKETS - 1; b++) {
        seen += k->ms[b];
        if (seen >= rank)
            break;
    }
    *from_ms = b == 0 ? 0 : cohort_kind_bucket_ms[b - 1];
    *to_ms = b == COHORT_KIND_BUCKETS - 1 ? -1 : cohort_kind_bucket_ms[b];
    return true;
}

void cohort_kinds_append(bson_t *doc, const char *key, const cohort_kinds_t *kinds)
{
    bson_t array, one, ms;
    BSON_APPEND_ARRAY_BEGIN(doc, key, &array);
    for (size_t i = 0; i < kinds->n; i++) {
        const cohort_kind_stats_t *k = &kinds->kind[i];
        char index[16];
        const char *ikey;
        bson_uint32_to_string((uint32_t)i, &ikey, index, sizeof index);
        BSON_APPEND_DOCUMENT_BEGIN(&array, ikey, &one);
        BSON_APPEND_UTF8(&one, "kind", k->kind);
        BSON_APPEND_INT64(&one, "succeeded", k->succeeded);
        BSON_APPEND_INT64(&one, "failed", k->failed);
        BSON_APPEND_INT64(&one, "timed_out", k->timed_out);
        BSON_APPEND_ARRAY_BEGIN(&one, "ms", &ms);
        for (uint32_t b = 0; b < COHORT_KIND_BUCKETS; b++) {
            bson_uint32_to_string(b, &ikey, index, sizeof index);
            BSON_APPEND_INT64(&ms, ikey, k->ms[b]);
        }
        bson_append_array_end(&one, &ms);
        bson_append_document_end(&array, &one);
    }
    bson_append_array_end(doc, &array);
}

/* One stored kind {kind, succeeded, failed, timed_out, ms: [...]} added into `kinds`. */
static void read_kind(const bson_t *doc, cohort_kinds_t *kinds)
{
    bson_iter_t it, ms;
    const char *kind = "";
    if (bson_iter_init_find(&it, doc, "kind") && BSON_ITER_HOLDS_UTF8(&it))
        kind = bson_iter_utf8(&it, NULL);
    cohort_kind_stats_t *k = kind_slot(kinds, kind);
    if (!k)
        return;
    k->succeeded += store_int64_field(doc, "succeeded", 0);
    k->failed += store_int64_field(doc, "failed", 0);
    k->timed_out += store_int64_field(doc, "timed_out", 0);
    if (!bson_iter_init_find(&it, doc, "ms") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &ms))
        return;
    for (int b = 0; b < COHORT_KIND_BUCKETS && bson_iter_next(&ms); b++)
        if (BSON_ITER_HOLDS_NUMBER(&ms))
            k->ms[b] += bson_iter_as_int64(&ms);
}

void cohort_kinds_read(bson_iter_t *it, cohort_kinds_t *kinds)
{
    bson_iter_t each;
    if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &each))
        return;
    while (bson_iter_next(&each)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&each))
            continue;
        uint32_t len;
        const uint8_t *data;
        bson_t one;
        bson_iter_document(&each, &len, &data);
        if (bson_init_static(&one, data, len))
            read_kind(&one, kinds);
    }
}

typedef struct sum_walk {
    cohort_kinds_t *sum;
    int64_t *docs;
} sum_walk_t;

static bool sum_one(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    sum_walk_t *w = user;
    bson_iter_t it;
    (*w->docs)++;
    if (bson_iter_init_find(&it, doc, "kinds"))
        cohort_kinds_read(&it, w->sum);
    if (bson_iter_init_find(&it, doc, "kinds_capped") && bson_iter_as_bool(&it))
        w->sum->capped = true;
    return true;
}

bool cohort_store_sum_kinds(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            bool hours, int64_t since_ms, cohort_kinds_t *sum, int64_t *docs,
                            bson_error_t *error)
{
    bson_t *filter = BCON_NEW("service", BCON_UTF8(service), "at", "{", "$gte",
                              BCON_DATE_TIME(since_ms), "}");
    /* Bounded by retention: 1,440 minutes or 192 hours per service. */
    bson_t *opts = BCON_NEW("projection", "{", "kinds", BCON_INT32(1), "kinds_capped",
                            BCON_INT32(1), "}", "limit", BCON_INT64(1441));
    sum_walk_t w = {.sum = sum, .docs = docs};
    bool ok = store_walk_find(store_collection(store, client, hours ? HOURS : HISTORY), filter,
                              opts, sum_one, &w, error);
    bson_destroy(opts);
    bson_destroy(filter);
    return ok;
}

/* The hour's sums, walked from its minutes. */
typedef struct hour_walk {
    int64_t enqueued, succeeded, failed, timed_out, minutes, last_at;
    bson_t counts; /* the last minute's queue counts */
    cohort_kinds_t kinds;
} hour_walk_t;

static bool hour_minute(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    hour_walk_t *h = user;
    h->minutes++;
    h->enqueued += store_int64_field(doc, "enqueued", 0);
    h->succeeded += store_int64_field(doc, "succeeded", 0);
    h->failed += store_int64_field(doc, "failed", 0);
    h->timed_out += store_int64_field(doc, "timed_out", 0);
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "kinds"))
        cohort_kinds_read(&it, &h->kinds);
    if (bson_iter_init_find(&it, doc, "kinds_capped") && bson_iter_as_bool(&it))
        h->kinds.capped = true;
    if (bson_iter_init_find(&it, doc, "counts") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&it, &len, &data);
        bson_destroy(&h->counts);
        bson_init(&h->counts);
        bson_t src;
        if (bson_init_static(&src, data, len))
            bson_concat(&h->counts, &src);
    }
    return true;
}

bool cohort_store_record_hour(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, int64_t hour_ms, bson_error_t *error)
{
    hour_walk_t h = {0};
    bson_init(&h.counts);
    bson_t *filter = BCON_NEW("service", BCON_UTF8(service), "at", "{", "$gte",
                              BCON_DATE_TIME(hour_ms), "$lt",
                              BCON_DATE_TIME(hour_ms + COHORT_HOUR_MS), "}");
    bson_t *opts = BCON_NEW("sort", "{", "at", BCON_INT32(1), "}", "limit", BCON_INT64(60));
    bool ok = store_walk_find(store_collection(store, client, HISTORY), filter, opts,
                              hour_minute, &h, error);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_t *hours = store_collection(store, client, HOURS);
    if (ok) {
        bson_t *index = BCON_NEW("createIndexes", BCON_UTF8(HOURS), "indexes", "[", "{", "key",
                                 "{", "service", BCON_INT32(1), "at", BCON_INT32(1), "}",
                                 "name", BCON_UTF8("service_at"), "}", "]");
        ok = mongoc_collection_write_command_with_opts(hours, index, NULL, NULL, error);
        bson_destroy(index);
    }
    if (ok) {
        bson_t *old = BCON_NEW("service", BCON_UTF8(service), "at", "{", "$lt",
                               BCON_DATE_TIME(hour_ms - COHORT_HOURS_RETENTION_MS), "}");
        ok = mongoc_collection_delete_many(hours, old, NULL, NULL, error);
        bson_destroy(old);
    }
    if (ok && h.minutes > 0) {
        char id[100];
        snprintf(id, sizeof id, "%s/%lld", service, (long long)hour_ms);
        bson_t *key = BCON_NEW("_id", BCON_UTF8(id));
        bson_t update = BSON_INITIALIZER, set;
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
        BSON_APPEND_UTF8(&set, "service", service);
        BSON_APPEND_DATE_TIME(&set, "at", hour_ms);
        BSON_APPEND_INT64(&set, "minutes", h.minutes);
        BSON_APPEND_DOCUMENT(&set, "counts", &h.counts);
        BSON_APPEND_INT64(&set, "enqueued", h.enqueued);
        BSON_APPEND_INT64(&set, "succeeded", h.succeeded);
        BSON_APPEND_INT64(&set, "failed", h.failed);
        BSON_APPEND_INT64(&set, "timed_out", h.timed_out);
        cohort_kinds_append(&set, "kinds", &h.kinds);
        if (h.kinds.capped)
            BSON_APPEND_BOOL(&set, "kinds_capped", true);
        bson_append_document_end(&update, &set);
        bson_t *upsert = BCON_NEW("upsert", BCON_BOOL(true));
        ok = mongoc_collection_update_one(hours, key, &update, upsert, NULL, error);
        bson_destroy(upsert);
        bson_destroy(&update);
        bson_destroy(key);
    }
    mongoc_collection_destroy(hours);
    bson_destroy(&h.counts);
    return ok;
}

typedef struct each_hour {
    bool (*fn)(void *user, const bson_t *hour);
    void *user;
} each_hour_t;

static bool one_hour(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    each_hour_t *w = user;
    return w->fn(w->user, doc);
}

bool cohort_store_each_hour(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            int64_t since_ms, int64_t limit,
                            bool (*fn)(void *user, const bson_t *hour), void *user,
                            bson_error_t *error)
{
    bson_t *filter = BCON_NEW("service", BCON_UTF8(service), "at", "{", "$gte",
                              BCON_DATE_TIME(since_ms), "}");
    bson_t *opts = BCON_NEW("sort", "{", "at", BCON_INT32(1), "}", "limit", BCON_INT64(limit),
                            "projection", "{", "kinds", BCON_INT32(0), "}");
    each_hour_t w = {.fn = fn, .user = user};
    bool ok = store_walk_find(store_collection(store, client, HOURS), filter, opts, one_hour, &w,
                              error);
    bson_destroy(opts);
    bson_destroy(filter);
    return ok;
}
