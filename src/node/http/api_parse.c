/*
 * api_parse.c - reading HTTP API requests (see api_parse.h): routes, query strings, JSON
 * bodies. Nothing here allocates beyond the documents it hands back, and nothing trusts a
 * length it did not check.
 */
#include "node/http/api_parse.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <ctype.h>
#include <stdarg.h>
#include <sys/queue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/jsondoc.h"
#include "core/schedule.h"
#include "core/status.h"
#include "core/timefmt.h"
#include "core/token.h"
#include "store/leases.h"

#define API_PREFIX "/api/v1/"
#define CURSOR_PREFIX "c1."
#define LEASE_PREFIX "l1."

bool cohort_api_fail(cohort_api_error_t *err, int status, const char *code, const char *fmt, ...)
{
    err->status = status;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return false;
}

#define bad_request(err, ...) cohort_api_fail((err), 400, "bad_request", __VA_ARGS__)

bool cohort_api_body_iter(const bson_t *body, bson_iter_t *it, cohort_api_error_t *err)
{
    return bson_iter_init(it, body) || bad_request(err, "the body is not a valid document");
}

/* ---- routes ---------------------------------------------------------------------------- */

/* The text up to the next `sep` (or the end) into `out`, and *p past the `sep`; false if it is
 * too long for `out` (len - 1 bytes) or empty when `nonempty`. */
static bool next_part(const char **p, char sep, bool nonempty, char *out, size_t len)
{
    const char stop[2] = {sep, '\0'};
    size_t n = strcspn(*p, stop);
    if ((nonempty && n == 0) || n >= len)
        return false;
    memcpy(out, *p, n);
    out[n] = '\0';
    *p += n;
    if (**p == sep)
        (*p)++;
    return true;
}

/* The path's next segment (up to '/' or the end) into `out`; false if it is too long. */
static bool next_segment(const char **p, char *out, size_t len)
{
    return next_part(p, '/', false, out, len);
}

/* Sets the route's endpoint if `method` is `want`, else a 405 allowing `allow`. */
static bool pick(const char *method, const char *want, cohort_api_endpoint_t endpoint,
                 uint32_t scope, const char *allow, cohort_api_route_t *route,
                 cohort_api_error_t *err)
{
    route->allow = allow;
    if (strcmp(method, want) != 0)
        return cohort_api_fail(err, 405, "method_not_allowed", "%s is not allowed here: use %s",
                               method, allow);
    route->endpoint = endpoint;
    route->scope = scope;
    return true;
}

/* GET or POST on .../tasks */
static bool route_tasks(const char *method, cohort_api_route_t *route, cohort_api_error_t *err)
{
    route->allow = "GET, POST";
    if (strcmp(method, "GET") == 0)
        return pick(method, "GET", COHORT_API_TASKS_LIST, COHORT_SCOPE_READ, "GET, POST", route,
                    err);
    return pick(method, "POST", COHORT_API_TASKS_CREATE, COHORT_SCOPE_ENQUEUE, "GET, POST",
                route, err);
}

/* .../tasks/{id} (GET, DELETE) and .../tasks/{id}/retry|cancel (POST); `rest` follows the id */
static bool route_task(const char *method, const char *rest, cohort_api_route_t *route,
                       cohort_api_error_t *err)
{
    if (!*rest) {
        if (strcmp(method, "DELETE") == 0)
            return pick(method, "DELETE", COHORT_API_TASK_DELETE, COHORT_SCOPE_OPERATE,
                        "GET, DELETE", route, err);
        return pick(method, "GET", COHORT_API_TASK, COHORT_SCOPE_READ, "GET, DELETE", route,
                    err);
    }
    if (strcmp(rest, "retry") == 0)
        return pick(method, "POST", COHORT_API_TASK_RETRY, COHORT_SCOPE_OPERATE, "POST", route,
                    err);
    if (strcmp(rest, "cancel") == 0)
        return pick(method, "POST", COHORT_API_TASK_CANCEL, COHORT_SCOPE_OPERATE, "POST", route,
                    err);
    return cohort_api_fail(err, 404, "not_found", "no such path");
}

/* .../settings: GET reads (read); PATCH or POST changes (operate). */
static bool route_settings(const char *method, cohort_api_route_t *route,
                           cohort_api_error_t *err)
{
    static const char allow[] = "GET, PATCH, POST";
    if (strcmp(method, "PATCH") == 0 || strcmp(method, "POST") == 0)
        return pick(method, method, COHORT_API_SETTINGS_WRITE, COHORT_SCOPE_OPERATE, allow,
                    route, err);
    return pick(method, "GET", COHORT_API_SETTINGS, COHORT_SCOPE_READ, allow, route, err);
}

/* .../schedules/{id}/pause|resume (POST, operate); `p` follows "schedules/" */
static bool route_schedule(const char *method, const char *p, cohort_api_route_t *route,
                           cohort_api_error_t *err)
{
    char id[80], verb[16];
    if (!next_segment(&p, id, sizeof id) || !cohort_schedule_valid_id(id))
        return bad_request(err, "the schedule id in the path must be 1-64 of [A-Za-z0-9_-]");
    if (!next_segment(&p, verb, sizeof verb) || *p ||
        (strcmp(verb, "pause") != 0 && strcmp(verb, "resume") != 0))
        return cohort_api_fail(err, 404, "not_found",
                               "no such path: a schedule takes .../schedules/{id}/pause or "
                               "/resume");
    memcpy(route->schedule_id, id, strlen(id) + 1); /* a valid id has at most 64 bytes */
    bool pause = strcmp(verb, "pause") == 0;
    return pick(method, "POST", pause ? COHORT_API_SCHEDULE_PAUSE : COHORT_API_SCHEDULE_RESUME,
                COHORT_SCOPE_OPERATE, "POST", route, err);
}

/* What follows /api/v1/services/{svc}/ */
static bool route_service(const char *method, const char *rest, cohort_api_route_t *route,
                          cohort_api_error_t *err)
{
    char word[32], id[64];
    const char *p = rest;
    if (!next_segment(&p, word, sizeof word))
        return cohort_api_fail(err, 404, "not_found", "no such path");
    if (strcmp(word, "tasks") == 0 && !*p)
        return route_tasks(method, route, err);
    if (strcmp(word, "tasks:batch") == 0 && !*p)
        return pick(method, "POST", COHORT_API_TASKS_BATCH, COHORT_SCOPE_ENQUEUE, "POST", route,
                    err);
    if (strcmp(word, "counts") == 0 && !*p)
        return pick(method, "GET", COHORT_API_COUNTS, COHORT_SCOPE_READ, "GET", route, err);
    if (strcmp(word, "schedules") == 0 && !*p)
        return pick(method, "GET", COHORT_API_SCHEDULES, COHORT_SCOPE_READ, "GET", route, err);
    if (strcmp(word, "schedules") == 0)
        return route_schedule(method, p, route, err);
    if (strcmp(word, "pause") == 0 && !*p)
        return pick(method, "POST", COHORT_API_PAUSE, COHORT_SCOPE_OPERATE, "POST", route, err);
    if (strcmp(word, "resume") == 0 && !*p)
        return pick(method, "POST", COHORT_API_RESUME, COHORT_SCOPE_OPERATE, "POST", route, err);
    if (strcmp(word, "claims") == 0 && !*p)
        return pick(method, "POST", COHORT_API_CLAIMS, COHORT_SCOPE_WORK, "POST", route, err);
    if (strcmp(word, "tasks:bulk") == 0 && !*p)
        return pick(method, "POST", COHORT_API_TASKS_BULK, COHORT_SCOPE_OPERATE, "POST", route,
                    err);
    if (strcmp(word, "settings") == 0 && !*p)
        return route_settings(method, route, err);
    if (strcmp(word, "tasks") == 0) {
        if (!next_segment(&p, id, sizeof id) || !bson_oid_is_valid(id, strlen(id)))
            return bad_request(err, "the task id in the path must be 24 hex digits");
        memcpy(route->task_id, id, sizeof route->task_id); /* 24 digits and the NUL */
        return route_task(method, p, route, err);
    }
    return cohort_api_fail(err, 404, "not_found", "no such path");
}

/* What follows /api/v1/leases/: {token}/heartbeat|succeed|fail|release */
static bool route_lease(const char *method, const char *rest, cohort_api_route_t *route,
                        cohort_api_error_t *err)
{
    static const struct {
        const char *name;
        cohort_api_endpoint_t endpoint;
    } actions[] = {{"heartbeat", COHORT_API_LEASE_HEARTBEAT},
                   {"succeed", COHORT_API_LEASE_SUCCEED},
                   {"fail", COHORT_API_LEASE_FAIL},
                   {"release", COHORT_API_LEASE_RELEASE}};
    char token[COHORT_LEASE_TOKEN_MAX], action[16];
    const char *p = rest;
    if (!next_segment(&p, token, sizeof token) || !next_segment(&p, action, sizeof action) || *p)
        return cohort_api_fail(err, 404, "not_found",
                               "no such path: /api/v1/leases/{token}/heartbeat|succeed|fail|"
                               "release");
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
        if (strcmp(action, actions[i].name) != 0)
            continue;
        if (!cohort_lease_token_parse(token, &route->lease))
            return bad_request(err, "the lease token in the path is not one this API handed "
                                    "out");
        memcpy(route->service, route->lease.service, sizeof route->service);
        return pick(method, "POST", actions[i].endpoint, COHORT_SCOPE_WORK, "POST", route, err);
    }
    return cohort_api_fail(err, 404, "not_found",
                           "no such path: a lease takes heartbeat, succeed, fail or release");
}

bool cohort_api_route(const char *method, const char *path, cohort_api_route_t *route,
                      cohort_api_error_t *err)
{
    memset(route, 0, sizeof *route);
    if (strncmp(path, API_PREFIX, strlen(API_PREFIX)) != 0)
        return cohort_api_fail(err, 404, "not_found",
                               "no such path: the API's paths start with /api/v1/");
    const char *p = path + strlen(API_PREFIX);
    char word[16];
    if (!next_segment(&p, word, sizeof word))
        return cohort_api_fail(err, 404, "not_found", "no such path");
    if (strcmp(word, "leases") == 0)
        return route_lease(method, p, route, err);
    if (strcmp(word, "services") != 0)
        return cohort_api_fail(err, 404, "not_found", "no such path");
    if (!*p)
        return pick(method, "GET", COHORT_API_SERVICES, COHORT_SCOPE_READ, "GET", route, err);
    if (!next_segment(&p, route->service, sizeof route->service) ||
        !cohort_config_valid_service_name(route->service))
        return bad_request(err, "the service name in the path must be 1-64 of [A-Za-z0-9_-]");
    return route_service(method, p, route, err);
}

/* ---- lease tokens ---------------------------------------------------------------------- */

void cohort_lease_token_format(const cohort_lease_ref_t *ref, char *out, size_t len)
{
    snprintf(out, len, LEASE_PREFIX "%s.%s.%d.%s", ref->service, ref->task_id,
             (int)ref->attempt, ref->claim);
}

/* The next '.'-separated part of *p into `out` (1 to len - 1 bytes). */
static bool lease_part(const char **p, char *out, size_t len)
{
    return next_part(p, '.', true, out, len);
}

bool cohort_lease_token_parse(const char *text, cohort_lease_ref_t *ref)
{
    memset(ref, 0, sizeof *ref);
    if (strncmp(text, LEASE_PREFIX, strlen(LEASE_PREFIX)) != 0)
        return false;
    const char *p = text + strlen(LEASE_PREFIX);
    char attempt[12];
    if (!lease_part(&p, ref->service, sizeof ref->service) ||
        !lease_part(&p, ref->task_id, sizeof ref->task_id) ||
        !lease_part(&p, attempt, sizeof attempt) ||
        !lease_part(&p, ref->claim, sizeof ref->claim) || *p)
        return false;
    /* The claim: 32 hex digits (128 random bits), or an ObjectId's 24 from a node of an older
     * version during an upgrade (store/leases.c never lets one name a node's own claim). */
    size_t claim_len = strlen(ref->claim);
    if (!cohort_config_valid_service_name(ref->service) || strlen(ref->task_id) != 24 ||
        !bson_oid_is_valid(ref->task_id, 24) || (claim_len != 32 && claim_len != 24) ||
        strspn(ref->claim, "0123456789abcdef") != claim_len)
        return false;
    char *end = NULL;
    long v = strtol(attempt, &end, 10);
    if (*end || attempt[0] < '1' || attempt[0] > '9' || v < 1 || v > INT32_MAX)
        return false;
    ref->attempt = (int32_t)v;
    return true;
}

/* ---- query strings --------------------------------------------------------------------- */

void cohort_api_query_free(char **values, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(values[i]);
        values[i] = NULL;
    }
}

bool cohort_api_query(const char *query, const char *const *known, char **values,
                      cohort_api_error_t *err)
{
    size_t n = 0;
    while (known[n])
        values[n++] = NULL;
    if (!query || !*query)
        return true;
    struct evkeyvalq params;
    TAILQ_INIT(&params);
    if (evhttp_parse_query_str(query, &params) != 0)
        return bad_request(err, "the query string is malformed");
    bool ok = true;
    for (struct evkeyval *kv = params.tqh_first; ok && kv; kv = kv->next.tqe_next) {
        size_t i = 0;
        while (i < n && strcmp(kv->key, known[i]) != 0)
            i++;
        if (i == n)
            ok = bad_request(err, "unknown query parameter '%.64s'", kv->key);
        else if (values[i])
            ok = bad_request(err, "query parameter '%s' given twice", known[i]);
        else if (!(values[i] = strdup(kv->value)))
            ok = cohort_api_fail(err, 500, "internal", "out of memory");
    }
    evhttp_clear_headers(&params);
    if (!ok)
        cohort_api_query_free(values, n);
    return ok;
}

const char *const cohort_api_list_params[] = {"status",    "kind",       "group", "limit",
                                              "after",     "order",      "view",  "total",
                                              "data_path", "data_value", NULL};

void cohort_api_cursor_encode(const bson_oid_t *last, char *out, size_t len)
{
    char hex[25];
    bson_oid_to_string(last, hex);
    snprintf(out, len, CURSOR_PREFIX "%s", hex);
}

bool cohort_api_cursor_decode(const char *text, bson_oid_t *oid)
{
    size_t prefix = strlen(CURSOR_PREFIX);
    if (strncmp(text, CURSOR_PREFIX, prefix) != 0 || strlen(text) != prefix + 24 ||
        !bson_oid_is_valid(text + prefix, 24))
        return false;
    bson_oid_init_from_string(oid, text + prefix);
    return true;
}

/* A filter value of the listing: 1-512 bytes. */
static bool filter_value(const char *name, const char *value, cohort_api_error_t *err)
{
    size_t n = strlen(value);
    return (n >= 1 && n <= 512) ||
           bad_request(err, "query parameter '%s' must be 1 to 512 bytes", name);
}

/* The listing's order, view and total parameters (each optional). */
static bool parse_list_shape(const char *order, const char *view, const char *total,
                             cohort_api_list_t *list, cohort_api_error_t *err)
{
    if (order && strcmp(order, "newest") != 0 && strcmp(order, "oldest") != 0)
        return bad_request(err, "query parameter 'order' must be newest or oldest");
    list->newest_first = order && strcmp(order, "newest") == 0;
    if (view && strcmp(view, "retrying") == 0)
        list->view = COHORT_TASK_VIEW_RETRYING;
    else if (view && strcmp(view, "scheduled") == 0)
        list->view = COHORT_TASK_VIEW_SCHEDULED;
    else if (view)
        return bad_request(err, "query parameter 'view' must be retrying or scheduled");
    if (total && strcmp(total, "true") != 0 && strcmp(total, "false") != 0)
        return bad_request(err, "query parameter 'total' must be true or false");
    list->total = total && strcmp(total, "true") == 0;
    return true;
}

/* A search by task data: data_path is 1-8 dot-separated names of [A-Za-z0-9_-] (at most 200
 * bytes), data_value 1-512 bytes; both or neither, and no total (the search is bounded). */
static bool parse_data_search(const char *path, const char *value, cohort_api_list_t *list,
                              cohort_api_error_t *err)
{
    if (!path && !value)
        return true;
    if (!path || !value)
        return bad_request(err, "query parameters 'data_path' and 'data_value' go together");
    size_t n = strlen(path), names = 1;
    bool ok = n >= 1 && n <= 200 && path[0] != '.' && path[n - 1] != '.';
    for (size_t i = 0; ok && i < n; i++) {
        if (path[i] == '.')
            ok = path[i + 1] != '.' && ++names <= 8;
        else
            ok = isalnum((unsigned char)path[i]) || path[i] == '_' || path[i] == '-';
    }
    if (!ok)
        return bad_request(err, "query parameter 'data_path' must be 1-8 names of "
                                "[A-Za-z0-9_-] joined by '.' (at most 200 bytes), e.g. "
                                "customer.id");
    if (!filter_value("data_value", value, err))
        return false;
    if (list->total)
        return bad_request(err, "query parameter 'total' is not available with a data search "
                                "(it looks at a bounded number of tasks)");
    list->data_path = path;
    list->data_value = value;
    return true;
}

bool cohort_api_parse_list(char *const *values, cohort_api_list_t *list, cohort_api_error_t *err)
{
    memset(list, 0, sizeof *list);
    list->limit = COHORT_API_LIST_DEFAULT;
    const char *status = values[0], *kind = values[1], *group = values[2];
    const char *limit = values[3], *after = values[4];
    cohort_task_status_t known;
    if (status && !cohort_status_parse(status, &known))
        return bad_request(err, "query parameter 'status' must be one of pending, claimed, "
                                "succeeded, failed, timed_out");
    if (kind && !cohort_config_valid_kind(kind))
        return bad_request(err, "query parameter 'kind' must be 1-64 of [A-Za-z0-9_-]");
    if (group && !filter_value("group", group, err))
        return false;
    if (limit) {
        char *end = NULL;
        long long v = strtoll(limit, &end, 10);
        if (!*limit || *end || limit[0] == '-' || limit[0] == '+' || v < 1 ||
            v > COHORT_API_LIST_MAX)
            return bad_request(err, "query parameter 'limit' must be 1..%d", COHORT_API_LIST_MAX);
        list->limit = v;
    }
    if (after) {
        if (!cohort_api_cursor_decode(after, &list->after))
            return bad_request(err, "query parameter 'after' is not a cursor this API gave "
                                    "(use the 'next' of the previous page)");
        list->has_after = true;
    }
    list->status = status;
    if (!parse_list_shape(values[5], values[6], values[7], list, err))
        return false;
    if (!parse_data_search(values[8], values[9], list, err))
        return false;
    if (list->view != COHORT_TASK_VIEW_ALL && status && strcmp(status, "pending") != 0)
        return bad_request(err, "query parameter 'view' lists pending tasks: drop 'status' "
                                "or make it pending");
    list->kind = kind;
    list->group = group;
    return true;
}

bool cohort_api_parse_counts_by(const char *by, const char *limit, const char **field,
                                int64_t *max_values, cohort_api_error_t *err)
{
    if (!by || strcmp(by, "status") == 0)
        *field = "status";
    else if (strcmp(by, "kind") == 0)
        *field = "kind";
    else if (strcmp(by, "group") == 0)
        *field = "group";
    else
        return bad_request(err, "query parameter 'by' must be status, kind or group");
    *max_values = COHORT_API_COUNTS_LIMIT_DEFAULT;
    if (limit && strcmp(*field, "status") == 0)
        return bad_request(err, "query parameter 'limit' applies to by=kind or by=group");
    char *end = NULL;
    long long v = limit ? strtoll(limit, &end, 10) : 0;
    if (limit && (!*limit || *end || v < 1 || v > COHORT_API_COUNTS_LIMIT_MAX))
        return bad_request(err, "query parameter 'limit' must be an integer from 1 to %d",
                           COHORT_API_COUNTS_LIMIT_MAX);
    if (limit)
        *max_values = v;
    return true;
}

/* ---- JSON bodies ----------------------------------------------------------------------- */

bool cohort_api_parse_object(const char *body, size_t len, bool empty_ok, bson_t *doc,
                             cohort_api_error_t *err)
{
    bson_init(doc);
    size_t skip = 0;
    while (skip < len && strchr(" \t\r\n", body[skip]) && body[skip])
        skip++;
    if (skip == len) {
        return empty_ok ||
               bad_request(err, "the body must be a JSON object, like {\"data\": {}}");
    }
    if (body[skip] != '{')
        return bad_request(err, "the body must be a JSON object, not another JSON value");
    if (memchr(body, '\0', len))
        return bad_request(err, "the body is not valid JSON: it holds a NUL byte");
    bson_error_t why;
    bson_destroy(doc);
    if (!cohort_json_parse_object(body, (ssize_t)len, COHORT_API_BODY_DEPTH_MAX, doc, &why)) {
        bson_init(doc);
        return bad_request(err, "%s", why.message);
    }
    return true;
}

/* A time field: ms since the epoch (an integer) or "2026-11-21T10:00:00Z", appended to
 * `one` as an integer for the options parser. */
static bool time_field(bson_iter_t *it, const cohort_task_option_t *r, const char *where,
                       bson_t *one, cohort_api_error_t *err)
{
    int64_t ms = 0;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        if (!cohort_time_parse(bson_iter_utf8(it, NULL), &ms))
            return bad_request(err, "field '%s%s' must be ms since the epoch or a UTC time like "
                                    "2026-11-21T10:00:00Z",
                               where, bson_iter_key(it));
        return BSON_APPEND_INT64(one, r->name, ms);
    }
    return bson_append_iter(one, r->name, -1, it);
}

/* Checks the task option field at `it` (row `r`) alone with the shared options parser;
 * appends it to `options` under the option's name. */
static bool option_field(bson_iter_t *it, const cohort_task_option_t *r, const char *where,
                         bson_t *options, cohort_api_error_t *err)
{
    bson_t one = BSON_INITIALIZER;
    bool ok = r->type == COHORT_TASK_OPTION_TIME ? time_field(it, r, where, &one, err)
                                                 : bson_append_iter(&one, r->name, -1, it);
    if (ok) {
        cohort_task_options_t parsed;
        bson_error_t why;
        if (cohort_task_options_parse(&one, false, &parsed, &why))
            bson_concat(options, &one);
        else
            ok = bad_request(err, "field '%s%s': %s", where, bson_iter_key(it), why.message);
    }
    bson_destroy(&one);
    return ok;
}

bool cohort_api_object_field(const bson_iter_t *it, const char *name, bson_t *out,
                             cohort_api_error_t *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return bad_request(err, "field '%s' must be a JSON object", name);
    if (!cohort_iter_doc(it, out))
        return bad_request(err, "field '%s' is not a valid document", name);
    bson_error_t why; /* depth and size as for a task's data (core/jsondoc.h) */
    return cohort_doc_check(out, name, &why) || bad_request(err, "%s", why.message);
}

/* The row of task option field `key`, given for the first time (`seen` is indexed by row). */
static const cohort_task_option_t *task_field(const char *key, const char *where, bool *seen,
                                              cohort_api_error_t *err)
{
    const cohort_task_option_t *r = cohort_task_option_find(key);
    if (!r) {
        char names[512];
        cohort_task_option_names(names, sizeof names);
        bad_request(err, "unknown field '%s%.64s' (known: data, %s)", where, key, names);
        return NULL;
    }
    size_t i = (size_t)(r - cohort_task_option_table);
    if (seen[i]) {
        bad_request(err, "field '%s%s' given twice", where, key);
        return NULL;
    }
    seen[i] = true;
    return r;
}

bool cohort_api_parse_task(const bson_t *body, const char *where, bson_t *data, bool *has_data,
                           bson_t *options, cohort_api_error_t *err)
{
    bson_init(options);
    *has_data = false;
    bool seen[COHORT_TASK_OPTIONS_MAX] = {false};
    bson_iter_t it;
    if (!bson_iter_init(&it, body))
        return bad_request(err, "%sthe task is not a valid document", where);
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (strcmp(key, "data") == 0) {
            if (*has_data)
                return bad_request(err, "field '%sdata' given twice", where);
            char name[48];
            snprintf(name, sizeof name, "%sdata", where);
            if (!cohort_api_object_field(&it, name, data, err))
                return false;
            *has_data = true;
            continue;
        }
        const cohort_task_option_t *r = task_field(key, where, seen, err);
        if (!r || !option_field(&it, r, where, options, err))
            return false;
    }
    /* Then the whole set, for what only the combination decides. */
    cohort_task_options_t parsed;
    bson_error_t why;
    if (!cohort_task_options_parse(options, false, &parsed, &why))
        return bad_request(err, "%s%s", where, why.message);
    return true;
}

bool cohort_api_parse_switch(const bson_t *body, bool pause, const char **kind,
                             const char **reason, cohort_api_error_t *err)
{
    *kind = *reason = NULL;
    bson_iter_t it;
    if (!cohort_api_body_iter(body, &it, err))
        return false;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (strcmp(key, "kind") == 0 && !*kind) {
            if (!BSON_ITER_HOLDS_UTF8(&it) || !cohort_config_valid_kind(bson_iter_utf8(&it, NULL)))
                return bad_request(err, "field 'kind' must be 1-64 of [A-Za-z0-9_-]");
            *kind = bson_iter_utf8(&it, NULL);
        } else if (strcmp(key, "reason") == 0 && pause && !*reason) {
            uint32_t len = 0;
            if (!BSON_ITER_HOLDS_UTF8(&it) ||
                (bson_iter_utf8(&it, &len), len > COHORT_API_REASON_MAX))
                return bad_request(err, "field 'reason' must be a string of at most %d bytes",
                                   COHORT_API_REASON_MAX);
            *reason = bson_iter_utf8(&it, NULL);
        } else {
            return bad_request(err, "unknown or repeated field '%.64s' (known: kind%s)", key,
                               pause ? ", reason" : "");
        }
    }
    return true;
}
