/*
 * api_lease.h - what external workers send: the bodies of claims, heartbeats and outcomes
 * (their lease tokens are read with the routes, api_parse.h). Pure functions (no database,
 * no network), driven by the fuzz target like the rest of the API's parsing.
 */
#ifndef COHORT_API_LEASE_H
#define COHORT_API_LEASE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "node/http/api_parse.h"

#define COHORT_API_CLAIM_MAX 100   /* tasks one claim call may take */
#define COHORT_API_LEASE_MIN_MS 1000
#define COHORT_API_LEASE_MAX_MS (24LL * 3600 * 1000)
#define COHORT_API_LEASE_DEFAULT_MS 30000
#define COHORT_API_KINDS_MAX 32
#define COHORT_API_ERROR_MAX 4000 /* bytes of a failure's message kept */

/* POST .../claims: {"worker", "max", "wait_ms", "lease_ms", "kinds"}. */
typedef struct cohort_api_claim {
    const char *worker; /* view into the body: 1-64 of [A-Za-z0-9_.-] */
    int64_t max;        /* 1..COHORT_API_CLAIM_MAX, default 1 */
    int64_t wait_ms;    /* 0..max_wait_ms (larger is capped), default 0 */
    int64_t lease_ms;   /* COHORT_API_LEASE_MIN_MS..MAX, default 30 s */
    const char *kinds[COHORT_API_KINDS_MAX]; /* views; none (and !no_kind): any kind */
    size_t n_kinds;
    bool no_kind; /* null among the kinds: the tasks without a kind too */
} cohort_api_claim_t;

bool cohort_api_parse_claim(const bson_t *body, int64_t max_wait_ms, cohort_api_claim_t *claim,
                            cohort_api_error_t *err);

/* POST /leases/{token}/heartbeat|succeed|fail|release: the fields each takes (all
 * optional): heartbeat {"lease_ms", "progress"}, succeed {"result"}, fail {"error",
 * "retry"}, release {}. */
typedef struct cohort_api_lease_body {
    int64_t lease_ms;   /* heartbeat; default COHORT_API_LEASE_DEFAULT_MS */
    bool has_progress;  /* heartbeat */
    bson_t progress;    /* static view into the body */
    bool has_result;    /* succeed */
    bson_t result;      /* static view into the body */
    const char *error;  /* fail; NULL: none given */
    bool retry;         /* fail; default true */
} cohort_api_lease_body_t;

bool cohort_api_parse_lease_body(const bson_t *body, cohort_api_endpoint_t endpoint,
                                 cohort_api_lease_body_t *out, cohort_api_error_t *err);

#endif
