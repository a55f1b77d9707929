/*
 * api_kinds.c - the per-kind statistics endpoint (see api_kinds.h): three windows only, so
 * each reads a bounded number of small documents (60 or 1,440 minutes, or 168 hours and up to
 * 60 minutes) and one aggregation for the minute under way.
 */
#include "node/http/api_kinds.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "node/status/api_json.h"
#include "store/history.h"
#include "store/kinds.h"
#include "store/nodes.h"
#include "store/queries.h"

#define WEEK_MINUTES 10080
#define HOURS_MAX 192

/* The window in minutes from `text` (NULL: an hour): 60, 1440 or 10080, else a 400. */
static bool window_minutes(const char *text, int64_t *minutes, cohort_api_error_t *err)
{
    *minutes = 60;
    if (!text)
        return true;
    if (strcmp(text, "60") == 0 || strcmp(text, "1440") == 0 || strcmp(text, "10080") == 0) {
        *minutes = strtoll(text, NULL, 10);
        return true;
    }
    return cohort_api_fail(err, 400, "bad_request",
                           "minutes must be 60 (hour), 1440 (day) or 10080 (week)");
}

static void append_bucket(bson_t *doc, const char *key, const cohort_kind_stats_t *k, int pct)
{
    int64_t from, to;
    if (!cohort_kind_percentile(k, pct, &from, &to)) {
        BSON_APPEND_NULL(doc, key);
        return;
    }
    bson_t b;
    BSON_APPEND_DOCUMENT_BEGIN(doc, key, &b);
    BSON_APPEND_INT64(&b, "from_ms", from);
    if (to >= 0)
        BSON_APPEND_INT64(&b, "to_ms", to);
    else
        BSON_APPEND_NULL(&b, "to_ms");
    bson_append_document_end(doc, &b);
}

static void append_kinds(bson_t *body, const cohort_kinds_t *kinds)
{
    bson_t array, one;
    uint32_t n = 0;
    BSON_APPEND_ARRAY_BEGIN(body, "kinds", &array);
    for (size_t i = 0; i < kinds->n; i++) {
        const cohort_kind_stats_t *k = &kinds->kind[i];
        int64_t finished = k->succeeded + k->failed + k->timed_out;
        cohort_json_array_begin_document(&array, &n, &one);
        if (k->kind[0])
            BSON_APPEND_UTF8(&one, "kind", k->kind);
        else
            BSON_APPEND_NULL(&one, "kind");
        BSON_APPEND_INT64(&one, "finished", finished);
        BSON_APPEND_INT64(&one, "succeeded", k->succeeded);
        BSON_APPEND_INT64(&one, "failed", k->failed);
        BSON_APPEND_INT64(&one, "timed_out", k->timed_out);
        BSON_APPEND_DOUBLE(&one, "error_rate",
                           finished ? (double)(k->failed + k->timed_out) / (double)finished : 0);
        append_bucket(&one, "p50", k, 50);
        append_bucket(&one, "p95", k, 95);
        bson_append_document_end(&array, &one);
    }
    bson_append_array_end(body, &array);
}

bool cohort_api_kinds(cohort_api_call_t *call)
{
    static const char *const known[] = {"minutes", NULL};
    char *values[1] = {NULL};
    if (!cohort_api_query(call->request->query, known, values, call->err))
        return false;
    int64_t minutes;
    bool ok = window_minutes(values[0], &minutes, call->err);
    cohort_api_query_free(values, 1);
    if (!ok)
        return false;
    const char *service = call->route->service;
    bson_error_t error;
    int64_t now = 0;
    if (!cohort_store_server_time(call->store, call->client, &now, &error))
        return cohort_api_fail_store(call->err, &error, "cannot read the kinds");
    int64_t minute = now - now % COHORT_MINUTE_MS, hour = now - now % COHORT_HOUR_MS;
    bool week = minutes == WEEK_MINUTES;
    /* The window's sum and the minute under way: 16 kB, off the stack. */
    cohort_kinds_t *sum = calloc(2, sizeof *sum), *current = sum + 1;
    int64_t minute_docs = 0, hour_docs = 0;
    int64_t from = week ? hour - minutes * COHORT_MINUTE_MS : minute - minutes * COHORT_MINUTE_MS;
    ok = sum && (!week || cohort_store_sum_kinds(call->store, call->client, service, true, from,
                                                 sum, &hour_docs, &error));
    ok = ok && cohort_store_sum_kinds(call->store, call->client, service, false,
                                      week ? hour : from, sum, &minute_docs, &error);
    ok = ok && cohort_store_measure_kinds(call->store, call->client, service, minute, now + 1,
                                          current, &error);
    if (!ok) {
        free(sum);
        if (!sum)
            return cohort_api_fail(call->err, 500, "internal", "out of memory");
        return cohort_api_fail_store(call->err, &error, "cannot read the kinds");
    }
    cohort_kinds_add(sum, current);
    bson_t *body = &call->reply->body;
    BSON_APPEND_UTF8(body, "service", service);
    BSON_APPEND_INT64(body, "minutes", minutes);
    cohort_json_append_time(body, "now", now);
    cohort_json_append_time(body, "from", from);
    BSON_APPEND_UTF8(body, "source", week ? "hours" : "minutes");
    BSON_APPEND_INT64(body, "hours_read", hour_docs);
    BSON_APPEND_INT64(body, "minutes_read", minute_docs);
    BSON_APPEND_BOOL(body, "capped", sum->capped);
    bson_t bounds;
    uint32_t n = 0;
    BSON_APPEND_ARRAY_BEGIN(body, "bucket_ms", &bounds);
    for (int b = 0; b < COHORT_KIND_BUCKETS - 1; b++) {
        char index[16];
        const char *key;
        bson_uint32_to_string(n++, &key, index, sizeof index);
        BSON_APPEND_INT64(&bounds, key, cohort_kind_bucket_ms[b]);
    }
    bson_append_array_end(body, &bounds);
    append_kinds(body, sum);
    free(sum);
    call->reply->status = 200;
    return true;
}

typedef struct hours_walk {
    bson_t *array;
    uint32_t n;
} hours_walk_t;

static void copy_int(bson_t *to, const bson_t *from, const char *key)
{
    bson_iter_t it;
    BSON_APPEND_INT64(to, key,
                      bson_iter_init_find(&it, from, key) && BSON_ITER_HOLDS_NUMBER(&it)
                          ? bson_iter_as_int64(&it)
                          : 0);
}

/* One rollup as the API shows it: {at, minutes, counts, enqueued, succeeded, failed,
 * timed_out}. */
static bool one_hour(void *user, const bson_t *hour)
{
    hours_walk_t *w = user;
    bson_t doc, counts;
    bson_iter_t it;
    cohort_json_array_begin_document(w->array, &w->n, &doc);
    if (bson_iter_init_find(&it, hour, "at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        cohort_json_append_time(&doc, "at", bson_iter_date_time(&it));
    BSON_APPEND_DOCUMENT_BEGIN(&doc, "counts", &counts);
    bson_t stored;
    bool have = bson_iter_init_find(&it, hour, "counts") && BSON_ITER_HOLDS_DOCUMENT(&it);
    if (have) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&it, &len, &data);
        have = bson_init_static(&stored, data, len);
    }
    for (int i = 0; i < COHORT_STATUS_COUNT; i++)
        if (have)
            copy_int(&counts, &stored, cohort_status_names[i]);
        else
            BSON_APPEND_INT64(&counts, cohort_status_names[i], 0);
    bson_append_document_end(&doc, &counts);
    static const char *const sums[] = {"minutes", "enqueued", "succeeded", "failed", "timed_out"};
    for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++)
        copy_int(&doc, hour, sums[i]);
    bson_append_document_end(w->array, &doc);
    return true;
}

bool cohort_api_history_hours(cohort_api_call_t *call)
{
    static const char *const known[] = {"hours", NULL};
    char *values[1] = {NULL};
    if (!cohort_api_query(call->request->query, known, values, call->err))
        return false;
    int64_t hours = 168;
    bool ok = true;
    if (values[0]) {
        char *end = NULL;
        hours = strtoll(values[0], &end, 10);
        ok = *values[0] && !*end && hours >= 1 && hours <= HOURS_MAX;
    }
    cohort_api_query_free(values, 1);
    if (!ok)
        return cohort_api_fail(call->err, 400, "bad_request",
                               "hours must be an integer from 1 to %d", HOURS_MAX);
    bson_error_t error;
    int64_t now = 0;
    if (!cohort_store_server_time(call->store, call->client, &now, &error))
        return cohort_api_fail_store(call->err, &error, "cannot read the hours");
    int64_t hour = now - now % COHORT_HOUR_MS;
    bson_t *body = &call->reply->body, array;
    BSON_APPEND_UTF8(body, "service", call->route->service);
    cohort_json_append_time(body, "now", now);
    BSON_APPEND_ARRAY_BEGIN(body, "hours", &array);
    hours_walk_t w = {.array = &array};
    ok = cohort_store_each_hour(call->store, call->client, call->route->service,
                                hour - hours * COHORT_HOUR_MS, hours, one_hour, &w, &error);
    bson_append_array_end(body, &array);
    if (!ok)
        return cohort_api_fail_store(call->err, &error, "cannot read the hours");
    call->reply->status = 200;
    return true;
}
