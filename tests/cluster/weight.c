/*
 * weight.c - load-aware claiming on three real nodes (issue 13, item 6): heavy tasks spread
 * over the nodes instead of piling onto the first claimer, light tasks still start within
 * about a tick while the heavy ones run, a task heavier than every node's capacity still
 * runs, alone, and a SIGHUP changes a node's capacity.
 *
 * Each node has 3 workers and so a capacity of 3 (the default: the worker count). A heavy
 * task weighs 2, so a node runs one at a time and keeps room for one light task (weight 1).
 * Without weights, the first node to claim would take three heavy tasks at once, one per
 * worker. The service runs the sleeper test handler (tests/support/handlers/sleeper.c),
 * whose journal gives each run's node, kind and start and end on the cluster clock; the
 * heavy tasks go in with `cohortctl enqueue --weight`, the light ones through the task
 * options parser that cohort_task_create() uses (cluster_enqueue()).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SLEEPER "../tests/handlers/test_handler_sleeper.so"
#define SERVICE "weighted"
#define HEAVY 6
#define HEAVY_MS 3000
#define LIGHT 3
#define TICK_MS 200
/* "Within about a tick": a node whose claims found nothing that fits waits for its next tick
 * (at most TICK_MS), then claims; the rest is slack for a shared machine. A light task that
 * had to wait for a heavy one would start HEAVY_MS - (the wait for 3 claims) later. */
#define LIGHT_START_MS (3 * TICK_MS + 400)
#define CLOCK_TOLERANCE_MS 15 /* two runs of one node: the same clock */

TestSuite(cluster_weight, .fini = cluster_cleanup_all, .timeout = 120);

static cluster_t *start_cluster(const char *tag)
{
    cluster_options_t options = {
        .tag = tag,
        .tick_ms = TICK_MS,
        .services = {{.name = SERVICE,
                      .settings = "workers = 3\n"
                                  "journal = @DIR@/journal.txt",
                      .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t primacy;
    cluster_start_elected(c, 3, SERVICE, 10000, &primacy);
    return c;
}

static size_t read_runs(cluster_t *c, cluster_run_t **runs)
{
    char *journal = NULL;
    cr_assert_geq(asprintf(&journal, "%s/journal.txt", c->dir), 0, "out of memory");
    size_t n = cluster_sleeper_runs(journal, runs);
    free(journal);
    return n;
}

/* The most runs of `kind` that ran at one moment on `node`. */
static int most_at_once(const cluster_run_t *runs, size_t n, const char *node, const char *kind)
{
    int most = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(runs[i].node, node) != 0 || strcmp(runs[i].kind, kind) != 0)
            continue;
        int at_once = 0; /* runs of the node in progress when run i starts, i included */
        for (size_t j = 0; j < n; j++)
            if (strcmp(runs[j].node, node) == 0 && strcmp(runs[j].kind, kind) == 0 &&
                runs[j].start_ms <= runs[i].start_ms &&
                runs[j].end_ms > runs[i].start_ms + CLOCK_TOLERANCE_MS)
                at_once++;
        if (at_once > most)
            most = at_once;
    }
    return most;
}

static int runs_of(const cluster_run_t *runs, size_t n, const char *node, const char *kind)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += strcmp(runs[i].node, node) == 0 && strcmp(runs[i].kind, kind) == 0;
    return k;
}

Test(cluster_weight, heavy_tasks_spread_over_the_nodes_and_light_ones_still_start)
{
    cluster_t *c = start_cluster("weight");
    char heavy_data[48];
    snprintf(heavy_data, sizeof heavy_data, "{\"sleep_ms\": %d}", HEAVY_MS);
    const char *args[] = {"enqueue", SERVICE, "--count", "6", "--weight", "2", "--kind",
                          "heavy", "--data", heavy_data, NULL};
    int rc = cluster_run_ctl(c, args);
    cluster_assert(c, rc == 0, "cohortctl enqueue --weight exited %d (see %s/cohortctl.log)",
                   rc, c->dir);
    cluster_assert(c, cluster_wait_count(c, SERVICE, "{\"status\": \"claimed\"}", 3, 10000),
                   "three heavy tasks were not claimed within 10 s");

    /* Every node holds weight 2 of 3 now: room for a light task each. */
    int64_t enqueued_at = cluster_server_ms(c);
    char light_ids[LIGHT][25];
    for (int i = 0; i < LIGHT; i++)
        cluster_enqueue(c, SERVICE, "{\"sleep_ms\": 100}", "{\"kind\": \"light\", \"weight\": 1}",
                        light_ids[i]);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, HEAVY + LIGHT, 3 * HEAVY_MS + 10000),
                   "not every task succeeded");

    cluster_run_t *runs = NULL;
    size_t n = read_runs(c, &runs);
    cr_assert_eq(n, HEAVY + LIGHT, "the journal has %zu runs, not %d", n, HEAVY + LIGHT);
    for (size_t i = 0; i < c->n_nodes; i++) {
        const char *node = c->nodes[i].id;
        int heavy = runs_of(runs, n, node, "heavy");
        int at_once = most_at_once(runs, n, node, "heavy");
        cr_log_info("%s ran %d heavy task(s), at most %d at once", node, heavy, at_once);
        cluster_assert(c, at_once <= 1,
                       "%s ran %d heavy tasks (weight 2) at once with capacity 3", node, at_once);
        cluster_assert(c, heavy == HEAVY / 3,
                       "%s ran %d heavy tasks, not %d: they did not spread over the nodes", node,
                       heavy, HEAVY / 3);
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(runs[i].kind, "light") != 0)
            continue;
        int64_t waited = runs[i].start_ms - enqueued_at;
        cr_log_info("light task %s started %lld ms after it was enqueued, on %s", runs[i].id,
                    (long long)waited, runs[i].node);
        cluster_assert(c, waited <= LIGHT_START_MS,
                       "light task %s started %lld ms after it was enqueued (more than %d): it "
                       "waited for the heavy ones",
                       runs[i].id, (long long)waited, LIGHT_START_MS);
    }
    free(runs);
}

Test(cluster_weight, a_task_heavier_than_every_node_runs_alone)
{
    cluster_t *c = start_cluster("weight-huge");
    char huge_id[25];
    cluster_enqueue(c, SERVICE, "{\"sleep_ms\": 1500}", "{\"kind\": \"huge\", \"weight\": 1000}",
                    huge_id);
    cluster_assert(c, cluster_wait_count(c, SERVICE, "{\"status\": \"claimed\"}", 1, 10000),
                   "the task of weight 1000 was not claimed within 10 s");
    bson_t doc;
    cr_assert(cluster_read_task(c, SERVICE, huge_id, &doc));
    char node[CLUSTER_ID_MAX];
    cluster_doc_utf8(&doc, "claimed_by", node, sizeof node);
    bson_destroy(&doc);
    for (int i = 0; i < 6; i++)
        cluster_enqueue(c, SERVICE, "{\"sleep_ms\": 100}", "{\"kind\": \"light\"}", NULL);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 7, 15000), "not every task succeeded");

    cluster_run_t *runs = NULL;
    size_t n = read_runs(c, &runs);
    cr_assert_eq(n, 7);
    const cluster_run_t *huge = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(runs[i].id, huge_id) == 0)
            huge = &runs[i];
    cr_assert_not_null(huge, "the huge task is not in the journal");
    cr_assert_str_eq(huge->node, node);
    for (size_t i = 0; i < n; i++)
        cluster_assert(c,
                       &runs[i] == huge || strcmp(runs[i].node, node) != 0 ||
                           runs[i].start_ms >= huge->end_ms - CLOCK_TOLERANCE_MS ||
                           runs[i].end_ms <= huge->start_ms + CLOCK_TOLERANCE_MS,
                       "%s ran task %s next to the task of weight 1000", node, runs[i].id);
    free(runs);
}

Test(cluster_weight, a_sighup_changes_the_capacity)
{
    cluster_options_t options = {
        .tag = "weight-reload",
        .tick_ms = TICK_MS,
        .services = {{.name = SERVICE,
                      .settings = "workers = 3\n"
                                  "capacity = 3\n"
                                  "journal = @DIR@/journal.txt",
                      .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t primacy;
    cluster_start_elected(c, 1, SERVICE, 10000, &primacy);
    cluster_node_t *n = &c->nodes[0];
    cluster_node_config_set(n, "capacity", "1");
    cluster_node_reload(n);
    cluster_assert(c, cluster_wait_log(n, "capacity = 1 (was 3", NULL, 10000),
                   "the node did not log its new capacity");
    for (int i = 0; i < 3; i++)
        cluster_enqueue(c, SERVICE, "{\"sleep_ms\": 400}", "{\"kind\": \"light\"}", NULL);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 3, 10000), "not every task succeeded");
    cluster_run_t *runs = NULL;
    size_t k = read_runs(c, &runs);
    cr_assert_eq(k, 3);
    int at_once = most_at_once(runs, k, n->id, "light");
    cluster_assert(c, at_once == 1, "%d tasks of weight 1 ran at once with capacity 1", at_once);
    free(runs);
}
