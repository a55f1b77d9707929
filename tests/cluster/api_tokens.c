/*
 * api_tokens.c - the HTTP API on real cohortd processes: a token made with `cohortctl tokens
 * create` works on every node, and once `cohortctl tokens revoke` returns, every node refuses
 * it (401) within one tick (the nodes' token cache lives a tick) plus a second of slack for a
 * busy machine. Then 1,000 idle connections against one node: /healthz still answers within a
 * second while they are open, the node logs that it closed the oldest past
 * http_max_connections (256), and every one of them is closed by the request deadline (10 s).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_server.h"
#include "cluster.h"
#include "http_client.h"
#include "support.h"

#define SERVICE "apisvc"
#define TICK_MS 200

TestSuite(cluster_api_tokens, .fini = cluster_cleanup_all, .timeout = 240);

static cluster_node_t *add_http_node(cluster_t *c, int port)
{
    cluster_node_t *n = cluster_add_node(c, NULL);
    char extra[64];
    snprintf(extra, sizeof extra, "http_listen = 127.0.0.1:%d", port);
    cluster_node_config_add(n, extra);
    return n;
}

/* The status of GET path, with the token if not NULL (0: no answer within 5 s). */
static int get_with(int port, const char *path, const char *token)
{
    char auth[160] = "";
    if (token)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
    http_response_t r;
    if (!http_request_with(port, "GET", path, auth, NULL, 5000, &r))
        return 0;
    int status = r.status;
    http_response_free(&r);
    return status;
}

typedef struct status_wait {
    int port;
    const char *path, *token;
    int want;
} status_wait_t;

static bool answers(void *arg)
{
    status_wait_t *w = arg;
    return get_with(w->port, w->path, w->token) == w->want;
}

static void start(cluster_t **out, int ports[2])
{
    cluster_options_t options = {
        .tag = "apitok", .tick_ms = TICK_MS, .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    for (int i = 0; i < 2; i++) {
        ports[i] = cluster_free_port();
        cluster_node_start(add_http_node(c, ports[i]));
    }
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");
    for (int i = 0; i < 2; i++) {
        status_wait_t w = {.port = ports[i], .path = "/readyz", .want = 200};
        cluster_assert(c, test_wait_until(answers, &w, 20000), "node %d is not ready", i + 1);
    }
    *out = c;
}

Test(cluster_api_tokens, a_revoked_token_is_refused_by_every_node_within_a_tick)
{
    cluster_t *c;
    int ports[2];
    start(&c, ports);
    char *out = NULL;
    const char *create[] = {"tokens", "create", "ci", "--scopes", "read", NULL};
    cluster_assert(c, cluster_run_ctl_output(c, create, &out) == 0, "tokens create failed");
    char token[128];
    snprintf(token, sizeof token, "%.*s", (int)strcspn(out, "\r\n"), out);
    free(out);
    cluster_assert(c, strncmp(token, "cht_", 4) == 0, "not a token: '%s'", token);

    /* Works on both nodes (and is now in each node's cache). */
    for (int i = 0; i < 2; i++) {
        status_wait_t w = {.port = ports[i], .path = "/api/v1/services", .token = token,
                           .want = 200};
        cluster_assert(c, test_wait_until(answers, &w, 10000),
                       "node %d does not take the new token", i + 1);
        cluster_assert(c, get_with(ports[i], "/api/v1/services/" SERVICE "/counts", token) == 200,
                       "node %d: counts", i + 1);
        cluster_assert(c, get_with(ports[i], "/api/v1/services/" SERVICE "/settings", token) ==
                              200,
                       "node %d: settings", i + 1);
    }

    const char *revoke[] = {"tokens", "revoke", "ci", NULL};
    cluster_assert(c, cluster_run_ctl(c, revoke) == 0, "tokens revoke failed");
    int64_t revoked = test_now_ms();
    int64_t bound = TICK_MS + 1000;
    bool refused[2] = {false, false};
    int64_t took[2] = {0, 0};
    while (!(refused[0] && refused[1]) && test_now_ms() - revoked <= bound + 2000) {
        for (int i = 0; i < 2; i++) {
            if (refused[i])
                continue;
            int status = get_with(ports[i], "/api/v1/services", token);
            if (status == 401) {
                refused[i] = true;
                took[i] = test_now_ms() - revoked;
            }
        }
        test_sleep_ms(10);
    }
    for (int i = 0; i < 2; i++) {
        cluster_assert(c, refused[i], "node %d still takes the revoked token after %lld ms",
                       i + 1, (long long)(test_now_ms() - revoked));
        cluster_assert(c, took[i] <= bound,
                       "node %d refused the revoked token only after %lld ms (bound: one tick, "
                       "%d ms, + 1 s)",
                       i + 1, (long long)took[i], TICK_MS);
        /* and keeps refusing it */
        for (int k = 0; k < 5; k++)
            cluster_assert(c, get_with(ports[i], "/api/v1/services", token) == 401,
                           "node %d took the revoked token again", i + 1);
    }
}

Test(cluster_api_tokens, a_thousand_idle_connections_neither_crash_nor_block_a_node)
{
    cluster_t *c;
    int ports[2];
    start(&c, ports);
    enum { N = 1000 };
    static int fds[N];
    for (int i = 0; i < N; i++)
        fds[i] = test_connect(ports[0]);
    int64_t opened = test_now_ms();
    for (int round = 0; round < 3; round++) {
        int64_t t0 = test_now_ms();
        http_response_t r;
        bool ok = http_request(ports[0], "GET", "/healthz", 1000, &r);
        int64_t took = test_now_ms() - t0;
        cluster_assert(c, ok && r.status == 200 && took <= 1000,
                       "/healthz with 1,000 idle connections open: %s after %lld ms",
                       ok ? "answered" : "no answer", (long long)took);
        http_response_free(&r);
    }
    cluster_assert(c, cluster_wait_log(&c->nodes[0], "over http_max_connections = 256", NULL,
                                       5000),
                   "no log line about the connections past the cap");
    /* Each is closed: the oldest at once by the cap, the rest by the 10 s request deadline. */
    for (int i = 0; i < N; i++) {
        int64_t left = opened + 10000 + 5000 - test_now_ms();
        cluster_assert(c, test_closed_within(fds[i], left > 0 ? left : 1),
                       "idle connection %d of %d still open %lld ms after they were opened", i,
                       N, (long long)(test_now_ms() - opened));
    }
    for (int i = 0; i < N; i++)
        close(fds[i]);
    cluster_assert(c, cluster_node_alive(&c->nodes[0]), "the node died");
    http_response_t r;
    cluster_assert(c, http_request(ports[0], "GET", "/readyz", 5000, &r) && r.status == 200,
                   "the node is not ready after the flood");
    http_response_free(&r);
    cluster_node_stop_ok(&c->nodes[0], 15000);
    cluster_node_stop_ok(&c->nodes[1], 15000);
}
