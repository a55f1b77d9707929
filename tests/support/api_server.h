/*
 * api_server.h - an HTTP listener for the integration tests: node/http/http.c with the HTTP API
 * (node/http/api.c) on a free loopback port, served by an event loop on a thread of its own, as a
 * node serves them on its loop; plus raw-socket helpers to talk to it byte by byte.
 */
#ifndef COHORT_TEST_API_SERVER_H
#define COHORT_TEST_API_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/http/api.h"
#include "node/http/http.h"
#include "store/store.h"

typedef struct test_api_server {
    struct event_base *base;
    cohort_http_t *http;
    cohort_api_t *api;
    struct cohort_api_pool *pool; /* the API's threads, as in cohortd */
    cohort_store_t *store;
    mongoc_client_t *client;
    pthread_t thread;
    int port;
    struct event *watch; /* stops the loop from its own thread */
    _Atomic bool stop;
    _Atomic size_t connections; /* cohort_http_connections(), sampled by the loop */
    _Atomic size_t held;        /* cohort_api_pool_held(), sampled by the loop */
    size_t metrics_bytes;       /* the size of the /metrics reply (set before start) */
} test_api_server_t;

/* Starts a listener with `limits` (its callbacks are the server's own; only the sizes,
 * counts and deadlines are read) on a client popped from `store`; /metrics answers
 * `metrics_bytes` of 'x'. Fails the test on error. */
void test_api_server_start(test_api_server_t *s, cohort_store_t *store,
                           const cohort_http_callbacks_t *limits, size_t metrics_bytes);

/* The same with the API's `options` (its store is `store`; services it hosts, max_wait_ms),
 * for external workers' calls over sockets. */
void test_api_server_start_api(test_api_server_t *s, cohort_store_t *store,
                               const cohort_http_callbacks_t *limits,
                               const cohort_api_options_t *options);
void test_api_server_stop(test_api_server_t *s);

/* Makes API token `name` with `scopes` ("read,operate") through the store, as cohortctl
 * tokens create does; the token's text in `token` (COHORT_TOKEN_TEXT_MAX bytes). */
void test_api_token(cohort_store_t *store, mongoc_client_t *client, const char *name,
                    const char *scopes, char *token);

/* A connected socket to 127.0.0.1:port (fails the test on error). */
int test_connect(int port);

/* Everything the peer sends until it closes, at most timeout_ms (a static buffer, 64 KiB);
 * NULL if it did not close in time. */
char *test_read_until_closed(int fd, int64_t timeout_ms);

/* Whether the peer closed `fd` (or reset it) within timeout_ms, whatever it sent before. */
bool test_closed_within(int fd, int64_t timeout_ms);

#endif
