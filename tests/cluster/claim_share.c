/*
 * claim_share.c - how nodes share a big queue of no-op tasks (issue 26, part 2), each claim
 * costing the server a sort of the queue: a primary with a peer claims its capped share
 * (primary_task_count) in one claim per tick, not in a probe of one task and a batch for the
 * rest, so its claims that took any task average close to the share (before: 5.9 of 10).
 * It reads the counters of the primary's final `stopped:` line. The bound leaves room for a
 * busy machine: what it catches is the shape (two claims per tick), not a rate.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

TestSuite(cluster_claim_share, .fini = cluster_cleanup_all, .timeout = 180);

/* The value of ` key=` in `line`, -1 if absent. */
static long long stat_of(const char *line, const char *key)
{
    char needle[64];
    snprintf(needle, sizeof needle, " %s=", key);
    const char *at = strstr(line, needle);
    return at ? strtoll(at + strlen(needle), NULL, 10) : -1;
}

/* Enqueues `tasks` no-op tasks and waits until they all succeeded. */
static void run_noop(cluster_t *c, int tasks)
{
    char n[16];
    snprintf(n, sizeof n, "%d", tasks);
    const char *args[] = {"enqueue", "noop", "--count", n, NULL};
    int rc = cluster_run_ctl(c, args);
    cluster_assert(c, rc == 0, "cohortctl enqueue exited %d (see %s/cohortctl.log)", rc, c->dir);
    cluster_assert(c, cluster_wait_succeeded(c, "noop", tasks, 120000),
                   "only %lld of %d tasks succeeded",
                   (long long)cluster_count_status(c, "noop", "succeeded"), tasks);
}

/* Stops `n` and returns its `stopped:` line (caller frees). */
static char *stop_and_read(cluster_node_t *n)
{
    cluster_node_stop_ok(n, n->cluster->shutdown_grace_ms + 5000);
    char *line = cluster_log_find(n, "stopped: ", NULL);
    cluster_assert(n->cluster, line, "%s wrote no 'stopped:' line", n->id);
    return line;
}

Test(cluster_claim_share, a_capped_primary_claims_its_share_in_one_claim_per_tick)
{
    cluster_options_t options = {
        .tag = "claim-share-primary",
        .services = {{.name = "noop", .settings = "workers = 2\nprimary_task_count = 10\n"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 2, "noop", 10000, &p);
    cluster_node_t *primary = cluster_node_by_id(c, p.primary);
    cluster_assert(c, primary, "no node is %s", p.primary);
    /* The cap applies once the primary has counted its peer (its maintenance). */
    cluster_assert(c, cluster_wait_log(primary, "other live node(s) serve", NULL, 20000),
                   "the primary never counted its peer");
    run_noop(c, 3000);
    char *line = stop_and_read(primary);
    long long claimed = stat_of(line, "claimed"), attempted = stat_of(line, "claims_attempted"),
              empty = stat_of(line, "claims_empty");
    long long took = attempted - empty;
    fprintf(stderr, "claim_share: the primary claimed %lld tasks in %lld claims (%lld empty)\n",
            claimed, attempted, empty);
    cluster_assert(c, claimed >= 0 && took > 0, "cannot read the primary's claims: %s", line);
    /* One claim of 10 per tick; a probe of one and a batch of nine averages 5. The first
     * claim (one task, before any run time is known) and the last ones pull it down a bit. */
    cluster_assert(c, took < 4 || claimed >= 7 * took,
                   "the primary's %lld claims that took tasks took %lld: %.1f per claim, "
                   "expected about primary_task_count = 10",
                   took, claimed, (double)claimed / (double)took);
    free(line);
    for (size_t i = 0; i < c->n_nodes; i++)
        if (&c->nodes[i] != primary)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
    cluster_destroy(c);
}
