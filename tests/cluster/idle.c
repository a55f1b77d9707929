/*
 * idle.c - what an idle cluster costs the database (issue 11), and that the savings lose no
 * work:
 * - 3 nodes serving 2 services on an empty queue: a node that leads no service sends at most
 *   one command per tick (its one read of both config documents, or its ping every
 *   takeover_ms/4 instead), and a node sends at most 1 + 4 per service it leads (the read,
 *   then per service its renewal and its claim, and the maintenance's commands spread over
 *   its ticks). Measured from the nodes' own stats.ticks and stats.db_commands, which each
 *   ping writes together;
 * - the idle secondaries still get work: with the primary capped at 1 claim a tick, the
 *   secondaries, which send no claim while the primary's hint says nothing is due, run most
 *   of 60 tasks enqueued into the idle cluster.
 */
#include <bson/bson.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define TICK_MS 250
#define NODES 3

TestSuite(cluster_idle, .fini = cluster_cleanup_all, .timeout = 300);

typedef struct counters {
    int64_t ticks, commands;
} counters_t;

/* Node `id`'s stats.ticks and stats.db_commands, as its last ping wrote them. */
static counters_t counters_of(cluster_t *c, const char *id)
{
    char filter[96];
    snprintf(filter, sizeof filter, "{\"_id\": \"%s\"}", id);
    bson_t doc;
    counters_t out = {0, 0};
    if (!test_find_one(c->client, c->db, "nodes", filter, &doc))
        return out;
    out.ticks = test_doc_int(&doc, "stats.ticks");
    out.commands = test_doc_int(&doc, "stats.db_commands");
    bson_destroy(&doc);
    return out;
}

/* Starts NODES nodes with `wake = poll`: the tick's own commands are measured (a change
 * stream's getMores are cluster/wake's and docs/BENCHMARKS.md's), and only the primary's hint
 * can send an idle secondary to work. */
static void start_polling_nodes(cluster_t *c, const char *service)
{
    for (int i = 0; i < NODES; i++) {
        cluster_node_t *n = cluster_add_node(c, NULL);
        cluster_node_config_add(n, "wake = poll");
        cluster_node_start(n);
    }
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");
    cluster_primacy_t p;
    cluster_assert(c, cluster_wait_primary(c, service, NULL, 30000, &p), "%s has no primary",
                   service);
}

/* How many of the services name node `id` as their primary. */
static int led_by(cluster_t *c, const char *id, const char *const *services, int n)
{
    int led = 0;
    for (int i = 0; i < n; i++) {
        cluster_primacy_t p;
        if (cluster_read_primacy(c, services[i], &p) && strcmp(p.primary, id) == 0)
            led++;
    }
    return led;
}

Test(cluster_idle, an_idle_secondary_sends_one_command_per_tick)
{
    const char *services[] = {"alpha", "beta"};
    cluster_options_t options = {
        .tag = "idle",
        .tick_ms = TICK_MS,
        .takeover_ms = 3000,
        .services = {{.name = "alpha", .settings = "workers = 1"},
                     {.name = "beta", .settings = "workers = 1"}},
    };
    cluster_t *c = cluster_new(&options);
    start_polling_nodes(c, "alpha");
    cluster_primacy_t p;
    cluster_assert(c, cluster_wait_primary(c, "beta", NULL, 30000, &p), "beta has no primary");
    test_sleep_ms(3000); /* start-up, indexes, the first maintenance */

    counters_t before[NODES], after[NODES];
    for (int i = 0; i < NODES; i++)
        before[i] = counters_of(c, c->nodes[i].id);
    test_sleep_ms(8000);
    for (int i = 0; i < NODES; i++)
        after[i] = counters_of(c, c->nodes[i].id);

    for (int i = 0; i < NODES; i++) {
        int64_t ticks = after[i].ticks - before[i].ticks;
        int64_t commands = after[i].commands - before[i].commands;
        int led = led_by(c, c->nodes[i].id, services, 2);
        double per_tick = ticks > 0 ? (double)commands / (double)ticks : 1e9;
        cr_log_info("node %s leads %d service(s): %lld commands in %lld ticks, %.2f per tick",
                    c->nodes[i].id, led, (long long)commands, (long long)ticks, per_tick);
        cluster_assert(c, ticks >= 8000 / TICK_MS / 2, "node %s pinged only %lld ticks apart",
                       c->nodes[i].id, (long long)ticks);
        double bound = led == 0 ? 1.0 : 1.0 + 4.0 * led;
        cluster_assert(c, per_tick <= bound + 0.05,
                       "node %s (leading %d service(s)) sent %.2f commands per idle tick; the "
                       "budget is %.2f",
                       c->nodes[i].id, led, per_tick, bound);
    }
}

Test(cluster_idle, idle_secondaries_take_work_the_primary_cannot)
{
    cluster_options_t options = {
        .tag = "idlework",
        .tick_ms = TICK_MS,
        .takeover_ms = 3000,
        .services = {{.name = "noop",
                      .settings = "workers = 1\nprimary_task_count = 1\n"
                                  "secondary_task_count = 0\nsleep_ms = 20"}},
    };
    cluster_t *c = cluster_new(&options);
    start_polling_nodes(c, "noop");
    cluster_primacy_t p;
    cluster_assert(c, cluster_read_primacy(c, "noop", &p), "cannot read the primacy");
    test_sleep_ms(2000); /* idle: the primary's hint now says nothing is due */
    const char *enqueue[] = {"enqueue", "noop", "--count", "60", NULL};
    int64_t t0 = test_now_ms();
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cannot enqueue");
    cluster_assert(c, cluster_wait_succeeded(c, "noop", 60, 30000), "the tasks did not all run");
    int64_t took = test_now_ms() - t0;
    char filter[192];
    snprintf(filter, sizeof filter, "{\"claimed_by\": {\"$ne\": \"%s\"}}", p.primary);
    int64_t by_secondaries = cluster_try_count(c, "noop", filter);
    cr_log_info("60 tasks in %lld ms, %lld of them run by the secondaries", (long long)took,
                (long long)by_secondaries);
    /* Capped at 1 a tick, the primary alone would need 60 ticks (15 s). */
    cluster_assert(c, by_secondaries >= 30,
                   "the secondaries ran only %lld of 60 tasks: they did not learn that work "
                   "was due",
                   (long long)by_secondaries);
}
