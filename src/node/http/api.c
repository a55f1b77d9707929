/*
 * api.c - the HTTP API v1 (see api.h): authenticate, route, check the scope, run the
 * endpoint (api_tasks.c; the operators' in api_ops.c), and shape every refusal as
 * {"error": {"code", "message"}}.
 *
 * The token is checked before the path is even looked at, so a caller without a token
 * learns nothing but 401.
 *
 * Every request to an operator endpoint is audited, refused ones included. Those refused
 * before a caller is known (401, a cross-site session request) are bounded, since anyone can
 * send them: at most one such entry per node and kind (401, cross-site) every
 * UNKNOWN_AUDIT_EVERY_MS, so a flood of one kind does not hide the other; the ones in between
 * are counted, and the count rides on the next entry of that kind written (`unrecorded`).
 *
 * GET /api/v1/openapi.yaml answers docs/openapi.yaml as the build embedded it, to any caller
 * with a valid token or session. With COHORT_API_RECORD set, every reply is also recorded for
 * the contract test (api_record.h).
 */
#include "node/http/api.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/token.h"
#include "node/http/api_auth.h"
#include "node/http/api_ops.h"
#include "node/http/api_parse.h"
#include "node/http/api_record.h"
#include "node/http/api_session.h"
#include "node/http/api_tasks.h"
#include "node/http/api_ui.h"
#include "node/http/api_workers.h"
#include "node/http/ui_assets.h"

#define UNKNOWN_AUDIT_EVERY_MS 60000
#define OPENAPI_PATH "/api/v1/openapi.yaml"

struct cohort_api {
    cohort_api_options_t options;
    cohort_api_auth_t *auth;
    int record_fd; /* COHORT_API_RECORD's file (api_record.h), or -1 */
    pthread_mutex_t unknown_lock; /* guards the three below; never held across a call */
    /* Per kind of refusal of an unknown caller (0: 401, 1: cross-site): */
    bool unknown_audited[2];       /* one was audited already */
    int64_t unknown_audited_ms[2]; /* monotonic: when the last one was */
    int64_t unknown_unrecorded[2]; /* those refused since, not audited */
};

cohort_api_t *cohort_api_new(const cohort_api_options_t *options)
{
    cohort_api_t *api = calloc(1, sizeof *api);
    if (!api)
        return NULL;
    api->options = *options;
    api->auth = cohort_api_auth_new(options->store, options->token_ttl_ms);
    if (!api->auth) {
        free(api);
        return NULL;
    }
    pthread_mutex_init(&api->unknown_lock, NULL);
    api->record_fd = cohort_api_record_open();
    return api;
}

void cohort_api_destroy(cohort_api_t *api)
{
    if (!api)
        return;
    cohort_api_auth_destroy(api->auth);
    if (api->record_fd >= 0)
        close(api->record_fd);
    pthread_mutex_destroy(&api->unknown_lock);
    free(api);
}

void cohort_api_set_token_ttl(cohort_api_t *api, int64_t ttl_ms)
{
    cohort_api_auth_set_ttl(api->auth, ttl_ms);
}

/* The names of the scopes in `need`, for a 403's message. */
static const char *scope_name(uint32_t need)
{
    for (int i = 0; i < COHORT_SCOPE_COUNT; i++)
        if (need & (1u << i))
            return cohort_scope_names[i];
    return "admin";
}

/* docs/openapi.yaml, embedded at build time (cmake/embed_assets.cmake). */
static bool serve_openapi(cohort_api_call_t *call)
{
    if (cohort_api_doc_asset_count != 1)
        return cohort_api_fail(call->err, 500, "internal", "the build embedded no API document");
    call->reply->raw = cohort_api_doc_assets[0].bytes;
    call->reply->raw_len = cohort_api_doc_assets[0].len;
    call->reply->content_type = "application/yaml";
    call->reply->status = 200;
    return true;
}

bool cohort_api_resolve(const char *method, const char *path, cohort_api_route_t *route,
                        cohort_api_error_t *err)
{
    bool doc = strcmp(path, OPENAPI_PATH) == 0, session = cohort_api_session_path(path);
    if (doc || session) {
        memset(route, 0, sizeof *route);
        route->allow = doc ? "GET" : COHORT_API_SESSION_ALLOW;
        route->endpoint = doc ? COHORT_API_OPENAPI : COHORT_API_SESSION;
        bool allowed = doc ? strcmp(method, "GET") == 0
                           : strcmp(method, "POST") == 0 || strcmp(method, "DELETE") == 0;
        return allowed || cohort_api_fail(err, 405, "method_not_allowed",
                                          "%s is not allowed here: use %s", method,
                                          route->allow);
    }
    return cohort_api_ui_owns(path) ? cohort_api_ui_route(method, path, route, err)
                                    : cohort_api_route(method, path, route, err);
}

static bool dispatch(cohort_api_call_t *call)
{
    switch (call->route->endpoint) {
    case COHORT_API_SERVICES:
        return cohort_api_list_services(call);
    case COHORT_API_TASKS_LIST:
        return cohort_api_list_tasks(call);
    case COHORT_API_TASKS_CREATE:
        return cohort_api_create_task(call);
    case COHORT_API_TASKS_BATCH:
        return cohort_api_create_tasks(call);
    case COHORT_API_TASK:
        return cohort_api_read_task(call);
    case COHORT_API_COUNTS:
        return cohort_api_count_tasks(call);
    case COHORT_API_PAUSE:
    case COHORT_API_RESUME:
    case COHORT_API_BLOCK:
    case COHORT_API_UNBLOCK:
        return cohort_api_switch(call);
    case COHORT_API_CLAIMS:
        return cohort_api_claim(call);
    case COHORT_API_LEASE_HEARTBEAT:
        return cohort_api_heartbeat(call);
    case COHORT_API_LEASE_SUCCEED:
    case COHORT_API_LEASE_FAIL:
    case COHORT_API_LEASE_RELEASE:
        return cohort_api_lease_outcome(call);
    case COHORT_API_SCHEDULES:
        return cohort_api_list_schedules(call);
    case COHORT_API_SCHEDULE_PAUSE:
    case COHORT_API_SCHEDULE_RESUME:
        return cohort_api_pause_schedule(call);
    case COHORT_API_TASK_RETRY:
    case COHORT_API_TASK_CANCEL:
    case COHORT_API_TASK_DELETE:
        return cohort_api_change_task(call);
    case COHORT_API_TASKS_BULK:
        return cohort_api_change_tasks(call);
    case COHORT_API_SETTINGS:
        return cohort_api_read_settings(call);
    case COHORT_API_SETTINGS_WRITE:
        return cohort_api_write_settings(call);
    case COHORT_API_WHOAMI:
    case COHORT_API_NODES:
    case COHORT_API_HISTORY:
    case COHORT_API_KINDS:
    case COHORT_API_HISTORY_HOURS:
    case COHORT_API_AUDIT:
    case COHORT_API_BATCHES:
    case COHORT_API_DUE:
        return cohort_api_ui_dispatch(call);
    case COHORT_API_OPENAPI:
        return serve_openapi(call);
    case COHORT_API_SESSION: /* answered before authentication */
        break;
    }
    return cohort_api_fail(call->err, 404, "not_found", "no such path");
}

/* A query value holding %00 would be cut there when decoded: refused whole instead, naming
 * the parameter. */
static bool query_without_nul(const char *query, cohort_api_error_t *err)
{
    const char *nul = query ? strstr(query, "%00") : NULL;
    if (!nul)
        return true;
    const char *start = nul;
    while (start > query && start[-1] != '&')
        start--;
    size_t key = strcspn(start, "=&");
    if (start + key > nul)
        key = (size_t)(nul - start); /* the %00 is in the name itself */
    return cohort_api_fail(err, 400, "bad_request",
                           "query parameter '%.*s' holds %%00 (a NUL byte), which no value may",
                           (int)(key > 64 ? 64 : key), start);
}

/* A request refused before its caller was known (`err`): audited if it was for an operator
 * endpoint, at most once per UNKNOWN_AUDIT_EVERY_MS (see the top). */
static void audit_unknown(cohort_api_t *api, mongoc_client_t *client,
                          const cohort_api_request_t *request, const cohort_api_error_t *err)
{
    if (err->status != 401 && !(err->code && strcmp(err->code, "cross_site") == 0))
        return;
    cohort_api_route_t route;
    cohort_api_error_t ignored;
    bool known = cohort_api_resolve(request->method, request->path, &route, &ignored);
    if (!known || route.scope != COHORT_SCOPE_OPERATE)
        return;
    int kind = err->status == 401 ? 0 : 1;
    int64_t now = cohort_clock_monotonic_ms(), unrecorded = -1;
    pthread_mutex_lock(&api->unknown_lock);
    if (!api->unknown_audited[kind] ||
        now - api->unknown_audited_ms[kind] >= UNKNOWN_AUDIT_EVERY_MS) {
        unrecorded = api->unknown_unrecorded[kind];
        api->unknown_unrecorded[kind] = 0;
        api->unknown_audited_ms[kind] = now;
        api->unknown_audited[kind] = true;
    } else {
        api->unknown_unrecorded[kind]++;
    }
    pthread_mutex_unlock(&api->unknown_lock);
    if (unrecorded < 0)
        return;
    cohort_api_caller_t nobody = {.name = "",
                                  .session = !request->authorization && request->cookie};
    cohort_api_ui_audit(api->options.store, client, request, &nobody, &route, err->status,
                        err->code, unrecorded, NULL);
}

/* Replaces whatever the endpoint began with the error document. */
static void reply_error(cohort_api_reply_t *reply, const cohort_api_error_t *err)
{
    bson_reinit(&reply->body);
    reply->raw = NULL;
    bson_t e;
    BSON_APPEND_DOCUMENT_BEGIN(&reply->body, "error", &e);
    BSON_APPEND_UTF8(&e, "code", err->code ? err->code : "internal");
    BSON_APPEND_UTF8(&e, "message", err->message);
    bson_append_document_end(&reply->body, &e);
    reply->status = err->status ? err->status : 500;
}

void cohort_api_give_back(cohort_api_t *api, mongoc_client_t *client, cohort_api_reply_t *reply)
{
    cohort_api_claim_give_back(api->options.store, client, api->options.services,
                               api->options.n_services, reply);
}

/* cohort_api_handle() but for the record. */
static void answer(cohort_api_t *api, mongoc_client_t *client, const cohort_api_request_t *request,
                   cohort_api_reply_t *reply)
{
    memset(reply, 0, sizeof *reply);
    bson_init(&reply->body);
    reply->status = 500;
    cohort_api_error_t err = {.status = 500, .code = "internal"};
    cohort_api_caller_t caller = {.name = ""};
    cohort_api_route_t route;
    memset(&route, 0, sizeof route);
    /* A write stamps times (due, lease, expiry) on the cluster clock: none before this node
     * has measured it (its own clock may be minutes off; node.c syncs it on every ping). */
    if (strcmp(request->method, "GET") != 0 && strcmp(request->method, "HEAD") != 0 &&
        !cohort_clock_synced()) {
        cohort_api_fail(&err, 503, "unavailable",
                        "this node has not measured the cluster clock yet (it just started, "
                        "or the database is slow or away): retry shortly");
        reply_error(reply, &err);
        return;
    }
    if (cohort_api_session_path(request->path)) { /* sign-in: before any authentication */
        if (!cohort_api_session_handle(api->options.store, api->auth, client, request, reply,
                                       &err))
            reply_error(reply, &err);
        return;
    }
    bool known = cohort_api_authenticate_request(api->auth, api->options.store, client, request,
                                                 &caller, &err);
    if (!known)
        audit_unknown(api, client, request, &err);
    bool ok = known && query_without_nul(request->query, &err) &&
              cohort_api_resolve(request->method, request->path, &route, &err);
    if (ok && !cohort_scopes_allow(caller.scopes, route.scope))
        ok = cohort_api_fail(&err, 403, "forbidden", "token '%s' lacks the scope '%s'",
                             caller.name, scope_name(route.scope));
    if (ok) {
        cohort_api_call_t call = {.store = api->options.store,
                                  .client = client,
                                  .config = api->options.config,
                                  .services = api->options.services,
                                  .n_services = api->options.n_services,
                                  .max_wait_ms = api->options.max_wait_ms,
                                  .request = request,
                                  .route = &route,
                                  .caller = &caller,
                                  .reply = reply,
                                  .err = &err};
        ok = dispatch(&call);
    }
    if (!ok && err.status == 405)
        reply->allow = route.allow;
    if (!ok) {
        reply->hold_ms = 0;
        reply_error(reply, &err);
    }
    /* Every operator action, done or refused, in the audit trail (node/http/api_ui.h). */
    if (route.scope == COHORT_SCOPE_OPERATE && caller.name[0])
        cohort_api_ui_audit(api->options.store, client, request, &caller, &route, reply->status,
                            ok ? NULL : err.code, 0, ok ? &reply->body : NULL);
}

void cohort_api_handle(cohort_api_t *api, mongoc_client_t *client,
                       const cohort_api_request_t *request, cohort_api_reply_t *reply)
{
    answer(api, client, request, reply);
    cohort_api_record(api->record_fd, request, reply);
}
