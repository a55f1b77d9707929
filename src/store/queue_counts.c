/*
 * queue_counts.c - the `counts` collection (see queue_counts.h): measuring a service's
 * queue once for every reader, publishing it, reading it back.
 */
#include "store/queue_counts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "store/doc.h"
#include "store/internal.h"

#define COUNTS "counts" /* not queue_...: that prefix names the task queues */

/* One kind or group and its tasks by status. */
typedef struct value_total {
    char *value; /* NULL: tasks without the field */
    int64_t total;
    int64_t n[COHORT_STATUS_COUNT + 1]; /* by cohort_task_status_t; the last: other statuses */
} value_total_t;

/* The streamed rows of one field folded into its values with the most tasks. */
typedef struct top_values {
    value_total_t cur;
    bool has_cur;
    value_total_t top[COHORT_COUNTS_VALUES_MAX];
    size_t n;
    int64_t distinct;
} top_values_t;

static bool same_value(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The value under way is complete: keep it if it is among the largest so far. */
static void close_value(top_values_t *t)
{
    if (!t->has_cur)
        return;
    t->has_cur = false;
    t->distinct++;
    if (t->n < COHORT_COUNTS_VALUES_MAX) {
        t->top[t->n++] = t->cur;
        return;
    }
    size_t min = 0;
    for (size_t i = 1; i < t->n; i++)
        if (t->top[i].total < t->top[min].total)
            min = i;
    value_total_t *loser = t->cur.total > t->top[min].total ? &t->top[min] : &t->cur;
    free(loser->value);
    if (loser == &t->top[min])
        t->top[min] = t->cur;
}

static void fold_row(void *user, const char *value, const char *status, int64_t n)
{
    top_values_t *t = user;
    if (t->has_cur && !same_value(t->cur.value, value))
        close_value(t);
    if (!t->has_cur) {
        memset(&t->cur, 0, sizeof t->cur);
        t->cur.value = value ? bson_strdup(value) : NULL;
        t->has_cur = true;
    }
    cohort_task_status_t s;
    t->cur.n[cohort_status_parse(status, &s) ? (int)s : COHORT_STATUS_COUNT] += n;
    t->cur.total += n;
}

/* Most tasks first; ties by value, tasks without the field first. */
static int by_total(const void *a, const void *b)
{
    const value_total_t *x = a, *y = b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    if (!x->value || !y->value)
        return x->value ? 1 : y->value ? -1 : 0;
    return strcmp(x->value, y->value);
}

/* {distinct, rows: [{<field>, status, count}]}: the kept values' rows, most tasks first. */
static void append_values(bson_t *snap, const char *key, const char *field, top_values_t *t)
{
    qsort(t->top, t->n, sizeof t->top[0], by_total);
    bson_t doc, rows, row;
    uint32_t i_row = 0;
    BSON_APPEND_DOCUMENT_BEGIN(snap, key, &doc);
    BSON_APPEND_INT64(&doc, "distinct", t->distinct);
    BSON_APPEND_ARRAY_BEGIN(&doc, "rows", &rows);
    for (size_t i = 0; i < t->n; i++) {
        for (int s = 0; s <= COHORT_STATUS_COUNT; s++) {
            if (!t->top[i].n[s])
                continue;
            char idx[16];
            const char *k;
            bson_uint32_to_string(i_row++, &k, idx, sizeof idx);
            bson_append_document_begin(&rows, k, -1, &row);
            if (t->top[i].value)
                BSON_APPEND_UTF8(&row, field, t->top[i].value);
            else
                BSON_APPEND_NULL(&row, field);
            BSON_APPEND_UTF8(&row, "status",
                             s < COHORT_STATUS_COUNT ? cohort_status_names[s] : "other");
            BSON_APPEND_INT64(&row, "count", t->top[i].n[s]);
            bson_append_document_end(&rows, &row);
        }
        free(t->top[i].value);
    }
    bson_append_array_end(&doc, &rows);
    bson_append_document_end(snap, &doc);
    t->n = 0;
}

/* Counts `field`'s values (one streamed aggregation) into `snap`'s `key`. */
static bool measure_values(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *field, const char *key, bson_t *snap,
                           bson_error_t *error)
{
    top_values_t *t = bson_malloc0(sizeof *t);
    bool ok = cohort_store_count_by(store, client, service, field, fold_row, t, error);
    close_value(t);
    if (ok)
        append_values(snap, key, field, t);
    for (size_t i = 0; i < t->n; i++)
        free(t->top[i].value);
    bson_free(t);
    return ok;
}

static void append_status_counts(bson_t *doc, const char *key, const cohort_status_counts_t *c)
{
    bson_t counts;
    BSON_APPEND_DOCUMENT_BEGIN(doc, key, &counts);
    for (int i = 0; i < COHORT_STATUS_COUNT; i++)
        BSON_APPEND_INT64(&counts, cohort_status_names[i],
                          cohort_status_count(c, (cohort_task_status_t)i));
    bson_append_document_end(doc, &counts);
}

typedef struct due_rows {
    bson_t *array;
    uint32_t n;
} due_rows_t;

static void keep_due(void *user, const char *kind, int64_t due, int64_t oldest_ms)
{
    due_rows_t *d = user;
    char idx[16];
    const char *k;
    bson_t row;
    bson_uint32_to_string(d->n++, &k, idx, sizeof idx);
    bson_append_document_begin(d->array, k, -1, &row);
    if (kind)
        BSON_APPEND_UTF8(&row, "kind", kind);
    else
        BSON_APPEND_NULL(&row, "kind");
    BSON_APPEND_INT64(&row, "due", due);
    BSON_APPEND_DATE_TIME(&row, "oldest_due_at", oldest_ms);
    bson_append_document_end(d->array, &row);
}

/* {kinds: [{kind, due, oldest_due_at}], more}: the due pending tasks by kind at `now_ms`. */
static bool measure_due(cohort_store_t *store, mongoc_client_t *client, const char *service,
                        int64_t now_ms, bson_t *snap, bson_error_t *error)
{
    bson_t doc, kinds;
    bool more = false;
    BSON_APPEND_DOCUMENT_BEGIN(snap, "due", &doc);
    BSON_APPEND_ARRAY_BEGIN(&doc, "kinds", &kinds);
    due_rows_t d = {.array = &kinds};
    bool ok = cohort_store_due_by_kind(store, client, service, now_ms, COHORT_COUNTS_DUE_KINDS_MAX,
                                       keep_due, &d, &more, error);
    bson_append_array_end(&doc, &kinds);
    BSON_APPEND_BOOL(&doc, "more", more);
    bson_append_document_end(snap, &doc);
    return ok;
}

bool cohort_store_measure_counts(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, int64_t now_ms, int64_t epoch,
                                 bson_t *snap, bson_error_t *error)
{
    bson_init(snap);
    int64_t started = bson_get_monotonic_time();
    cohort_minute_t m;
    if (!cohort_store_measure_minute(store, client, service, now_ms - now_ms % COHORT_MINUTE_MS,
                                     now_ms, &m, error))
        return false;
    BSON_APPEND_DATE_TIME(snap, "measured_at", now_ms);
    if (epoch)
        BSON_APPEND_INT64(snap, "epoch", epoch);
    int64_t total = m.counts.other;
    for (int i = 0; i < COHORT_STATUS_COUNT; i++)
        total += cohort_status_count(&m.counts, (cohort_task_status_t)i);
    BSON_APPEND_INT64(snap, "total", total);
    append_status_counts(snap, "counts", &m.counts);
    bson_t minute;
    BSON_APPEND_DOCUMENT_BEGIN(snap, "minute", &minute);
    BSON_APPEND_DATE_TIME(&minute, "at", m.at_ms);
    BSON_APPEND_INT64(&minute, "enqueued", m.enqueued);
    BSON_APPEND_INT64(&minute, "succeeded", m.succeeded);
    BSON_APPEND_INT64(&minute, "failed", m.failed);
    BSON_APPEND_INT64(&minute, "timed_out", m.timed_out);
    bson_append_document_end(snap, &minute);
    if (m.oldest_due_ms)
        BSON_APPEND_DATE_TIME(snap, "oldest_due_at", m.oldest_due_ms);
    else
        BSON_APPEND_NULL(snap, "oldest_due_at");
    bool ok = measure_values(store, client, service, "kind", "kinds", snap, error) &&
              measure_values(store, client, service, "group", "groups", snap, error) &&
              measure_due(store, client, service, now_ms, snap, error);
    BSON_APPEND_INT64(snap, "took_ms", (bson_get_monotonic_time() - started) / 1000);
    return ok;
}

bool cohort_store_publish_counts(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const bson_t *snap, bson_error_t *error)
{
    mongoc_collection_t *coll = store_collection(store, client, COUNTS);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service));
    bson_t doc = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&doc, "_id", service);
    bson_concat(&doc, snap);
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bool ok = mongoc_collection_replace_one(coll, filter, &doc, opts, NULL, error);
    bson_destroy(opts);
    bson_destroy(&doc);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return ok;
}

bool cohort_store_read_counts(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, bson_t *snap, bool *found,
                              bson_error_t *error)
{
    mongoc_collection_t *coll = store_collection(store, client, COUNTS);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service));
    bool ok = store_find_one(coll, filter, snap, found, error);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return ok;
}

static int64_t date_field(const bson_t *doc, const char *path)
{
    bson_iter_t it;
    return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &it) &&
                   BSON_ITER_HOLDS_DATE_TIME(&it)
               ? bson_iter_date_time(&it)
               : 0;
}

void cohort_counts_status(const bson_t *snap, cohort_status_counts_t *c)
{
    memset(c, 0, sizeof *c);
    c->pending = store_int64_field(snap, "counts.pending", 0);
    c->claimed = store_int64_field(snap, "counts.claimed", 0);
    c->succeeded = store_int64_field(snap, "counts.succeeded", 0);
    c->failed = store_int64_field(snap, "counts.failed", 0);
    c->timed_out = store_int64_field(snap, "counts.timed_out", 0);
    c->cancelled = store_int64_field(snap, "counts.cancelled", 0);
}

void cohort_counts_minute(const bson_t *snap, cohort_minute_t *m)
{
    memset(m, 0, sizeof *m);
    cohort_counts_status(snap, &m->counts);
    m->at_ms = date_field(snap, "minute.at");
    m->enqueued = store_int64_field(snap, "minute.enqueued", 0);
    m->succeeded = store_int64_field(snap, "minute.succeeded", 0);
    m->failed = store_int64_field(snap, "minute.failed", 0);
    m->timed_out = store_int64_field(snap, "minute.timed_out", 0);
    m->oldest_due_ms = date_field(snap, "oldest_due_at");
}

int64_t cohort_counts_measured_at(const bson_t *snap)
{
    return date_field(snap, "measured_at");
}

int64_t cohort_counts_total(const bson_t *snap)
{
    return store_int64_field(snap, "total", 0);
}

int64_t cohort_counts_distinct(const bson_t *snap, const char *key)
{
    char path[32];
    snprintf(path, sizeof path, "%s.distinct", key);
    return store_int64_field(snap, path, 0);
}

int64_t cohort_counts_every_ms(const bson_t *snap)
{
    return store_int64_field(snap, "every_ms", 0);
}
