/*
 * http.c - the observability of real cohortd processes: each node with http_listen on a
 * port of its own answers /healthz, /readyz and /metrics; readiness follows the database
 * (503 while it cannot be reached, 200 again once it can); the metrics parse as Prometheus
 * text (the tests' strict parser, and `promtool check metrics` when the Debian prometheus
 * package is installed) and their counters move as tasks run; an address that cannot be
 * bound stops the node at start with an error naming http_listen; log_format = json makes
 * every log line a JSON object.
 *
 * HTTP is spoken from C over a plain socket (HTTP/1.1, Connection: close), so the tests
 * need no HTTP client program.
 */
#include <arpa/inet.h>
#include <bson/bson.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.h"
#include "core/status.h"
#include "http_client.h"
#include "prometheus.h"
#include "support.h"

#define SERVICE "obs"
#define TASKS 40

TestSuite(cluster_http, .fini = cluster_cleanup_all, .timeout = 180);

/* The value of header `name` (case-insensitive), or NULL; static buffer. */
static const char *http_header(const http_response_t *r, const char *name)
{
    static char value[256];
    size_t n = strlen(name);
    for (const char *line = strstr(r->headers, "\r\n"); line; line = strstr(line, "\r\n")) {
        line += 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            snprintf(value, sizeof value, "%.*s", (int)strcspn(v, "\r\n"), v);
            return value;
        }
    }
    return NULL;
}

/* GET that must succeed (the node answers) within 15 s. */
static void http_get_ok(cluster_t *c, int port, const char *path, http_response_t *out)
{
    cluster_assert(c, http_request(port, "GET", path, 15000, out),
                   "no HTTP answer from 127.0.0.1:%d%s within 15 s", port, path);
}

typedef struct status_wait {
    int port;
    const char *path;
    int status;
    http_response_t last;
} status_wait_t;

static bool answers_with(void *arg)
{
    status_wait_t *w = arg;
    http_response_free(&w->last);
    return http_request(w->port, "GET", w->path, 5000, &w->last) && w->last.status == w->status;
}

/* Polls until GET path answers `status`; the last answer stays in w->last (free it). */
static bool wait_status(status_wait_t *w, int port, const char *path, int status,
                        int64_t timeout_ms)
{
    *w = (status_wait_t){.port = port, .path = path, .status = status};
    return test_wait_until(answers_with, w, timeout_ms);
}

/* ---- nodes with http_listen ----------------------------------------------------------- */

/* Adds a node whose [cluster] section also has `extra` lines (e.g. "http_listen = ..."). */
static cluster_node_t *add_node_with(cluster_t *c, const char *extra)
{
    cluster_node_t *n = cluster_add_node(c, NULL);
    cluster_node_config_add(n, extra);
    return n;
}

static cluster_node_t *add_http_node(cluster_t *c, int port, const char *more)
{
    char extra[256];
    snprintf(extra, sizeof extra, "http_listen = 127.0.0.1:%d%s%s", port, more ? "\n" : "",
             more ? more : "");
    return add_node_with(c, extra);
}

/* Scrapes /metrics and checks the text; `out` is freed by the caller (prom_free). */
static void scrape(cluster_t *c, int port, prom_text_t *out)
{
    http_response_t r;
    http_get_ok(c, port, "/metrics", &r);
    cluster_assert(c, r.status == 200, "/metrics on port %d answered %d: %s", port, r.status,
                   r.body);
    const char *type = http_header(&r, "Content-Type");
    cluster_assert(c, type && strncmp(type, "text/plain; version=0.0.4", 25) == 0,
                   "/metrics Content-Type is '%s'", type ? type : "(none)");
    char what[64];
    snprintf(what, sizeof what, "/metrics of port %d", port);
    prom_assert_valid(r.body, what, out);
    http_response_free(&r);
}

static double series(const prom_text_t *m, const char *name, const char *labels)
{
    char key[256];
    snprintf(key, sizeof key, "%s%s", name, labels ? labels : "");
    double value;
    return prom_get(m, key, &value) ? value : 0;
}

#define SVC "{service=\"" SERVICE "\"}"

/* ---- the tests ------------------------------------------------------------------------ */

Test(cluster_http, health_readiness_metrics_and_json_logs)
{
    cluster_options_t options = {.tag = "http", .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    int ports[2] = {cluster_free_port(), cluster_free_port()};
    cluster_node_start(add_http_node(c, ports[0], "log_format = json"));
    cluster_node_start(add_http_node(c, ports[1], NULL));
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");

    for (int i = 0; i < 2; i++) {
        status_wait_t w;
        cluster_assert(c, wait_status(&w, ports[i], "/readyz", 200, 15000),
                       "node %d: /readyz did not answer 200 within 15 s (last: %d %s)", i + 1,
                       w.last.status, w.last.body ? w.last.body : "");
        http_response_free(&w.last);

        http_response_t r;
        http_get_ok(c, ports[i], "/healthz", &r);
        cluster_assert(c, r.status == 200 && strcmp(r.body, "ok\n") == 0,
                       "/healthz answered %d '%s'", r.status, r.body);
        http_response_free(&r);

        http_get_ok(c, ports[i], "/nope", &r);
        cluster_assert(c, r.status == 404, "/nope answered %d", r.status);
        http_response_free(&r);
        http_get_ok(c, ports[i], "/", &r);
        cluster_assert(c, r.status == 404, "/ answered %d", r.status);
        http_response_free(&r);

        cluster_assert(c, http_request(ports[i], "POST", "/metrics", 15000, &r),
                       "no answer to POST");
        cluster_assert(c, r.status == 405, "POST /metrics answered %d", r.status);
        const char *allow = http_header(&r, "Allow");
        cluster_assert(c, allow && strstr(allow, "GET"), "405 without Allow: GET");
        http_response_free(&r);
        cluster_assert(c, http_request(ports[i], "DELETE", "/healthz", 15000, &r),
                       "no answer to DELETE");
        cluster_assert(c, r.status == 405, "DELETE /healthz answered %d", r.status);
        http_response_free(&r);

        cluster_assert(c, http_request(ports[i], "HEAD", "/healthz", 15000, &r),
                       "no answer to HEAD");
        cluster_assert(c, r.status == 200 && r.body_len == 0, "HEAD /healthz: %d, %zu bytes",
                       r.status, r.body_len);
        http_response_free(&r);
    }

    /* Exactly one node reports primacy, under the epoch in the database, and only it shows
     * the queue depth (counted on its next tick). */
    cluster_primacy_t primacy;
    cluster_assert(c, cluster_wait_primary(c, SERVICE, NULL, 10000, &primacy), "no primary");
    cluster_node_t *primary = cluster_node_by_id(c, primacy.primary);
    cluster_assert(c, primary != NULL, "unknown primary %s", primacy.primary);
    int p = primary->index - 1;
    int64_t deadline = test_now_ms() + 10000;
    prom_text_t m[2];
    for (;;) {
        scrape(c, ports[p], &m[p]);
        if (prom_count(&m[p], "cohort_queue_tasks") == COHORT_STATUS_COUNT ||
            test_now_ms() > deadline)
            break;
        prom_free(&m[p]);
        test_sleep_ms(50);
    }
    scrape(c, ports[1 - p], &m[1 - p]);
    cluster_assert(c, series(&m[p], "cohort_primary", SVC) == 1, "the primary says it is not");
    cluster_assert(c, series(&m[1 - p], "cohort_primary", SVC) == 0, "two nodes say primary");
    cluster_assert(c, series(&m[p], "cohort_epoch", SVC) == (double)primacy.epoch,
                   "cohort_epoch %g, the database says %lld", series(&m[p], "cohort_epoch", SVC),
                   (long long)primacy.epoch);
    cluster_assert(c, series(&m[p], "cohort_leader_changes_total", SVC) >= 1,
                   "the primary counted no leader change");
    cluster_assert(c, prom_count(&m[p], "cohort_queue_tasks") == COHORT_STATUS_COUNT,
                   "the primary shows no queue depth within 10 s");
    cluster_assert(c, prom_count(&m[1 - p], "cohort_queue_tasks") == 0,
                   "a secondary shows the queue depth");
    for (int i = 0; i < 2; i++) {
        cluster_assert(c, series(&m[i], "cohort_db_commands_total", NULL) > 0,
                       "node %d counted no database command", i + 1);
        cluster_assert(c, series(&m[i], "cohort_node_start_time_seconds", NULL) > 1.6e9,
                       "node %d: implausible start time", i + 1);
        cluster_assert(c, prom_count(&m[i], "cohort_build_info") == 1, "no build info");
        prom_free(&m[i]);
    }

    /* Node 1 logs JSON: every line is one object, and the role changes carry their fields. */
    cluster_node_t *json_node = &c->nodes[0];
    char *log = test_read_file(json_node->log_path);
    size_t lines = 0;
    for (char *save = NULL, *line = strtok_r(log, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), lines++) {
        bson_error_t error;
        bson_t *doc = bson_new_from_json((const uint8_t *)line, -1, &error);
        cluster_assert(c, doc != NULL, "node 1's log line is not JSON (%s): %s", error.message,
                       line);
        bson_iter_t it;
        cluster_assert(
            c,
            bson_iter_init_find(&it, doc, "time") && bson_iter_init_find(&it, doc, "level") &&
                bson_iter_init_find(&it, doc, "node") && bson_iter_init_find(&it, doc, "msg"),
            "a JSON log line lacks time, level, node or msg: %s", line);
        if (strstr(line, "became primary"))
            cluster_assert(c,
                           bson_iter_init_find(&it, doc, "service") &&
                               bson_iter_init_find(&it, doc, "role") &&
                               bson_iter_init_find(&it, doc, "epoch"),
                           "a role change without service, role or epoch: %s", line);
        bson_destroy(doc);
    }
    cluster_assert(c, lines >= 2, "node 1 logged %zu line(s)", lines);
    free(log);
    cluster_assert(c, cluster_log_count(&c->nodes[1], " INFO  node=n2 | ", NULL) > 0,
                   "node 2 (log_format unset) does not log text");

    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], 15000);
}

typedef struct totals {
    double claimed, succeeded, failed, observed, fast, sum_s, db_commands;
} totals_t;

static totals_t scrape_totals(cluster_t *c, const int *ports, size_t n)
{
    totals_t t = {0};
    for (size_t i = 0; i < n; i++) {
        prom_text_t m;
        scrape(c, ports[i], &m);
        t.claimed += series(&m, "cohort_tasks_claimed_total", SVC);
        t.succeeded += series(&m, "cohort_tasks_succeeded_total", SVC);
        t.failed += series(&m, "cohort_tasks_failed_total", SVC);
        t.observed += series(&m, "cohort_task_duration_seconds_count", SVC);
        t.fast += series(&m, "cohort_task_duration_seconds_bucket",
                         "{le=\"0.001\",service=\"" SERVICE "\"}");
        t.sum_s += series(&m, "cohort_task_duration_seconds_sum", SVC);
        t.db_commands += series(&m, "cohort_db_commands_total", NULL);
        prom_free(&m);
    }
    return t;
}

typedef struct succeeded_wait {
    cluster_t *c;
    const int *ports;
    double want;
} succeeded_wait_t;

static bool metrics_show_succeeded(void *arg)
{
    succeeded_wait_t *w = arg;
    return scrape_totals(w->c, w->ports, 2).succeeded >= w->want;
}

typedef struct queue_wait {
    cluster_t *c;
    int port;
    double succeeded;
} queue_wait_t;

static bool queue_shows_succeeded(void *arg)
{
    queue_wait_t *w = arg;
    prom_text_t m;
    scrape(w->c, w->port, &m);
    double v = series(&m, "cohort_queue_tasks", "{service=\"" SERVICE "\",status=\"succeeded\"}");
    double pending =
        series(&m, "cohort_queue_tasks", "{service=\"" SERVICE "\",status=\"pending\"}");
    prom_free(&m);
    return v == w->succeeded && pending == 0;
}

Test(cluster_http, counters_move_as_tasks_run)
{
    cluster_options_t options = {
        .tag = "httpcount",
        .services = {{.name = SERVICE, .settings = "sleep_ms = 3\nworkers = 2"}},
    };
    cluster_t *c = cluster_new(&options);
    int ports[2] = {cluster_free_port(), cluster_free_port()};
    for (int i = 0; i < 2; i++)
        cluster_node_start(add_http_node(c, ports[i], NULL));
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");
    cluster_primacy_t primacy;
    cluster_assert(c, cluster_wait_primary(c, SERVICE, NULL, 10000, &primacy), "no primary");

    totals_t before = scrape_totals(c, ports, 2);
    cluster_assert(c, before.claimed == 0 && before.observed == 0,
                   "tasks ran before any was enqueued");
    char count[16];
    snprintf(count, sizeof count, "%d", TASKS);
    const char *enqueue[] = {"enqueue", SERVICE, "--count", count, NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue failed");
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, TASKS, 30000),
                   "%d tasks did not succeed (none for 30 s)", TASKS);
    /* The counter moves right after the outcome is written: poll for it. */
    succeeded_wait_t sw = {c, ports, before.succeeded + TASKS};
    cluster_assert(c, test_wait_until(metrics_show_succeeded, &sw, 10000),
                   "the nodes' cohort_tasks_succeeded_total did not add up to %d", TASKS);
    totals_t after = scrape_totals(c, ports, 2);

    cluster_assert(c, after.succeeded - before.succeeded == TASKS, "succeeded moved by %g",
                   after.succeeded - before.succeeded);
    cluster_assert(c, after.claimed - before.claimed == TASKS, "claimed moved by %g",
                   after.claimed - before.claimed);
    cluster_assert(c, after.failed == before.failed, "failed moved");
    cluster_assert(c, after.observed - before.observed == TASKS,
                   "the duration histogram counted %g runs", after.observed - before.observed);
    /* Each run sleeps 3 ms in the handler: none is under 1 ms, and the sum is at least
     * TASKS * 3 ms. */
    cluster_assert(c, after.fast == before.fast, "%g runs took under 1 ms",
                   after.fast - before.fast);
    cluster_assert(c, after.sum_s - before.sum_s >= TASKS * 0.003,
                   "the durations add up to %g s only", after.sum_s - before.sum_s);
    cluster_assert(c, after.db_commands > before.db_commands, "no database command counted");

    /* The primary's queue gauge catches up within a few ticks. */
    cluster_primacy_t now;
    cluster_assert(c, cluster_wait_primary(c, SERVICE, NULL, 5000, &now), "no primary");
    cluster_node_t *primary = cluster_node_by_id(c, now.primary);
    cluster_assert(c, primary != NULL, "unknown primary %s", now.primary);
    queue_wait_t qw = {c, ports[primary->index - 1], TASKS};
    cluster_assert(c, test_wait_until(queue_shows_succeeded, &qw, 10000),
                   "the primary's cohort_queue_tasks never showed %d succeeded, 0 pending", TASKS);

    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], 15000);
}

Test(cluster_http, readyz_is_503_while_the_database_is_unreachable)
{
    /* Nothing listens on a port that was free a moment ago. */
    char uri[96];
    snprintf(uri, sizeof uri, "mongodb://127.0.0.1:%d/?serverSelectionTimeoutMS=500",
             cluster_free_port());
    cluster_options_t options = {.tag = "httpnodb", .uri = uri, .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    int port = cluster_free_port();
    cluster_node_t *n = add_http_node(c, port, NULL);
    cluster_node_start(n);

    /* The process is up: /healthz answers 200 even though the database never did. */
    status_wait_t w;
    cluster_assert(c, wait_status(&w, port, "/healthz", 200, 15000),
                   "/healthz did not answer 200 within 15 s (last: %d)", w.last.status);
    http_response_free(&w.last);
    cluster_assert(c, cluster_wait_log(n, "database unreachable", NULL, 15000),
                   "the node did not log that the database is unreachable");
    http_response_t r;
    http_get_ok(c, port, "/readyz", &r);
    cluster_assert(c, r.status == 503, "/readyz answered %d without a database", r.status);
    cluster_assert(c, strstr(r.body, "database unreachable") != NULL,
                   "the 503 does not give the reason: %s", r.body);
    http_response_free(&r);
    /* The metrics are served all the same, and show no primacy. */
    prom_text_t m;
    scrape(c, port, &m);
    cluster_assert(c, series(&m, "cohort_primary", SVC) == 0, "primary without a database");
    prom_free(&m);
    cluster_assert(c, cluster_node_alive(n), "the node died without its database");
    cluster_node_stop_ok(n, 15000);
}

Test(cluster_http, readyz_follows_the_database_away_and_back)
{
    cluster_options_t options = {
        .tag = "httpdb", .private_db = true, .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    int port = cluster_free_port();
    cluster_node_t *n = add_http_node(c, port, NULL);
    cluster_node_start(n);
    status_wait_t w;
    cluster_assert(c, wait_status(&w, port, "/readyz", 200, 20000),
                   "/readyz not 200 within 20 s (last: %d %s)", w.last.status,
                   w.last.body ? w.last.body : "");
    http_response_free(&w.last);

    cluster_db_stop(c);
    cluster_assert(c, wait_status(&w, port, "/readyz", 503, 20000),
                   "/readyz still %d 20 s after the database stopped", w.last.status);
    cluster_assert(c, strstr(w.last.body, "database unreachable") != NULL, "reason: %s",
                   w.last.body);
    http_response_free(&w.last);
    http_response_t r;
    http_get_ok(c, port, "/healthz", &r);
    cluster_assert(c, r.status == 200, "/healthz answered %d while the database is away", r.status);
    http_response_free(&r);

    cluster_db_start(c);
    cluster_assert(c, wait_status(&w, port, "/readyz", 200, 30000),
                   "/readyz not 200 again within 30 s of the database's return (last: %d %s)",
                   w.last.status, w.last.body ? w.last.body : "");
    http_response_free(&w.last);
    cluster_node_stop_ok(n, 15000);
}

Test(cluster_http, an_address_in_use_stops_the_node_at_start)
{
    cluster_options_t options = {.tag = "httpbusy", .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    /* Hold a listening socket on the port the node is told to use. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0, "bind: %s", strerror(errno));
    cr_assert_eq(listen(fd, 4), 0);
    socklen_t len = sizeof addr;
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    int port = ntohs(addr.sin_port);

    cluster_node_t *n = add_http_node(c, port, NULL);
    cluster_node_start(n);
    int64_t started = test_now_ms();
    cluster_assert(c, cluster_node_wait_exit(n, started, 15000) >= 0,
                   "the node kept running with http_listen on a port in use");
    close(fd);
    cluster_assert(c, WIFEXITED(n->wait_status) && WEXITSTATUS(n->wait_status) == 1,
                   "the node's exit status is %d, not 1", n->wait_status);
    char needle[64];
    snprintf(needle, sizeof needle, "http_listen = '127.0.0.1:%d'", port);
    char *line = cluster_log_find(n, needle, "cannot listen");
    cluster_assert(c, line != NULL, "no error naming %s in the log", needle);
    cluster_assert(c, strstr(line, "ERROR") != NULL, "not logged as an error: %s", line);
    free(line);
}
