/*
 * api.h - the HTTP API v1 (/api/v1/, docs/API.md): bearer tokens with scopes, and the task
 * management endpoints. http.c hands it every request under /api/; it answers with a status
 * and a JSON document, so it knows nothing of evhttp and tests and the fuzz target can call
 * it directly.
 *
 * Requests are served on the node's loop thread between ticks, with the loop's own client:
 * each does a bounded number of database commands (the store's timeouts bound them).
 * Tokens are cached for at most one tick (`token_ttl_ms`), so a revoked token is refused by
 * every node by its next tick.
 */
#ifndef COHORT_API_H
#define COHORT_API_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "node/api_parse.h" /* the request and reply types */
#include "store/store.h"

typedef struct cohort_api_options {
    cohort_store_t *store;
    mongoc_client_t *client;         /* used only on the thread that calls handle() */
    const cohort_config_t *config;   /* the node's (services' defaults); may be NULL */
    int64_t token_ttl_ms;            /* how long a token is trusted without a lookup: a tick */
} cohort_api_options_t;

typedef struct cohort_api cohort_api_t;

/* NULL when out of memory. The options are copied; what they point to must outlive it. */
cohort_api_t *cohort_api_new(const cohort_api_options_t *options);
void cohort_api_destroy(cohort_api_t *api);

/* A tick may change (tick_ms is a live setting). */
void cohort_api_set_token_ttl(cohort_api_t *api, int64_t ttl_ms);

/* Answers one request: authenticates it, routes it, runs it. Never fails to fill `reply`. */
void cohort_api_handle(cohort_api_t *api, const cohort_api_request_t *request,
                       cohort_api_reply_t *reply);

#endif
