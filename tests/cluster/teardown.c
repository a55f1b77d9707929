/*
 * teardown.c - a node serving the HTTP API exits cleanly on SIGTERM whatever its clients do
 * meanwhile (issue 22: the chaos harness saw cohortd die of SIGSEGV after SIGTERM, twice).
 *
 * After the drain the node stops the API's threads (answering the claims they hold) and runs
 * its loop once more to write those answers out. A request that reached the node while it
 * was stepping down is read in that last run of the loop: it must get an answer (503), not a
 * dead API pool. To make that happen every time, the node reaches the database through a
 * proxy (tests/support/delay_proxy.h) that holds replies back while it steps down, and the
 * test sends that request on a connection the node accepted before SIGTERM.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster.h"
#include "delay_proxy.h"
#include "http_client.h"
#include "support.h"

#define SERVICE "ext"

TestSuite(cluster_teardown, .fini = cluster_cleanup_all, .timeout = 120);

/* A connection to 127.0.0.1:port with nothing sent yet. */
static int connect_idle(cluster_t *c, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cluster_assert(c, fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cluster_assert(c, connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0,
                   "cannot connect to the node's API: %s", strerror(errno));
    return fd;
}

Test(cluster_teardown, a_request_arriving_while_stepping_down_gets_an_answer)
{
    cluster_options_t options = {
        .tag = "teardown",
        .services = {{.name = SERVICE, .handler = "external"}},
    };
    cluster_t *c = cluster_new(&options);
    char uri_env[128];
    delay_proxy_t *proxy = delay_proxy_in_front_of(c->uri, uri_env, sizeof uri_env);
    const char *env[] = {uri_env, NULL};
    cluster_node_t *n = cluster_add_node(c, env);
    int port = cluster_node_listen(n, "api_threads = 2");
    cluster_node_start(n);
    cluster_primacy_t p;
    cluster_assert(c, cluster_wait_primary(c, SERVICE, NULL, 30000, &p), "no primary");

    char *auth = cluster_api_auth(c, "all", "work,read");

    /* An external worker's long-poll, held by the node (as the chaos harness's were). */
    int held = http_send(port, "POST", "/api/v1/services/" SERVICE "/claims", auth,
                         "{\"worker\": \"w1\", \"wait_ms\": 30000}");
    cluster_assert(c, held >= 0, "the node did not take the claim");
    /* A keep-alive connection the node has accepted, with no request yet. */
    int idle = connect_idle(c, port);
    test_sleep_ms(500);

    /* Every reply of the database now waits: the step-down takes that long. */
    delay_proxy_set_reply_delay(proxy, 2000);
    cluster_node_send_term(n);
    int64_t term_at = test_now_ms();
    cluster_assert(c, cluster_wait_log(n, "stopping claims", NULL, 15000),
                   "the node never handled SIGTERM");
    char request[512];
    int len = snprintf(request, sizeof request,
                       "GET /api/v1/services HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s"
                       "Connection: close\r\n\r\n",
                       port, auth);
    cluster_assert(c, send(idle, request, (size_t)len, MSG_NOSIGNAL) == len,
                   "cannot send the request: %s", strerror(errno));

    int64_t exit_ms = cluster_node_wait_exit(n, term_at, c->shutdown_grace_ms + 20000);
    cluster_assert(c, exit_ms >= 0, "the node still runs %lld ms after SIGTERM",
                   (long long)(c->shutdown_grace_ms + 20000));
    cluster_node_assert_clean_exit(n);

    /* Both clients got an answer: the held claim its empty one, the late request a 503. */
    http_response_t r;
    cluster_assert(c, http_read_response(held, 5000, &r), "the held claim was not answered");
    cluster_assert(c, r.status == 200, "the held claim answered %d %s", r.status,
                   r.body ? r.body : "");
    http_response_free(&r);
    cluster_assert(c, http_read_response(idle, 5000, &r), "the late request was not answered");
    cluster_assert(c, r.status == 503 && r.body && strstr(r.body, "shutting down"),
                   "the late request answered %d %s", r.status, r.body ? r.body : "");
    http_response_free(&r);
    delay_proxy_stop(proxy);
    free(auth);
}
