/*
 * api_checks.c - the checks the API fuzz targets share (see api_checks.h). Beyond the
 * sanitizers': every refusal has a 4xx status (5xx only for memory), a code and a message; a
 * route accepted has a scope; a lease token accepted by a route is written back as the same
 * text; a claim accepted has its fields in range; a bulk body accepted has a limit in range
 * and a status its action applies to; a settings body accepted names 1 to
 * COHORT_API_SETTINGS_MAX live settings, each value in its range.
 */
#include "api_checks.h"

#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "node/http/api_lease.h"
#include "node/http/api_ops.h"
#include "store/operator.h"

void fuzz_check_refusal(const cohort_api_error_t *err)
{
    if (err->status < 400 || err->status > 599 || !err->code || !err->message[0])
        abort();
}

bool fuzz_check_route(const char *method, const char *path, cohort_api_route_t *route,
                      cohort_api_error_t *err)
{
    if (!cohort_api_route(method, path, route, err)) {
        fuzz_check_refusal(err);
        return false;
    }
    if (!route->scope)
        abort();
    if (route->lease.attempt > 0) { /* /api/v1/leases/{token}/...: the token round-trips */
        char token[COHORT_LEASE_TOKEN_MAX];
        cohort_lease_token_format(&route->lease, token, sizeof token);
        const char *in = path + strlen("/api/v1/leases/");
        if (strncmp(in, token, strlen(token)) != 0 || in[strlen(token)] != '/')
            abort();
    }
    return true;
}

void fuzz_check_queries(const char *query)
{
    char *values[COHORT_API_LIST_PARAMS + 1];
    cohort_api_error_t err = {0};
    if (cohort_api_query(query, cohort_api_list_params, values, &err)) {
        cohort_api_list_t list;
        if (!cohort_api_parse_list(values, &list, &err))
            fuzz_check_refusal(&err);
        else if (list.limit < 1 || list.limit > COHORT_API_LIST_MAX)
            abort();
        cohort_api_query_free(values, COHORT_API_LIST_PARAMS);
    } else {
        fuzz_check_refusal(&err);
    }
    const char *field = NULL;
    int64_t shown = 0;
    if (!cohort_api_parse_counts_by(query, NULL, &field, &shown, &err))
        fuzz_check_refusal(&err);
    if (!cohort_api_parse_counts_by("group", query, &field, &shown, &err))
        fuzz_check_refusal(&err);
    else if (shown < 1 || shown > COHORT_API_COUNTS_LIMIT_MAX)
        abort();
    bson_oid_t oid;
    cohort_api_cursor_decode(query, &oid);
}

void fuzz_check_task(const bson_t *body, const char *where)
{
    bson_t data, options;
    bool has_data = false;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_task(body, where, &data, &has_data, &options, &err))
        fuzz_check_refusal(&err);
    bson_destroy(&options);
}

void fuzz_check_batch(const bson_t *body)
{
    bson_iter_t it, tasks;
    if (!bson_iter_init_find(&it, body, "tasks") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &tasks))
        return;
    while (bson_iter_next(&tasks)) {
        uint32_t len = 0;
        const uint8_t *raw = NULL;
        bson_t one;
        if (!BSON_ITER_HOLDS_DOCUMENT(&tasks))
            continue;
        bson_iter_document(&tasks, &len, &raw);
        if (bson_init_static(&one, raw, len))
            fuzz_check_task(&one, "tasks[0].");
    }
}

void fuzz_check_switch(const bson_t *body)
{
    const char *kind, *reason;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_switch(body, true, &kind, &reason, &err))
        fuzz_check_refusal(&err);
    if (!cohort_api_parse_switch(body, false, &kind, &reason, &err))
        fuzz_check_refusal(&err);
}

void fuzz_check_worker(const bson_t *body)
{
    cohort_api_claim_t claim;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_claim(body, 30000, &claim, &err))
        fuzz_check_refusal(&err);
    else if (!claim.worker || claim.max < 1 || claim.max > COHORT_API_CLAIM_MAX ||
             claim.wait_ms < 0 || claim.wait_ms > 30000 ||
             claim.lease_ms < COHORT_API_LEASE_MIN_MS || claim.lease_ms > COHORT_API_LEASE_MAX_MS)
        abort();
    static const cohort_api_endpoint_t calls[] = {
        COHORT_API_LEASE_HEARTBEAT, COHORT_API_LEASE_SUCCEED, COHORT_API_LEASE_FAIL,
        COHORT_API_LEASE_RELEASE};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        cohort_api_lease_body_t out;
        if (!cohort_api_parse_lease_body(body, calls[i], &out, &err))
            fuzz_check_refusal(&err);
    }
}

void fuzz_check_bulk(const bson_t *body)
{
    cohort_api_bulk_t bulk;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_bulk(body, &bulk, &err))
        fuzz_check_refusal(&err);
    else if (bulk.limit < 1 || bulk.limit > COHORT_API_BULK_MAX || !bulk.action_name ||
             !cohort_task_action_applies(bulk.action, bulk.status) || bulk.older_than_ms < 0)
        abort();
}

void fuzz_check_settings(const bson_t *body)
{
    cohort_api_settings_patch_t patch;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_settings(body, &patch, &err)) {
        fuzz_check_refusal(&err);
        return;
    }
    if (patch.n < 1 || patch.n > COHORT_API_SETTINGS_MAX)
        abort();
    for (size_t i = 0; i < patch.n; i++) {
        bson_error_t why;
        cohort_settings_t probe = {0};
        if (!cohort_settings_field(&probe, patch.items[i].name) ||
            (patch.items[i].set &&
             !cohort_settings_validate_value(patch.items[i].name, patch.items[i].value, &why)))
            abort();
    }
}
