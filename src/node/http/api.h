/*
 * api.h - the HTTP API v1 (/api/v1/, docs/API.md): bearer tokens with scopes, and the task
 * management endpoints. http.c hands it every request under /api/; it answers with a status
 * and a JSON document, so it knows nothing of evhttp and tests and the fuzz target can call
 * it directly.
 *
 * Requests are served by the API's threads (api_pool.h), each with its own client: each does
 * a bounded number of database commands (the store's timeouts bound them), and a claim that
 * finds nothing asks to be held rather than wait on a thread. Tokens are cached for at most
 * one tick (`token_ttl_ms`), so a revoked token is refused by every node by its next tick.
 */
#ifndef COHORT_API_H
#define COHORT_API_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "node/http/api_parse.h" /* the request and reply types */
#include "node/runtime.h"
#include "store/store.h"

typedef struct cohort_api_options {
    cohort_store_t *store;
    const cohort_config_t *config;   /* the node's (services' defaults); may be NULL */
    int64_t token_ttl_ms;            /* how long a token is trusted without a lookup: a tick */
    /* The services this node hosts: external workers' calls are served for them only. */
    cohort_service_t *const *services;
    size_t n_services;
    int64_t max_wait_ms; /* api_max_wait_ms: the longest a claim is held */
} cohort_api_options_t;

typedef struct cohort_api cohort_api_t;

/* NULL when out of memory. The options are copied; what they point to must outlive it. */
cohort_api_t *cohort_api_new(const cohort_api_options_t *options);
void cohort_api_destroy(cohort_api_t *api);

/* A tick may change (tick_ms is a live setting). */
void cohort_api_set_token_ttl(cohort_api_t *api, int64_t ttl_ms);

/* Answers one request with `client` (the calling thread's): authenticates it, routes it,
 * runs it. Never fails to fill `reply` (initialised by the call; the caller destroys its
 * body). Thread-safe. */
void cohort_api_handle(cohort_api_t *api, mongoc_client_t *client,
                       const cohort_api_request_t *request, cohort_api_reply_t *reply);

/* The endpoint of `method` `path` (a path under /api/v1/, as sent), whichever part of the API
 * routes it: this document (openapi.yaml), the sign-in (session), the dashboard's endpoints
 * (api_ui.h) or the rest (api_parse.h). false with a 404, 405 (route->allow set) or 400 as
 * cohort_api_route() says. Pure: tests/openapi's route probe calls it. */
bool cohort_api_resolve(const char *method, const char *path, cohort_api_route_t *route,
                        cohort_api_error_t *err);

/* A claim's reply that was never delivered (its client left): gives back the tasks still
 * claimed under reply->claimed, untouched (pending, attempts as before the claim), and sets
 * reply->wake to their service so held claims take them. Thread-safe. */
void cohort_api_give_back(cohort_api_t *api, mongoc_client_t *client, cohort_api_reply_t *reply);

#endif
