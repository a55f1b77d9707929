/*
 * http.h - the node's HTTP listener (http_listen): health, readiness and metrics for
 * orchestrators and Prometheus, served by libevent's evhttp on the node's own event loop.
 *
 *   GET /healthz  200 "ok" while the process runs (the loop answers)
 *   GET /readyz   200 "ready", or 503 with the reason the node is not ready
 *   GET /metrics  200, the Prometheus text exposition (version 0.0.4)
 *   /api/...      the HTTP API (node/http/api.h, docs/API.md), through the `api` callback, which
 *                 answers later with cohort_http_api_reply(): JSON bodies up to
 *                 `api_max_body` bytes (larger: 413)
 *   /ui/...       the dashboard's embedded static files (node/http/ui.h)
 *   other paths 404; methods other than GET and HEAD 405 (the API answers its own)
 *
 * Limits (http.c): headers 8 KiB; a body over api_max_body gets the API's JSON 413; at most
 * `max_connections` open (a new one past it shuts the oldest idle one down); each request
 * must arrive whole within `request_deadline_ms` of the connection's start or its previous
 * answer.
 *
 * The listener knows nothing of services or the database: the node lends it callbacks. They
 * run on the loop's thread, between ticks, so they see the node's state as it stands after a
 * tick and never during one; the `api` callback only hands the request on (to the API's
 * threads, api_pool.h), and its answer comes back through cohort_http_api_reply().
 */
#ifndef COHORT_HTTP_H
#define COHORT_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <bson/bson.h>

#include "node/http/api.h"

struct event_base;

typedef struct cohort_http_callbacks {
    /* True if the node is ready; otherwise false with the reason in `why`. */
    bool (*ready)(void *arg, char *why, size_t whylen);
    /* The metrics text (caller frees with free()) and its length, or NULL on failure. */
    char *(*metrics)(void *arg, size_t *len);
    /* Takes a request under /api/ (NULL: those paths are 404), to be answered with
     * cohort_http_api_reply(origin, ...) on the loop thread, now or later. `request` is valid
     * during the call only. */
    void (*api)(void *arg, const cohort_api_request_t *request, void *origin);
    /* The client of `origin` (an API request not answered yet) closed its connection: the
     * request is still to be answered (its reply is then dropped), but nobody waits for it
     * (a held claim ends). Called once per request, from the listener's sweep (every
     * 100 ms); NULL: not told. */
    void (*api_gone)(void *arg, void *origin);
    void *arg;
    size_t api_max_body; /* bytes; 0: the listener's small default */
    size_t max_connections; /* open at once (http_max_connections); 0: 256. Past it, a new
                               connection shuts down the oldest idle one */
    int64_t request_deadline_ms; /* a connection must send each whole request within this of
                                    being accepted or answered; 0: 10 s */
} cohort_http_callbacks_t;

typedef struct cohort_http cohort_http_t;

/* Listens on `listen` ("HOST:PORT", HOST a numeric address, an IPv6 one in brackets, as
 * libevent's evutil_parse_sockaddr_port() reads it; names are not resolved) on `base`.
 * Returns NULL with a message naming http_listen in `error` (Cohort's error type, see
 * errors.h) if the address is malformed or cannot be bound.
 * The callbacks are copied; `base` must outlive the listener. */
cohort_http_t *cohort_http_start(struct event_base *base, const char *listen,
                                 const cohort_http_callbacks_t *callbacks, bson_error_t *error);

/* Answers the API request `origin` (handed to callbacks.api) with `reply` as JSON. Loop
 * thread only; once per request. Safe after the client went away (evhttp then frees the
 * request instead of writing). Returns false if the client had gone (closed or reset its
 * connection) before the reply was written: it will never read it. True says only that the
 * reply was handed to a connection still open. */
bool cohort_http_api_reply(void *origin, const cohort_api_reply_t *reply);

/* Whether the client of the unanswered API request `origin` has closed (or reset) its
 * connection. Loop thread only. */
bool cohort_http_api_client_gone(void *origin);
/* The connections open now (those shut down and not yet freed by evhttp aside). */
size_t cohort_http_connections(const cohort_http_t *http);

/* Closes the listener and its connections (NULL is allowed). */
void cohort_http_destroy(cohort_http_t *http);

#endif
