/*
 * drain.c - a SIGTERM drain keeps what its running tasks depend on (issue 22, defects 1-3).
 *
 * (a) Tasks longer than stall_timeout_ms: 2 nodes x 4 workers run 4 tasks of 20 s
 *     (stall_timeout_ms 1000, takeover_ms 1500) and the node running more of them gets
 *     SIGTERM. While it
 *     drains it keeps checking its tasks in (else the new primary resets them after a
 *     second and they run twice) and keeps its node document alive past 10 x takeover_ms
 *     (else it is expired and its claims released). Every task succeeds once, on attempt 1;
 *     the drained node exits 0 with nothing abandoned, and its stop summary counts exactly
 *     the outcomes it wrote.
 * (b) A task with --timeout 3s that hangs (60 s) on the node that gets SIGTERM ends
 *     timed_out at attempt 1 while the node drains (never back to pending, never run again),
 *     and the node does not wait out its grace period for a handler whose task already ended.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "drain"
#define TAKEOVER_MS 1500
#define LONG_SLEEP_MS 20000 /* past 10 x takeover_ms: the heartbeat thread's liveness bound */
#define HANG_MS 60000
#define TIMEOUT_MS 3000

TestSuite(cluster_drain, .fini = cluster_cleanup_all, .timeout = 150);

static cluster_t *start_cluster(const char *tag, const char *settings, int64_t grace_ms)
{
    cluster_options_t options = {
        .tag = tag,
        .tick_ms = 200,
        .takeover_ms = TAKEOVER_MS,
        .shutdown_grace_ms = grace_ms,
        .services = {{.name = SERVICE, .settings = settings}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 2, SERVICE, 5000, &p);
    return c;
}

/* The node's `stopped:` summary value for `key` ("succeeded=", ...); fails if absent. */
static long long summary_value(cluster_t *c, cluster_node_t *n, const char *key)
{
    char *summary = cluster_log_find(n, "stopped: claimed=", NULL);
    cluster_assert(c, summary != NULL, "%s logged no 'stopped:' summary", n->id);
    const char *at = strstr(summary, key);
    cluster_assert(c, at != NULL, "%s: no %s in '%s'", n->id, key, summary);
    long long value = strtoll(at + strlen(key), NULL, 10);
    free(summary);
    return value;
}

static int64_t count(cluster_t *c, const char *filter)
{
    int64_t n = cluster_try_count(c, SERVICE, filter);
    cluster_assert(c, n >= 0, "cannot count %s", filter);
    return n;
}

Test(cluster_drain, a_drain_longer_than_the_stall_timeout_runs_nothing_twice)
{
    char settings[160];
    snprintf(settings, sizeof settings,
             "workers = 4\nstall_timeout_ms = 1000\nsleep_ms = %d\njournal = @DIR@/journal.txt",
             LONG_SLEEP_MS);
    cluster_t *c = start_cluster("drain_long", settings, LONG_SLEEP_MS + 10000);
    const char *enqueue[] = {"enqueue", SERVICE, "--count", "4", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue failed");
    cluster_assert(c, cluster_wait_count(c, SERVICE, "{\"status\": \"claimed\"}", 4, 10000),
                   "the 4 tasks were not all claimed within 10 s");
    /* The node running more of them (4 workers each, so the other has room to run again
     * whatever is taken back). */
    cluster_node_t *drained = NULL;
    int64_t held = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        char mine[160];
        snprintf(mine, sizeof mine, "{\"status\": \"claimed\", \"claimed_by\": \"%s\"}",
                 c->nodes[i].id);
        int64_t k = count(c, mine);
        if (k > held) {
            held = k;
            drained = &c->nodes[i];
        }
    }
    cluster_assert(c, drained != NULL, "no node of ours holds the claims");

    int64_t term_at = test_now_ms();
    cluster_node_send_term(drained);
    int64_t exit_ms = cluster_node_wait_exit(drained, term_at, c->shutdown_grace_ms + 5000);
    cluster_assert(c, exit_ms >= 0, "%s still runs %lld ms after SIGTERM", drained->id,
                   (long long)(c->shutdown_grace_ms + 5000));
    cluster_node_assert_clean_exit(drained);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 4, LONG_SLEEP_MS + 10000),
                   "not all 4 tasks succeeded");
    fprintf(stderr,
            "drain: %s held %lld of 4 tasks of %d ms at SIGTERM and exited after "
            "%lld ms\n",
            drained->id, (long long)held, LONG_SLEEP_MS, (long long)exit_ms);

    /* Nothing was reset, expired, released or run twice. */
    cluster_assert(c, cluster_log_count_all(c, "stalled task(s)", NULL) == 0,
                   "a drained node's running tasks were reset as stalled");
    cluster_assert(c,
                   cluster_log_count(drained, "still running after shutdown_grace_ms", NULL) == 0,
                   "%s abandoned running tasks at exit", drained->id);
    cluster_assert(c, count(c, "{\"attempts\": {\"$ne\": 1}}") == 0,
                   "a task needed more than one attempt");
    cluster_assert(c, count(c, "{\"history.event\": \"crashed\"}") == 0,
                   "a task's history records a run taken back (crashed)");
    char journal[512];
    snprintf(journal, sizeof journal, "%s/journal.txt", c->dir);
    cluster_journal_report_t r;
    cluster_journal_check(c, SERVICE, journal, &r);
    cluster_assert(c, r.lines == 4 && r.duplicates == 0 && r.missing == 0,
                   "journal: %lld runs of 4 tasks, %lld duplicate(s), %lld missing (e.g. %s)",
                   (long long)r.lines, (long long)r.duplicates, (long long)r.missing, r.example);

    /* The stop summary counts what the drained node wrote, and that is what it held. */
    char written[200];
    snprintf(written, sizeof written,
             "{\"status\": \"succeeded\", \"history.node\": \"%s\", \"history.outcome\": "
             "\"succeeded\"}",
             drained->id);
    int64_t by_drained = count(c, written);
    long long succeeded = summary_value(c, drained, "succeeded=");
    cluster_assert(c, succeeded == by_drained && by_drained == held,
                   "%s held %lld task(s) at SIGTERM, %lld succeeded by it, its summary says "
                   "succeeded=%lld",
                   drained->id, (long long)held, (long long)by_drained, succeeded);
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

Test(cluster_drain, a_timeout_during_a_drain_ends_the_task_timed_out)
{
    char settings[64];
    snprintf(settings, sizeof settings, "workers = 2\nsleep_ms = %d", HANG_MS);
    int64_t grace_ms = 20000;
    cluster_t *c = start_cluster("drain_timeout", settings, grace_ms);
    const char *enqueue[] = {"enqueue", SERVICE, "--timeout", "3s", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue failed");
    cluster_assert(c, cluster_wait_count(c, SERVICE, "{\"status\": \"claimed\"}", 1, 10000),
                   "the task was not claimed within 10 s");
    cluster_task_view_t t;
    cluster_assert(c, cluster_read_task_views(c, SERVICE, &t, 1) == 1, "expected 1 task");
    cluster_node_t *drained = cluster_node_by_id(c, t.claimed_by);
    cluster_assert(c, drained != NULL, "claimer '%s' is not one of our nodes", t.claimed_by);

    int64_t term_at = test_now_ms();
    cluster_node_send_term(drained);
    bool timed_out = cluster_wait_count(c, SERVICE, "{\"status\": \"timed_out\"}", 1,
                                        TIMEOUT_MS + 5000);
    int64_t timed_out_ms = test_now_ms() - term_at;
    cluster_assert(c, timed_out,
                   "the task with a %d ms timeout was not timed_out %lld ms after its node got "
                   "SIGTERM (it drains for up to %lld ms)",
                   TIMEOUT_MS, (long long)timed_out_ms, (long long)grace_ms);
    int64_t exit_ms = cluster_node_wait_exit(drained, term_at, grace_ms + 5000);
    fprintf(stderr,
            "drain_timeout: %s got SIGTERM running a hung task (timeout %d ms): timed_out "
            "after %lld ms, exit after %lld ms (grace %lld ms)\n",
            drained->id, TIMEOUT_MS, (long long)timed_out_ms, (long long)exit_ms,
            (long long)grace_ms);
    cluster_assert(c, exit_ms >= 0, "%s still runs %lld ms after SIGTERM", drained->id,
                   (long long)(grace_ms + 5000));
    cluster_node_assert_clean_exit(drained);
    cluster_assert(c, exit_ms < grace_ms,
                   "%s waited out its grace period (%lld ms) for a task that had timed out",
                   drained->id, (long long)grace_ms);

    /* Final: nobody runs it again. */
    test_sleep_ms(5 * c->tick_ms);
    cluster_assert(c, cluster_read_task_views(c, SERVICE, &t, 1) == 1, "expected 1 task");
    cluster_assert(c,
                   strcmp(t.status, "timed_out") == 0 && t.attempts == 1 && t.history == 1 &&
                       strcmp(t.last_node, drained->id) == 0 &&
                       strcmp(t.last_outcome, "timed_out") == 0,
                   "task %s: %s at attempt %lld, %d history entries (last: %s, %s); expected "
                   "timed_out once, by %s",
                   t.id, t.status, (long long)t.attempts, t.history, t.last_node, t.last_outcome,
                   drained->id);
    cluster_assert(c, summary_value(c, drained, "timed_out=") == 1,
                   "%s's stop summary does not count the timeout", drained->id);
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
