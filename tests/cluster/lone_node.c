/*
 * lone_node.c - primary_task_count caps the primary only while other live nodes serve the
 * service. A lone node is always the primary: capped at the default 10 tasks a tick it ran
 * 11 tasks/s out of the box (docs/BENCHMARKS.md, before). Now:
 * - one node at tick_ms = 500 and the default primary_task_count = 10 runs 400 no-op tasks
 *   in well under the 20 s the cap would need (bound: 10 s), and logs that it claims
 *   without the cap;
 * - once a second node serves the service, the primary logs that the cap applies again and
 *   claims at most 10 tasks a tick (its claimed counter over the ticks of the second
 *   batch), while the secondary takes the rest.
 */
#include <bson/bson.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "noop"
#define TICK_MS 500
#define TASKS 400

TestSuite(cluster_lone_node, .fini = cluster_cleanup_all, .timeout = 300);

/* stats.services.noop.claimed of node `id`, as its last ping wrote it. */
static int64_t claimed_by(cluster_t *c, const char *id)
{
    char filter[96];
    snprintf(filter, sizeof filter, "{\"_id\": \"%s\"}", id);
    bson_t doc;
    if (!test_find_one(c->client, c->db, "nodes", filter, &doc))
        return 0;
    bson_iter_t it;
    int64_t n = bson_iter_init(&it, &doc) &&
                        bson_iter_find_descendant(&it, "stats.services." SERVICE ".claimed", &it)
                    ? bson_iter_as_int64(&it)
                    : 0;
    bson_destroy(&doc);
    return n;
}

Test(cluster_lone_node, the_cap_applies_only_with_peers)
{
    cluster_options_t options = {
        .tag = "lone",
        .tick_ms = TICK_MS,
        .takeover_ms = 3000,
        .services = {{.name = SERVICE, .settings = "workers = 4\nsecondary_task_count = 0"}},
    };
    cluster_t *c = cluster_new(&options);
    char count[16];
    snprintf(count, sizeof count, "%d", TASKS);
    const char *enqueue[] = {"enqueue", SERVICE, "--count", count, "--create", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cannot enqueue");
    cluster_primacy_t p;
    int64_t started = test_now_ms();
    cluster_start_elected(c, 1, SERVICE, 30000, &p);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, TASKS, 30000), "the lone node stalled");
    int64_t took = test_now_ms() - started;
    cluster_assert(c, took < 10000,
                   "a lone node took %lld ms for %d tasks: capped at 10 a tick it needs %d ms",
                   (long long)took, TASKS, TASKS / 10 * TICK_MS);
    cluster_assert(c, cluster_log_count(&c->nodes[0], "claims without the primary_task_count",
                                        NULL) >= 1,
                   "the primary did not log that it runs uncapped");

    /* A second node: the cap is back for the primary. */
    cluster_node_t *second = cluster_add_node(c, NULL);
    cluster_node_start(second);
    cluster_assert(c, cluster_wait_log(&c->nodes[0], "1 other live node(s) serve", NULL, 20000),
                   "the primary did not notice its peer");
    int64_t before = claimed_by(c, p.primary);
    int64_t t0 = test_now_ms();
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cannot enqueue");
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 2 * TASKS, 60000), "stalled");
    test_sleep_ms(2 * TICK_MS); /* the last ping carries the final counter */
    int64_t ticks = (test_now_ms() - t0) / TICK_MS + 2;
    int64_t primary_claims = claimed_by(c, p.primary) - before;
    cr_log_info("lone node: %d tasks in %lld ms; with a peer the primary claimed %lld of %d "
                "in about %lld ticks",
                TASKS, (long long)took, (long long)primary_claims, TASKS, (long long)ticks);
    cluster_assert(c, primary_claims <= 10 * ticks,
                   "with a peer the primary claimed %lld tasks in about %lld ticks (cap 10)",
                   (long long)primary_claims, (long long)ticks);
    cluster_assert(c, primary_claims < TASKS, "the secondary took none of the second batch");
}
