/*
 * notify.c - readiness for a systemd Type=notify unit (src/node/notify.c): a node started with
 * NOTIFY_SOCKET sends READY=1 exactly once, and only after it has registered in the database
 * and prepared its services; it sends STOPPING=1 when SIGTERM arrives and still exits 0. A
 * node that cannot reach its database never says READY=1 (so systemd keeps the unit
 * "activating" and its start timeout reports the problem), yet stops cleanly.
 *
 * The test plays systemd's part: a datagram socket in the abstract namespace (no path-length
 * or cleanup concerns) whose name goes to cohortd in NOTIFY_SOCKET.
 *
 * The watchdog (WatchdogSec= in the unit, WATCHDOG_USEC in the environment): the node sends
 * WATCHDOG=1 from its loop at a quarter of that interval, none while the process is stopped
 * (SIGSTOP: what systemd sees of a wedged node), again once it runs; none when WATCHDOG_USEC
 * is unset or WATCHDOG_PID names another process (sd_watchdog_enabled(3)).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "notified"

TestSuite(cluster_notify, .fini = cluster_cleanup_all, .timeout = 120);

/* What the node has told us so far. */
typedef struct listener {
    int fd;
    char env[128]; /* "NOTIFY_SOCKET=@..." for the node */
    int ready;     /* READY=1 lines received */
    int stopping;  /* STOPPING=1 lines received */
    int statuses;  /* STATUS= lines received */
    int watchdogs; /* WATCHDOG=1 lines received */
    char status[256];
    char transcript[2048]; /* every message, for failure reports */
} listener_t;

static void listener_open(listener_t *l)
{
    static int counter;
    memset(l, 0, sizeof *l);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    /* Abstract socket: sun_path[0] is NUL; NOTIFY_SOCKET spells that NUL as '@'. */
    int len = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "cohort-test-notify-%ld-%d",
                       (long)getpid(), ++counter);
    snprintf(l->env, sizeof l->env, "NOTIFY_SOCKET=@%s", addr.sun_path + 1);
    l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(l->fd, 0, "socket: %s", strerror(errno));
    socklen_t size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
    cr_assert_eq(bind(l->fd, (struct sockaddr *)&addr, size), 0, "bind %s: %s", l->env,
                 strerror(errno));
}

/* Counts the lines of one message ("READY=1\nSTATUS=..." may come as one datagram). */
static void listener_take(listener_t *l, char *message)
{
    size_t used = strlen(l->transcript);
    if (strcmp(message, "WATCHDOG=1") == 0 && used > sizeof l->transcript / 2)
        used = sizeof l->transcript; /* keep room for the rest: pings come every 250 ms */
    if (used < sizeof l->transcript)
        snprintf(l->transcript + used, sizeof l->transcript - used, "[%s] ", message);
    for (char *line = strtok(message, "\n"); line; line = strtok(NULL, "\n")) {
        if (strcmp(line, "READY=1") == 0)
            l->ready++;
        else if (strcmp(line, "STOPPING=1") == 0)
            l->stopping++;
        else if (strcmp(line, "WATCHDOG=1") == 0)
            l->watchdogs++;
        else if (strncmp(line, "STATUS=", 7) == 0) {
            snprintf(l->status, sizeof l->status, "%s", line + 7);
            l->statuses++;
        }
    }
}

/* Takes messages until *counter > 0 or timeout_ms passes (0: just what is queued now).
 * Returns whether *counter > 0. */
static bool listener_wait(listener_t *l, const int *counter, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        if (*counter > 0)
            return true;
        int64_t left = deadline - test_now_ms();
        struct pollfd p = {.fd = l->fd, .events = POLLIN};
        if (poll(&p, 1, left > 0 ? (int)left : 0) <= 0)
            return *counter > 0;
        char message[1024];
        ssize_t got = recv(l->fd, message, sizeof message - 1, 0);
        cr_assert_geq(got, 0, "recv: %s", strerror(errno));
        message[got] = '\0';
        listener_take(l, message);
    }
}

/* Takes messages until the latest STATUS contains `needle` or timeout_ms passes. STATUS is a
 * datagram of its own, sent after READY=1, so on a busy machine it may not be queued yet. */
static bool listener_wait_status(listener_t *l, const char *needle, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    while (!strstr(l->status, needle)) {
        int64_t left = deadline - test_now_ms();
        if (left <= 0)
            return false;
        int seen = l->statuses;
        l->statuses = 0;
        listener_wait(l, &l->statuses, left);
        l->statuses += seen;
    }
    return true;
}

/* Takes every message queued now. */
static void listener_drain(listener_t *l)
{
    static const int never = 0;
    listener_wait(l, &never, 0);
}

/* Milliseconds of the node's `seen_at` (server time of its last ping); 0 if none yet. */
static int64_t node_seen_at(cluster_t *c, const char *node_id)
{
    char filter[128];
    snprintf(filter, sizeof filter, "{\"_id\": \"%s\"}", node_id);
    bson_t doc;
    int64_t seen = 0;
    if (test_find_one(c->client, c->db, "nodes", filter, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, &doc, "seen_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
            seen = bson_iter_date_time(&it);
    }
    bson_destroy(&doc);
    return seen;
}

Test(cluster_notify, ready_once_after_prepared_then_stopping)
{
#ifndef COHORT_HAVE_SYSTEMD
    cr_skip_test("built without libsystemd: cohortd sends no notifications");
#endif
    cluster_options_t options = {.tag = "notify", .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    listener_t l;
    listener_open(&l);
    const char *env[] = {l.env, NULL};
    cluster_node_t *node = cluster_add_node(c, env);
    cluster_node_start(node);

    cluster_assert(c, listener_wait(&l, &l.ready, 20000), "no READY=1 within 20 s; received: %s",
                   l.transcript);
    /* Ready means reachable and prepared: both are visible in the database already. */
    int64_t seen = node_seen_at(c, node->id);
    cluster_assert(c, seen > 0, "READY=1 came before the node registered in `nodes`");
    cluster_primacy_t primacy;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &primacy),
                   "READY=1 came before the service's document existed");
    cluster_assert(c, listener_wait_status(&l, "1 service(s)", 20000),
                   "STATUS does not describe the running node within 20 s: '%s'", l.status);

    /* Two more pings (ticks) later it still has said READY=1 only once. */
    int64_t before = seen, deadline = test_now_ms() + 20000;
    for (int pings = 0; pings < 2; test_sleep_ms(c->tick_ms / 4)) {
        cluster_assert(c, cluster_node_alive(node), "the node exited");
        cluster_assert(c, test_now_ms() < deadline, "the node stopped pinging");
        int64_t now = node_seen_at(c, node->id);
        if (now > before) {
            pings++;
            before = now;
        }
    }
    listener_drain(&l);
    cluster_assert(c, l.ready == 1, "READY=1 sent %d times: %s", l.ready, l.transcript);
    cluster_assert(c, l.stopping == 0, "STOPPING=1 before any signal: %s", l.transcript);
    cluster_assert(c, l.watchdogs == 0, "WATCHDOG=1 without WATCHDOG_USEC: %s", l.transcript);

    int64_t start = test_now_ms();
    cluster_node_send_term(node);
    cluster_assert(c, listener_wait(&l, &l.stopping, 15000),
                   "no STOPPING=1 within 15 s of SIGTERM; received: %s", l.transcript);
    cluster_assert(c, cluster_node_wait_exit(node, start, 15000) >= 0,
                   "the node did not exit after SIGTERM");
    cluster_node_assert_clean_exit(node);
    listener_drain(&l);
    cluster_assert(c, l.ready == 1, "READY=1 sent %d times: %s", l.ready, l.transcript);
    close(l.fd);
}

Test(cluster_notify, no_ready_without_database)
{
#ifndef COHORT_HAVE_SYSTEMD
    cr_skip_test("built without libsystemd: cohortd sends no notifications");
#endif
    /* A port nothing listens on: every ping fails at once (connection refused). */
    char uri[160];
    snprintf(uri, sizeof uri,
             "mongodb://127.0.0.1:%d/?serverSelectionTimeoutMS=300&connectTimeoutMS=300",
             cluster_free_port());
    cluster_options_t options = {.tag = "notify_nodb", .uri = uri, .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    listener_t l;
    listener_open(&l);
    const char *env[] = {l.env, NULL};
    cluster_node_t *node = cluster_add_node(c, env);
    cluster_node_start(node);

    cluster_assert(c, cluster_wait_log(node, "database unreachable", NULL, 20000),
                   "the node did not report the unreachable database");
    /* It keeps retrying (with backoff) and must not claim readiness meanwhile: listen across
     * several of its retries. */
    cluster_assert(c, !listener_wait(&l, &l.ready, 5 * c->tick_ms),
                   "READY=1 although the database is unreachable: %s", l.transcript);
    cluster_assert(c, cluster_node_alive(node), "the node gave up instead of retrying");

    int64_t start = test_now_ms();
    cluster_node_send_term(node);
    cluster_assert(c, listener_wait(&l, &l.stopping, 15000),
                   "no STOPPING=1 within 15 s of SIGTERM; received: %s", l.transcript);
    cluster_assert(c, cluster_node_wait_exit(node, start, 15000) >= 0,
                   "the node did not exit after SIGTERM");
    cluster_node_assert_clean_exit(node);
    cluster_assert(c, l.ready == 0, "READY=1 although the database is unreachable: %s",
                   l.transcript);
    close(l.fd);
}

/* WATCHDOG=1 lines that arrive within ms (the count before is kept). */
static int watchdogs_within(listener_t *l, int64_t ms)
{
    static const int never = 0;
    int before = l->watchdogs;
    int64_t deadline = test_now_ms() + ms;
    while (test_now_ms() < deadline)
        listener_wait(l, &never, deadline - test_now_ms());
    return l->watchdogs - before;
}

Test(cluster_notify, watchdog_pings_from_the_loop)
{
#ifndef COHORT_HAVE_SYSTEMD
    cr_skip_test("built without libsystemd: cohortd sends no notifications");
#endif
    cluster_options_t options = {.tag = "notify_wd", .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    listener_t l, other;
    listener_open(&l);
    listener_open(&other);
    /* 1 s: a ping every 250 ms. */
    const char *env[] = {l.env, "WATCHDOG_USEC=1000000", NULL};
    cluster_node_t *node = cluster_add_node(c, env);
    cluster_node_start(node);
    /* The same, but the manager watches another process (WATCHDOG_PID): no pings. */
    const char *other_env[] = {other.env, "WATCHDOG_USEC=1000000", "WATCHDOG_PID=1", NULL};
    cluster_node_t *bystander = cluster_add_node(c, other_env);
    cluster_node_start(bystander);
    cluster_assert(c, listener_wait(&l, &l.ready, 20000), "no READY=1 within 20 s; received: %s",
                   l.transcript);
    cluster_assert(c, listener_wait(&other, &other.ready, 20000),
                   "the bystander sent no READY=1 within 20 s; received: %s", other.transcript);

    /* 3 s: 12 pings on a quiet machine; 3 is far from the 1 s watchdog. */
    int pings = watchdogs_within(&l, 3000);
    cluster_assert(c, pings >= 3, "%d WATCHDOG=1 in 3 s with WATCHDOG_USEC=1000000: %s", pings,
                   l.transcript);

    /* A node that does not run sends nothing: systemd's watchdog would fire. */
    cluster_node_pause(node);
    test_sleep_ms(300);
    listener_drain(&l);
    pings = watchdogs_within(&l, 1500);
    cluster_node_resume(node);
    cluster_assert(c, pings == 0, "%d WATCHDOG=1 from a stopped process", pings);
    l.watchdogs = 0;
    cluster_assert(c, listener_wait(&l, &l.watchdogs, 10000),
                   "no WATCHDOG=1 within 10 s of SIGCONT: %s", l.transcript);

    listener_drain(&other);
    cluster_assert(c, other.watchdogs == 0,
                   "WATCHDOG=1 although WATCHDOG_PID names another process: %s",
                   other.transcript);

    cluster_assert(c, cluster_node_stop_ok(node, 15000) >= 0, "the node did not stop");
    cluster_assert(c, cluster_node_stop_ok(bystander, 15000) >= 0, "the bystander did not stop");
    close(l.fd);
    close(other.fd);
}
