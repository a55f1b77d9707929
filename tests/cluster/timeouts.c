/*
 * timeouts.c - task_timeout_ms under `isolation = thread` on three real nodes (issue 6).
 *
 * A task that runs past its timeout ends `timed_out`: a final state, at attempt 1, never
 * retried, also after the handler finally returns (its late outcome is void). A thread
 * cannot be killed, so the node stops using that worker slot until the handler returns and
 * says so: a log line naming the slot, and the gauge cohort_worker_slots_wedged on
 * /metrics (with cohort_tasks_timed_out_total). Meanwhile the node stays up and the cluster
 * keeps running other tasks, including ones whose own timeout overrides the service's.
 *
 * Precision (issue 22): with ticks 2 s apart, a 5 ms timeout on 1 s runs ends every run
 * timed_out under both isolations, and under `isolation = thread` the watchdog thread ends it
 * within 200 ms of the deadline, as the node logs it on its monotonic clock (the cluster clock
 * of the history's times may be corrected by up to takeover_ms / 8 in between). The product's
 * bound is max(10 ms, a tenth of the timeout), and 1 ms is measured; the margin is for a
 * machine running a load of 15 on 2 cores. Checked once per tick as before, about half of
 * such runs would succeed and the timeouts would be ended up to 2 s late.
 *
 * The service's default timeout (task_timeout_ms in its section) reaches tasks through
 * `cohortctl -c FILE enqueue`, which applies the section's defaults; `--timeout` overrides
 * it per task. The sleeper test handler journals every run on the cluster clock.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster.h"
#include "support.h"

#define SLEEPER "../tests/handlers/test_handler_sleeper.so"
#define SERVICE "to"
#define DEFAULT_TIMEOUT_MS 300
#define WEDGE_SLEEP_MS 6000

TestSuite(cluster_timeouts, .fini = cluster_cleanup_all, .timeout = 120);

/* ---- a minimal HTTP GET for /metrics ---------------------------------------------------- */

/* The body of GET http://127.0.0.1:port/path (caller frees), or NULL on any failure. */
static char *http_get(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return NULL;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char request[256];
    int len = snprintf(request, sizeof request,
                       "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    char *data = NULL;
    size_t size = 0, cap = 0;
    bool ok = connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
              write(fd, request, (size_t)len) == len;
    int64_t deadline = test_now_ms() + 5000;
    while (ok) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - test_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            ok = false;
            break;
        }
        if (size + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *grown = realloc(data, cap);
            cr_assert_not_null(grown, "out of memory");
            data = grown;
        }
        ssize_t got = read(fd, data + size, cap - size - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            ok = got == 0;
            break;
        }
        size += (size_t)got;
    }
    close(fd);
    if (!ok || !data) {
        free(data);
        return NULL;
    }
    data[size] = '\0';
    char *body = strstr(data, "\r\n\r\n");
    char *out = body && strncmp(data, "HTTP/1.", 7) == 0 && strstr(data, " 200 ") ? strdup(body + 4)
                                                                                   : NULL;
    free(data);
    return out;
}

/* The value of the sample line starting with `series` (exactly, then a space) in the node's
 * /metrics, or -1 if it cannot be read or is absent. */
static double metric(int port, const char *series)
{
    char *text = http_get(port, "/metrics");
    double value = -1;
    size_t n = strlen(series);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, series, n) == 0 && line[n] == ' ') {
            value = strtod(line + n + 1, NULL);
            break;
        }
        const char *end = strchr(line, '\n');
        line = end ? end + 1 : NULL;
    }
    free(text);
    return value;
}

/* ---- the cluster ----------------------------------------------------------------------- */

/* Adds a node whose [cluster] section also listens for HTTP on `port`. */
static cluster_node_t *add_http_node(cluster_t *c, int port)
{
    cluster_node_t *n = cluster_add_node(c, NULL);
    char *text = test_read_file(n->config_path);
    char line[64];
    snprintf(line, sizeof line, "[cluster]\nhttp_listen = 127.0.0.1:%d\n", port);
    char *changed = test_replace_all(text, "[cluster]\n", line);
    FILE *f = fopen(n->config_path, "w");
    cr_assert_not_null(f, "cannot write %s", n->config_path);
    fputs(changed, f);
    cr_assert_eq(fclose(f), 0, "cannot write %s", n->config_path);
    free(changed);
    free(text);
    return n;
}

static int64_t count(cluster_t *c, const char *filter)
{
    int64_t n = cluster_try_count(c, SERVICE, filter);
    cluster_assert(c, n >= 0, "cannot count %s", filter);
    return n;
}

/* `cohortctl -c n1.ini enqueue SERVICE ARGS...` (so the section's defaults apply); the
 * printed output into `out` (may be NULL). */
static void enqueue_to(cluster_t *c, const char *service, const char *const *args, char **out)
{
    const char *argv[16] = {"-c", c->nodes[0].config_path, "enqueue", service};
    size_t k = 4;
    for (size_t i = 0; args[i] && k < 15; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    char *text = NULL;
    int rc = cluster_run_ctl_output(c, argv, &text);
    cluster_assert(c, rc == 0, "cohortctl enqueue exited %d: %s (see %s/cohortctl.log)", rc, text,
                   c->dir);
    if (out)
        *out = text;
    else
        free(text);
}

/* The task's string field, copied into `out` ("" if absent). */
static void task_string(cluster_t *c, const char *id, const char *path, char *out, size_t len)
{
    bson_t doc;
    cluster_assert(c, cluster_read_task(c, SERVICE, id, &doc), "task %s is gone", id);
    bson_iter_t it;
    out[0] = '\0';
    if (bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, path, &it) &&
        BSON_ITER_HOLDS_UTF8(&it))
        snprintf(out, len, "%s", bson_iter_utf8(&it, NULL));
    bson_destroy(&doc);
}

static int64_t task_int(cluster_t *c, const char *id, const char *path)
{
    bson_t doc;
    cluster_assert(c, cluster_read_task(c, SERVICE, id, &doc), "task %s is gone", id);
    bson_iter_t it;
    int64_t value = -1;
    if (bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, path, &it) &&
        BSON_ITER_HOLDS_NUMBER(&it))
        value = bson_iter_as_int64(&it);
    bson_destroy(&doc);
    return value;
}

typedef struct status_wait {
    cluster_t *c;
    const char *id;
    const char *status;
} status_wait_t;

static bool has_status(void *arg)
{
    status_wait_t *w = arg;
    char status[32];
    task_string(w->c, w->id, "status", status, sizeof status);
    return strcmp(status, w->status) == 0;
}

/* Runs of task `id` in the journal. */
static size_t runs_of(const char *journal, const char *id)
{
    cluster_run_t *runs;
    size_t n = cluster_sleeper_runs(journal, &runs), k = 0;
    for (size_t i = 0; i < n; i++)
        k += strcmp(runs[i].id, id) == 0;
    free(runs);
    return k;
}

typedef struct journal_wait {
    const char *journal;
    const char *id;
} journal_wait_t;

static bool journaled(void *arg)
{
    journal_wait_t *w = arg;
    return runs_of(w->journal, w->id) > 0;
}

Test(cluster_timeouts, a_wedged_thread_ends_timed_out_and_the_node_keeps_working)
{
    char settings[256];
    snprintf(settings, sizeof settings,
             "workers = 2\n"
             "isolation = thread\n"
             "task_timeout_ms = %d\n"
             "journal = @DIR@/journal.txt",
             DEFAULT_TIMEOUT_MS);
    cluster_options_t options = {
        .tag = "timeouts",
        .services = {{.name = SERVICE, .settings = settings, .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    int ports[3];
    for (int i = 0; i < 3; i++) {
        ports[i] = cluster_free_port();
        cluster_node_start(add_http_node(c, ports[i]));
    }
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");
    cluster_primacy_t primacy;
    cluster_assert(c, cluster_wait_primary(c, SERVICE, NULL, 10000, &primacy), "no primary");
    char journal[512];
    snprintf(journal, sizeof journal, "%s/journal.txt", c->dir);

    /* A task sleeping far past the service's default timeout. */
    char sleep_data[48];
    snprintf(sleep_data, sizeof sleep_data, "{\"sleep_ms\": %d}", WEDGE_SLEEP_MS);
    const char *wedge_args[] = {"--data", sleep_data, NULL};
    char *out = NULL;
    enqueue_to(c, SERVICE, wedge_args, &out);
    char id[25];
    cluster_assert(c, sscanf(out, "%24s", id) == 1 && strlen(id) == 24,
                   "cohortctl enqueue printed no task id: '%s'", out);
    free(out);
    cluster_assert(c, task_int(c, id, "task_timeout_ms") == DEFAULT_TIMEOUT_MS,
                   "the task did not get the service's task_timeout_ms (%d): %lld",
                   DEFAULT_TIMEOUT_MS, (long long)task_int(c, id, "task_timeout_ms"));
    int64_t enqueued_at = test_now_ms();
    status_wait_t sw = {c, id, "timed_out"};
    cluster_assert(c, test_wait_until(has_status, &sw, 5000),
                   "the task was not timed_out within 5 s (timeout %d ms)", DEFAULT_TIMEOUT_MS);
    int64_t timed_out_after = test_now_ms() - enqueued_at;

    char node_id[CLUSTER_ID_MAX], error[256], outcome[32];
    task_string(c, id, "history.0.node", node_id, sizeof node_id);
    task_string(c, id, "last_error", error, sizeof error);
    task_string(c, id, "history.0.outcome", outcome, sizeof outcome);
    cluster_node_t *wedged = cluster_node_by_id(c, node_id);
    cluster_assert(c, wedged != NULL, "the task's history names no node of ours: '%s'", node_id);
    int port = ports[wedged->index - 1];
    fprintf(stderr, "timeouts: task %s timed_out %lld ms after it was enqueued, on %s: %s\n", id,
            (long long)timed_out_after, node_id, error);
    cluster_assert(c, task_int(c, id, "attempts") == 1, "attempts is %lld, not 1",
                   (long long)task_int(c, id, "attempts"));
    cluster_assert(c, strstr(error, "timed out") != NULL, "last_error '%s' says nothing of it",
                   error);
    cluster_assert(c, strcmp(outcome, "timed_out") == 0, "history outcome is '%s'", outcome);

    /* The node says which slot is wedged, in its log and its metrics. */
    char needle[64];
    snprintf(needle, sizeof needle, "task %s attempt 1 timed out (final)", id);
    cluster_assert(c, cluster_wait_log(wedged, needle, "worker slot", 3000),
                   "%s did not log '%s ... worker slot N is wedged'", wedged->id, needle);
    double wedged_gauge = metric(port, "cohort_worker_slots_wedged{service=\"" SERVICE "\"}");
    double timed_out_total = metric(port, "cohort_tasks_timed_out_total{service=\"" SERVICE "\"}");
    fprintf(stderr, "timeouts: %s /metrics: cohort_worker_slots_wedged %g, "
                    "cohort_tasks_timed_out_total %g\n",
            wedged->id, wedged_gauge, timed_out_total);
    cluster_assert(c, wedged_gauge == 1, "%s reports cohort_worker_slots_wedged = %g, not 1",
                   wedged->id, wedged_gauge);
    cluster_assert(c, timed_out_total == 1, "%s reports cohort_tasks_timed_out_total = %g, not 1",
                   wedged->id, timed_out_total);

    /* Other work goes on, also past the default timeout where a task overrides it. */
    const char *short_args[] = {"--count", "20", "--data", "{\"sleep_ms\": 10}", NULL};
    enqueue_to(c, SERVICE, short_args, NULL);
    char longer[48];
    snprintf(longer, sizeof longer, "{\"sleep_ms\": %d}", DEFAULT_TIMEOUT_MS * 2);
    const char *override_args[] = {"--count", "6", "--data", longer, "--timeout", "5s", NULL};
    enqueue_to(c, SERVICE, override_args, NULL);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 26, 15000),
                   "only %lld of 26 other tasks succeeded",
                   (long long)cluster_count_status(c, SERVICE, "succeeded"));
    journal_wait_t jw = {journal, id};
    bool wedge_returned = journaled(&jw);
    fprintf(stderr, "timeouts: 26 other tasks succeeded %lld ms after enqueue; the wedged handler "
                    "had %sreturned\n",
            (long long)(test_now_ms() - enqueued_at), wedge_returned ? "" : "not ");
    cluster_assert(c, count(c, "{\"status\": {\"$nin\": [\"succeeded\", \"timed_out\"]}}") == 0,
                   "tasks other than succeeded or timed_out remain");
    cluster_assert(c, count(c, "{\"status\": \"timed_out\"}") == 1,
                   "more than one task timed out (the overrides were not honoured?)");

    /* The handler returns at last: its outcome is void, the task stays timed_out for good and
     * the slot serves again. */
    cluster_assert(c, test_wait_until(journaled, &jw, WEDGE_SLEEP_MS + 10000),
                   "the wedged handler never returned");
    test_sleep_ms(3 * c->tick_ms);
    char status[32];
    task_string(c, id, "status", status, sizeof status);
    cluster_assert(c, strcmp(status, "timed_out") == 0 && task_int(c, id, "attempts") == 1,
                   "after the handler returned the task is %s at attempt %lld", status,
                   (long long)task_int(c, id, "attempts"));
    cluster_assert(c, runs_of(journal, id) == 1, "the timed-out task ran %zu times",
                   runs_of(journal, id));
    double after = metric(port, "cohort_worker_slots_wedged{service=\"" SERVICE "\"}");
    cluster_assert(c, after == 0, "%s still reports %g wedged slot(s)", wedged->id, after);

    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_assert(c, cluster_node_alive(&c->nodes[i]), "%s died", c->nodes[i].id);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

/* ---- precision (issue 22, defect 5) ----------------------------------------------------- */

#define SHORT_TASKS 6
#define CONTROL_TASKS 4
#define PRECISE_TICK_MS 2000
/* The bound is max(10 ms, timeout / 10) past the deadline; the test allows more, for a busy
 * machine, and still far less than a tick, which is what it was checked on before. */
#define LATE_MAX_MS 200

/* Counts of `service` tasks with `status`. */
static int64_t count_in(cluster_t *c, const char *service, const char *status)
{
    char filter[64];
    snprintf(filter, sizeof filter, "{\"status\": \"%s\"}", status);
    int64_t n = cluster_try_count(c, service, filter);
    cluster_assert(c, n >= 0, "cannot count %s tasks of %s", status, service);
    return n;
}

typedef struct final_wait {
    cluster_t *c;
    const char *service;
    int64_t want;
} final_wait_t;

static bool all_final(void *arg)
{
    final_wait_t *w = arg;
    int64_t n = cluster_try_count(w->c, w->service,
                                  "{\"status\": {\"$in\": [\"succeeded\", \"timed_out\"]}}");
    return n == w->want;
}

/* What the log lines "ended N ms past its deadline" say (the node's monotonic clock): the
 * largest N, and how many lines. */
typedef struct lateness {
    int64_t max_ms;
    int n;
} lateness_t;

static bool note_lateness(const char *line, void *arg)
{
    lateness_t *l = arg;
    const char *at = strstr(line, "ended ");
    long long ms = at ? strtoll(at + strlen("ended "), NULL, 10) : -1;
    l->n++;
    if (ms > l->max_ms)
        l->max_ms = ms;
    return true;
}

Test(cluster_timeouts, a_5ms_timeout_is_enforced_within_its_margin_in_both_isolations)
{
    cluster_options_t options = {
        .tag = "timeouts_precise",
        .tick_ms = PRECISE_TICK_MS,
        .takeover_ms = 3 * PRECISE_TICK_MS,
        .services = {{.name = "tthread",
                      .settings = "workers = 2\nisolation = thread",
                      .handler = SLEEPER},
                     {.name = "tprocess",
                      .settings = "workers = 2\nisolation = process",
                      .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_start_nodes(c, 2);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");
    const char *services[] = {"tthread", "tprocess"};
    char shorts[8];
    snprintf(shorts, sizeof shorts, "%d", SHORT_TASKS);
    char controls[8];
    snprintf(controls, sizeof controls, "%d", CONTROL_TASKS);
    for (size_t s = 0; s < 2; s++) {
        /* Runs of 1 s with a 5 ms timeout, and runs of 50 ms with a 2 s one. */
        const char *short_args[] = {"--count", shorts, "--data", "{\"sleep_ms\": 1000}",
                                    "--timeout", "5ms", NULL};
        enqueue_to(c, services[s], short_args, NULL);
        const char *control_args[] = {"--count", controls, "--data", "{\"sleep_ms\": 50}",
                                      "--timeout", "2s", NULL};
        enqueue_to(c, services[s], control_args, NULL);
    }
    for (size_t s = 0; s < 2; s++) {
        final_wait_t w = {c, services[s], SHORT_TASKS + CONTROL_TASKS};
        cluster_assert(c, test_wait_until(all_final, &w, 30000),
                       "the tasks of %s did not all end within 30 s", services[s]);
    }
    for (size_t s = 0; s < 2; s++) {
        int64_t timed_out = count_in(c, services[s], "timed_out");
        int64_t succeeded = count_in(c, services[s], "succeeded");
        fprintf(stderr, "timeouts_precise: %s: %lld timed_out, %lld succeeded\n", services[s],
                (long long)timed_out, (long long)succeeded);
        cluster_assert(c, timed_out == SHORT_TASKS && succeeded == CONTROL_TASKS,
                       "%s: %lld timed_out (want %d: 1 s runs, 5 ms timeout) and %lld "
                       "succeeded (want %d: 50 ms runs, 2 s timeout)",
                       services[s], (long long)timed_out, SHORT_TASKS, (long long)succeeded,
                       CONTROL_TASKS);
    }
    /* How late the watchdog ended them, as the nodes measured it (their log lines). */
    lateness_t late = {.max_ms = -1};
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_log_scan(&c->nodes[i], "service=tthread", "ms past its deadline", note_lateness,
                         &late);
    fprintf(stderr, "timeouts_precise: isolation = thread ended %d run(s) up to %lld ms past "
                    "the deadline\n",
            late.n, (long long)late.max_ms);
    cluster_assert(c, late.n == SHORT_TASKS,
                   "%d log line(s) say how late a timeout of tthread was ended, not %d", late.n,
                   SHORT_TASKS);
    cluster_assert(c, late.max_ms >= 0 && late.max_ms <= LATE_MAX_MS,
                   "isolation = thread ended a 5 ms timeout %lld ms past its deadline "
                   "(allowed: 10 ms, %d ms on a busy machine; ticks are %d ms apart)",
                   (long long)late.max_ms, LATE_MAX_MS, PRECISE_TICK_MS);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
