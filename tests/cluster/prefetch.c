/*
 * prefetch.c - claim_batch = auto (node/work/prefetch.h), the default, on real nodes:
 *   - short tasks go in batches: 3 nodes x 2 workers run 2,000 no-op tasks clearly faster
 *     than the same cluster with claim_batch = 1 (a ratio, measured in the same test);
 *   - long tasks are not hoarded: after short tasks taught the nodes to batch, 30 tasks of
 *     1 s on 3 nodes x 2 workers finish within 8 s and every node runs some; and a node whose
 *     batch took more long tasks than it has workers gives the rest back within a second
 *     (about a prefetch window), though its tick and its runs last 3 s;
 *   - pausing a kind gives back the prefetched tasks of that kind waiting on a node (pending
 *     again, untouched, attempts unchanged) and they run once the kind is resumed;
 *   - SIGTERM gives prefetched tasks back at once, and another node runs them.
 *
 * The last two make a lone node hold prefetched tasks on purpose (a lone primary keeps them):
 * taught short runs, its first worker's claim (the tick's probe, always one task) takes one
 * of two 3 s tasks of the highest priority, its second worker's batch the other with 20
 * short ones, so the 20 wait in its ready queue while both workers run long tasks.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SLEEPER "../tests/handlers/test_handler_sleeper.so"
#define SHORT_TASKS 2000
#define HELD 20        /* short tasks prefetched behind the long one */
#define LONG_MS 3000   /* the long tasks that keep both workers busy */
#define WARM 50

TestSuite(cluster_prefetch, .fini = cluster_cleanup_all, .timeout = 240);

/* Runs cohortctl with up to 8 arguments (NULL-terminated) and asserts it exits 0. */
static void ctl(cluster_t *c, const char *const *args)
{
    int rc = cluster_run_ctl(c, args);
    cluster_assert(c, rc == 0, "cohortctl %s %s exited %d (see %s/cohortctl.log)", args[0],
                   args[1] ? args[1] : "", rc, c->dir);
}

/* `count` sleeper tasks of `kind` sleeping `sleep_ms`, at `priority`. */
static void enqueue(cluster_t *c, const char *service, int count, const char *kind,
                    int sleep_ms, int priority)
{
    char n[16], data[48], prio[16];
    snprintf(n, sizeof n, "%d", count);
    snprintf(data, sizeof data, "{\"sleep_ms\": %d}", sleep_ms);
    snprintf(prio, sizeof prio, "%d", priority);
    const char *args[] = {"enqueue", service, "--count", n,      "--data", data,
                          "--kind",  kind,    "--priority", prio, NULL};
    ctl(c, args);
}

static int64_t count(cluster_t *c, const char *service, const char *filter)
{
    int64_t n = cluster_try_count(c, service, filter);
    cluster_assert(c, n >= 0, "cannot count %s", filter);
    return n;
}

/* Waits until `node` has logged `needle` `times` times (it applied a switch). */
static void wait_logged(cluster_node_t *n, const char *needle, int times)
{
    int64_t deadline = test_now_ms() + 10000;
    while (cluster_log_count(n, needle, NULL) < times && test_now_ms() < deadline)
        test_sleep_ms(20);
    cluster_assert(n->cluster, cluster_log_count(n, needle, NULL) >= times,
                   "%s did not log '%s' (%d times) within 10 s", n->id, needle, times);
}

/* Waits up to timeout_ms until `want` tasks match `filter`; returns how many matched last. */
static int64_t wait_count(cluster_t *c, const char *service, const char *filter, int64_t want,
                          int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms, n = 0;
    while ((n = count(c, service, filter)) < want && test_now_ms() < deadline)
        test_sleep_ms(20);
    return n;
}

/* ---- short tasks ------------------------------------------------------------------------ */

/* Tasks/s of 2,000 no-op tasks on 3 nodes x 2 workers with `settings` added. */
static double short_task_rate(const char *tag, const char *settings)
{
    char lines[256];
    snprintf(lines, sizeof lines, "workers = 2\n%s", settings);
    cluster_options_t options = {.tag = tag, .services = {{.name = "noop", .settings = lines}}};
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t primacy;
    cluster_start_elected(c, 3, "noop", 10000, &primacy);
    char n[16];
    snprintf(n, sizeof n, "%d", SHORT_TASKS);
    const char *args[] = {"enqueue", "noop", "--count", n, NULL};
    int64_t start = test_now_ms();
    ctl(c, args);
    bool done = cluster_wait_succeeded(c, "noop", SHORT_TASKS, 90000);
    int64_t took = test_now_ms() - start;
    cluster_assert(c, done, "%s: only %lld of %d tasks succeeded", tag,
                   (long long)cluster_count_status(c, "noop", "succeeded"), SHORT_TASKS);
    double rate = SHORT_TASKS * 1000.0 / (double)(took > 0 ? took : 1);
    fprintf(stderr, "prefetch: %s: %d no-op tasks in %lld ms (%.0f tasks/s)\n", tag,
            SHORT_TASKS, (long long)took, rate);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
    cluster_destroy(c);
    return rate;
}

Test(cluster_prefetch, short_tasks_at_the_defaults_beat_claim_batch_1)
{
    double one = short_task_rate("prefetch-b1", "claim_batch = 1\n");
    double dflt = short_task_rate("prefetch-auto", "");
    fprintf(stderr, "prefetch: the default runs %.2fx claim_batch = 1\n", dflt / one);
    cr_assert(dflt >= 2.0 * one,
              "at the defaults %.0f tasks/s, with claim_batch = 1 %.0f: expected 2x or more",
              dflt, one);
}

/* ---- long tasks ------------------------------------------------------------------------- */

Test(cluster_prefetch, long_tasks_are_not_hoarded)
{
    cluster_options_t options = {
        .tag = "prefetch-long",
        .services = {{.name = "sl",
                      .settings = "workers = 2\njournal = @DIR@/journal.txt",
                      .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t primacy;
    cluster_start_elected(c, 3, "sl", 10000, &primacy);
    /* Short runs first: the nodes that ran them would batch up to 64 tasks per claim. */
    enqueue(c, "sl", 200, "warm", 0, 0);
    cluster_assert(c, cluster_wait_succeeded(c, "sl", 200, 30000), "the warm-up did not finish");

    int64_t start = test_now_ms();
    enqueue(c, "sl", 30, "long", 1000, 0);
    bool done = wait_count(c, "sl", "{\"kind\": \"long\", \"status\": \"succeeded\"}", 30,
                           15000) == 30;
    int64_t took = test_now_ms() - start;
    cluster_assert(c, done, "the 30 tasks of 1 s did not all succeed within 15 s");
    fprintf(stderr, "prefetch: 30 tasks of 1 s on 3 nodes x 2 workers in %lld ms\n",
            (long long)took);

    char journal[512];
    snprintf(journal, sizeof journal, "%s/journal.txt", c->dir);
    cluster_run_t *runs;
    size_t n = cluster_sleeper_runs(journal, &runs);
    size_t per_node[3] = {0};
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < 3; k++)
            if (strcmp(runs[i].kind, "long") == 0 && strcmp(runs[i].node, c->nodes[k].id) == 0)
                per_node[k]++;
    free(runs);
    fprintf(stderr, "prefetch: long tasks per node: %zu %zu %zu\n", per_node[0], per_node[1],
            per_node[2]);
    for (size_t k = 0; k < 3; k++)
        cluster_assert(c, per_node[k] > 0, "%s ran none of the 30 long tasks (%zu %zu %zu)",
                       c->nodes[k].id, per_node[0], per_node[1], per_node[2]);
    cluster_assert(c, took <= 8000, "30 tasks of 1 s on 6 workers took %lld ms (> 8 s)",
                   (long long)took);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

/* Short runs on every secondary, so that any of them batches its claims (a node that ran
 * nothing claims one task per idle worker): rounds of 200 until each ran some. */
static void warm_secondaries(cluster_t *c, const cluster_node_t *primary)
{
    int64_t warmed[3] = {0};
    int64_t before = count(c, "sl", "{\"kind\": \"warm\", \"status\": \"succeeded\"}");
    bool all = false;
    for (int round = 1; round <= 5 && !all; round++) {
        enqueue(c, "sl", 200, "warm", 0, 0);
        cluster_assert(c,
                       wait_count(c, "sl", "{\"kind\": \"warm\", \"status\": \"succeeded\"}",
                                  before + 200 * round, 30000) == before + 200 * round,
                       "warm-up round %d did not finish within 30 s", round);
        all = true;
        for (size_t k = 0; k < 3; k++) {
            char filter[160];
            snprintf(filter, sizeof filter, "{\"kind\": \"warm\", \"claimed_by\": \"%s\"}",
                     c->nodes[k].id);
            warmed[k] = count(c, "sl", filter);
            if (&c->nodes[k] != primary && warmed[k] == 0)
                all = false;
        }
        fprintf(stderr, "prefetch: warm-up round %d: warm tasks run by n1 n2 n3: %lld %lld %lld\n",
                round, (long long)warmed[0], (long long)warmed[1], (long long)warmed[2]);
    }
    cluster_assert(c, all, "5 warm-up rounds of 200 left a secondary that ran none");
}

/* One round of the test below: LONG tasks of kind `kind` that run RUN_MS, watched from the
 * first claim for WATCH_MS; asserts that no node held more than its 2 workers run for
 * HOLD_LIMIT_MS or longer, that all succeed once. Returns how many give-backs the nodes
 * logged meanwhile. */
enum { LONG = 12, RUN_MS = 4000, WATCH_MS = 3000, HOLD_LIMIT_MS = 1000 };

static size_t long_round(cluster_t *c, const char *kind)
{
    size_t gave_before = 0, gave = 0;
    for (size_t k = 0; k < 3; k++)
        gave_before += cluster_log_count(&c->nodes[k], "runs now take longer than the prefetch "
                                                       "window", NULL);
    char filter[192];
    enqueue(c, "sl", LONG, kind, RUN_MS, 0);
    snprintf(filter, sizeof filter, "{\"kind\": \"%s\", \"status\": \"claimed\"}", kind);
    cluster_assert(c, wait_count(c, "sl", filter, 1, 12000) >= 1,
                   "no node claimed the %s tasks within 12 s", kind);
    int64_t start = test_now_ms(), held_since[3] = {0}, longest[3] = {0};
    int64_t max_held[3] = {0};
    while (test_now_ms() - start < WATCH_MS) {
        int64_t now = test_now_ms();
        for (size_t k = 0; k < 3; k++) {
            snprintf(filter, sizeof filter,
                     "{\"kind\": \"%s\", \"status\": \"claimed\", \"claimed_by\": \"%s\"}", kind,
                     c->nodes[k].id);
            int64_t held = count(c, "sl", filter);
            if (held > max_held[k])
                max_held[k] = held;
            if (held <= 2)
                held_since[k] = 0;
            else if (held_since[k] == 0)
                held_since[k] = now;
            else if (now - held_since[k] > longest[k])
                longest[k] = now - held_since[k];
        }
        test_sleep_ms(10);
    }
    fprintf(stderr,
            "prefetch: %s: most tasks held by n1 n2 n3: %lld %lld %lld; longest spans above "
            "the 2 workers: %lld %lld %lld ms\n",
            kind, (long long)max_held[0], (long long)max_held[1], (long long)max_held[2],
            (long long)longest[0], (long long)longest[1], (long long)longest[2]);
    for (size_t k = 0; k < 3; k++) {
        gave += cluster_log_count(&c->nodes[k], "runs now take longer than the prefetch window",
                                  NULL);
        cluster_assert(c, longest[k] < HOLD_LIMIT_MS,
                       "%s held more of the %d tasks of %d ms than its 2 workers for %lld ms "
                       "(tick 5 s)",
                       c->nodes[k].id, LONG, RUN_MS, (long long)longest[k]);
    }
    snprintf(filter, sizeof filter, "{\"kind\": \"%s\", \"status\": \"succeeded\"}", kind);
    cluster_assert(c, wait_count(c, "sl", filter, LONG, 30000) == LONG,
                   "the %d %s tasks did not all succeed", LONG, kind);
    snprintf(filter, sizeof filter, "{\"kind\": \"%s\", \"attempts\": {\"$ne\": 1}}", kind);
    cluster_assert(c, count(c, "sl", filter) == 0, "a %s task ran more than once", kind);
    return gave - gave_before;
}

/* A node whose batch claim took more than it can start gives the rest back within about a
 * prefetch window (50 ms), not at its next tick nor when its first long run ends: the tick is
 * 5 s here and the runs 4 s, so only the loop's look after the claim (node/work/handback.c) gives
 * them back within 1 s for sure (the tick, at a random point of its 5 s, does in 1 s at odds
 * of one in five). Watched from the first claim (the local server's change streams are
 * polled once a tick) for 3 s. Whether a node batches at all depends on what it measured of
 * its last runs and on which node's tick comes first: in the CI run of 222ec56 no node did
 * (each held 2), so up to 3 rounds run, each warmed up first, until one did. */
Test(cluster_prefetch, a_batch_it_cannot_start_goes_back_within_a_window)
{
    cluster_options_t options = {
        .tag = "prefetch-window",
        .tick_ms = 5000,
        .takeover_ms = 15000,
        .services = {{.name = "sl", .settings = "workers = 2", .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t primacy;
    cluster_start_elected(c, 3, "sl", 30000, &primacy);
    cluster_node_t *primary = cluster_node_by_id(c, primacy.primary);
    cluster_assert(c, primary != NULL, "primary '%s' is not one of our nodes", primacy.primary);
    /* A primary alone keeps what it prefetched (nobody else would run it): wait until it
     * counted the others (at its election, or at its maintenance, every 5 s). */
    wait_logged(primary, "other live node(s) serve the service: the primary claims at most", 1);

    size_t gave = 0;
    for (int round = 1; round <= 3 && gave == 0; round++) {
        char kind[16];
        snprintf(kind, sizeof kind, "lng%d", round);
        warm_secondaries(c, primary);
        gave = long_round(c, kind);
    }
    cluster_assert(c, gave > 0,
                   "in 3 rounds no node prefetched long tasks and gave them back: the test did "
                   "not test it");
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

/* ---- giving back ------------------------------------------------------------------------ */

/* One node of two workers holding HELD prefetched tasks of kind "k" while both run a task of
 * LONG_MS: taught short runs first, the service paused while the tasks go in, so the claims
 * after the resume take them all. */
static cluster_t *hold_prefetched(const char *tag)
{
    cluster_options_t options = {
        .tag = tag,
        .shutdown_grace_ms = 8000,
        .services = {{.name = "sl",
                      .settings = "workers = 2\njournal = @DIR@/journal.txt",
                      .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t primacy;
    cluster_start_elected(c, 1, "sl", 10000, &primacy);
    cluster_node_t *n1 = &c->nodes[0];
    enqueue(c, "sl", WARM, "warm", 0, 0);
    cluster_assert(c, cluster_wait_succeeded(c, "sl", WARM, 20000), "the warm-up did not finish");

    const char *pause[] = {"pause", "sl", NULL};
    ctl(c, pause);
    wait_logged(n1, "paused (all kinds)", 1);
    enqueue(c, "sl", 2, "long", LONG_MS, 10);
    enqueue(c, "sl", HELD, "k", 0, 0);
    const char *resume[] = {"resume", "sl", NULL};
    ctl(c, resume);
    char held[160];
    snprintf(held, sizeof held,
             "{\"kind\": \"k\", \"status\": \"claimed\", \"claimed_by\": \"%s\"}", n1->id);
    int64_t n = wait_count(c, "sl", held, HELD, 3000);
    cluster_assert(c, n == HELD, "%s holds %lld of the %d short tasks behind the long one",
                   n1->id, (long long)n, HELD);
    cluster_assert(c, count(c, "sl", "{\"kind\": \"long\", \"status\": \"claimed\"}") == 2,
                   "the two long tasks are not running");
    return c;
}

/* How many tasks of kind "k" are pending again, untouched: never run, attempts 0, no
 * claimer (an unclaim sets claimed_by to null). */
static int64_t given_back(cluster_t *c)
{
    return count(c, "sl",
                 "{\"kind\": \"k\", \"status\": \"pending\", \"attempts\": 0, \"history\": "
                 "{\"$exists\": false}, \"claimed_by\": null}");
}

/* Every task of kind "k" ran exactly once, at attempt 1. */
static void assert_each_ran_once(cluster_t *c)
{
    char journal[512];
    snprintf(journal, sizeof journal, "%s/journal.txt", c->dir);
    cluster_run_t *runs;
    size_t n = cluster_sleeper_runs(journal, &runs), k_runs = 0, first_attempts = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(runs[i].kind, "k") == 0) {
            k_runs++;
            first_attempts += runs[i].attempt == 1;
        }
    free(runs);
    cluster_assert(c, k_runs == HELD && first_attempts == HELD,
                   "%zu runs of the %d given-back tasks, %zu at attempt 1", k_runs, HELD,
                   first_attempts);
}

Test(cluster_prefetch, pausing_a_kind_gives_its_prefetched_tasks_back)
{
    cluster_t *c = hold_prefetched("prefetch-pause");
    cluster_node_t *n1 = &c->nodes[0];
    int64_t paused_at = test_now_ms();
    const char *pause[] = {"pause", "sl", "--kind", "k", NULL};
    ctl(c, pause);
    int64_t back = 0, deadline = paused_at + LONG_MS - 500;
    while ((back = given_back(c)) < HELD && test_now_ms() < deadline)
        test_sleep_ms(20);
    cluster_assert(c, back == HELD,
                   "%lld of %d prefetched tasks of the paused kind are pending again while the "
                   "long tasks run",
                   (long long)back, HELD);
    cluster_assert(c, cluster_log_count(n1, "gave back 20 prefetched task(s) of paused", NULL) == 1,
                   "%s did not log that it gave the tasks back", n1->id);

    /* Paused, they stay pending after the long tasks end; resumed, they run. */
    bool long_done = wait_count(c, "sl", "{\"kind\": \"long\", \"status\": \"succeeded\"}", 2,
                                LONG_MS + 3000) == 2;
    cluster_assert(c, long_done, "the long tasks did not finish");
    test_sleep_ms(3 * c->tick_ms);
    cluster_assert(c, given_back(c) == HELD, "tasks of the paused kind ran");
    const char *resume[] = {"resume", "sl", "--kind", "k", NULL};
    ctl(c, resume);
    cluster_assert(c, cluster_wait_succeeded(c, "sl", WARM + 2 + HELD, 10000),
                   "the given-back tasks did not run after the resume");
    assert_each_ran_once(c);
    cluster_node_stop_ok(n1, c->shutdown_grace_ms + 5000);
}

Test(cluster_prefetch, sigterm_gives_prefetched_tasks_back_at_once)
{
    cluster_t *c = hold_prefetched("prefetch-term");
    cluster_node_t *n1 = &c->nodes[0];
    int64_t term_at = test_now_ms();
    cluster_node_send_term(n1);
    int64_t back = 0, deadline = term_at + LONG_MS - 500;
    while ((back = given_back(c)) < HELD && test_now_ms() < deadline)
        test_sleep_ms(20);
    cluster_assert(c, back == HELD,
                   "%lld of %d prefetched tasks are pending again while the stopping node "
                   "finishes its long tasks",
                   (long long)back, HELD);
    cluster_assert(c, cluster_node_wait_exit(n1, term_at, c->shutdown_grace_ms + 5000) >= 0,
                   "%s did not exit", n1->id);
    cluster_node_assert_clean_exit(n1);
    cluster_assert(c, given_back(c) == HELD, "the given-back tasks changed after the exit");

    cluster_node_t *n2 = cluster_add_node(c, NULL);
    cluster_node_start(n2);
    cluster_assert(c, cluster_wait_succeeded(c, "sl", WARM + 2 + HELD, 15000),
                   "another node did not run the given-back tasks");
    assert_each_ran_once(c);
    cluster_node_stop_ok(n2, c->shutdown_grace_ms + 5000);
}
