/*
 * fuzz_api.c - libFuzzer target for the HTTP API's request parsing (node/api_parse.h): the
 * route (method and path), the query strings of the listing and the counts, the cursor, and
 * every JSON body (a task, a batch's tasks, pause/resume), with no database.
 *
 * Input: the first byte chooses what the rest is.
 *   byte % 8 == 0  a path; bits 3-5 of the byte choose the method (GET, POST, DELETE, PUT,
 *                  PATCH, HEAD, OPTIONS, TRACE)
 *   byte % 8 == 1  the query string of GET .../tasks, then of GET .../counts (as by=)
 *   byte % 8 == 2  a task body (POST .../tasks)
 *   byte % 8 == 3  a batch body: each element of its "tasks" array parsed as a task
 *   byte % 8 == 4  a pause body, then the same as a resume body, a claim body and each
 *                  lease call's body (heartbeat, succeed, fail, release)
 *   byte % 8 == 5  a tasks:bulk body (api_ops.h)
 *   byte % 8 == 6  a settings body (PATCH .../settings)
 *   byte % 8 == 7  both: the same body as bulk and as settings
 *
 * Checks beyond the sanitizers': every refusal has a 4xx status (5xx only for memory), a
 * code and a message; a route accepted has a scope; a lease token accepted by a route is
 * written back as the same text; a claim accepted has its fields in range; a bulk body accepted has a limit in
 * range and a status its action applies to; a settings body accepted names 1 to
 * COHORT_API_SETTINGS_MAX live settings, each value in its range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/api_lease.h"
#include "core/settings.h"
#include "node/api_ops.h"
#include "node/api_parse.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void check_refusal(const cohort_api_error_t *err)
{
    if (err->status < 400 || err->status > 599 || !err->code || !err->message[0])
        abort();
}

/* The payload as a NUL-terminated string (cut at an embedded NUL, as C headers would be). */
static char *text_of(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return NULL;
    memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

static void fuzz_route(uint8_t selector, const char *path)
{
    static const char *const methods[] = {"GET",   "POST", "DELETE",  "PUT",
                                          "PATCH", "HEAD", "OPTIONS", "TRACE"};
    cohort_api_route_t route;
    cohort_api_error_t err = {0};
    if (cohort_api_route(methods[(selector >> 3) & 7], path, &route, &err)) {
        if (!route.scope)
            abort();
        if (route.lease.attempt > 0) { /* /api/v1/leases/{token}/...: the token round-trips */
            char token[COHORT_LEASE_TOKEN_MAX];
            cohort_lease_token_format(&route.lease, token, sizeof token);
            const char *in = path + strlen("/api/v1/leases/");
            if (strncmp(in, token, strlen(token)) != 0 || in[strlen(token)] != '/')
                abort();
        }
    } else {
        check_refusal(&err);
    }
}

static void fuzz_queries(const char *query)
{
    char *values[COHORT_API_LIST_PARAMS + 1];
    cohort_api_error_t err = {0};
    if (cohort_api_query(query, cohort_api_list_params, values, &err)) {
        cohort_api_list_t list;
        if (!cohort_api_parse_list(values, &list, &err))
            check_refusal(&err);
        else if (list.limit < 1 || list.limit > COHORT_API_LIST_MAX)
            abort();
        cohort_api_query_free(values, COHORT_API_LIST_PARAMS);
    } else {
        check_refusal(&err);
    }
    const char *field = NULL;
    if (!cohort_api_parse_counts_by(query, &field, &err))
        check_refusal(&err);
    bson_oid_t oid;
    cohort_api_cursor_decode(query, &oid);
}

static void fuzz_task(const bson_t *body, const char *where)
{
    bson_t data, options;
    bool has_data = false;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_task(body, where, &data, &has_data, &options, &err))
        check_refusal(&err);
    bson_destroy(&options);
}

static void fuzz_batch(const bson_t *body)
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
            fuzz_task(&one, "tasks[0].");
    }
}

static void fuzz_switch(const bson_t *body)
{
    const char *kind, *reason;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_switch(body, true, &kind, &reason, &err))
        check_refusal(&err);
    if (!cohort_api_parse_switch(body, false, &kind, &reason, &err))
        check_refusal(&err);
}

/* The external workers' bodies (node/api_lease.h). */
static void fuzz_worker(const bson_t *body)
{
    cohort_api_claim_t claim;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_claim(body, 30000, &claim, &err))
        check_refusal(&err);
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
            check_refusal(&err);
    }
}

static void fuzz_bulk(const bson_t *body)
{
    cohort_api_bulk_t bulk;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_bulk(body, &bulk, &err))
        check_refusal(&err);
    else if (bulk.limit < 1 || bulk.limit > COHORT_API_BULK_MAX || !bulk.action_name ||
             !cohort_task_action_applies(bulk.action, bulk.status) || bulk.older_than_ms < 0)
        abort();
}

static void fuzz_settings(const bson_t *body)
{
    cohort_api_settings_patch_t patch;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_settings(body, &patch, &err)) {
        check_refusal(&err);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 20)
        return 0;
    uint8_t selector = data[0];
    uint8_t what = selector % 8;
    const char *payload = (const char *)data + 1;
    size_t len = size - 1;
    if (what <= 1) {
        char *text = text_of(data + 1, len);
        if (!text)
            return 0;
        if (what == 0)
            fuzz_route(selector, text);
        else
            fuzz_queries(text);
        free(text);
        return 0;
    }
    bson_t body;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_object(payload, len, what == 4, &body, &err)) {
        check_refusal(&err);
    } else if (what == 2) {
        fuzz_task(&body, "");
    } else if (what == 3) {
        fuzz_batch(&body);
    } else if (what == 4) {
        fuzz_switch(&body);
        fuzz_worker(&body);
    } else {
        if (what != 6)
            fuzz_bulk(&body);
        if (what != 5)
            fuzz_settings(&body);
    }
    bson_destroy(&body);
    return 0;
}
