/*
 * api_ui.c - the API endpoints added for the dashboard (see api_ui.h). They answer any
 * caller, token or session alike.
 */
#include "node/api_ui.h"

#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/status.h"
#include "core/token.h"
#include "node/api_json.h"
#include "node/node_status.h"
#include "store/history.h"
#include "store/listing.h"

#define WHOAMI "/api/v1/whoami"
#define NODES "/api/v1/nodes"
#define DAY_MS 86400000

#define SERVICES "/api/v1/services/"
#define HISTORY_SUFFIX "/history"
#define HISTORY_MAX_MINUTES 1440

/* Whether `path` is /api/v1/services/{anything}/history. */
static bool history_path(const char *path)
{
    size_t n = strlen(path), p = strlen(SERVICES), s = strlen(HISTORY_SUFFIX);
    return n > p + s && strncmp(path, SERVICES, p) == 0 &&
           strcmp(path + n - s, HISTORY_SUFFIX) == 0 && !memchr(path + p, '/', n - p - s);
}

bool cohort_api_ui_owns(const char *path)
{
    return path && (strcmp(path, WHOAMI) == 0 || strcmp(path, NODES) == 0 || history_path(path));
}

bool cohort_api_ui_route(const char *method, const char *path, cohort_api_route_t *route,
                         cohort_api_error_t *err)
{
    memset(route, 0, sizeof *route);
    route->allow = "GET";
    if (history_path(path)) {
        size_t len = strlen(path) - strlen(SERVICES) - strlen(HISTORY_SUFFIX);
        if (len >= sizeof route->service)
            return cohort_api_fail(err, 400, "bad_request",
                                   "the service name in the path must be 1-64 of [A-Za-z0-9_-]");
        memcpy(route->service, path + strlen(SERVICES), len);
        route->service[len] = '\0';
        if (!cohort_config_valid_service_name(route->service))
            return cohort_api_fail(err, 400, "bad_request",
                                   "the service name in the path must be 1-64 of [A-Za-z0-9_-]");
        if (strcmp(method, "GET") != 0)
            return cohort_api_fail(err, 405, "method_not_allowed",
                                   "%s is not allowed here: use GET", method);
        route->endpoint = COHORT_API_HISTORY;
        route->scope = COHORT_SCOPE_READ;
        return true;
    }
    bool me = strcmp(path, WHOAMI) == 0;
    if (!me && strcmp(path, NODES) != 0)
        return cohort_api_fail(err, 404, "not_found", "no such path");
    if (strcmp(method, "GET") != 0)
        return cohort_api_fail(err, 405, "method_not_allowed", "%s is not allowed here: use GET",
                               method);
    route->endpoint = me ? COHORT_API_WHOAMI : COHORT_API_NODES;
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

/* {"service", "minutes": [minute, ...] oldest first, "current": the minute under way so
 * far}: at most 1,440 small documents and five indexed counts. */
static bool history(cohort_api_call_t *call)
{
    static const char *const known[] = {"minutes", NULL};
    char *values[1] = {NULL};
    if (!cohort_api_query(call->request->query, known, values, call->err))
        return false;
    int64_t minutes = 60;
    bool ok = true;
    if (values[0]) {
        char *end = NULL;
        long long v = strtoll(values[0], &end, 10);
        if (!*values[0] || *end || v < 1 || v > HISTORY_MAX_MINUTES)
            ok = cohort_api_fail(call->err, 400, "bad_request",
                                 "minutes must be an integer from 1 to %d",
                                 HISTORY_MAX_MINUTES);
        minutes = v;
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
    if (!cohort_store_measure_minute(call->store, call->client, call->route->service, minute,
                                     &current, &error))
        return cohort_api_fail_store(call->err, &error, "cannot read the history");
    bson_t *body = &call->reply->body, array, cur;
    BSON_APPEND_UTF8(body, "service", call->route->service);
    BSON_APPEND_ARRAY_BEGIN(body, "minutes", &array);
    minutes_walk_t w = {.array = &array};
    ok = cohort_store_each_minute(call->store, call->client, call->route->service,
                                  minute - minutes * COHORT_MINUTE_MS, minutes, one_minute, &w,
                                  &error);
    bson_append_array_end(body, &array);
    if (!ok)
        return cohort_api_fail_store(call->err, &error, "cannot read the history");
    BSON_APPEND_DOCUMENT_BEGIN(body, "current", &cur);
    append_minute(&cur, &current);
    bson_append_document_end(body, &cur);
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
    default:
        return cohort_api_fail(call->err, 404, "not_found", "no such path");
    }
}
