/*
 * switches.c - pause/resume (the owner's switch) and block/unblock (the operator's, with a
 * reason) on three real nodes, through cohortctl, per kind and for the whole service
 * (issue 6):
 *
 *   - paused or blocked work stays pending and untouched (attempts 0, no history) while other
 *     kinds run;
 *   - the switches live in the service's config document, so they hold across a restart of
 *     every node;
 *   - resuming / unblocking makes the work claimable at once: it starts within a couple of
 *     ticks;
 *   - tasks already running when the service is stopped finish;
 *   - the two switches are independent: lifting the block of a paused service runs nothing.
 *
 * Nodes log each change of what they skip ("paused alpha; blocked beta: REASON", "running:
 * nothing paused or blocked"); the test uses those lines to know every node has applied a
 * switch. Runs are timed by the sleeper test handler's journal (cluster clock).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SLEEPER "../tests/handlers/test_handler_sleeper.so"
/* How long after a resume the first run may start: the nodes read the switch on their next
 * tick (one tick) and claim on the tick after at the latest; the rest is scheduling noise. */
#define RESUME_BOUND_TICKS 2
#define RESUME_SLACK_MS 400

TestSuite(cluster_switches, .fini = cluster_cleanup_all, .timeout = 150);

static cluster_t *start_cluster(const char *tag, const char *service)
{
    cluster_options_t options = {
        .tag = tag,
        .services = {{.name = service,
                      .settings = "workers = 2\n"
                                  "journal = @DIR@/journal.txt",
                      .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t primacy;
    cluster_start_elected(c, 3, service, 10000, &primacy);
    return c;
}

/* Runs cohortctl with up to 6 arguments (NULL-terminated) and asserts it exits 0. */
static void ctl(cluster_t *c, const char *a0, const char *a1, const char *a2, const char *a3,
                const char *a4, const char *a5)
{
    const char *args[] = {a0, a1, a2, a3, a4, a5, NULL};
    int rc = cluster_run_ctl(c, args);
    cluster_assert(c, rc == 0, "cohortctl %s %s %s %s exited %d (see %s/cohortctl.log)", a0,
                   a1 ? a1 : "", a2 ? a2 : "", a3 ? a3 : "", rc, c->dir);
}

/* `count` tasks of `kind` (NULL: none) sleeping `sleep_ms`, through cohortctl enqueue. */
static void enqueue(cluster_t *c, const char *service, int count, const char *kind,
                    int sleep_ms)
{
    char n[16], data[48];
    snprintf(n, sizeof n, "%d", count);
    snprintf(data, sizeof data, "{\"sleep_ms\": %d}", sleep_ms);
    const char *args[] = {"enqueue", service, "--count", n, "--data", data,
                          kind ? "--kind" : NULL, kind, NULL};
    int rc = cluster_run_ctl(c, args);
    cluster_assert(c, rc == 0, "cohortctl enqueue --kind %s exited %d (see %s/cohortctl.log)",
                   kind ? kind : "-", rc, c->dir);
}

static int64_t count(cluster_t *c, const char *service, const char *filter)
{
    int64_t n = cluster_try_count(c, service, filter);
    cluster_assert(c, n >= 0, "cannot count %s", filter);
    return n;
}

/* Waits until every node has logged `needle` at least `times` times (each node logs what it
 * skips when that changes, and once at start if something is stopped). */
static void wait_all_logged(cluster_t *c, const char *service, const char *needle, int times)
{
    int64_t deadline = test_now_ms() + 10000;
    for (size_t i = 0; i < c->n_nodes; i++) {
        cluster_node_t *n = &c->nodes[i];
        while (cluster_log_count(n, needle, NULL) < times && test_now_ms() < deadline)
            test_sleep_ms(20);
        cluster_primacy_t p;
        bool primary = cluster_read_primacy(c, service, &p) && strcmp(p.primary, n->id) == 0;
        cluster_assert(c, cluster_log_count(n, needle, NULL) >= times,
                       "%s%s did not log '%s' (%d times) within 10 s: it has not applied the "
                       "switch, so it still claims that work",
                       n->id, primary ? " (the service's primary)" : "", needle, times);
    }
}

/* Asserts that exactly `n` tasks match `which` (a JSON fragment such as "\"kind\":
 * \"alpha\"") and that all of them are pending and untouched: never claimed, no run. */
static void assert_untouched(cluster_t *c, const char *service, const char *which, int64_t n)
{
    char all[160], untouched[320];
    snprintf(all, sizeof all, "{%s}", which);
    snprintf(untouched, sizeof untouched,
             "{\"$and\": [{%s}, {\"status\": \"pending\", \"attempts\": 0, \"history\": "
             "{\"$exists\": false}, \"claimed_by\": {\"$exists\": false}}]}",
             which);
    int64_t total = count(c, service, all), clean = count(c, service, untouched);
    cluster_assert(c, total == n && clean == n,
                   "tasks {%s}: %lld of %lld expected are pending and untouched (%lld exist)",
                   which, (long long)clean, (long long)n, (long long)total);
}

/* Restarts every node (clean stop, then start) and waits until each has re-registered. */
static void restart_all(cluster_t *c)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_start(&c->nodes[i]);
}

/* The earliest start (cluster clock) of a journal run matching `kind` ("-": none). */
static int64_t first_start(const char *journal, const char *kind, int64_t after_ms)
{
    cluster_run_t *runs;
    size_t n = cluster_sleeper_runs(journal, &runs);
    int64_t first = INT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (strcmp(runs[i].kind, kind) == 0 && runs[i].start_ms >= after_ms &&
            runs[i].start_ms < first)
            first = runs[i].start_ms;
    free(runs);
    return first;
}

static void stop_all(cluster_t *c)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

/* ---- per kind -------------------------------------------------------------------------- */

Test(cluster_switches, per_kind_pause_and_block_hold_across_restarts_and_lift_at_once)
{
    const char *svc = "sw";
    cluster_t *c = start_cluster("switches-kind", svc);
    char journal[512];
    snprintf(journal, sizeof journal, "%s/journal.txt", c->dir);
    const int64_t quiet_ms = 3 * c->tick_ms; /* long enough for any node to claim */

    /* Pause kind alpha: alpha waits, beta runs. */
    ctl(c, "pause", svc, "--kind", "alpha", NULL, NULL);
    wait_all_logged(c, svc, "paused alpha", 1);
    enqueue(c, svc, 8, "alpha", 10);
    enqueue(c, svc, 8, "beta", 10);
    cluster_assert(c,
                   cluster_wait_count(c, svc, "{\"kind\": \"beta\", \"status\": \"succeeded\"}", 8,
                              15000),
                   "the 8 beta tasks did not all succeed while alpha was paused");
    test_sleep_ms(quiet_ms);
    assert_untouched(c, svc, "\"kind\": \"alpha\"", 8);

    /* Block kind beta too, with a reason; the operator sees it. */
    const char *reason = "beta-store-migration";
    ctl(c, "block", svc, "--kind", "beta", "--reason", reason);
    wait_all_logged(c, svc, "blocked beta: beta-store-migration", 1);
    char *status = NULL;
    const char *status_args[] = {"status", NULL};
    int rc = cluster_run_ctl_output(c, status_args, &status);
    cluster_assert(c, rc == 0 && strstr(status, reason) && strstr(status, "alpha"),
                   "cohortctl status (exit %d) does not show the switches: %s", rc, status);
    free(status);
    bson_t doc;
    cluster_assert(c, cluster_read_service_doc(c, svc, &doc), "no config document");
    bson_iter_t it;
    cluster_assert(c,
                   bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, "block.beta.reason",
                                                                          &it) &&
                       BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), reason) == 0,
                   "the config document has no block.beta.reason '%s'", reason);
    bson_destroy(&doc);

    /* Every node restarts: the switches come back from the config document. */
    restart_all(c);
    wait_all_logged(c, svc, "paused alpha; blocked beta: beta-store-migration", 2);
    enqueue(c, svc, 6, "beta", 10);
    enqueue(c, svc, 6, "gamma", 10);
    enqueue(c, svc, 6, NULL, 10);
    cluster_assert(c,
                   cluster_wait_count(c, svc,
                              "{\"kind\": {\"$nin\": [\"alpha\", \"beta\"]}, \"status\": "
                              "\"succeeded\"}",
                              12, 15000),
                   "gamma and kindless tasks did not run after the restart");
    test_sleep_ms(quiet_ms);
    assert_untouched(c, svc, "\"kind\": \"alpha\"", 8);
    assert_untouched(c, svc, "\"kind\": \"beta\", \"status\": {\"$ne\": \"succeeded\"}", 6);

    /* Lift both: the waiting work starts within a couple of ticks. */
    int64_t lifted_at = cluster_server_ms(c);
    int64_t lifted_local = test_now_ms();
    ctl(c, "resume", svc, "--kind", "alpha", NULL, NULL);
    ctl(c, "unblock", svc, "--kind", "beta", NULL, NULL);
    int64_t ctl_ms = test_now_ms() - lifted_local;
    cluster_assert(c, cluster_wait_succeeded(c, svc, 8 + 8 + 6 + 6 + 6, 15000),
                   "not every task succeeded after resume and unblock");
    int64_t alpha_first = first_start(journal, "alpha", lifted_at);
    int64_t beta_first = first_start(journal, "beta", lifted_at);
    fprintf(stderr,
            "switches-kind: after resume/unblock (cohortctl took %lld ms) the first alpha run "
            "started after %lld ms, the first beta run after %lld ms (tick %lld ms)\n",
            (long long)ctl_ms, (long long)(alpha_first - lifted_at),
            (long long)(beta_first - lifted_at), (long long)c->tick_ms);
    int64_t bound = ctl_ms + RESUME_BOUND_TICKS * c->tick_ms + RESUME_SLACK_MS;
    cluster_assert(c, alpha_first - lifted_at <= bound,
                   "alpha started %lld ms after resume, more than %lld ms",
                   (long long)(alpha_first - lifted_at), (long long)bound);
    cluster_assert(c, beta_first - lifted_at <= bound,
                   "beta started %lld ms after unblock, more than %lld ms",
                   (long long)(beta_first - lifted_at), (long long)bound);
    cluster_assert(c, count(c, svc, "{\"attempts\": {\"$ne\": 1}}") == 0,
                   "some tasks ran more than once");
    wait_all_logged(c, svc, "running: nothing paused or blocked", 1);
    stop_all(c);
}

/* ---- whole service --------------------------------------------------------------------- */

#define LONG_TASKS 6

Test(cluster_switches, whole_service_block_and_pause_let_running_tasks_finish)
{
    const char *svc = "sw2";
    cluster_t *c = start_cluster("switches-all", svc);
    const int64_t quiet_ms = 3 * c->tick_ms;

    /* Long tasks fill the 6 worker slots, then the whole service is blocked. */
    enqueue(c, svc, LONG_TASKS, NULL, 1500);
    cluster_assert(c, cluster_wait_count(c, svc, "{\"status\": \"claimed\"}", LONG_TASKS, 10000),
                   "the %d long tasks were not all claimed within 10 s", LONG_TASKS);
    int64_t blocked_at = test_now_ms();
    ctl(c, "block", svc, "--reason", "maintenance window", NULL, NULL);
    wait_all_logged(c, svc, "blocked (all kinds): maintenance window", 1);
    enqueue(c, svc, 10, NULL, 10);
    enqueue(c, svc, 5, "alpha", 10);

    /* What was running finishes, successfully and once. */
    cluster_assert(c, cluster_wait_count(c, svc, "{\"status\": \"succeeded\"}", LONG_TASKS, 15000),
                   "the tasks running when the service was blocked did not finish");
    int64_t finished_after = test_now_ms() - blocked_at;
    cluster_assert(c, count(c, svc, "{\"status\": \"succeeded\", \"attempts\": 1}") == LONG_TASKS,
                   "the running tasks did not all succeed at their first attempt");
    test_sleep_ms(quiet_ms);
    assert_untouched(c, svc, "\"status\": {\"$ne\": \"succeeded\"}", 15);
    fprintf(stderr, "switches-all: the %d running tasks finished %lld ms after the block\n",
            LONG_TASKS, (long long)finished_after);

    /* Pause as well, then lift the block: still paused, so nothing runs. */
    ctl(c, "pause", svc, NULL, NULL, NULL, NULL);
    wait_all_logged(c, svc, "paused (all kinds); blocked (all kinds): maintenance window", 1);
    ctl(c, "unblock", svc, NULL, NULL, NULL, NULL);
    wait_all_logged(c, svc, "paused (all kinds)", 2);
    test_sleep_ms(quiet_ms);
    assert_untouched(c, svc, "\"status\": {\"$ne\": \"succeeded\"}", 15);

    /* Resume: everything runs. */
    int64_t resumed_local = test_now_ms();
    ctl(c, "resume", svc, NULL, NULL, NULL, NULL);
    cluster_assert(c, cluster_wait_succeeded(c, svc, LONG_TASKS + 15, 15000),
                   "not every task succeeded after resume");
    fprintf(stderr, "switches-all: after resume all 15 waiting tasks succeeded in %lld ms\n",
            (long long)(test_now_ms() - resumed_local));
    cluster_assert(c, count(c, svc, "{\"attempts\": {\"$ne\": 1}}") == 0,
                   "some tasks ran more than once");
    stop_all(c);
}
