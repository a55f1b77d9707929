/*
 * api_ui.c - the API endpoints added for the dashboard (see api_ui.h). They answer any
 * caller, token or session alike.
 */
#include "node/api_ui.h"

#include <string.h>

#include "core/token.h"
#include "node/api_json.h"

#define WHOAMI "/api/v1/whoami"

bool cohort_api_ui_owns(const char *path)
{
    return path && strcmp(path, WHOAMI) == 0;
}

bool cohort_api_ui_route(const char *method, const char *path, cohort_api_route_t *route,
                         cohort_api_error_t *err)
{
    memset(route, 0, sizeof *route);
    route->allow = "GET";
    if (strcmp(path, WHOAMI) != 0)
        return cohort_api_fail(err, 404, "not_found", "no such path");
    if (strcmp(method, "GET") != 0)
        return cohort_api_fail(err, 405, "method_not_allowed", "%s is not allowed here: use GET",
                               method);
    route->endpoint = COHORT_API_WHOAMI;
    route->scope = 0; /* any caller may ask who it is */
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

bool cohort_api_ui_dispatch(cohort_api_call_t *call)
{
    switch (call->route->endpoint) {
    case COHORT_API_WHOAMI:
        return whoami(call);
    default:
        return cohort_api_fail(call->err, 404, "not_found", "no such path");
    }
}
