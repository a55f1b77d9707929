/*
 * schedule_status.c - builds the schedules of a service as JSON-ready BSON (see
 * schedule_status.h).
 *
 * The next slot comes from the recorded series ("CRON @ ZONE"), not from a config file, so a
 * tool without the file still computes it the way the primary will.
 */
#include "node/status/schedule_status.h"

#include <stdio.h>
#include <string.h>

#include "core/cron.h"
#include "core/schedule.h"
#include "node/status/api_json.h"
#include "store/store.h"
#include "store/queries.h"
#include "store/schedules.h"
#include "store/services.h"

/* The next slot after `after` of a series "CRON @ ZONE", into *next; false if unreadable. */
static bool next_of_series(const char *series, int64_t after, int64_t *next)
{
    const char *at = strstr(series, " @ ");
    if (!at)
        return false;
    char cron_text[256];
    snprintf(cron_text, sizeof cron_text, "%.*s", (int)(at - series), series);
    cohort_cron_t cron;
    bson_error_t error;
    cohort_tz_t *tz = cohort_tz_load(at + 3, &error);
    bool ok = tz && cohort_cron_parse(cron_text, &cron, &error) &&
              cohort_cron_next(&cron, tz, after, next);
    cohort_tz_destroy(tz);
    return ok;
}

typedef struct builder {
    cohort_store_t *store;
    mongoc_client_t *client;
    const char *service;
    const cohort_service_config_t *file;
    int64_t now;
    bson_t *array;
    uint32_t n;
} builder_t;

static const cohort_schedule_config_t *in_file(const builder_t *b, const char *id)
{
    for (size_t i = 0; b->file && i < b->file->n_schedules; i++)
        if (strcmp(b->file->schedules[i].id, id) == 0)
            return &b->file->schedules[i];
    return NULL;
}

/* The status of the task `oid` into `buf`: its status, "deleted" if it is gone (purged), or
 * "?" if it cannot be read. */
static void task_status(const builder_t *b, const bson_oid_t *oid, char *buf, size_t len)
{
    char id[25];
    bson_oid_to_string(oid, id);
    bson_t doc;
    bool found = false;
    bson_error_t error;
    bson_iter_t it;
    snprintf(buf, len, "?");
    if (cohort_store_read_task(b->store, b->client, b->service, id, &doc, &found, &error)) {
        if (!found)
            snprintf(buf, len, "deleted");
        else if (bson_iter_init_find(&it, &doc, "status") && BSON_ITER_HOLDS_UTF8(&it))
            snprintf(buf, len, "%s", bson_iter_utf8(&it, NULL));
    }
    bson_destroy(&doc);
}

static void one(builder_t *b, const char *id, const cohort_schedule_state_t *st)
{
    const cohort_schedule_config_t *sc = in_file(b, id);
    char series[320] = "";
    if (st->found)
        snprintf(series, sizeof series, "%s", st->series);
    else if (sc)
        cohort_schedule_series(sc, series, sizeof series);
    int64_t next = 0;
    if (st->found ? !next_of_series(series, st->last_slot_ms, &next)
                  : !sc || !cohort_cron_next(&sc->cron, sc->tz, b->now, &next))
        next = 0;
    bson_t doc;
    cohort_json_array_begin_document(b->array, &b->n, &doc);
    BSON_APPEND_UTF8(&doc, "id", id);
    BSON_APPEND_UTF8(&doc, "state", !st->found ? "not started" : st->paused ? "paused" : "active");
    BSON_APPEND_UTF8(&doc, "series", series);
    cohort_json_append_utf8_or_null(&doc, "spec", sc ? sc->spec : NULL);
    if (b->file)
        BSON_APPEND_BOOL(&doc, "in_file", sc != NULL);
    cohort_json_append_utf8_or_null(&doc, "catch_up",
                                    sc ? cohort_catch_up_name(sc->catch_up) : NULL);
    cohort_json_append_time(&doc, "last_slot", st->found ? st->last_slot_ms : 0);
    cohort_json_append_time(&doc, "next_slot", next);
    BSON_APPEND_BOOL(&doc, "due", st->found && !st->paused && next > 0 && next <= b->now);
    if (st->has_last_task) {
        char task_id[25], status[32];
        bson_oid_to_string(&st->last_task, task_id);
        task_status(b, &st->last_task, status, sizeof status);
        bson_t task;
        BSON_APPEND_DOCUMENT_BEGIN(&doc, "last_task", &task);
        BSON_APPEND_UTF8(&task, "id", task_id);
        cohort_json_append_time(&task, "slot", st->last_task_slot_ms);
        BSON_APPEND_UTF8(&task, "status", status);
        bson_append_document_end(&doc, &task);
    } else {
        BSON_APPEND_NULL(&doc, "last_task");
    }
    BSON_APPEND_INT64(&doc, "created", st->created);
    BSON_APPEND_INT64(&doc, "existed", st->existed);
    BSON_APPEND_INT64(&doc, "skipped", st->skipped);
    BSON_APPEND_INT64(&doc, "last_epoch", st->last_epoch);
    bson_append_document_end(b->array, &doc);
}

bool cohort_schedule_status(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const cohort_service_config_t *file, int64_t now_ms, bson_t *out,
                            bool *found, bson_error_t *error)
{
    bson_t doc;
    if (!cohort_store_read_service(store, client, service, &doc, found, error)) {
        bson_destroy(&doc);
        return false;
    }
    if (!*found) {
        bson_destroy(&doc);
        return true;
    }
    bson_t array;
    builder_t b = {.store = store, .client = client, .service = service, .file = file,
                   .now = now_ms, .array = &array};
    BSON_APPEND_UTF8(out, "service", service);
    cohort_json_append_time(out, "now", now_ms);
    BSON_APPEND_ARRAY_BEGIN(out, "schedules", &array);
    bson_iter_t it, child;
    if (bson_iter_init_find(&it, &doc, "schedules") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &child)) {
        while (bson_iter_next(&child)) {
            cohort_schedule_state_t st;
            cohort_store_schedule_state(&doc, bson_iter_key(&child), &st);
            if (st.found)
                one(&b, bson_iter_key(&child), &st);
        }
    }
    for (size_t i = 0; file && i < file->n_schedules; i++) {
        cohort_schedule_state_t st;
        cohort_store_schedule_state(&doc, file->schedules[i].id, &st);
        if (!st.found)
            one(&b, file->schedules[i].id, &st);
    }
    bson_append_array_end(out, &array);
    bson_destroy(&doc);
    return true;
}
