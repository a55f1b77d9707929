/*
 * api_lease.c - the bodies of external workers' calls (see api_lease.h).
 * Every field is checked alone and named in a refusal; unknown fields are refused, so a
 * misspelt "lease_ms" is an error rather than a silent default.
 */
#include "node/http/api_lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/jsondoc.h"

#define bad_request(err, ...) cohort_api_fail((err), 400, "bad_request", __VA_ARGS__)

/* A whole number in [min, max] (JSON integers arrive as int32 or int64; 5.0 as a double). */
static bool whole(bson_iter_t *it, const char *name, int64_t min, int64_t max, int64_t *out,
                  cohort_api_error_t *err)
{
    int64_t v;
    if (BSON_ITER_HOLDS_INT32(it) || BSON_ITER_HOLDS_INT64(it)) {
        v = bson_iter_as_int64(it);
    } else if (BSON_ITER_HOLDS_DOUBLE(it) && bson_iter_double(it) >= (double)INT64_MIN &&
               bson_iter_double(it) <= (double)INT64_MAX &&
               bson_iter_double(it) == (double)(int64_t)bson_iter_double(it)) {
        v = (int64_t)bson_iter_double(it);
    } else {
        return bad_request(err, "field '%s' must be a whole number", name);
    }
    if (v < min || v > max)
        return bad_request(err, "field '%s' must be %lld..%lld", name, (long long)min,
                           (long long)max);
    *out = v;
    return true;
}

static bool valid_worker(const char *name)
{
    size_t n = strlen(name);
    if (n < 1 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

static bool kinds_field(bson_iter_t *it, cohort_api_claim_t *claim, cohort_api_error_t *err)
{
    bson_iter_t arr;
    if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &arr))
        return bad_request(err, "field 'kinds' must be an array of kind names");
    size_t i = 0;
    for (; bson_iter_next(&arr); i++) {
        if (BSON_ITER_HOLDS_NULL(&arr)) { /* exactly the kinds named: null names "no kind" */
            claim->no_kind = true;
            continue;
        }
        if (!BSON_ITER_HOLDS_UTF8(&arr) || !cohort_config_valid_kind(bson_iter_utf8(&arr, NULL)))
            return bad_request(err, "field 'kinds[%zu]' must be 1-64 of [A-Za-z0-9_-], or null "
                                    "for the tasks without a kind",
                               i);
        if (claim->n_kinds == COHORT_API_KINDS_MAX)
            return bad_request(err, "field 'kinds' may name at most %d kinds",
                               COHORT_API_KINDS_MAX);
        claim->kinds[claim->n_kinds++] = bson_iter_utf8(&arr, NULL);
    }
    if (i == 0)
        return bad_request(err, "field 'kinds' is empty: name the kinds to claim (null for the "
                                "tasks without a kind), or leave it out to claim every kind");
    return true;
}

bool cohort_api_parse_claim(const bson_t *body, int64_t max_wait_ms, cohort_api_claim_t *claim,
                            cohort_api_error_t *err)
{
    memset(claim, 0, sizeof *claim);
    claim->max = 1;
    claim->lease_ms = COHORT_API_LEASE_DEFAULT_MS;
    bool seen_max = false, seen_wait = false, seen_lease = false, seen_kinds = false;
    bson_iter_t it;
    if (!cohort_api_body_iter(body, &it, err))
        return false;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        bool ok;
        if (strcmp(key, "worker") == 0 && !claim->worker) {
            if (!BSON_ITER_HOLDS_UTF8(&it) || !valid_worker(bson_iter_utf8(&it, NULL)))
                return bad_request(err, "field 'worker' must be 1-64 of [A-Za-z0-9_.-]");
            claim->worker = bson_iter_utf8(&it, NULL);
            ok = true;
        } else if (strcmp(key, "max") == 0 && !seen_max) {
            ok = seen_max = whole(&it, "max", 1, COHORT_API_CLAIM_MAX, &claim->max, err);
        } else if (strcmp(key, "wait_ms") == 0 && !seen_wait) {
            ok = seen_wait = whole(&it, "wait_ms", 0, INT64_MAX, &claim->wait_ms, err);
            if (claim->wait_ms > max_wait_ms)
                claim->wait_ms = max_wait_ms; /* capped by api_max_wait_ms */
        } else if (strcmp(key, "lease_ms") == 0 && !seen_lease) {
            ok = seen_lease = whole(&it, "lease_ms", COHORT_API_LEASE_MIN_MS,
                                    COHORT_API_LEASE_MAX_MS, &claim->lease_ms, err);
        } else if (strcmp(key, "kinds") == 0 && !seen_kinds) {
            ok = seen_kinds = kinds_field(&it, claim, err);
        } else {
            return bad_request(err, "unknown or repeated field '%.64s' (known: worker, max, "
                                    "wait_ms, lease_ms, kinds)",
                               key);
        }
        if (!ok)
            return false;
    }
    if (!claim->worker)
        return bad_request(err, "field 'worker' is required: the worker's name, 1-64 of "
                                "[A-Za-z0-9_.-]");
    return true;
}

bool cohort_api_parse_lease_body(const bson_t *body, cohort_api_endpoint_t endpoint,
                                 cohort_api_lease_body_t *out, cohort_api_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->lease_ms = COHORT_API_LEASE_DEFAULT_MS;
    out->retry = true;
    const char *known = endpoint == COHORT_API_LEASE_HEARTBEAT ? "lease_ms, progress"
                        : endpoint == COHORT_API_LEASE_SUCCEED ? "result"
                        : endpoint == COHORT_API_LEASE_FAIL    ? "error, retry"
                                                               : "none";
    bool seen_lease = false, seen_retry = false;
    bson_iter_t it;
    if (!cohort_api_body_iter(body, &it, err))
        return false;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        bool ok;
        if (endpoint == COHORT_API_LEASE_HEARTBEAT && strcmp(key, "lease_ms") == 0 &&
            !seen_lease) {
            ok = seen_lease = whole(&it, "lease_ms", COHORT_API_LEASE_MIN_MS,
                                    COHORT_API_LEASE_MAX_MS, &out->lease_ms, err);
        } else if (endpoint == COHORT_API_LEASE_HEARTBEAT && strcmp(key, "progress") == 0 &&
                   !out->has_progress) {
            ok = out->has_progress = cohort_api_object_field(&it, "progress", &out->progress, err);
        } else if (endpoint == COHORT_API_LEASE_SUCCEED && strcmp(key, "result") == 0 &&
                   !out->has_result) {
            ok = out->has_result = cohort_api_object_field(&it, "result", &out->result, err);
        } else if (endpoint == COHORT_API_LEASE_FAIL && strcmp(key, "error") == 0 &&
                   !out->error) {
            uint32_t len = 0;
            if (!BSON_ITER_HOLDS_UTF8(&it) ||
                (bson_iter_utf8(&it, &len), len > COHORT_API_ERROR_MAX))
                return bad_request(err, "field 'error' must be a string of at most %d bytes",
                                   COHORT_API_ERROR_MAX);
            out->error = bson_iter_utf8(&it, NULL);
            ok = true;
        } else if (endpoint == COHORT_API_LEASE_FAIL && strcmp(key, "retry") == 0 &&
                   !seen_retry) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return bad_request(err, "field 'retry' must be true or false");
            out->retry = bson_iter_bool(&it);
            ok = seen_retry = true;
        } else {
            return bad_request(err, "unknown or repeated field '%.64s' (known: %s)", key, known);
        }
        if (!ok)
            return false;
    }
    return true;
}
