/*
 * throughput.c - 1,000 tasks through three nodes: every task succeeds, runs exactly once
 * (one journal line per task id, all at attempt 1), the work is shared by at least two
 * nodes, and every node then stops cleanly on SIGTERM with a summary that adds up.
 *
 * All nodes append to one noop journal file (single write() per line on O_APPEND, so lines
 * never interleave). The tasks are enqueued with cohortctl, as an operator would.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "noop"
#define TASKS 1000

TestSuite(cluster_throughput, .fini = cluster_cleanup_all, .timeout = 120);

/* The succeeded=N of the node's "stopped:" summary line, or -1. */
static long long stopped_succeeded(cluster_node_t *n)
{
    char *line = cluster_log_find(n, "stopped: claimed=", NULL);
    const char *at = line ? strstr(line, "succeeded=") : NULL;
    long long value = at ? strtoll(at + strlen("succeeded="), NULL, 10) : -1;
    free(line);
    return value;
}

Test(cluster_throughput, thousand_tasks_each_run_once)
{
    cluster_options_t options = {
        .tag = "throughput",
        .services = {{.name = SERVICE,
                      .settings = "workers = 2\n"
                                  "secondary_task_count = 0\n"
                                  "journal = @DIR@/journal.txt"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t primacy;
    cluster_start_elected(c, 3, SERVICE, 5000, &primacy);

    int64_t start = test_now_ms();
    const char *enqueue[] = {"enqueue", SERVICE, "--count", "1000", NULL};
    int rc = cluster_run_ctl(c, enqueue);
    cluster_assert(c, rc == 0, "cohortctl enqueue exited %d (see %s/cohortctl.log)", rc, c->dir);
    bool done = cluster_wait_succeeded(c, SERVICE, TASKS, 45000);
    int64_t took = test_now_ms() - start;
    int64_t succeeded = cluster_count_status(c, SERVICE, "succeeded");
    cluster_assert(c, done, "only %lld of %d tasks succeeded (none for 45 s)",
                   (long long)succeeded, TASKS);
    fprintf(stderr, "throughput: %d tasks in %lld ms (%.0f tasks/s) on 3 nodes x 2 workers\n",
            TASKS, (long long)took, TASKS * 1000.0 / (double)(took > 0 ? took : 1));
    cluster_assert(c, succeeded == TASKS, "%lld tasks succeeded, expected %d", (long long)succeeded,
                   TASKS);
    static const char *const others[] = {"pending", "claimed", "failed"};
    for (size_t i = 0; i < 3; i++) {
        int64_t n = cluster_count_status(c, SERVICE, others[i]);
        cluster_assert(c, n == 0, "%lld task(s) are %s", (long long)n, others[i]);
    }

    /* Stop first, so the journal is complete and the summaries are written. */
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);

    char journal[1024];
    snprintf(journal, sizeof journal, "%s/journal.txt", c->dir);
    cluster_journal_report_t r;
    cluster_journal_check(c, SERVICE, journal, &r);
    fprintf(stderr, "throughput: journal has %lld lines;", (long long)r.lines);
    for (size_t i = 0; i < r.n_nodes; i++)
        fprintf(stderr, " %s ran %lld", r.nodes[i], (long long)r.per_node[i]);
    fprintf(stderr, "\n");
    cluster_assert(c, r.tasks_in_db == TASKS, "%lld tasks in the queue, expected %d",
                   (long long)r.tasks_in_db, TASKS);
    cluster_assert(c, r.malformed == 0, "%lld malformed journal line(s), e.g. %s",
                   (long long)r.malformed, r.example);
    cluster_assert(c, r.duplicates == 0, "%lld task(s) ran more than once, e.g. %s",
                   (long long)r.duplicates, r.example);
    cluster_assert(c, r.missing == 0, "%lld task(s) never ran, e.g. %s", (long long)r.missing,
                   r.example);
    cluster_assert(c, r.unknown == 0, "%lld journal id(s) are not tasks, e.g. %s",
                   (long long)r.unknown, r.example);
    cluster_assert(c, r.not_first_attempt == 0, "%lld run(s) were not attempt 1, e.g. %s",
                   (long long)r.not_first_attempt, r.example);
    cluster_assert(c, r.lines == TASKS, "%lld journal lines, expected %d", (long long)r.lines,
                   TASKS);
    cluster_assert(c, r.n_nodes >= 2, "only %zu node(s) processed tasks", r.n_nodes);

    /* Each node's own count of successes matches what the journal says it ran. */
    long long total = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        long long mine = stopped_succeeded(&c->nodes[i]);
        cluster_assert(c, mine >= 0, "%s logged no 'stopped:' summary", c->nodes[i].id);
        total += mine;
    }
    cluster_assert(c, total == TASKS, "the nodes' summaries add up to %lld successes, not %d",
                   total, TASKS);
}
