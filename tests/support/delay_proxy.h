/*
 * delay_proxy.h - a TCP proxy inside the test process that holds back the database's replies.
 *
 * It listens on 127.0.0.1 (a free port) and forwards each connection to the target. What the
 * client sends goes through at once; every chunk the server sends back is delivered `delay`
 * ms after it arrived, chunks of one connection in order and without adding up (a reply
 * pipelined behind another waits only its own delay). So each command's round trip grows by
 * the delay, as with a database that answers slowly, whatever the connection carries.
 *
 * Used by cluster tests that point one node at the proxy (see cluster_add_node()'s env) and
 * change the delay while it runs. The chaos harness's proxy (tests/chaos/proxy.py) delays both
 * directions and is driven from Python; this one needs no interpreter.
 */
#ifndef COHORT_TEST_DELAY_PROXY_H
#define COHORT_TEST_DELAY_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct delay_proxy delay_proxy_t;

/* host and port of a single-server mongodb:// URI; false for anything else (a replica set,
 * SRV, several hosts, credentials), which the proxy cannot stand in for. */
bool delay_proxy_single_server(const char *uri, char *host, size_t hostlen, int *port);

/* Starts forwarding 127.0.0.1:<port> to host:port. Fails the test if it cannot listen. */
delay_proxy_t *delay_proxy_start(const char *host, int port);

/* Starts a proxy in front of the database of `uri` and writes the environment entry that points
 * a node at it, "MONGODB_URI=mongodb://127.0.0.1:<port>", into uri_env (for cluster_add_node()).
 * Skips the test when `uri` is not one server (delay_proxy_single_server()). */
delay_proxy_t *delay_proxy_in_front_of(const char *uri, char *uri_env, size_t len);

/* The port it listens on. */
int delay_proxy_port(const delay_proxy_t *proxy);

/* Every reply chunk arriving from now on is held `ms` before it is delivered (0: none). */
void delay_proxy_set_reply_delay(delay_proxy_t *proxy, int64_t ms);

/* The next `n` replies (chunks), on whichever connections they come, are dropped and their
 * connection closed: the server did the work and the client sees a network error. */
void delay_proxy_cut_replies(delay_proxy_t *proxy, int64_t n);

/* Replies delivered so far (chunks), for a test to see that traffic went through it. */
int64_t delay_proxy_replies(const delay_proxy_t *proxy);

/* Closes every connection and the listener, joins its threads, frees it (NULL is fine). */
void delay_proxy_stop(delay_proxy_t *proxy);

#endif
