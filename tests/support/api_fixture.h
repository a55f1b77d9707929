/*
 * api_fixture.h - the fixture of the integration tests that call the HTTP API in process
 * (cohort_api_handle(), no sockets) or over a real listener (api_server.h): a fresh database
 * with one service, an API on it, and, where the test asks, that service hosted here as a
 * `handler = external` service, so the external workers' endpoints have something to claim
 * from. Also one request through the in-process API and the checks every such test makes of
 * the answer.
 */
#ifndef COHORT_TEST_API_FIXTURE_H
#define COHORT_TEST_API_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "api_server.h"
#include "support.h"
#include "node/http/api.h"
#include "node/service.h"
#include "store/store.h"

/* How long the fixture's API may keep accepting a revoked token (its token cache). */
#define TEST_API_TOKEN_TTL_MS 300

/* What a test's fixture is made of; a zero field takes the default named. */
typedef struct test_api_setup {
    const char *prefix;  /* the database name's tag (test_db_name()) */
    const char *service; /* its config document and indexes are created */
    bool host;           /* host `service` here (node "node-a", 5 s takeover) with
                          * handler = external: the API serves its claims */
    int max_attempts;    /* the hosted service's; 0: test_service_config()'s */
    int64_t retry_base_ms;
    int64_t max_wait_ms; /* the longest a claim may wait for work (0: it never waits) */
    /* NULL: the API is called in process (test_api_call()); else it is served over a real
     * listener with these limits (test_api_server_start_api()) and fx.api is NULL. */
    const cohort_http_callbacks_t *listen;
} test_api_setup_t;

typedef struct test_api_fixture {
    char *db;                       /* owned */
    cohort_store_t *store;          /* owned */
    mongoc_client_t *client;        /* popped from store for the test thread */
    cohort_service_config_t config; /* the hosted service's section (when setup.host) */
    cohort_service_t *service;      /* the hosted service, or NULL; owned */
    cohort_api_options_t options;   /* what the API was made with; .services points into
                                     * this struct, which must not move */
    cohort_api_t *api;              /* the in-process API, or NULL; owned */
    test_api_server_t server;       /* the listener (when setup.listen): server.port */
    bool serving;
} test_api_fixture_t;

/* Opens the fixture (test_service_db_open(), the hosted service, the API with its token cache of
 * TEST_API_TOKEN_TTL_MS, in process or behind a listener). Fails the test on error. */
void test_api_fixture_open(test_api_fixture_t *fx, const test_api_setup_t *setup);

/* Stops the listener, destroys the API and the service, closes the database (safe after a failed or
 * partial open) and zeroes *fx. */
void test_api_fixture_close(test_api_fixture_t *fx);

/* One answer of the API. The body is a heap copy: a bson_t moved by value loses its buffer's
 * self-pointers. Free with test_api_answer_free(). */
typedef struct test_api_answer {
    int status;
    int64_t hold_ms; /* a claim's hold when nothing was due */
    char wake[65];   /* the service whose held claims the request wakes, or "" */
    bson_t *body;
    char *json; /* the body as relaxed extended JSON, for messages */
} test_api_answer_t;

void test_api_answer_free(test_api_answer_t *a);

/* One request through cohort_api_handle() on the fixture's client. `token` NULL sends no
 * Authorization header, "" a bad one ("Bearer "); a '?' in `target` starts the query; `body`
 * and `idempotency_key` may be NULL. */
test_api_answer_t test_api_call(test_api_fixture_t *fx, const char *token, const char *method,
                                const char *target, const char *body, const char *idempotency_key);

/* Asserts the answer's status and, when given, its error code (an error then has a message)
 * and a part of its message; `what` names the request in a failure. Frees the answer. */
void test_api_expect(test_api_answer_t a, int status, const char *code, const char *part,
                     const char *what);

#endif
