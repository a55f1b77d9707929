/*
 * api_ui.c - the API endpoints added for the dashboard (see api_ui.h). They answer any
 * caller, token or session alike.
 */
#include "node/api_ui.h"

#include <string.h>

#include "core/token.h"
#include "core/config.h"
#include "node/api_json.h"
#include "node/node_status.h"
#include "store/listing.h"

#define WHOAMI "/api/v1/whoami"
#define NODES "/api/v1/nodes"
#define DAY_MS 86400000

bool cohort_api_ui_owns(const char *path)
{
    return path && (strcmp(path, WHOAMI) == 0 || strcmp(path, NODES) == 0);
}

bool cohort_api_ui_route(const char *method, const char *path, cohort_api_route_t *route,
                         cohort_api_error_t *err)
{
    memset(route, 0, sizeof *route);
    route->allow = "GET";
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

bool cohort_api_ui_dispatch(cohort_api_call_t *call)
{
    switch (call->route->endpoint) {
    case COHORT_API_WHOAMI:
        return whoami(call);
    case COHORT_API_NODES:
        return nodes(call);
    default:
        return cohort_api_fail(call->err, 404, "not_found", "no such path");
    }
}
