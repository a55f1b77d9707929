/*
 * api_server.c - an in-process HTTP listener with the API for the integration tests (see
 * api_server.h).
 */
#include "api_server.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support.h"
#include "core/token.h"
#include "node/http/api_pool.h"
#include "store/tokens.h"
#include "store/store.h"

void test_api_token(cohort_store_t *store, mongoc_client_t *client, const char *name,
                    const char *scopes, char *token)
{
    uint32_t bits = 0;
    bson_error_t error;
    cr_assert(cohort_scopes_parse(scopes, &bits, &error), "%s", error.message);
    char hash[COHORT_TOKEN_HASH_HEX];
    cr_assert(cohort_token_generate(token, COHORT_TOKEN_TEXT_MAX, &error), "%s", error.message);
    cr_assert(cohort_token_hash(token, hash, sizeof hash));
    bson_t array = BSON_INITIALIZER;
    uint32_t n = 0;
    for (int i = 0; i < COHORT_SCOPE_COUNT; i++) {
        if (bits & (1u << i)) {
            char key[8];
            snprintf(key, sizeof key, "%u", n++);
            BSON_APPEND_UTF8(&array, key, cohort_scope_names[i]);
        }
    }
    bool exists = false;
    cr_assert(cohort_store_create_token(store, client, name, hash, &array, "test", &exists,
                                        &error),
              "%s", error.message);
    bson_destroy(&array);
}

static void server_watch(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    test_api_server_t *s = arg;
    s->connections = cohort_http_connections(s->http);
    s->held = cohort_api_pool_held(s->pool);
    if (s->stop)
        event_base_loopbreak(s->base);
}

/* As cohortd does: the API's threads answer, the loop sends. */
static void server_api(void *arg, const cohort_api_request_t *request, void *origin)
{
    cohort_api_pool_submit(((test_api_server_t *)arg)->pool, request, origin);
}

static bool server_deliver(void *arg, void *origin, const cohort_api_reply_t *reply)
{
    (void)arg;
    return cohort_http_api_reply(origin, reply);
}

static bool server_client_gone(void *arg, void *origin)
{
    (void)arg;
    return cohort_http_api_client_gone(origin);
}

static void server_api_gone(void *arg, void *origin)
{
    cohort_api_pool_gone(((test_api_server_t *)arg)->pool, origin);
}

static bool server_ready(void *arg, char *why, size_t len)
{
    (void)arg, (void)why, (void)len;
    return true;
}

static char *server_metrics(void *arg, size_t *len)
{
    test_api_server_t *s = arg;
    char *text = malloc(s->metrics_bytes + 1);
    if (!text)
        return NULL;
    memset(text, 'x', s->metrics_bytes);
    text[s->metrics_bytes] = '\0';
    *len = s->metrics_bytes;
    return text;
}

static void *server_loop(void *arg)
{
    event_base_dispatch(((test_api_server_t *)arg)->base);
    return NULL;
}

static void server_start(test_api_server_t *s, cohort_store_t *store,
                         const cohort_http_callbacks_t *limits, size_t metrics_bytes,
                         const cohort_api_options_t *options)
{
    memset(s, 0, sizeof *s);
    signal(SIGPIPE, SIG_IGN); /* as cohortd does: a write to a closed socket is an error */
    s->store = store;
    s->metrics_bytes = metrics_bytes;
    s->base = event_base_new();
    s->client = cohort_store_pop(store);
    s->api = cohort_api_new(options);
    bson_error_t perr;
    s->pool = cohort_api_pool_start(s->base, s->api, store, 2, server_deliver, server_client_gone,
                                    s, &perr);
    cr_assert_not_null(s->pool, "%s", perr.message);
    cohort_http_callbacks_t callbacks = *limits;
    callbacks.ready = server_ready;
    callbacks.metrics = server_metrics;
    callbacks.api = server_api;
    callbacks.api_gone = server_api_gone;
    callbacks.arg = s;
    srand((unsigned)getpid() ^ (unsigned)test_now_ms());
    for (int attempt = 0; attempt < 50 && !s->http; attempt++) {
        s->port = 20000 + (int)((unsigned)rand() % 30000);
        char listen[32];
        snprintf(listen, sizeof listen, "127.0.0.1:%d", s->port);
        bson_error_t error;
        s->http = cohort_http_start(s->base, listen, &callbacks, &error);
    }
    cr_assert_not_null(s->http, "no free port");
    s->watch = event_new(s->base, -1, EV_PERSIST, server_watch, s);
    struct timeval every = {0, 20000};
    event_add(s->watch, &every);
    pthread_create(&s->thread, NULL, server_loop, s);
}

void test_api_server_start(test_api_server_t *s, cohort_store_t *store,
                           const cohort_http_callbacks_t *limits, size_t metrics_bytes)
{
    cohort_api_options_t options = {.store = store, .token_ttl_ms = 300};
    server_start(s, store, limits, metrics_bytes, &options);
}

void test_api_server_start_api(test_api_server_t *s, cohort_store_t *store,
                               const cohort_http_callbacks_t *limits,
                               const cohort_api_options_t *options)
{
    server_start(s, store, limits, 0, options);
}

void test_api_server_stop(test_api_server_t *s)
{
    s->stop = true;
    pthread_join(s->thread, NULL);
    event_free(s->watch);
    cohort_api_pool_destroy(s->pool);
    cohort_http_destroy(s->http);
    cohort_api_destroy(s->api);
    event_base_free(s->base);
    cohort_store_push(s->store, s->client);
}

int test_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&addr, sizeof addr), 0, "connect: %s",
                 strerror(errno));
    return fd;
}

char *test_read_until_closed(int fd, int64_t timeout_ms)
{
    static char buf[65536];
    size_t used = 0;
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - test_now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return NULL;
        ssize_t n = recv(fd, buf + used, sizeof buf - used - 1, 0);
        if (n <= 0)
            break;
        used += (size_t)n;
        if (used == sizeof buf - 1)
            used = 0; /* keep reading: only the end matters then */
    }
    buf[used] = '\0';
    return buf;
}

bool test_closed_within(int fd, int64_t timeout_ms)
{
    return test_read_until_closed(fd, timeout_ms) != NULL;
}
