/*
 * api_tasks.c - the endpoints of the HTTP API v1 (see api_tasks.h and docs/API.md).
 *
 * Tasks are created through the same option parser as cohortctl enqueue and
 * cohort_task_create() (core/taskopts.h), with this node's defaults for the service when it
 * hosts it. Listings are keyset pages on _id: at most 500 tasks a reply, never a skip.
 * Times go out as ISO-8601 UTC, task ids as 24 hex digits.
 */
#include "node/http/api_tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/jsondoc.h"
#include "core/status.h"
#include "node/status/api_json.h"
#include "node/status/counts_view.h"
#include "node/status/service_status.h"
#include "store/listing.h"
#include "store/requests.h"
#include "store/batches.h"
#include "store/claims.h"
#include "store/nodes.h"
#include "store/queries.h"
#include "store/queue_counts.h"
#include "store/services.h"

bool cohort_api_fail_store(cohort_api_error_t *err, const bson_error_t *error, const char *what)
{
    bool unreachable = error->domain == MONGOC_ERROR_STREAM ||
                       error->domain == MONGOC_ERROR_SERVER_SELECTION ||
                       error->domain == MONGOC_ERROR_CLIENT;
    if (unreachable)
        return cohort_api_fail(err, 503, "unavailable", "%s: the database did not answer: %.300s",
                               what, error->message);
    return cohort_api_fail(err, 500, "internal", "%s: %.300s", what, error->message);
}

bool cohort_api_fail_no_service(cohort_api_call_t *call)
{
    return cohort_api_fail(call->err, 404, "not_found",
                           "service '%s' does not exist (no node has run it)",
                           call->route->service);
}

void cohort_api_wake(cohort_api_call_t *call)
{
    bson_strncpy(call->reply->wake, call->route->service, sizeof call->reply->wake);
}

/* 404 unless the service has its config document (a node has run it). */
static bool service_exists(cohort_api_call_t *call)
{
    bson_t doc;
    bool found = false;
    bson_error_t error;
    bool ok = cohort_store_read_service(call->store, call->client, call->route->service, &doc,
                                        &found, &error);
    bson_destroy(&doc);
    if (!ok)
        return cohort_api_fail_store(call->err, &error, "cannot read the service");
    if (!found)
        return cohort_api_fail_no_service(call);
    return true;
}

/* ---- GET /api/v1/services -------------------------------------------------------------- */

typedef struct services_walk {
    cohort_api_call_t *call;
    bson_t *array;
    uint32_t n;
    int64_t now;
} services_walk_t;

static bool one_service(void *user, const char *name, bson_error_t *error)
{
    services_walk_t *w = user;
    bson_t svc;
    cohort_json_array_begin_document(w->array, &w->n, &svc);
    bool ok = cohort_service_status(w->call->store, w->call->client, name, w->now, &svc, NULL,
                                    error);
    bson_append_document_end(w->array, &svc);
    return ok;
}

bool cohort_api_list_services(cohort_api_call_t *call)
{
    bson_t array;
    bson_error_t error;
    int64_t now = 0;
    if (!cohort_store_server_time(call->store, call->client, &now, &error))
        return cohort_api_fail_store(call->err, &error, "cannot list the services");
    BSON_APPEND_ARRAY_BEGIN(&call->reply->body, "services", &array);
    services_walk_t w = {.call = call, .array = &array, .now = now};
    bool ok = cohort_store_each_service(call->store, call->client, one_service, &w, &error);
    bson_append_array_end(&call->reply->body, &array);
    if (!ok)
        return cohort_api_fail_store(call->err, &error, "cannot list the services");
    call->reply->status = 200;
    return true;
}

/* ---- POST .../tasks and .../tasks:batch ------------------------------------------------ */

/* A task ready to insert: its options parsed and applied. */
typedef struct new_task {
    bson_t options;
    bson_t data;
    bool has_data;
    cohort_task_options_t parsed;
    cohort_new_task_t task;
} new_task_t;

/* Parses one task of the body into `t` (destroy t->options after). */
static bool read_task(cohort_api_call_t *call, const bson_t *body, const char *where,
                      new_task_t *t)
{
    if (!cohort_api_parse_task(body, where, &t->data, &t->has_data, &t->options, call->err))
        return false;
    bson_error_t why;
    if (!cohort_task_options_parse(&t->options, false, &t->parsed, &why))
        return cohort_api_fail(call->err, 400, "bad_request", "%s%s", where, why.message);
    return true;
}

/* Fills t->task for the service as cohortctl enqueue does: due now on the cluster clock, the
 * service's defaults from this node's file if it hosts the service. */
static void apply_task(cohort_api_call_t *call, new_task_t *t, int64_t now, int64_t batch)
{
    const cohort_service_config_t *section =
        call->config ? cohort_config_find_service(call->config, call->route->service) : NULL;
    t->task = (cohort_new_task_t){.data = t->has_data ? &t->data : NULL,
                                  .tracked = t->parsed.tracked,
                                  .unique_key = t->parsed.unique_key,
                                  .created_by = "api",
                                  .now_ms = now,
                                  .batch = batch};
    cohort_task_options_apply(&t->parsed, section, &t->task);
}

/* Inserts one task; `oid` receives its id. *replayed: an earlier request with the same
 * Idempotency-Key created it; *created: a new document (not a coalesce into a pending task's,
 * not a replay). */
static bool insert_task(cohort_api_call_t *call, new_task_t *t, bson_oid_t *oid, bool *replayed,
                        bool *created)
{
    bool exists = false, coalesced = false;
    bson_error_t error;
    if (!cohort_store_insert_task_once(call->store, call->client, call->route->service, &t->task,
                                       oid, replayed, &exists, &coalesced, &error)) {
        if (exists)
            return cohort_api_fail(call->err, 409, "conflict",
                                   "a task with unique_key '%.200s' exists already",
                                   t->task.unique_key);
        return cohort_api_fail_store(call->err, &error, "cannot create the task");
    }
    *created = !coalesced && !*replayed;
    return true;
}

/* The open batch tracked tasks join now (1 when nothing is tracked: unused). */
static bool open_batch(cohort_api_call_t *call, bool tracked, int64_t *batch)
{
    cohort_batch_state_t state = {.open = 1};
    bson_error_t error;
    if (tracked &&
        !cohort_store_batch_state(call->store, call->client, call->route->service, &state, &error))
        return cohort_api_fail_store(call->err, &error, "cannot read the open batch");
    *batch = state.open;
    return true;
}

static bool read_body(cohort_api_call_t *call, bool empty_ok, bson_t *body)
{
    return cohort_api_parse_object(call->request->body, call->request->body_len, empty_ok, body,
                                   call->err);
}

bool cohort_api_create_task(cohort_api_call_t *call)
{
    const char *key = call->request->idempotency_key;
    if (key && (strlen(key) < 1 || strlen(key) > COHORT_API_KEY_MAX))
        return cohort_api_fail(call->err, 400, "bad_request",
                               "header 'Idempotency-Key' must be 1 to %d bytes",
                               COHORT_API_KEY_MAX);
    bson_t body;
    new_task_t t = {0};
    bson_init(&t.options); /* read_task() may not run */
    bool ok = read_body(call, false, &body) && read_task(call, &body, "", &t);
    int64_t batch = 1;
    ok = ok && service_exists(call) && open_batch(call, t.parsed.tracked, &batch);
    bson_oid_t oid;
    bool replayed = false, created = false;
    if (ok) {
        apply_task(call, &t, cohort_clock_cluster_ms(), batch);
        t.task.idempotency_key = key;
        ok = insert_task(call, &t, &oid, &replayed, &created);
    }
    if (ok) {
        char id[25];
        bson_oid_to_string(&oid, id);
        BSON_APPEND_UTF8(&call->reply->body, "id", id);
        call->reply->status = replayed ? 200 : 201;
        cohort_api_wake(call);
    }
    bson_destroy(&t.options);
    bson_destroy(&body);
    return ok;
}

/* The tasks array of a batch body: 1..COHORT_API_BATCH_MAX objects. */
static bool batch_tasks(cohort_api_call_t *call, const bson_t *body, bson_iter_t *tasks)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, body))
        return cohort_api_fail(call->err, 400, "bad_request", "the body is not valid");
    bool found = false;
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "tasks") != 0 || found)
            return cohort_api_fail(call->err, 400, "bad_request",
                                   "unknown or repeated field '%.64s' (known: tasks)",
                                   bson_iter_key(&it));
        if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, tasks))
            return cohort_api_fail(call->err, 400, "bad_request",
                                   "field 'tasks' must be an array of task objects");
        found = true;
    }
    if (!found)
        return cohort_api_fail(call->err, 400, "bad_request",
                               "field 'tasks' is required: {\"tasks\": [{...}, ...]}");
    uint32_t n = 0;
    bson_iter_t count = *tasks;
    while (bson_iter_next(&count))
        n++;
    if (n < 1 || n > COHORT_API_BATCH_MAX)
        return cohort_api_fail(call->err, 400, "bad_request",
                               "field 'tasks' must hold 1 to %d tasks, not %u",
                               COHORT_API_BATCH_MAX, n);
    return true;
}

static int compare_texts(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Two tasks of the batch with one unique_key: the second would be refused part way. `keys`
 * (n of them) are copies, owned by the caller. */
static bool distinct_unique_keys(cohort_api_call_t *call, const char **keys, size_t n)
{
    qsort(keys, n, sizeof *keys, compare_texts);
    for (size_t i = 1; i < n; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0)
            return cohort_api_fail(call->err, 400, "bad_request",
                                   "unique_key '%.200s' is given to two tasks of the batch",
                                   keys[i]);
    return true;
}

/* Checks every task of the batch before any is written: bad input writes nothing. (The
 * body's keys, integers and nesting passed cohort_api_parse_object() already.) */
static bool check_batch(cohort_api_call_t *call, bson_iter_t tasks, bool *any_tracked)
{
    uint32_t i = 0;
    size_t n_keys = 0;
    const char **keys = calloc(COHORT_API_BATCH_MAX, sizeof *keys);
    if (!keys)
        return cohort_api_fail(call->err, 500, "internal", "out of memory");
    *any_tracked = false;
    bool ok = true;
    while (ok && bson_iter_next(&tasks)) {
        char where[32];
        snprintf(where, sizeof where, "tasks[%u].", i++);
        bson_t one;
        uint32_t len = 0;
        const uint8_t *raw = NULL;
        if (!BSON_ITER_HOLDS_DOCUMENT(&tasks)) {
            ok = cohort_api_fail(call->err, 400, "bad_request", "field '%.*s' must be an object",
                                 (int)strlen(where) - 1, where);
            break;
        }
        bson_iter_document(&tasks, &len, &raw);
        new_task_t t = {0};
        bson_init(&t.options);
        ok = bson_init_static(&one, raw, len) && read_task(call, &one, where, &t);
        *any_tracked = *any_tracked || (ok && t.parsed.tracked);
        /* A copy: the parsed options live only as long as `t`. */
        if (ok && t.parsed.unique_key && n_keys < COHORT_API_BATCH_MAX &&
            !(keys[n_keys++] = strdup(t.parsed.unique_key)))
            ok = cohort_api_fail(call->err, 500, "internal", "out of memory");
        bson_destroy(&t.options);
    }
    ok = ok && distinct_unique_keys(call, keys, n_keys);
    for (size_t k = 0; k < n_keys; k++)
        free((char *)keys[k]);
    free(keys);
    return ok;
}

/* A batch refused part way by the database: the tasks it created (`ids`) are deleted again,
 * and the message says what became of them. */
static void undo_batch(cohort_api_call_t *call, uint32_t failed, const bson_oid_t *ids, size_t n)
{
    char why[sizeof call->err->message];
    bson_strncpy(why, call->err->message, sizeof why);
    int64_t deleted = 0;
    bson_error_t error;
    bool undone = cohort_store_delete_pending_tasks(call->store, call->client,
                                                    call->route->service, ids, n, &deleted,
                                                    &error);
    char *msg = call->err->message;
    size_t room = sizeof call->err->message;
    if (n == 0)
        snprintf(msg, room, "tasks[%u]: %.300s (nothing was created)", failed, why);
    else if (!undone)
        snprintf(msg, room, "tasks[%u]: %.200s (the %zu tasks before it were created and could "
                 "not be removed: %.150s)", failed, why, n, error.message);
    else if ((size_t)deleted < n)
        snprintf(msg, room, "tasks[%u]: %.200s (of the %zu tasks created before it, %lld were "
                 "removed; %lld were claimed already and stay)", failed, why, n,
                 (long long)deleted, (long long)n - (long long)deleted);
    else
        snprintf(msg, room, "tasks[%u]: %.300s (the %zu tasks created before it were removed: "
                 "nothing was created)", failed, why, n);
}

/* Inserts the checked tasks in order; on a refusal part way, undoes the ones created. */
static bool insert_batch(cohort_api_call_t *call, bson_iter_t tasks, int64_t batch,
                         bson_t *ids_reply)
{
    bson_oid_t *created = calloc(COHORT_API_BATCH_MAX, sizeof *created);
    if (!created)
        return cohort_api_fail(call->err, 500, "internal", "out of memory");
    size_t n_created = 0;
    uint32_t n = 0;
    int64_t now = cohort_clock_cluster_ms();
    bool ok = true;
    while (ok && bson_iter_next(&tasks)) {
        bson_t one;
        uint32_t len = 0;
        const uint8_t *raw = NULL;
        bson_iter_document(&tasks, &len, &raw);
        new_task_t t = {0};
        bson_init(&t.options);
        bson_oid_t oid;
        bool replayed = false, made = false;
        ok = bson_init_static(&one, raw, len) && read_task(call, &one, "", &t);
        if (ok) {
            apply_task(call, &t, now, batch);
            ok = insert_task(call, &t, &oid, &replayed, &made);
        }
        if (ok && made && n_created < COHORT_API_BATCH_MAX)
            created[n_created++] = oid;
        if (ok) {
            char id[25];
            bson_oid_to_string(&oid, id);
            cohort_json_array_append_utf8(ids_reply, &n, id);
        }
        bson_destroy(&t.options);
    }
    if (!ok)
        undo_batch(call, n, created, n_created);
    free(created);
    return ok;
}

bool cohort_api_create_tasks(cohort_api_call_t *call)
{
    if (call->request->idempotency_key)
        return cohort_api_fail(call->err, 400, "bad_request",
                               "header 'Idempotency-Key' is for single tasks: give each task of "
                               "a batch a unique_key instead");
    bson_t body;
    bson_iter_t tasks;
    bool tracked = false;
    int64_t batch = 1;
    bool ok = read_body(call, false, &body) && batch_tasks(call, &body, &tasks) &&
              check_batch(call, tasks, &tracked) && service_exists(call) &&
              open_batch(call, tracked, &batch);
    bson_t ids;
    BSON_APPEND_ARRAY_BEGIN(&call->reply->body, "ids", &ids);
    ok = ok && insert_batch(call, tasks, batch, &ids);
    bson_append_array_end(&call->reply->body, &ids);
    if (ok) {
        cohort_api_wake(call);
        call->reply->status = 201;
    }
    bson_destroy(&body);
    return ok;
}

/* ---- GET .../tasks and .../tasks/{id} -------------------------------------------------- */

/* `key`'s value as it is stored (a document a worker reported), or null. */
static void copy_value_or_null(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key))
        bson_append_value(out, key, -1, bson_iter_value(&it));
    else
        bson_append_null(out, key, -1);
}

static void copy_utf8_or_null(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    bool has = bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it);
    cohort_json_append_utf8_or_null(out, key, has ? bson_iter_utf8(&it, NULL) : NULL);
}

static void copy_time(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    bool has = bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_DATE_TIME(&it);
    cohort_json_append_time(out, key, has ? bson_iter_date_time(&it) : 0);
}

/* A number as it is (int32, int64 as text), or null. */
static void copy_number(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_NUMBER(&it))
        BSON_APPEND_NULL(out, key);
    else if (BSON_ITER_HOLDS_INT64(&it))
        cohort_json_append_int64_text(out, key, bson_iter_int64(&it));
    else
        bson_append_value(out, key, -1, bson_iter_value(&it));
}

static void append_history(const bson_t *doc, bson_t *out)
{
    bson_t array;
    uint32_t n = 0;
    BSON_APPEND_ARRAY_BEGIN(out, "history", &array);
    bson_iter_t it, runs;
    if (bson_iter_init_find(&it, doc, "history") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &runs)) {
        while (bson_iter_next(&runs)) {
            bson_t run, one;
            if (!cohort_iter_doc(&runs, &run))
                continue;
            cohort_json_array_begin_document(&array, &n, &one);
            copy_utf8_or_null(&run, "node", &one);
            copy_number(&run, "attempt", &one);
            copy_time(&run, "started_at", &one);
            copy_time(&run, "ended_at", &one);
            copy_utf8_or_null(&run, "outcome", &one);
            copy_utf8_or_null(&run, "error", &one);
            bson_iter_t event;
            if (bson_iter_init_find(&event, &run, "event")) { /* an operator's: who and when */
                copy_utf8_or_null(&run, "event", &one);
                copy_utf8_or_null(&run, "by", &one);
                copy_time(&run, "at", &one);
            }
            bson_append_document_end(&array, &one);
        }
    }
    bson_append_array_end(out, &array);
}

/* A task as the API shows it (docs/API.md); with its history for the single read. */
static void append_task(const cohort_api_call_t *call, const bson_t *doc, bool history,
                        bson_t *out)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it)) {
        char id[25];
        bson_oid_to_string(bson_iter_oid(&it), id);
        BSON_APPEND_UTF8(out, "id", id);
    } else if (bson_iter_init_find(&it, doc, "_id")) {
        bson_append_value(out, "id", -1, bson_iter_value(&it)); /* written by hand */
    }
    copy_utf8_or_null(doc, "status", out);
    if (bson_iter_init_find(&it, doc, "data"))
        bson_append_value(out, "data", -1, bson_iter_value(&it));
    else
        BSON_APPEND_NULL(out, "data");
    copy_number(doc, "attempts", out);
    const cohort_service_config_t *section =
        call->config ? cohort_config_find_service(call->config, call->route->service) : NULL;
    if (section)
        BSON_APPEND_INT64(out, "max_attempts", section->max_attempts);
    else
        BSON_APPEND_NULL(out, "max_attempts"); /* this node does not host the service */
    copy_number(doc, "priority", out);
    BSON_APPEND_INT64(out, "weight", cohort_store_task_weight(doc)); /* none: 1 */
    copy_utf8_or_null(doc, "kind", out);
    copy_utf8_or_null(doc, "group", out);
    BSON_APPEND_BOOL(out, "tracked",
                     bson_iter_init_find(&it, doc, "tracked") && BSON_ITER_HOLDS_BOOL(&it) &&
                         bson_iter_bool(&it));
    copy_time(doc, "run_at", out);
    copy_time(doc, "created_at", out);
    copy_time(doc, "finished_at", out);
    copy_utf8_or_null(doc, "claimed_by", out);
    copy_utf8_or_null(doc, "last_error", out);
    if (history) { /* the one task's reply: what its worker reported too */
        copy_value_or_null(doc, "result", out);
        copy_value_or_null(doc, "progress", out);
        append_history(doc, out);
    }
}

bool cohort_api_read_task(cohort_api_call_t *call)
{
    if (!service_exists(call))
        return false;
    bson_t doc;
    bool found = false;
    bson_error_t error;
    bool ok = cohort_store_read_task(call->store, call->client, call->route->service,
                                     call->route->task_id, &doc, &found, &error);
    if (!ok)
        cohort_api_fail_store(call->err, &error, "cannot read the task");
    else if (!found)
        ok = cohort_api_fail(call->err, 404, "not_found", "service '%s' has no task %s",
                             call->route->service, call->route->task_id);
    else {
        append_task(call, &doc, true, &call->reply->body);
        call->reply->status = 200;
    }
    bson_destroy(&doc);
    return ok;
}

typedef struct page_walk {
    cohort_api_call_t *call;
    bson_t *items;
    uint32_t n;
    int64_t limit;
    bson_oid_t last;
    bool more; /* a document beyond the limit exists */
    bool full; /* the page reached COHORT_API_PAGE_BYTES: the walk stopped early */
} page_walk_t;

static bool page_item(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    page_walk_t *w = user;
    if ((int64_t)w->n == w->limit) {
        w->more = true; /* the one read past the limit: there is a next page */
        return true;
    }
    if (w->n > 0 && (size_t)w->items->len + doc->len > COHORT_API_PAGE_BYTES) {
        w->more = w->full = true; /* the page ends before this one, which opens the next */
        return false;
    }
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it))
        bson_oid_copy(bson_iter_oid(&it), &w->last);
    bson_t one;
    cohort_json_array_begin_document(w->items, &w->n, &one);
    append_task(w->call, doc, false, &one);
    bson_append_document_end(w->items, &one);
    return true;
}

bool cohort_api_list_tasks(cohort_api_call_t *call)
{
    char *values[COHORT_API_LIST_PARAMS + 1];
    cohort_api_list_t list;
    if (!cohort_api_query(call->request->query, cohort_api_list_params, values, call->err))
        return false;
    bool ok = cohort_api_parse_list(values, &list, call->err) && service_exists(call);
    bson_t items;
    BSON_APPEND_ARRAY_BEGIN(&call->reply->body, "items", &items);
    page_walk_t w = {.call = call, .items = &items, .limit = list.limit};
    int64_t total = 0;
    if (ok) {
        cohort_task_page_t page = {.status = list.status,
                                   .kind = list.kind,
                                   .group = list.group,
                                   .view = list.view,
                                   .after = list.has_after ? &list.after : NULL,
                                   .newest_first = list.newest_first,
                                   .limit = list.limit + 1,
                                   .data_path = list.data_path,
                                   .data_value = list.data_value};
        bson_error_t error;
        ok = cohort_store_each_task_page(call->store, call->client, call->route->service, &page,
                                         page_item, &w, &error) ||
             w.full || cohort_api_fail_store(call->err, &error, "cannot list the tasks");
        if (ok && list.total)
            ok = cohort_store_count_task_page(call->store, call->client, call->route->service,
                                              &page, &total, &error) ||
                 cohort_api_fail_store(call->err, &error, "cannot count the tasks");
    }
    bson_append_array_end(&call->reply->body, &items);
    if (ok && list.total)
        BSON_APPEND_INT64(&call->reply->body, "total", total);
    BSON_APPEND_UTF8(&call->reply->body, "order", list.newest_first ? "newest" : "oldest");
    if (ok && list.data_path)
        BSON_APPEND_INT64(&call->reply->body, "searched_max", COHORT_TASK_SEARCH_SCAN);
    if (ok && w.more) {
        char next[40];
        cohort_api_cursor_encode(&w.last, next, sizeof next);
        BSON_APPEND_UTF8(&call->reply->body, "next", next);
    } else if (ok) {
        BSON_APPEND_NULL(&call->reply->body, "next");
    }
    cohort_api_query_free(values, COHORT_API_LIST_PARAMS);
    if (ok)
        call->reply->status = 200;
    return ok;
}

/* ---- GET .../counts -------------------------------------------------------------------- */

/* Copies the rows of `snap`'s `key` ("kinds", "groups") for its first `limit` values (most
 * tasks first) into `out`'s rows, with how many distinct values there are. */
static void copy_value_rows(const bson_t *snap, const char *key, const char *field,
                            int64_t limit, bson_t *out)
{
    char path[32];
    bson_iter_t it, rows;
    bson_t array;
    uint32_t n = 0;
    int64_t values = 0;
    const char *last = NULL;
    bool last_null = false;
    BSON_APPEND_ARRAY_BEGIN(out, "rows", &array);
    snprintf(path, sizeof path, "%s.rows", key);
    if (bson_iter_init(&it, snap) && bson_iter_find_descendant(&it, path, &it) &&
        BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &rows)) {
        while (bson_iter_next(&rows) && BSON_ITER_HOLDS_DOCUMENT(&rows)) {
            bson_t row;
            uint32_t len;
            const uint8_t *data;
            bson_iter_document(&rows, &len, &data);
            if (!bson_init_static(&row, data, len))
                continue;
            bson_iter_t v;
            const char *value = bson_iter_init_find(&v, &row, field) && BSON_ITER_HOLDS_UTF8(&v)
                                    ? bson_iter_utf8(&v, NULL)
                                    : NULL;
            if (!values || (value ? last_null || strcmp(value, last) != 0 : !last_null)) {
                if (++values > limit)
                    break;
                last = value;
                last_null = !value;
            }
            bson_t copy;
            cohort_json_array_begin_document(&array, &n, &copy);
            bson_concat(&copy, &row);
            bson_append_document_end(&array, &copy);
        }
    }
    bson_append_array_end(out, &array);
    BSON_APPEND_INT64(out, "distinct", cohort_counts_distinct(snap, key));
    BSON_APPEND_INT64(out, "limit", limit);
}

static void counts_by_status(cohort_api_call_t *call, const bson_t *snap)
{
    cohort_status_counts_t counts;
    cohort_counts_status(snap, &counts);
    bson_t c;
    BSON_APPEND_UTF8(&call->reply->body, "by", "status");
    BSON_APPEND_DOCUMENT_BEGIN(&call->reply->body, "counts", &c);
    for (int i = 0; i < COHORT_STATUS_COUNT; i++)
        BSON_APPEND_INT64(&c, cohort_status_names[i],
                          cohort_status_count(&counts, (cohort_task_status_t)i));
    bson_append_document_end(&call->reply->body, &c);
}

bool cohort_api_count_tasks(cohort_api_call_t *call)
{
    static const char *const params[] = {"by", "limit", NULL};
    char *values[2];
    const char *field = NULL;
    int64_t limit = 0;
    if (!cohort_api_query(call->request->query, params, values, call->err))
        return false;
    bool ok = cohort_api_parse_counts_by(values[0], values[1], &field, &limit, call->err) &&
              service_exists(call);
    bson_t snap;
    bson_error_t error;
    bson_init(&snap);
    if (ok) {
        bson_destroy(&snap);
        ok = cohort_counts_view_get(call->store, call->client, call->route->service, &snap,
                                    &error) ||
             cohort_api_fail_store(call->err, &error, "cannot count the tasks");
    }
    if (ok && strcmp(field, "status") == 0) {
        counts_by_status(call, &snap);
    } else if (ok) {
        BSON_APPEND_UTF8(&call->reply->body, "by", field);
        copy_value_rows(&snap, strcmp(field, "kind") == 0 ? "kinds" : "groups", field, limit,
                        &call->reply->body);
    }
    if (ok)
        cohort_counts_view_append_age(&call->reply->body, "", &snap);
    bson_destroy(&snap);
    cohort_api_query_free(values, 2);
    if (ok)
        call->reply->status = 200;
    return ok;
}

/* ---- POST .../pause and .../resume ------------------------------------------------------ */

bool cohort_api_switch(cohort_api_call_t *call)
{
    /* The owner's switch (pause, resume) or the operator's (block, unblock). */
    cohort_api_endpoint_t e = call->route->endpoint;
    bool blocking = e == COHORT_API_BLOCK || e == COHORT_API_UNBLOCK;
    bool on = e == COHORT_API_PAUSE || e == COHORT_API_BLOCK;
    bson_t body;
    const char *kind = NULL, *reason = NULL;
    bool ok = read_body(call, true, &body) &&
              cohort_api_parse_switch(&body, on, &kind, &reason, call->err);
    bool changed = true; /* false: a resume or unblock of a switch that was not set */
    if (ok) {
        char by[100];
        cohort_api_author(call, by, sizeof by);
        bool found = false;
        bson_error_t error;
        ok = on || cohort_store_switch_is_set(call->store, call->client, call->route->service,
                                              blocking ? "block" : "pause", kind ? kind : "*",
                                              &changed, &error) ||
             cohort_api_fail_store(call->err, &error, "cannot read the switch");
        ok = ok && (cohort_store_set_switch(call->store, call->client, call->route->service,
                                     blocking ? "block" : "pause", kind ? kind : "*", on, reason,
                                     by, &found, &error) ||
                    cohort_api_fail_store(call->err, &error, "cannot set the switch"));
        if (ok && !found)
            ok = cohort_api_fail_no_service(call);
    }
    if (ok) {
        BSON_APPEND_UTF8(&call->reply->body, "service", call->route->service);
        BSON_APPEND_UTF8(&call->reply->body, "kind", kind ? kind : "*");
        BSON_APPEND_BOOL(&call->reply->body, blocking ? "blocked" : "paused", on);
        BSON_APPEND_BOOL(&call->reply->body, "changed", changed);
        call->reply->status = 200;
    }
    bson_destroy(&body);
    return ok;
}

/* ---- shared with the other endpoints (api_ops.c) ---------------------------------------- */

void cohort_api_author(const cohort_api_call_t *call, char *by, size_t len)
{
    const char *name = call->caller->name;
    if (!call->caller->session) {
        snprintf(by, len, "api token %s", name);
        return;
    }
    /* A session's name is "ui USER@HOST" (cohortctl ui-link) or "token NAME" (signed in
     * with a token): the person, then how they acted. */
    if (strncmp(name, "ui ", 3) == 0)
        name += 3;
    snprintf(by, len, "%s via dashboard", name);
}

bool cohort_api_service_exists(cohort_api_call_t *call)
{
    return service_exists(call);
}
