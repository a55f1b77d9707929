/*
 * scale20.c - twenty cohortd processes on one machine serving five services (issue 11):
 *
 *   1. primacy spreads: no node leads more than MAX_PRIMACIES of the five services, at start-up
 *      and again after a failover (node/primary/spread.h);
 *   2. the idle cluster's database commands per node and per tick, read from the stats each
 *      node writes into its `nodes` document with every ping (stats.db_commands over
 *      stats.ticks), stay within issue 11's budget: at most one per tick for a node that
 *      leads nothing, whatever its five services; a node leading k services at most 1 + 4k
 *      (the read, then per service its renewal and its claim, and the maintenance's commands
 *      spread over its ticks). The nodes run `wake = poll`, so that the figure is the
 *      tick's alone (cluster/wake and docs/BENCHMARKS.md measure what the streams cost);
 *   3. 2,000 tracked tasks (400 per service) all succeed, each exactly once (one succeeded
 *      entry in its history), although five nodes are killed (SIGKILL) at once while they run:
 *      the tasks those nodes held are released by the primaries (a `crashed` entry) and run
 *      again elsewhere.
 *
 * Each node runs one worker per service. The test's tick is 500 ms (20 processes share the
 * machine with the database server).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define N_NODES 20
#define N_SERVICES 5
#define TASKS_PER_SERVICE 400
#define N_KILLED 5
#define MAX_PRIMACIES 2
#define TICK_MS 500
/* A quarter of it is the liveness cadence of an idle node's ping, which must span two
 * ticks for an idle node to send one command per tick. */
#define TAKEOVER_MS 5000
#define IDLE_WINDOW_MS 6000
#define IDLE_WARMUP_MS 3000
#define START_EVERY_MS 100
#define ENQUEUE_MS 5000

/* The idle budget, in database commands per node and per tick (commands counted by each
 * node's libmongoc APM over the ticks it ran, each node on its own). Before issue 11's change
 * a secondary of 5 services measured 11.4-11.9 and a node leading one 14.7-17.7 (commit
 * 9aafbbd plus the spread); now 1.00 on a quiet machine. The 0.2 above 1 is for a loaded
 * machine (20 nodes and the tests beside them on 2 cores): a tick stretched past the
 * heartbeat's bound adds the heartbeat thread's touch (node/heartbeat.h). */
#define IDLE_SECONDARY_MAX 1.2
#define IDLE_PRIMARY_BASE 1.2
#define IDLE_PER_LED_SERVICE 4.0

static const char *const services[N_SERVICES] = {"s1", "s2", "s3", "s4", "s5"};

TestSuite(cluster_scale20, .fini = cluster_cleanup_all, .timeout = 600);

/* The primary of every service (empty if none) into primaries[]; how many services each node
 * leads into per_node[] (indexed like c->nodes). Returns the largest count. */
static int read_spread(cluster_t *c, char primaries[N_SERVICES][CLUSTER_ID_MAX],
                       int per_node[CLUSTER_MAX_NODES])
{
    memset(per_node, 0, sizeof(int) * CLUSTER_MAX_NODES);
    int most = 0;
    for (size_t s = 0; s < N_SERVICES; s++) {
        cluster_primacy_t p;
        cluster_assert(c, cluster_read_primacy(c, services[s], &p), "cannot read %s's primacy",
                       services[s]);
        snprintf(primaries[s], CLUSTER_ID_MAX, "%s", p.primary);
        cluster_node_t *n = cluster_node_by_id(c, p.primary);
        if (n && ++per_node[n->index - 1] > most)
            most = per_node[n->index - 1];
    }
    return most;
}

/* Waits until every service has a primary; then checks and prints the spread. */
static void check_spread(cluster_t *c, const char *when, int per_node[CLUSTER_MAX_NODES])
{
    char primaries[N_SERVICES][CLUSTER_ID_MAX];
    for (size_t s = 0; s < N_SERVICES; s++) {
        cluster_primacy_t p;
        cluster_assert(c, cluster_wait_primary(c, services[s], NULL, 30000, &p),
                       "%s: %s has no primary after 30 s", when, services[s]);
    }
    int most = read_spread(c, primaries, per_node);
    fprintf(stderr, "scale20: primaries %s:", when);
    for (size_t s = 0; s < N_SERVICES; s++)
        fprintf(stderr, " %s=%s", services[s], primaries[s]);
    fprintf(stderr, " (at most %d per node)\n", most);
    cluster_assert(c, most <= MAX_PRIMACIES, "%s: a node leads %d of the %d services (at most %d)",
                   when, most, N_SERVICES, MAX_PRIMACIES);
}

/* Every node's stats.ticks and stats.db_commands from its `nodes` document, indexed like
 * c->nodes (-1: none). */
static void read_counters(cluster_t *c, int64_t ticks[CLUSTER_MAX_NODES],
                          int64_t commands[CLUSTER_MAX_NODES])
{
    for (size_t i = 0; i < CLUSTER_MAX_NODES; i++)
        ticks[i] = commands[i] = -1;
    mongoc_collection_t *nodes = mongoc_client_get_collection(c->client, c->db, "nodes");
    bson_t filter = BSON_INITIALIZER;
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(nodes, &filter, NULL, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        char id[CLUSTER_ID_MAX];
        cluster_doc_utf8(doc, "_id", id, sizeof id);
        cluster_node_t *n = cluster_node_by_id(c, id);
        if (n && test_doc_has(doc, "stats.ticks")) {
            ticks[n->index - 1] = test_doc_int(doc, "stats.ticks");
            commands[n->index - 1] = test_doc_int(doc, "stats.db_commands");
        }
    }
    bson_error_t error;
    bool failed = mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
    mongoc_collection_destroy(nodes);
    cluster_assert(c, !failed, "cannot read the nodes collection: %s", error.message);
}

/* Commands per tick of each node of the idle cluster, against the budget of its role (how
 * many services it leads). */
static void check_idle_cost(cluster_t *c, const int per_node[CLUSTER_MAX_NODES])
{
    int64_t ticks0[CLUSTER_MAX_NODES], before[CLUSTER_MAX_NODES];
    int64_t ticks1[CLUSTER_MAX_NODES], after[CLUSTER_MAX_NODES];
    test_sleep_ms(IDLE_WARMUP_MS); /* start-up's commands (indexes, ...) reach a ping first */
    read_counters(c, ticks0, before);
    test_sleep_ms(IDLE_WINDOW_MS);
    read_counters(c, ticks1, after);
    double sum[2] = {0, 0}, most[2] = {0, 0};
    int count[2] = {0, 0};
    for (size_t i = 0; i < c->n_nodes; i++) {
        int64_t ticks = ticks1[i] - ticks0[i];
        cluster_assert(c, before[i] >= 0 && ticks > 0,
                       "%s pinged no stats in %d ms (ticks %lld, then %lld)", c->nodes[i].id,
                       IDLE_WINDOW_MS, (long long)ticks0[i], (long long)ticks1[i]);
        double per_tick = (double)(after[i] - before[i]) / (double)ticks;
        int role = per_node[i] > 0;
        double bound = role ? IDLE_PRIMARY_BASE + IDLE_PER_LED_SERVICE * per_node[i]
                            : IDLE_SECONDARY_MAX;
        cluster_assert(c, per_tick <= bound,
                       "idle %s, leading %d service(s), sent %.2f commands per tick (budget "
                       "%.2f)",
                       c->nodes[i].id, per_node[i], per_tick, bound);
        sum[role] += per_tick;
        count[role]++;
        if (per_tick > most[role])
            most[role] = per_tick;
    }
    fprintf(stderr,
            "scale20: idle, %d nodes x %d services, ticks of %d ms: commands per node-tick: "
            "%d secondaries %.2f (max %.2f), %d primaries %.2f (max %.2f)\n",
            N_NODES, N_SERVICES, TICK_MS, count[0], sum[0] / (count[0] ? count[0] : 1), most[0],
            count[1], sum[1] / (count[1] ? count[1] : 1), most[1]);
}

static int64_t total_succeeded(cluster_t *c)
{
    int64_t total = 0;
    for (size_t s = 0; s < N_SERVICES; s++) {
        int64_t n = cluster_try_count(c, services[s], "{\"status\": \"succeeded\"}");
        total += n > 0 ? n : 0;
    }
    return total;
}

/* The nodes to kill: every primary first (so every service fails over), then the first
 * others; their indexes (0-based) into killed[]. */
static void choose_victims(cluster_t *c, const int per_node[CLUSTER_MAX_NODES],
                           size_t killed[N_KILLED])
{
    size_t k = 0;
    for (size_t i = 0; i < c->n_nodes && k < N_KILLED; i++)
        if (per_node[i] > 0)
            killed[k++] = i;
    for (size_t i = 0; i < c->n_nodes && k < N_KILLED; i++)
        if (per_node[i] == 0)
            killed[k++] = i;
}

/* How many tasks of the service are claimed by a killed node right now. */
static int64_t held_by(cluster_t *c, const char *service, const size_t killed[N_KILLED])
{
    int64_t held = 0;
    for (size_t k = 0; k < N_KILLED; k++) {
        char filter[256];
        snprintf(filter, sizeof filter, "{\"status\": \"claimed\", \"claimed_by\": \"%s\"}",
                 c->nodes[killed[k]].id);
        int64_t n = cluster_try_count(c, service, filter);
        held += n > 0 ? n : 0;
    }
    return held;
}

/* Every task of the service succeeded, with exactly one succeeded run in its history; returns
 * how many of them have a `crashed` entry (released from a killed node). */
static int64_t check_tasks(cluster_t *c, const char *service, cluster_task_view_t *views)
{
    size_t n = cluster_read_task_views(c, service, views, TASKS_PER_SERVICE + 1);
    cluster_assert(c, n == TASKS_PER_SERVICE, "%s has %zu tasks, expected %d", service, n,
                   TASKS_PER_SERVICE);
    for (size_t i = 0; i < n; i++) {
        cluster_assert(c, strcmp(views[i].status, "succeeded") == 0, "%s: task %s is %s",
                       service, views[i].id, views[i].status);
        cluster_assert(c, views[i].succeeded_entries == 1,
                       "%s: task %s has %d succeeded runs in its history", service, views[i].id,
                       views[i].succeeded_entries);
    }
    return cluster_try_count(c, service, "{\"history.event\": \"crashed\"}");
}

Test(cluster_scale20, twenty_nodes_five_services)
{
    cluster_options_t options = {.tag = "scale20", .tick_ms = TICK_MS, .takeover_ms = TAKEOVER_MS};
    for (size_t s = 0; s < N_SERVICES; s++)
        options.services[s] = (cluster_service_spec_t){.name = services[s],
                                                       .settings = "workers = 1"};
    cluster_t *c = cluster_new(&options);
    int64_t spawned = test_now_ms();
    /* A rolling start, one node every START_EVERY_MS: the first node has every vacant primacy
     * to itself for a few ticks. */
    for (size_t i = 0; i < N_NODES; i++) {
        cluster_node_t *n = cluster_add_node(c, NULL);
        cluster_node_config_add(n, "wake = poll");
        cluster_node_start(n);
        test_sleep_ms(START_EVERY_MS);
    }
    cluster_assert(c, cluster_wait_registered(c, 60000), "the %d nodes did not register in 60 s",
                   N_NODES);
    fprintf(stderr, "scale20: %d nodes registered in %lld ms\n", N_NODES,
            (long long)(test_now_ms() - spawned));

    /* 1. Primacy spreads. */
    int per_node[CLUSTER_MAX_NODES];
    check_spread(c, "at start-up", per_node);

    /* 2. The idle cost. */
    check_idle_cost(c, per_node);

    /* 3. 2,000 tracked tasks, all due at the same moment, ENQUEUE_MS after the first enqueue
     * (five cohortctl runs take a while); five nodes killed at once while they run. */
    int64_t enqueued = test_now_ms();
    char due[32];
    snprintf(due, sizeof due, "%lld", (long long)(cluster_server_ms(c) + ENQUEUE_MS));
    for (size_t s = 0; s < N_SERVICES; s++) {
        char count[16];
        snprintf(count, sizeof count, "%d", TASKS_PER_SERVICE);
        const char *args[] = {"enqueue",   services[s],    "--count", count,
                              "--tracked", "--not-before", due,       NULL};
        int rc = cluster_run_ctl(c, args);
        cluster_assert(c, rc == 0, "cohortctl enqueue %s exited %d", services[s], rc);
    }
    fprintf(stderr, "scale20: enqueued in %lld ms\n", (long long)(test_now_ms() - enqueued));
    int64_t all = (int64_t)N_SERVICES * TASKS_PER_SERVICE;
    int64_t deadline = test_now_ms() + 60000;
    int64_t at_kill = 0;
    while ((at_kill = total_succeeded(c)) < all / 4 && test_now_ms() < deadline)
        test_sleep_ms(20);
    size_t killed[N_KILLED];
    choose_victims(c, per_node, killed);
    for (size_t k = 0; k < N_KILLED; k++)
        cluster_node_kill(&c->nodes[killed[k]]);
    /* A killed node's last writes may still be queued at the server (an outcome bulk sent just
     * before SIGKILL lands after it): count what the dead hold once those landed, 1 s later,
     * still well before any release (takeover_ms after their last ping). */
    test_sleep_ms(1000);
    int64_t held = 0;
    for (size_t s = 0; s < N_SERVICES; s++)
        held += held_by(c, services[s], killed);
    fprintf(stderr, "scale20: killed %d nodes (every primary among them) with %lld tasks "
                    "succeeded; they held %lld claimed tasks\n",
            N_KILLED, (long long)at_kill, (long long)held);

    for (size_t s = 0; s < N_SERVICES; s++)
        cluster_assert(c, cluster_wait_succeeded(c, services[s], TASKS_PER_SERVICE, 60000),
                       "%s: only %lld of %d tasks succeeded (none for 60 s)", services[s],
                       (long long)cluster_count_status(c, services[s], "succeeded"),
                       TASKS_PER_SERVICE);
    fprintf(stderr, "scale20: %lld tasks succeeded %lld ms after the enqueue\n",
            (long long)all, (long long)(test_now_ms() - enqueued));
    for (size_t s = 0; s < N_SERVICES; s++)
        cluster_assert(c, held_by(c, services[s], killed) == 0,
                       "%s: tasks are still claimed by killed nodes", services[s]);

    cluster_task_view_t *views = calloc(TASKS_PER_SERVICE + 1, sizeof *views);
    cr_assert(views);
    int64_t crashed = 0;
    for (size_t s = 0; s < N_SERVICES; s++)
        crashed += check_tasks(c, services[s], views);
    free(views);
    fprintf(stderr, "scale20: every task succeeded once; %lld were released from killed nodes\n",
            (long long)crashed);
    cluster_assert(c, crashed >= held, "%lld tasks were held by the killed nodes, but only %lld "
                   "carry a crashed entry", (long long)held, (long long)crashed);

    /* The failover spread the five primacies over the survivors too (the tasks may all be
     * done before takeover_ms has passed: wait for the takeovers). */
    for (size_t s = 0; s < N_SERVICES; s++) {
        cluster_primacy_t was, now;
        cluster_assert(c, cluster_read_primacy(c, services[s], &was), "cannot read %s",
                       services[s]);
        bool gone = false;
        for (size_t k = 0; k < N_KILLED; k++)
            gone = gone || strcmp(was.primary, c->nodes[killed[k]].id) == 0;
        if (gone)
            cluster_assert(c, cluster_wait_primary(c, services[s], was.primary,
                                                   4 * TAKEOVER_MS, &now),
                           "%s: no node took over from the killed %s", services[s],
                           was.primary);
    }
    check_spread(c, "after the kill", per_node);
    for (size_t k = 0; k < N_KILLED; k++)
        cluster_assert(c, per_node[killed[k]] == 0, "killed node %s still leads a service",
                       c->nodes[killed[k]].id);
    for (size_t s = 0; s < N_SERVICES; s++) {
        char why[160];
        cluster_assert(c, cluster_epochs_unique(c, services[s], why, sizeof why), "%s: %s",
                       services[s], why);
    }
}
