/*
 * ops_rolling.c - stopping and restarting nodes the way an operator does: SIGTERM makes a
 * primary step down at once, so primacy moves within a tick, and a rolling restart of every
 * node loses no task, runs none twice and leaves no hole in primacy.
 *
 * (a) Step-down: SIGTERM to the primary (twice in a row, on 3 nodes running 300 ms tasks).
 *     Each time the old primary logs "stepped down from epoch E" and exits 0 within
 *     shutdown_grace_ms, having finished its tasks; another node is primary under epoch E+1
 *     within one tick (+ SLACK_MS) of the signal - far below takeover_ms.
 * (b) Rolling restart: 3 nodes, a steady stream of tasks (a thread of the test enqueues one
 *     every 50 ms through the product's store, as cohortctl does), and each node in turn -
 *     the current primary first - is stopped with SIGTERM, waited for, and started again
 *     with the same config. Meanwhile the same thread reads the services document every
 *     50 ms. On the server's clock, consecutive refreshes of last_active (a renewal or a
 *     takeover) are never more than 2 ticks (+ SLACK_MS) apart, and the document never names
 *     no primary for longer than a tick (+ SLACK_MS). At the end every task succeeded on its
 *     first attempt and the shared noop journal holds each task id exactly once.
 * (c) A task that outlives shutdown_grace_ms: its node releases it to pending as it exits
 *     and, as in a rolling restart, is started again at once under the same node_id. The
 *     task must not be claimed by the old process after the exit (within the bound below, far
 *     below the 600 s stall timeout), and then succeed on its second attempt. (Were the exit
 *     unable to release it, the new process would: it releases the claims its node_id still
 *     holds when it prepares the service.)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "primacy_sampler.h"
#include "support.h"

#define SERVICE "roll"
#define SLACK_MS 200
#define MAINTENANCE_MS 5000 /* the primary's maintenance cadence with a 600 s stall timeout */
#define RELEASE_SLACK_MS 1000

TestSuite(cluster_ops_rolling, .fini = cluster_cleanup_all, .timeout = 120);

/* ---- (a) step-down ----------------------------------------------------------------------- */

Test(cluster_ops_rolling, sigterm_primary_steps_down_and_another_takes_over_within_a_tick)
{
    cluster_options_t options = {
        .tag = "ops_stepdown",
        .tick_ms = 200,
        .takeover_ms = 3000,
        .services = {{.name = SERVICE, .settings = "workers = 2\nsleep_ms = 300"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_start_nodes(c, 3);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");
    const char *enqueue[] = {"enqueue", SERVICE, "--count", "40", "--create", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue failed");

    int64_t took[2];
    char who[2][2][CLUSTER_ID_MAX];
    for (int round = 0; round < 2; round++) {
        cluster_primacy_t old;
        cluster_assert(c, cluster_wait_primary(c, SERVICE, NULL, 5000, &old), "no primary in 5 s");
        /* Land the signal in the primary's steady state: after a renewal or two. */
        int64_t elected = old.last_active_ms, deadline = test_now_ms() + 10 * c->tick_ms;
        while (old.last_active_ms < elected + c->tick_ms && test_now_ms() < deadline) {
            test_sleep_ms(20);
            cluster_assert(c, cluster_read_primacy(c, SERVICE, &old), "cannot read primacy");
        }
        cluster_node_t *primary = cluster_node_by_id(c, old.primary);
        cluster_assert(c, primary != NULL, "primary '%s' is not one of our nodes", old.primary);

        int64_t term_at = test_now_ms();
        cluster_node_send_term(primary);
        cluster_takeover_t t;
        bool taken = cluster_wait_takeover(c, SERVICE, old.primary, term_at, 10000, &t);
        int64_t exit_ms = cluster_node_wait_exit(primary, term_at, c->shutdown_grace_ms + 5000);
        cluster_assert(c, taken, "no new primary within 10 s of SIGTERM to %s", old.primary);
        cluster_assert(c, exit_ms >= 0, "%s still runs %lld ms after SIGTERM", primary->id,
                       (long long)(c->shutdown_grace_ms + 5000));
        cluster_node_assert_clean_exit(primary);
        cluster_assert(c, exit_ms <= c->shutdown_grace_ms,
                       "%s took %lld ms to exit, more than shutdown_grace_ms = %lld", primary->id,
                       (long long)exit_ms, (long long)c->shutdown_grace_ms);
        char stepped[64];
        snprintf(stepped, sizeof stepped, "stepped down from epoch %lld", (long long)old.epoch);
        cluster_assert(c, cluster_log_count(primary, stepped, NULL) == 1,
                       "%s does not log '%s' once", primary->id, stepped);
        cluster_assert(c, t.after.epoch == old.epoch + 1,
                       "the new primary %s has epoch %lld, expected %lld", t.after.primary,
                       (long long)t.after.epoch, (long long)old.epoch + 1);
        fprintf(stderr,
                "ops_stepdown: SIGTERM to primary %s (epoch %lld); %s primary (epoch %lld) "
                "after %lld ms (tick %lld ms, takeover %lld ms); %s exited 0 after %lld ms\n",
                primary->id, (long long)old.epoch, t.after.primary, (long long)t.after.epoch,
                (long long)t.elapsed_ms, (long long)c->tick_ms, (long long)c->takeover_ms,
                primary->id, (long long)exit_ms);
        cluster_assert(c, t.elapsed_ms <= c->tick_ms + SLACK_MS,
                       "%s became primary %lld ms after %s got SIGTERM; expected within one "
                       "tick (%lld ms) + %d ms",
                       t.after.primary, (long long)t.elapsed_ms, primary->id, (long long)c->tick_ms,
                       SLACK_MS);
        took[round] = t.elapsed_ms;
        snprintf(who[round][0], CLUSTER_ID_MAX, "%s", old.primary);
        snprintf(who[round][1], CLUSTER_ID_MAX, "%s", t.after.primary);
    }
    /* Nothing the stopped primaries ran was lost or run again. */
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 40, 30000), "not all 40 tasks succeeded");
    int64_t again = cluster_try_count(c, SERVICE, "{\"attempts\": {\"$ne\": 1}}");
    cluster_assert(c, again == 0, "%lld task(s) ran more than once", (long long)again);
    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);
    fprintf(stderr, "ops_stepdown: handovers %s -> %s in %lld ms, %s -> %s in %lld ms\n", who[0][0],
            who[0][1], (long long)took[0], who[1][0], who[1][1], (long long)took[1]);
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

/* ---- (b) rolling restart ----------------------------------------------------------------- */

/* The node to restart next: the current primary if it has not been restarted yet, else the
 * first that has not. */
static cluster_node_t *next_to_restart(cluster_t *c, const bool *restarted)
{
    cluster_primacy_t p;
    if (cluster_read_primacy(c, SERVICE, &p)) {
        cluster_node_t *primary = cluster_node_by_id(c, p.primary);
        if (primary && !restarted[primary->index - 1])
            return primary;
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        if (!restarted[i])
            return &c->nodes[i];
    return NULL;
}

Test(cluster_ops_rolling, rolling_restart_loses_nothing_runs_nothing_twice_keeps_primacy)
{
    cluster_options_t options = {
        .tag = "ops_rolling",
        .tick_ms = 200,
        .takeover_ms = 1500,
        .services = {{.name = SERVICE,
                      .settings = "workers = 2\nsleep_ms = 20\njournal = @DIR@/journal.txt"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t first;
    cluster_start_elected(c, 3, SERVICE, 5000, &first);

    cluster_sampler_t s = {.service = SERVICE, .enqueue = true, .created_by = "ops-rolling-test"};
    cluster_sampler_start(c, &s);
    test_sleep_ms(1000); /* pacing: the stream runs before the first restart */

    bool restarted[CLUSTER_MAX_NODES] = {false};
    char order[64] = "";
    int primaries_restarted = 0;
    for (size_t round = 0; round < c->n_nodes; round++) {
        cluster_node_t *n = next_to_restart(c, restarted);
        cluster_primacy_t p;
        bool was_primary = cluster_read_primacy(c, SERVICE, &p) && strcmp(p.primary, n->id) == 0;
        primaries_restarted += was_primary;
        snprintf(order + strlen(order), sizeof order - strlen(order), "%s%s%s", round ? ", " : "",
                 n->id, was_primary ? " (primary)" : "");
        int64_t took = cluster_node_stop_ok(n, c->shutdown_grace_ms + 5000);
        cluster_assert(c, took <= c->shutdown_grace_ms,
                       "%s took %lld ms to exit, more than shutdown_grace_ms", n->id,
                       (long long)took);
        cluster_node_start(n);
        restarted[n->index - 1] = true;
        /* The new process has pinged, so it takes part; whether it wins tasks from the stream
         * in the next second depends on the phase of its ticks against the others'. */
        cluster_assert(c, cluster_wait_pinged_by_pid(c, n, 10000),
                       "%s did not register with its new pid within 10 s", n->id);
        test_sleep_ms(1000); /* pacing: a second of steady state between restarts */
    }
    cluster_sampler_stop(&s);

    fprintf(stderr,
            "ops_rolling: restarted %s; %lld tasks enqueued; %lld samples (longest interval "
            "%lld ms, %lld read errors); longest time between refreshes of last_active %lld "
            "ms (ended by epoch %lld; bound 2 ticks = %lld ms + %d); longest run without a "
            "primary %lld ms (%lld samples); %lld epochs seen\n",
            order, (long long)s.enqueued, (long long)s.samples, (long long)s.max_sample_interval_ms,
            (long long)s.read_errors, (long long)s.max_refresh_gap_ms, (long long)s.gap_at_epoch,
            (long long)(2 * c->tick_ms), SLACK_MS, (long long)s.max_vacant_ms,
            (long long)s.vacant_samples, (long long)s.epochs_seen);
    cluster_assert(c, s.enqueue_errors == 0, "%lld enqueue(s) failed: %s",
                   (long long)s.enqueue_errors, s.enqueue_error);
    cluster_assert(c, primaries_restarted >= 1, "no primary was restarted (order: %s)", order);
    cluster_assert(c, s.max_refresh_gap_ms <= 2 * c->tick_ms + SLACK_MS,
                   "primacy was not refreshed for %lld ms (until epoch %lld), more than 2 ticks "
                   "(%lld ms) + %d",
                   (long long)s.max_refresh_gap_ms, (long long)s.gap_at_epoch,
                   (long long)(2 * c->tick_ms), SLACK_MS);
    cluster_assert(c, s.max_vacant_ms <= c->tick_ms + SLACK_MS,
                   "the service had no primary for %lld ms, more than a tick + %d",
                   (long long)s.max_vacant_ms, SLACK_MS);
    cluster_assert(c, s.max_sample_interval_ms <= 4 * CLUSTER_SAMPLE_MS + SLACK_MS,
                   "the sampler was starved (%lld ms between samples): gaps may be unseen",
                   (long long)s.max_sample_interval_ms);

    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, s.enqueued, 30000),
                   "not all %lld tasks succeeded (none for 30 s) (%lld did)",
                   (long long)s.enqueued,
                   (long long)cluster_count_status(c, SERVICE, "succeeded"));
    int64_t again = cluster_try_count(c, SERVICE, "{\"attempts\": {\"$ne\": 1}}");
    cluster_assert(c, again == 0, "%lld task(s) were claimed more than once", (long long)again);
    char journal[512];
    snprintf(journal, sizeof journal, "%s/journal.txt", c->dir);
    cluster_journal_report_t r;
    cluster_journal_check(c, SERVICE, journal, &r);
    cluster_assert(c,
                   r.tasks_in_db == s.enqueued && r.lines == s.enqueued && r.duplicates == 0 &&
                       r.missing == 0 && r.unknown == 0 && r.malformed == 0 &&
                       r.not_first_attempt == 0,
                   "journal: %lld lines for %lld tasks (%lld enqueued): %lld duplicate(s), "
                   "%lld missing, %lld unknown, %lld malformed, %lld not on attempt 1 (e.g. %s)",
                   (long long)r.lines, (long long)r.tasks_in_db, (long long)s.enqueued,
                   (long long)r.duplicates, (long long)r.missing, (long long)r.unknown,
                   (long long)r.malformed, (long long)r.not_first_attempt, r.example);
    char per_node[160] = "";
    for (size_t i = 0; i < r.n_nodes; i++)
        snprintf(per_node + strlen(per_node), sizeof per_node - strlen(per_node), " %s: %lld",
                 r.nodes[i], (long long)r.per_node[i]);
    fprintf(stderr, "ops_rolling: all %lld tasks succeeded once; run by node:%s\n",
            (long long)r.lines, per_node);
    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

/* ---- (c) a task that outlives the grace period ------------------------------------------- */

/* claimed_by of the only task with `attempts`, or "" (copied into `out`). */
static void claimer_of_attempt(cluster_t *c, int attempts, char *out, size_t len)
{
    char filter[96];
    snprintf(filter, sizeof filter, "{\"status\": \"claimed\", \"attempts\": %d}", attempts);
    bson_t doc;
    bson_iter_t it;
    out[0] = '\0';
    if (test_find_one(c->client, c->db, "queue_" SERVICE, filter, &doc) &&
        bson_iter_init_find(&it, &doc, "claimed_by") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(out, len, "%s", bson_iter_utf8(&it, NULL));
    bson_destroy(&doc);
}

Test(cluster_ops_rolling, a_task_outliving_the_grace_period_runs_again_after_a_restart)
{
    cluster_options_t options = {
        .tag = "ops_grace",
        .tick_ms = 200,
        .takeover_ms = 1500,
        .shutdown_grace_ms = 500,
        .services = {{.name = SERVICE,
                      .settings = "workers = 1\nstall_timeout_ms = 600000\nsleep_ms = 3000"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 3, SERVICE, 5000, &p);
    const char *enqueue[] = {"enqueue", SERVICE, NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue failed");
    char holder[CLUSTER_ID_MAX] = "";
    int64_t deadline = test_now_ms() + 5000;
    while (!holder[0] && test_now_ms() < deadline) {
        test_sleep_ms(20);
        claimer_of_attempt(c, 1, holder, sizeof holder);
    }
    cluster_assert(c, holder[0], "the task was not claimed within 5 s");
    cluster_node_t *n = cluster_node_by_id(c, holder);
    cluster_assert(c, n != NULL, "'%s' is not one of our nodes", holder);

    /* SIGTERM while its 3 s task runs: after the 500 ms grace it hands the task back to
     * pending (the issue: "tasks that cannot finish are released back to pending, not left to
     * stall") and exits. */
    int64_t took = cluster_node_stop_ok(n, c->shutdown_grace_ms + 5000);
    int64_t exited_at = test_now_ms();
    cluster_assert(c,
                   cluster_log_count(n, "still running after shutdown_grace_ms",
                                     "released 1 to pending") == 1,
                   "%s did not report releasing its still-running task at the end of its grace "
                   "period",
                   n->id);
    char filter[160];
    snprintf(filter, sizeof filter,
             "{\"status\": \"claimed\", \"claimed_by\": \"%s\", \"attempts\": 1}", n->id);
    /* The rolling restart: the same config, so the same node_id, started again at once. */
    cluster_node_start(n);

    int64_t bound = c->takeover_ms + MAINTENANCE_MS + 2 * c->tick_ms + RELEASE_SLACK_MS;
    int64_t released_ms = -1;
    deadline = exited_at + bound;
    while (test_now_ms() < deadline) {
        if (cluster_try_count(c, SERVICE, filter) == 0) {
            released_ms = test_now_ms() - exited_at;
            break;
        }
        test_sleep_ms(50);
    }
    fprintf(stderr,
            "ops_grace: %s exited %lld ms after SIGTERM with its task running and was "
            "restarted under the same node_id; the task was %s\n",
            n->id, (long long)took,
            released_ms >= 0 ? "released" : "still claimed by it at the deadline");
    cluster_assert(c, released_ms >= 0,
                   "the task is still claimed by %s %lld ms after its process exited: "
                   "restarted at once under the same node_id, the node keeps pinging, is never "
                   "expired, and its dead process's claim is held until stall_timeout_ms "
                   "(600 s)",
                   n->id, (long long)bound);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 1, 3000 + 5000),
                   "the released task did not succeed");
    int64_t second = cluster_try_count(c, SERVICE, "{\"status\": \"succeeded\", \"attempts\": 2}");
    cluster_assert(c, second == 1, "the task did not succeed on its second attempt");
    fprintf(stderr, "ops_grace: released %lld ms after the exit; succeeded on attempt 2\n",
            (long long)released_ms);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
