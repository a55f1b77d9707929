/*
 * api_ui.c - the API endpoints added for the dashboard (see api_ui.h). They answer any
 * caller, token or session alike.
 */
#include "node/http/api_ui.h"
#include "node/http/api_kinds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/status.h"
#include "core/token.h"
#include "node/status/api_json.h"
#include "node/status/counts_view.h"
#include "node/status/node_status.h"
#include "store/audit.h"
#include "store/history.h"
#include "store/listing.h"
#include "store/store.h"
#include "store/nodes.h"
#include "store/queries.h"
#include "store/queue_counts.h"
#include "store/services.h"

#define WHOAMI "/api/v1/whoami"
#define AUDIT "/api/v1/audit"
#define AUDIT_BODY_MAX 4096
#define AUDIT_PAGE_MAX 200
#define NODES "/api/v1/nodes"
#define DAY_MS 86400000

#define SERVICES "/api/v1/services/"
#define HISTORY_SUFFIX "/history"
#define BATCHES_SUFFIX "/batches"
#define BLOCK_SUFFIX "/block"
#define UNBLOCK_SUFFIX "/unblock"
#define DUE_SUFFIX "/due"
#define HISTORY_MAX_MINUTES 1440

/* Whether `path` is /api/v1/services/{anything}`suffix`. */
static bool service_path(const char *path, const char *suffix)
{
    size_t n = strlen(path), p = strlen(SERVICES), s = strlen(suffix);
    return n > p + s && strncmp(path, SERVICES, p) == 0 && strcmp(path + n - s, suffix) == 0 &&
           !memchr(path + p, '/', n - p - s);
}

/* The per-service endpoints these are: /api/v1/services/{svc}<suffix>. */
typedef struct service_endpoint {
    const char *suffix, *method;
    cohort_api_endpoint_t endpoint;
    uint32_t scope;
} service_endpoint_t;

static const service_endpoint_t service_endpoints[] = {
    {HISTORY_SUFFIX, "GET", COHORT_API_HISTORY, COHORT_SCOPE_READ},
    {"/kinds", "GET", COHORT_API_KINDS, COHORT_SCOPE_READ},
    {"/history/hours", "GET", COHORT_API_HISTORY_HOURS, COHORT_SCOPE_READ},
    {BATCHES_SUFFIX, "GET", COHORT_API_BATCHES, COHORT_SCOPE_READ},
    {BLOCK_SUFFIX, "POST", COHORT_API_BLOCK, COHORT_SCOPE_OPERATE},
    {UNBLOCK_SUFFIX, "POST", COHORT_API_UNBLOCK, COHORT_SCOPE_OPERATE},
    {DUE_SUFFIX, "GET", COHORT_API_DUE, COHORT_SCOPE_READ},
};

/* The per-service endpoint `path` names, or NULL. */
static const service_endpoint_t *service_endpoint(const char *path)
{
    for (size_t i = 0; i < sizeof service_endpoints / sizeof service_endpoints[0]; i++)
        if (service_path(path, service_endpoints[i].suffix))
            return &service_endpoints[i];
    return NULL;
}

static bool per_service_path(const char *path)
{
    return service_endpoint(path) != NULL;
}

bool cohort_api_ui_owns(const char *path)
{
    return path && (strcmp(path, WHOAMI) == 0 || strcmp(path, NODES) == 0 ||
                    strcmp(path, AUDIT) == 0 || per_service_path(path));
}

bool cohort_api_ui_route(const char *method, const char *path, cohort_api_route_t *route,
                         cohort_api_error_t *err)
{
    memset(route, 0, sizeof *route);
    route->allow = "GET";
    if (per_service_path(path)) {
        const service_endpoint_t *e = service_endpoint(path);
        size_t len = strlen(path) - strlen(SERVICES) - strlen(e->suffix);
        if (len >= sizeof route->service)
            return cohort_api_fail(err, 400, "bad_request",
                                   "the service name in the path must be 1-64 of [A-Za-z0-9_-]");
        memcpy(route->service, path + strlen(SERVICES), len);
        route->service[len] = '\0';
        if (!cohort_config_valid_service_name(route->service))
            return cohort_api_fail(err, 400, "bad_request",
                                   "the service name in the path must be 1-64 of [A-Za-z0-9_-]");
        route->allow = e->method;
        if (strcmp(method, e->method) != 0)
            return cohort_api_fail(err, 405, "method_not_allowed",
                                   "%s is not allowed here: use %s", method, e->method);
        route->endpoint = e->endpoint;
        route->scope = e->scope;
        return true;
    }
    bool me = strcmp(path, WHOAMI) == 0, audit = strcmp(path, AUDIT) == 0;
    if (!me && !audit && strcmp(path, NODES) != 0)
        return cohort_api_fail(err, 404, "not_found", "no such path");
    if (strcmp(method, "GET") != 0)
        return cohort_api_fail(err, 405, "method_not_allowed", "%s is not allowed here: use GET",
                               method);
    route->endpoint = me ? COHORT_API_WHOAMI : audit ? COHORT_API_AUDIT : COHORT_API_NODES;
    route->scope = me ? 0 : COHORT_SCOPE_READ; /* any caller may ask who it is */
    return true;
}

/* {"name", "scopes": [...], "via": "token" | "session", "can_operate"} */
static bool whoami(cohort_api_call_t *call)
{
    bson_t *body = &call->reply->body, array;
    BSON_APPEND_UTF8(body, "name", call->caller->name);
    BSON_APPEND_ARRAY_BEGIN(body, "scopes", &array);
    uint32_t n = 0;
    for (int i = 0; i < COHORT_SCOPE_COUNT; i++)
        if (call->caller->scopes & (1u << i))
            cohort_json_array_append_utf8(&array, &n, cohort_scope_names[i]);
    bson_append_array_end(body, &array);
    BSON_APPEND_UTF8(body, "via", call->caller->session ? "session" : "token");
    BSON_APPEND_BOOL(body, "can_operate",
                     cohort_scopes_allow(call->caller->scopes, COHORT_SCOPE_OPERATE));
    call->reply->status = 200;
    return true;
}

typedef struct nodes_walk {
    bson_t *array;
    uint32_t n;
    int64_t now, lease;
} nodes_walk_t;

static bool one_node(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    nodes_walk_t *w = user;
    bson_t one;
    cohort_json_array_begin_document(w->array, &w->n, &one);
    cohort_node_status(doc, w->now, w->lease, &one, NULL);
    bson_append_document_end(w->array, &one);
    return true;
}

/* {"nodes": [...]}: the nodes seen in the last day (a handful: one document per node). */
static bool nodes(cohort_api_call_t *call)
{
    cohort_settings_t file; /* the node's takeover_ms, or the table's default */
    cohort_settings_from_config(call->config, NULL, &file);
    nodes_walk_t w = {.lease = file.takeover_ms};
    bson_error_t error;
    int64_t declared = 0;
    if (!cohort_store_server_time(call->store, call->client, &w.now, &error) ||
        !cohort_store_longest_lease(call->store, call->client, &declared, &error))
        return cohort_api_fail_store(call->err, &error, "cannot list the nodes");
    if (declared > 0)
        w.lease = declared;
    bson_t array;
    BSON_APPEND_ARRAY_BEGIN(&call->reply->body, "nodes", &array);
    w.array = &array;
    bool ok = cohort_store_each_node(call->store, call->client, w.now - DAY_MS, one_node, &w,
                                     &error);
    bson_append_array_end(&call->reply->body, &array);
    if (!ok)
        return cohort_api_fail_store(call->err, &error, "cannot list the nodes");
    call->reply->status = 200;
    return true;
}

static void append_minute(bson_t *doc, const cohort_minute_t *m)
{
    bson_t counts;
    cohort_json_append_time(doc, "at", m->at_ms);
    BSON_APPEND_DOCUMENT_BEGIN(doc, "counts", &counts);
    for (int i = 0; i < COHORT_STATUS_COUNT; i++)
        BSON_APPEND_INT64(&counts, cohort_status_names[i],
                          cohort_status_count(&m->counts, (cohort_task_status_t)i));
    bson_append_document_end(doc, &counts);
    BSON_APPEND_INT64(doc, "enqueued", m->enqueued);
    BSON_APPEND_INT64(doc, "succeeded", m->succeeded);
    BSON_APPEND_INT64(doc, "failed", m->failed);
    BSON_APPEND_INT64(doc, "timed_out", m->timed_out);
    if (m->epoch) {
        BSON_APPEND_INT64(doc, "epoch", m->epoch);
        BSON_APPEND_UTF8(doc, "primary", m->primary);
    }
    if (m->oldest_due_ms)
        cohort_json_append_time(doc, "oldest_due_at", m->oldest_due_ms);
    else
        BSON_APPEND_NULL(doc, "oldest_due_at");
}

typedef struct minutes_walk {
    bson_t *array;
    uint32_t n;
} minutes_walk_t;

static bool one_minute(void *user, const cohort_minute_t *m)
{
    minutes_walk_t *w = user;
    bson_t doc;
    cohort_json_array_begin_document(w->array, &w->n, &doc);
    append_minute(&doc, m);
    bson_append_document_end(w->array, &doc);
    return true;
}

/* A query parameter's whole number from 1 to `max` into *out, or a 400 naming it. */
static bool query_count(const char *text, const char *name, int max, int64_t *out,
                        cohort_api_error_t *err)
{
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || v < 1 || v > max)
        return cohort_api_fail(err, 400, "bad_request", "%s must be an integer from 1 to %d", name,
                               max);
    *out = v;
    return true;
}

/* {"service", "minutes": [minute, ...] oldest first, "current": the minute under way so
 * far, with its as_of and age_ms}: at most 1,440 small documents and the queue's counts
 * (node/status/counts_view.h: the primary's snapshot on a big queue, else measured now). */
static bool history(cohort_api_call_t *call)
{
    static const char *const known[] = {"minutes", NULL};
    char *values[1] = {NULL};
    if (!cohort_api_query(call->request->query, known, values, call->err))
        return false;
    int64_t minutes = 60;
    bool ok = true;
    if (values[0]) {
        ok = query_count(values[0], "minutes", HISTORY_MAX_MINUTES, &minutes, call->err);
    }
    cohort_api_query_free(values, 1);
    if (!ok)
        return false;
    bson_error_t error;
    int64_t now = 0;
    if (!cohort_store_server_time(call->store, call->client, &now, &error))
        return cohort_api_fail_store(call->err, &error, "cannot read the history");
    int64_t minute = now - now % COHORT_MINUTE_MS;
    cohort_minute_t current;
    bson_t snap;
    if (!cohort_counts_view_get(call->store, call->client, call->route->service, &snap,
                                &error)) {
        bson_destroy(&snap);
        return cohort_api_fail_store(call->err, &error, "cannot read the history");
    }
    cohort_counts_minute(&snap, &current);
    bson_t *body = &call->reply->body, array, cur;
    BSON_APPEND_UTF8(body, "service", call->route->service);
    cohort_json_append_time(body, "now", now);
    BSON_APPEND_ARRAY_BEGIN(body, "minutes", &array);
    minutes_walk_t w = {.array = &array};
    ok = cohort_store_each_minute(call->store, call->client, call->route->service,
                                  minute - minutes * COHORT_MINUTE_MS, minutes, one_minute, &w,
                                  &error);
    bson_append_array_end(body, &array);
    if (!ok) {
        bson_destroy(&snap);
        return cohort_api_fail_store(call->err, &error, "cannot read the history");
    }
    BSON_APPEND_DOCUMENT_BEGIN(body, "current", &cur);
    append_minute(&cur, &current);
    cohort_counts_view_append_age(&cur, "", &snap);
    bson_append_document_end(body, &cur);
    bson_destroy(&snap);
    call->reply->status = 200;
    return true;
}

void cohort_api_ui_audit(cohort_store_t *store, mongoc_client_t *client,
                         const cohort_api_request_t *request, const cohort_api_caller_t *caller,
                         const cohort_api_route_t *route, int status, const char *code,
                         int64_t unrecorded, const bson_t *reply_body)
{
    bson_t entry = BSON_INITIALIZER, body;
    BSON_APPEND_UTF8(&entry, "who", caller->name);
    BSON_APPEND_UTF8(&entry, "via", caller->session ? "session" : "token");
    BSON_APPEND_UTF8(&entry, "method", request->method);
    BSON_APPEND_UTF8(&entry, "path", request->path);
    if (route->service[0])
        BSON_APPEND_UTF8(&entry, "service", route->service);
    if (route->task_id[0])
        BSON_APPEND_UTF8(&entry, "task_id", route->task_id);
    bson_error_t error;
    if (request->body_len && request->body_len <= AUDIT_BODY_MAX &&
        cohort_json_parse_object(request->body, (ssize_t)request->body_len,
                                 COHORT_API_BODY_DEPTH_MAX, &body, &error)) { /* storable */
        BSON_APPEND_DOCUMENT(&entry, "body", &body);
        bson_destroy(&body);
    } else if (request->body_len) {
        BSON_APPEND_INT64(&entry, "body_bytes", (int64_t)request->body_len);
    }
    BSON_APPEND_INT32(&entry, "status", status);
    if (code)
        BSON_APPEND_UTF8(&entry, "error", code);
    if (unrecorded > 0)
        BSON_APPEND_INT64(&entry, "unrecorded", unrecorded);
    bson_iter_t it; /* a resume or unblock that found nothing to undo: not "succeeded" */
    if (reply_body && bson_iter_init_find(&it, reply_body, "changed") &&
        BSON_ITER_HOLDS_BOOL(&it) && !bson_iter_bool(&it))
        BSON_APPEND_BOOL(&entry, "changed", false);
    if (!cohort_store_audit(store, client, &entry, cohort_clock_cluster_ms(), &error))
        cohort_log_node(COHORT_LOG_WARN, "api: cannot record %s %s by '%s' in the audit: %s",
                        request->method, request->path, caller->name, error.message);
    bson_destroy(&entry);
}

typedef struct audit_walk {
    bson_t *array;
    uint32_t n;
    bson_oid_t last;
} audit_walk_t;

/* Copies `key` of `doc` into `out` if present. */
static void copy_key(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key))
        bson_append_value(out, key, -1, bson_iter_value(&it));
}

static bool one_entry(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    audit_walk_t *w = user;
    bson_t out;
    bson_iter_t it;
    cohort_json_array_begin_document(w->array, &w->n, &out);
    if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it)) {
        char id[25];
        bson_oid_copy(bson_iter_oid(&it), &w->last);
        bson_oid_to_string(&w->last, id);
        BSON_APPEND_UTF8(&out, "id", id);
    }
    if (bson_iter_init_find(&it, doc, "at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        cohort_json_append_time(&out, "at", bson_iter_date_time(&it));
    static const char *const keys[] = {"who",  "via",        "method", "path",  "service", "task_id",
                                       "body", "body_bytes", "status", "error", "changed"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        copy_key(doc, keys[i], &out);
    bson_append_document_end(w->array, &out);
    return true;
}

/* {"entries": [...] newest first, "next": id | null}: pass `next` as `before` for older ones. */
static bool audit(cohort_api_call_t *call)
{
    static const char *const known[] = {"limit", "before", NULL};
    char *values[2] = {NULL, NULL};
    if (!cohort_api_query(call->request->query, known, values, call->err))
        return false;
    int64_t limit = COHORT_API_LIST_DEFAULT;
    bson_oid_t before;
    bool ok = true;
    if (values[0]) {
        ok = query_count(values[0], "limit", AUDIT_PAGE_MAX, &limit, call->err);
    }
    if (ok && values[1]) {
        if (strlen(values[1]) != 24 || !bson_oid_is_valid(values[1], 24))
            ok = cohort_api_fail(call->err, 400, "bad_request",
                                 "before must be an entry's id (24 hex digits)");
        else
            bson_oid_init_from_string(&before, values[1]);
    }
    bool has_before = ok && values[1];
    cohort_api_query_free(values, 2);
    if (!ok)
        return false;
    bson_t array;
    bson_error_t error;
    BSON_APPEND_ARRAY_BEGIN(&call->reply->body, "entries", &array);
    audit_walk_t w = {.array = &array};
    ok = cohort_store_each_audit(call->store, call->client, has_before ? &before : NULL, limit,
                                 one_entry, &w, &error);
    bson_append_array_end(&call->reply->body, &array);
    if (!ok)
        return cohort_api_fail_store(call->err, &error, "cannot read the audit");
    if ((int64_t)w.n == limit) {
        char id[25];
        bson_oid_to_string(&w.last, id);
        BSON_APPEND_UTF8(&call->reply->body, "next", id);
    } else {
        BSON_APPEND_NULL(&call->reply->body, "next");
    }
    call->reply->status = 200;
    return true;
}

/* Appends sub-document `field` of `doc` as `key`, its dates as ISO-8601 text; null if
 * absent. */
static void append_doc_iso(bson_t *out, const char *key, const bson_t *doc, const char *field)
{
    bson_iter_t it, sub;
    if (!bson_iter_init_find(&it, doc, field) || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &sub)) {
        BSON_APPEND_NULL(out, key);
        return;
    }
    bson_t child;
    BSON_APPEND_DOCUMENT_BEGIN(out, key, &child);
    while (bson_iter_next(&sub)) {
        if (BSON_ITER_HOLDS_DATE_TIME(&sub))
            cohort_json_append_time(&child, bson_iter_key(&sub), bson_iter_date_time(&sub));
        else
            bson_append_value(&child, bson_iter_key(&sub), -1, bson_iter_value(&sub));
    }
    bson_append_document_end(out, &child);
}

static int64_t doc_int(const bson_t *doc, const char *dotted, int64_t fallback)
{
    bson_iter_t it, found;
    return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, dotted, &found) &&
                   BSON_ITER_HOLDS_NUMBER(&found)
               ? bson_iter_as_int64(&found)
               : fallback;
}

/* {"service", "open": seq | null, "draining": seq | null, "completed": n, "last": {seq,
 * succeeded, failed, completed_by, epoch, completed_at} | null, "elected_at"}: the tracked
 * batches as the service's config document holds them (one read by _id). */
static bool batches(cohort_api_call_t *call)
{
    bson_t doc;
    bool found = false;
    bson_error_t error;
    if (!cohort_store_read_service(call->store, call->client, call->route->service, &doc,
                                   &found, &error)) {
        bson_destroy(&doc);
        return cohort_api_fail_store(call->err, &error, "cannot read the service");
    }
    if (!found) {
        bson_destroy(&doc);
        return cohort_api_fail(call->err, 404, "not_found", "no service '%s' (no node has run it)",
                               call->route->service);
    }
    bson_t *body = &call->reply->body;
    BSON_APPEND_UTF8(body, "service", call->route->service);
    int64_t open = doc_int(&doc, "batch_seq", -1), draining = doc_int(&doc, "draining.seq", -1);
    if (open >= 0)
        BSON_APPEND_INT64(body, "open", open);
    else
        BSON_APPEND_NULL(body, "open");
    if (draining >= 0)
        BSON_APPEND_INT64(body, "draining", draining);
    else
        BSON_APPEND_NULL(body, "draining");
    BSON_APPEND_INT64(body, "completed", doc_int(&doc, "batches_completed", 0));
    append_doc_iso(body, "last", &doc, "last_batch");
    bson_iter_t it;
    if (bson_iter_init_find(&it, &doc, "elected_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        cohort_json_append_time(body, "elected_at", bson_iter_date_time(&it));
    else
        BSON_APPEND_NULL(body, "elected_at");
    bson_destroy(&doc);
    call->reply->status = 200;
    return true;
}

/* Appends the snapshot's due kinds ({kind, due, oldest_due_at} each, store/queue_counts.h)
 * to `array`, their dates as ISO-8601 text; returns its `due.more`. */
static bool append_due_kinds(bson_t *array, const bson_t *snap)
{
    bson_iter_t it, row;
    bson_t kinds;
    uint32_t len = 0;
    const uint8_t *data = NULL;
    if (bson_iter_init(&it, snap) && bson_iter_find_descendant(&it, "due.kinds", &it) &&
        BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_array(&it, &len, &data);
        if (bson_init_static(&kinds, data, len) && bson_iter_init(&row, &kinds))
            while (bson_iter_next(&row))
                append_doc_iso(array, bson_iter_key(&row), &kinds, bson_iter_key(&row));
    }
    return bson_iter_init(&it, snap) && bson_iter_find_descendant(&it, "due.more", &it) &&
           BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
}

/* {"service", "now", "kinds": [{"kind", "due", "oldest_due_at"}] most due first, "more",
 * "as_of", "age_ms"}: the due pending tasks by kind (the dashboard's "no worker for this kind"
 * warning), at most COHORT_COUNTS_DUE_KINDS_MAX kinds, measured with the queue's counts
 * (node/status/counts_view.h: the primary's snapshot on a big queue, else measured now). */
static bool due(cohort_api_call_t *call)
{
    if (call->request->query && *call->request->query)
        return cohort_api_fail(call->err, 400, "bad_request",
                               "GET .../due takes no query parameters");
    bson_error_t error;
    int64_t now = 0;
    if (!cohort_api_service_exists(call))
        return false;
    if (!cohort_store_server_time(call->store, call->client, &now, &error))
        return cohort_api_fail_store(call->err, &error, "cannot read the due tasks");
    bson_t snap;
    if (!cohort_counts_view_get(call->store, call->client, call->route->service, &snap, &error)) {
        bson_destroy(&snap);
        return cohort_api_fail_store(call->err, &error, "cannot read the due tasks");
    }
    bson_t *body = &call->reply->body, array;
    BSON_APPEND_UTF8(body, "service", call->route->service);
    cohort_json_append_time(body, "now", now);
    BSON_APPEND_ARRAY_BEGIN(body, "kinds", &array);
    bool more = append_due_kinds(&array, &snap);
    bson_append_array_end(body, &array);
    BSON_APPEND_BOOL(body, "more", more);
    cohort_counts_view_append_age(body, "", &snap);
    bson_destroy(&snap);
    call->reply->status = 200;
    return true;
}

bool cohort_api_ui_dispatch(cohort_api_call_t *call)
{
    switch (call->route->endpoint) {
    case COHORT_API_WHOAMI:
        return whoami(call);
    case COHORT_API_NODES:
        return nodes(call);
    case COHORT_API_HISTORY:
        return history(call);
    case COHORT_API_KINDS:
        return cohort_api_kinds(call);
    case COHORT_API_HISTORY_HOURS:
        return cohort_api_history_hours(call);
    case COHORT_API_AUDIT:
        return audit(call);
    case COHORT_API_BATCHES:
        return batches(call);
    case COHORT_API_DUE:
        return due(call);
    default:
        return cohort_api_fail(call->err, 404, "not_found", "no such path");
    }
}
