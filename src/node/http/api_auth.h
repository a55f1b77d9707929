/*
 * api_auth.h - who is calling the API: the bearer token of a request, checked against the
 * `tokens` collection through a small cache.
 *
 * A token found in the database is trusted for `ttl_ms` (one tick), then looked up again,
 * so a revoked token stops working everywhere within a tick. A cache hit compares SHA-256
 * hashes in constant time. last_used is written at most once a minute per token and node.
 */
#ifndef COHORT_API_AUTH_H
#define COHORT_API_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "node/http/api_parse.h"
#include "store/store.h"

#define COHORT_API_AUTH_SLOTS 64

typedef struct cohort_api_caller {
    char name[65]; /* the token's name */
    uint32_t scopes;
    bool session; /* signed in through the dashboard's session cookie (node/http/api_session.h) */
} cohort_api_caller_t;

typedef struct cohort_api_auth cohort_api_auth_t;

/* NULL when out of memory. Thread-safe: any thread may authenticate with its own client. */
cohort_api_auth_t *cohort_api_auth_new(cohort_store_t *store, int64_t ttl_ms);
void cohort_api_auth_destroy(cohort_api_auth_t *auth);
void cohort_api_auth_set_ttl(cohort_api_auth_t *auth, int64_t ttl_ms);

/* The caller of a request with this Authorization header (may be NULL): false with a 401
 * (no or bad token) or a 503 (the database did not answer) in `err`. */
bool cohort_api_authenticate(cohort_api_auth_t *auth, mongoc_client_t *client,
                             const char *authorization, cohort_api_caller_t *caller,
                             cohort_api_error_t *err);

/* The scope bits of a document's `scopes` array of names (unknown names grant nothing). */
uint32_t cohort_api_scopes_of(const bson_t *doc);

#endif
