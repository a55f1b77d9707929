/*
 * fuzz_http.c - libFuzzer target for whole raw HTTP requests: the input is every byte one
 * client sends on one connection (request line, headers, body; several requests if it
 * pipelines), read by libevent's evhttp (its framing: Content-Length, chunked, header and
 * body limits) and by the node's own listener (node/http/http.c: the connection list, deadlines,
 * the JSON 413, /healthz, /readyz, /metrics, the dashboard's files), and each API request
 * then by the API's router and parsers as its endpoint reads it, with no database.
 *
 * A listener made once on a loopback port serves the connections on this process's event
 * loop. Each input is written on a new connection, which is then half-closed, and the loop
 * runs until the listener closes the connection (it always does once it reads the end of the
 * stream). The `api` callback stands in for the API's threads: it routes the request
 * (cohort_api_route, or the dashboard's cohort_api_ui_route), reads the session cookie, the
 * origin and the bearer token as the API does, parses the query and the body with the
 * endpoint's parser (api_checks.c, which also checks their answers), and answers at once
 * through cohort_http_api_reply(): the refusal, or 200 {}.
 *
 * Checks beyond the sanitizers' and api_checks.c's: whatever the listener writes back starts
 * with a status line ("HTTP/": evhttp answers in the request's own version, HTTP/0.1
 * included); an API reply is 2xx or 4xx (5xx only for memory).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api_checks.h"
#include "core/clock.h"
#include "core/token.h"
#include "node/http/api_session.h"
#include "node/http/api_ui.h"
#include "node/http/http.h"

#define FUZZ_BODY_MAX 4096   /* api_max_body: small, so inputs reach the 413 too */
#define FUZZ_WAIT_MS 5000    /* for the listener to close a half-closed connection */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct event_base *base;
static cohort_http_t *listener;
static struct sockaddr_in address;

/* ---- the listener's callbacks ------------------------------------------------------------- */

static bool fuzz_ready(void *arg, char *why, size_t len)
{
    (void)arg;
    snprintf(why, len, "fuzzing");
    return false;
}

static char *fuzz_metrics(void *arg, size_t *len)
{
    (void)arg;
    char *text = strdup("# fuzz\n");
    *len = text ? strlen(text) : 0;
    return text;
}

/* `body` parsed as an object (`empty_ok` as the endpoint takes it) and checked by `check`. */
static void check_body(const cohort_api_request_t *request, bool empty_ok,
                       void (*check)(const bson_t *))
{
    bson_t body;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_object(request->body, request->body_len, empty_ok, &body, &err)) {
        fuzz_check_refusal(&err);
        return;
    }
    if (check)
        check(&body);
    bson_destroy(&body);
}

static void check_task_body(const bson_t *body)
{
    fuzz_check_task(body, "");
}

/* A query the dashboard's endpoints read (history, audit): known names, values decoded. */
static void check_ui_query(const char *query)
{
    static const char *const known[] = {"minutes", "limit", "before", NULL};
    char *values[3] = {NULL, NULL, NULL};
    cohort_api_error_t err = {0};
    if (cohort_api_query(query, known, values, &err))
        cohort_api_query_free(values, 3);
    else
        fuzz_check_refusal(&err);
}

/* What the endpoint of `route` reads of the request besides its path. */
static void check_endpoint(const cohort_api_request_t *request, const cohort_api_route_t *route)
{
    switch (route->endpoint) {
    case COHORT_API_TASKS_LIST:
    case COHORT_API_COUNTS:
        fuzz_check_queries(request->query ? request->query : "");
        break;
    case COHORT_API_HISTORY:
    case COHORT_API_AUDIT:
        check_ui_query(request->query);
        break;
    case COHORT_API_TASKS_CREATE:
        check_body(request, false, check_task_body);
        break;
    case COHORT_API_TASKS_BATCH:
        check_body(request, false, fuzz_check_batch);
        break;
    case COHORT_API_PAUSE:
    case COHORT_API_RESUME:
    case COHORT_API_BLOCK:
    case COHORT_API_UNBLOCK:
        check_body(request, true, fuzz_check_switch);
        break;
    case COHORT_API_CLAIMS:
    case COHORT_API_LEASE_HEARTBEAT:
    case COHORT_API_LEASE_SUCCEED:
    case COHORT_API_LEASE_FAIL:
    case COHORT_API_LEASE_RELEASE:
        check_body(request, true, fuzz_check_worker);
        break;
    case COHORT_API_TASKS_BULK:
        check_body(request, false, fuzz_check_bulk);
        break;
    case COHORT_API_SETTINGS_WRITE:
        check_body(request, false, fuzz_check_settings);
        break;
    case COHORT_API_TASK_RETRY:
    case COHORT_API_TASK_CANCEL:
    case COHORT_API_TASK_DELETE:
    case COHORT_API_SCHEDULE_PAUSE:
    case COHORT_API_SCHEDULE_RESUME:
        check_body(request, true, NULL);
        break;
    default:
        break;
    }
}

/* The credentials as the API reads them before it looks at the path. */
static void check_credentials(const cohort_api_request_t *request)
{
    char session[128];
    cohort_api_session_cookie(request->cookie, session, sizeof session);
    cohort_api_same_origin(request);
    static const char bearer[] = "Bearer ";
    const char *auth = request->authorization;
    if (auth && strncmp(auth, bearer, sizeof bearer - 1) == 0 &&
        cohort_token_well_formed(auth + sizeof bearer - 1)) {
        char hash[COHORT_TOKEN_HASH_HEX];
        if (!cohort_token_hash(auth + sizeof bearer - 1, hash, sizeof hash))
            abort();
    }
}

static void fuzz_api(void *arg, const cohort_api_request_t *request, void *origin)
{
    (void)arg;
    cohort_api_reply_t reply = {.status = 200};
    bson_init(&reply.body);
    cohort_api_error_t err = {0};
    cohort_api_route_t route;
    memset(&route, 0, sizeof route);
    check_credentials(request);
    bool routed;
    if (cohort_api_session_path(request->path)) {
        check_body(request, false, NULL);
        routed = false;
    } else if (cohort_api_ui_owns(request->path)) {
        routed = cohort_api_ui_route(request->method, request->path, &route, &err);
        if (!routed)
            fuzz_check_refusal(&err);
    } else {
        routed = fuzz_check_route(request->method, request->path, &route, &err);
    }
    if (routed)
        check_endpoint(request, &route);
    if (err.status) {
        reply.status = err.status;
        reply.allow = err.status == 405 ? route.allow : NULL;
        bson_t e;
        BSON_APPEND_DOCUMENT_BEGIN(&reply.body, "error", &e);
        BSON_APPEND_UTF8(&e, "code", err.code);
        BSON_APPEND_UTF8(&e, "message", err.message);
        bson_append_document_end(&reply.body, &e);
    }
    if (reply.status >= 500 && reply.status != 503)
        abort();
    cohort_http_api_reply(origin, &reply);
    bson_destroy(&reply.body);
}

/* ---- the fuzzer ---------------------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN); /* as cohortd does: a write to a closed socket is an error */
    base = event_base_new();
    if (!base)
        abort();
    cohort_http_callbacks_t callbacks = {.ready = fuzz_ready,
                                         .metrics = fuzz_metrics,
                                         .api = fuzz_api,
                                         .api_max_body = FUZZ_BODY_MAX};
    srand((unsigned)getpid() ^ (unsigned)time(NULL));
    for (int attempt = 0; attempt < 100 && !listener; attempt++) {
        int port = 20000 + rand() % 40000;
        char listen[32];
        snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
        bson_error_t error;
        listener = cohort_http_start(base, listen, &callbacks, &error);
        address = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    if (!listener) {
        fprintf(stderr, "fuzz_http: no free loopback port\n");
        abort();
    }
    return 0;
}

/* The listener's answer must begin with a status line (in any version). */
static void check_answer(const char *start, size_t len)
{
    static const char line[] = "HTTP/";
    if (memcmp(start, line, len < sizeof line - 1 ? len : sizeof line - 1) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        if (fd >= 0)
            close(fd);
        return 0; /* out of descriptors or ports: not the listener's fault */
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    size_t sent = 0, got = 0;
    bool half_closed = false;
    char first[8], buf[16384];
    int64_t deadline = cohort_clock_monotonic_ms() + FUZZ_WAIT_MS;
    while (cohort_clock_monotonic_ms() < deadline) {
        if (sent < size) {
            ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
            else if (errno != EAGAIN && errno != EWOULDBLOCK)
                sent = size; /* the listener closed it: the rest goes nowhere */
        }
        if (sent == size && !half_closed) {
            shutdown(fd, SHUT_WR);
            half_closed = true;
        }
        event_base_loop(base, EVLOOP_NONBLOCK);
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            break; /* closed (or reset) by the listener */
        if (n > 0 && got < sizeof first) {
            size_t take = (size_t)n < sizeof first - got ? (size_t)n : sizeof first - got;
            memcpy(first + got, buf, take);
            got += take;
        }
    }
    if (got)
        check_answer(first, got);
    close(fd);
    event_base_loop(base, EVLOOP_NONBLOCK); /* the listener sees the close */
    return 0;
}
