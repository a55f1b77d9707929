/*
 * delay_proxy.c - a TCP proxy that holds back replies (see delay_proxy.h).
 *
 * One thread accepts; each connection gets a thread that polls both sockets. Requests are
 * written upstream as they come; replies are queued with the time they are due and written
 * back once it has come. Threads look at the stop flag at least every 50 ms.
 */
#include "delay_proxy.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support.h"

#define CHUNK 65536
#define POLL_MS 50

struct delay_proxy {
    char host[256];
    int target_port;
    int listen_fd;
    int port;
    pthread_t acceptor;
    _Atomic bool stopping;
    _Atomic int64_t delay_ms;
    _Atomic int64_t replies;
    _Atomic int64_t cuts; /* replies still to be dropped with their connection */
    _Atomic int connections; /* connection threads still running */
};

typedef struct chunk {
    struct chunk *next;
    int64_t due_ms;
    size_t len;
    char data[];
} chunk_t;

typedef struct connection {
    delay_proxy_t *proxy;
    int client, server;
    chunk_t *head, *tail; /* replies waiting for their time */
} connection_t;

static bool write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

static int connect_target(const delay_proxy_t *p)
{
    char port[16];
    snprintf(port, sizeof port, "%d", p->target_port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found;
    if (getaddrinfo(p->host, port, &hints, &found) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *a = found; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    return fd;
}

/* Reads what the server sent and queues it, due `delay` ms from now. */
static bool queue_reply(connection_t *c)
{
    chunk_t *k = malloc(sizeof *k + CHUNK);
    if (!k)
        return false;
    ssize_t n = read(c->server, k->data, CHUNK);
    if (n <= 0) {
        free(k);
        return false;
    }
    int64_t cuts = atomic_load(&c->proxy->cuts);
    while (cuts > 0 && !atomic_compare_exchange_weak(&c->proxy->cuts, &cuts, cuts - 1))
        ;
    if (cuts > 0) { /* the server did the work; the client never hears of it */
        free(k);
        return false;
    }
    k->len = (size_t)n;
    k->next = NULL;
    k->due_ms = test_now_ms() + atomic_load(&c->proxy->delay_ms);
    if (c->tail)
        c->tail->next = k;
    else
        c->head = k;
    c->tail = k;
    return true;
}

/* Writes back the replies whose time has come. */
static bool deliver_due(connection_t *c)
{
    while (c->head && c->head->due_ms <= test_now_ms()) {
        chunk_t *k = c->head;
        bool ok = write_all(c->client, k->data, k->len);
        c->head = k->next;
        if (!c->head)
            c->tail = NULL;
        free(k);
        if (!ok)
            return false;
        atomic_fetch_add(&c->proxy->replies, 1);
    }
    return true;
}

static bool forward_request(connection_t *c)
{
    char buf[CHUNK];
    ssize_t n = read(c->client, buf, sizeof buf);
    return n > 0 && write_all(c->server, buf, (size_t)n);
}

static void *connection_main(void *arg)
{
    connection_t *c = arg;
    bool open = true;
    while (open && !atomic_load(&c->proxy->stopping)) {
        int64_t wait = POLL_MS;
        if (c->head) {
            int64_t until = c->head->due_ms - test_now_ms();
            wait = until < 0 ? 0 : until < wait ? until : wait;
        }
        struct pollfd fds[2] = {{.fd = c->client, .events = POLLIN},
                                {.fd = c->server, .events = POLLIN}};
        if (poll(fds, 2, (int)wait) < 0)
            break;
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
            open = forward_request(c);
        if (open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)))
            open = queue_reply(c);
        if (open)
            open = deliver_due(c);
    }
    while (c->head) {
        chunk_t *k = c->head;
        c->head = k->next;
        free(k);
    }
    close(c->client);
    close(c->server);
    atomic_fetch_sub(&c->proxy->connections, 1);
    free(c);
    return NULL;
}

static void start_connection(delay_proxy_t *p, int client)
{
    int server = connect_target(p);
    connection_t *c = server >= 0 ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        if (server >= 0)
            close(server);
        close(client);
        return;
    }
    *c = (connection_t){.proxy = p, .client = client, .server = server};
    atomic_fetch_add(&p->connections, 1);
    pthread_t thread;
    if (pthread_create(&thread, NULL, connection_main, c) != 0) {
        atomic_fetch_sub(&p->connections, 1);
        close(client);
        close(server);
        free(c);
        return;
    }
    pthread_detach(thread);
}

static void *acceptor_main(void *arg)
{
    delay_proxy_t *p = arg;
    while (!atomic_load(&p->stopping)) {
        struct pollfd fd = {.fd = p->listen_fd, .events = POLLIN};
        if (poll(&fd, 1, POLL_MS) <= 0)
            continue;
        int client = accept(p->listen_fd, NULL, NULL);
        if (client >= 0)
            start_connection(p, client);
    }
    return NULL;
}

delay_proxy_t *delay_proxy_start(const char *host, int port)
{
    delay_proxy_t *p = calloc(1, sizeof *p);
    cr_assert_not_null(p);
    snprintf(p->host, sizeof p->host, "%s", host);
    p->target_port = port;
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(p->listen_fd, 0, "proxy: socket() failed");
    int one = 1;
    setsockopt(p->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    cr_assert_eq(bind(p->listen_fd, (struct sockaddr *)&addr, sizeof addr), 0,
                 "proxy: bind() failed");
    cr_assert_eq(listen(p->listen_fd, 64), 0, "proxy: listen() failed");
    getsockname(p->listen_fd, (struct sockaddr *)&addr, &len);
    p->port = ntohs(addr.sin_port);
    cr_assert_eq(pthread_create(&p->acceptor, NULL, acceptor_main, p), 0,
                 "proxy: cannot start its thread");
    return p;
}

int delay_proxy_port(const delay_proxy_t *p)
{
    return p->port;
}

void delay_proxy_cut_replies(delay_proxy_t *p, int64_t n)
{
    atomic_store(&p->cuts, n);
}

void delay_proxy_set_reply_delay(delay_proxy_t *p, int64_t ms)
{
    atomic_store(&p->delay_ms, ms);
}

int64_t delay_proxy_replies(const delay_proxy_t *p)
{
    return atomic_load(&((delay_proxy_t *)p)->replies);
}

void delay_proxy_stop(delay_proxy_t *p)
{
    if (!p)
        return;
    atomic_store(&p->stopping, true);
    pthread_join(p->acceptor, NULL);
    close(p->listen_fd);
    while (atomic_load(&p->connections) > 0)
        test_sleep_ms(10);
    free(p);
}

bool delay_proxy_single_server(const char *uri, char *host, size_t hostlen, int *port)
{
    const char *p = strncmp(uri, "mongodb://", 10) == 0 ? uri + 10 : NULL;
    if (!p || strchr(p, ',') || strstr(p, "replicaSet") || strchr(p, '@'))
        return false;
    size_t len = strcspn(p, "/?");
    const char *colon = memchr(p, ':', len);
    if (!colon || (size_t)(colon - p) >= hostlen)
        return false;
    snprintf(host, hostlen, "%.*s", (int)(colon - p), p);
    *port = atoi(colon + 1);
    return *port > 0;
}

delay_proxy_t *delay_proxy_in_front_of(const char *uri, char *uri_env, size_t len)
{
    char host[256];
    int port = 0;
    if (!delay_proxy_single_server(uri, host, sizeof host, &port))
        cr_skip_test("MONGODB_URI '%s' is not one server: the proxy cannot stand in for it", uri);
    delay_proxy_t *proxy = delay_proxy_start(host, port);
    snprintf(uri_env, len, "MONGODB_URI=mongodb://127.0.0.1:%d", delay_proxy_port(proxy));
    return proxy;
}
