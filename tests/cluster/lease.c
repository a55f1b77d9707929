/*
 * lease.c - task leases on real nodes: a running task is checked in by its node, so only a
 * node that stops checking in loses its tasks, and its late outcome is refused.
 *
 * stall_timeout_ms is 1000 with tick_ms 200, so running tasks are checked in every 333 ms
 * (on the next tick after that) and the primary's maintenance runs every 333 ms too. Every
 * task sleeps 3000 ms (noop sleep_ms): three times the stall timeout. takeover_ms is 3000,
 * so node expiry (a node silent for takeover_ms loses its claims) comes well after the
 * stall timeout.
 *
 * (a) Six such tasks on 3 nodes x 2 workers, primary and secondaries alike: none is ever
 *     reset ("stalled" appears in no log), each succeeds on its first attempt with one
 *     history entry and one journal line, and ran for the full 3 s.
 * (b) Three such tasks, so at least one runs on a secondary; that secondary is frozen with
 *     SIGSTOP (it stops checking in). The primary resets its K tasks ("reset K stalled
 *     task(s)"), other nodes claim them (attempt 2) and finish them. Then SIGCONT: the frozen
 *     node's workers wake up, journal attempt 1 and try to record success, which is refused
 *     ("no longer holds its claim"). Each task's final record is the other node's:
 *     succeeded, attempts 2, its history attempt 1 crashed on the frozen node (the reset) and
 *     attempt 2 succeeded on the other. Primacy never moves, and the
 *     resumed node stays up and exits 0 on SIGTERM.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "lease"
#define QUEUE "queue_" SERVICE
#define STALL_MS 1000
#define SLEEP_MS 3000
/* Nodes silent for takeover_ms are expired and their claims released at once. 3000 ms keeps
 * that well behind the stall timeout, so (b) sees the stall reset and not the expiry. */
#define TAKEOVER_MS 3000

TestSuite(cluster_lease, .fini = cluster_cleanup_all, .timeout = 120);

static int64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static cluster_t *start_cluster(const char *tag)
{
    static char settings[256];
    snprintf(settings, sizeof settings,
             "workers = 2\n"
             "stall_timeout_ms = %d\n"
             "sleep_ms = %d\n"
             "journal = @DIR@/journal.txt",
             STALL_MS, SLEEP_MS);
    cluster_options_t options = {
        .tag = tag,
        .tick_ms = 200,
        .takeover_ms = TAKEOVER_MS,
        .services = {{.name = SERVICE, .settings = settings}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 3, SERVICE, 5000, &p);
    return c;
}

static void enqueue(cluster_t *c, const char *count)
{
    const char *args[] = {"enqueue", SERVICE, "--count", count, NULL};
    cluster_assert(c, cluster_run_ctl(c, args) == 0, "cohortctl enqueue failed");
}

/* Journal lines ("<task id> <node id> <attempt>") for task `id`: count, and per attempt the
 * node that journaled it (attempts 1 and 2 only). */
typedef struct journal_view {
    int lines;
    char node_of_attempt[3][64];
} journal_view_t;

static void read_journal_for(cluster_t *c, const char *id, journal_view_t *j)
{
    memset(j, 0, sizeof *j);
    char path[512];
    snprintf(path, sizeof path, "%s/journal.txt", c->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return; /* nothing journaled yet */
    char line[256], task[64], node[64];
    int attempt;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%63s %63s %d", task, node, &attempt) != 3 || strcmp(task, id) != 0)
            continue;
        j->lines++;
        if (attempt >= 1 && attempt <= 2)
            snprintf(j->node_of_attempt[attempt], sizeof j->node_of_attempt[attempt], "%s", node);
    }
    fclose(f);
}

static void stop_all_ok(cluster_t *c)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + SLEEP_MS + 5000);
}

Test(cluster_lease, a_task_running_three_stall_timeouts_is_never_reset)
{
    cluster_t *c = start_cluster("lease_long");
    enqueue(c, "6");
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 6, 4 * SLEEP_MS + 10000),
                   "6 tasks of %d ms did not all succeed in time", SLEEP_MS);

    cluster_task_view_t tasks[6];
    size_t n = cluster_read_task_views(c, SERVICE, tasks, 6);
    cluster_assert(c, n == 6, "%zu tasks in the queue, expected 6", n);
    char nodes[160] = "";
    for (size_t i = 0; i < n; i++) {
        cluster_task_view_t *t = &tasks[i];
        cluster_assert(c, strcmp(t->status, "succeeded") == 0 && t->attempts == 1,
                       "task %s is %s after %lld attempt(s); expected succeeded after 1", t->id,
                       t->status, (long long)t->attempts);
        cluster_assert(c, t->history == 1 && t->last_attempt == 1,
                       "task %s has %d history entries (last attempt %lld); expected 1", t->id,
                       t->history, (long long)t->last_attempt);
        /* started_at is the server's claim time, ended_at the node's estimate of server
         * time, off by at most takeover_ms / 16 + 1 ms. */
        cluster_assert(c, t->last_run_ms >= SLEEP_MS - TAKEOVER_MS / 16 - 1,
                       "task %s ran %lld ms by its history, less than its %d ms sleep", t->id,
                       (long long)t->last_run_ms, SLEEP_MS);
        journal_view_t j;
        read_journal_for(c, t->id, &j);
        cluster_assert(c, j.lines == 1 && strcmp(j.node_of_attempt[1], t->claimed_by) == 0,
                       "task %s: %d journal lines (attempt 1 by '%s', claimed by %s); expected "
                       "one, by its claimer",
                       t->id, j.lines, j.node_of_attempt[1], t->claimed_by);
        if (!strstr(nodes, t->claimed_by)) {
            strncat(nodes, " ", sizeof nodes - strlen(nodes) - 1);
            strncat(nodes, t->claimed_by, sizeof nodes - strlen(nodes) - 1);
        }
    }
    cluster_assert(c, cluster_log_count_all(c, "stalled", NULL) == 0,
                   "a task kept checked in was reset as stalled");
    cluster_assert(c, cluster_log_count_all(c, "no longer holds its claim", NULL) == 0,
                   "a node lost the claim of a task it kept checked in");
    cluster_assert(c, cluster_log_count_all(c, "expired", NULL) == 0,
                   "a node that kept pinging was expired");
    fprintf(stderr, "lease: 6 tasks of %d ms (stall timeout %d ms) ran once each, on%s\n", SLEEP_MS,
            STALL_MS, nodes);
    stop_all_ok(c);
}

Test(cluster_lease, a_frozen_claimer_loses_its_tasks_and_its_late_outcomes_are_refused)
{
    cluster_t *c = start_cluster("lease_frozen");
    /* Three tasks on 3 nodes x 2 workers: at least one runs on a secondary. */
    enqueue(c, "3");
    cluster_assert(c,
                   cluster_wait_count(c, SERVICE, "{\"status\": \"claimed\", \"attempts\": 1}", 3,
                                      10000),
                   "the 3 tasks were not all claimed within 10 s");
    cluster_primacy_t primacy;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &primacy), "cannot read primacy");
    cluster_task_view_t tasks[3];
    cluster_assert(c, cluster_read_task_views(c, SERVICE, tasks, 3) == 3, "expected 3 tasks");
    cluster_node_t *frozen = NULL;
    for (size_t i = 0; i < 3 && !frozen; i++)
        if (strcmp(tasks[i].claimed_by, primacy.primary) != 0)
            frozen = cluster_node_by_id(c, tasks[i].claimed_by);
    cluster_assert(c, frozen != NULL, "no task was claimed by a secondary (primary %s)",
                   primacy.primary);
    int held = 0;
    for (size_t i = 0; i < 3; i++)
        held += strcmp(tasks[i].claimed_by, frozen->id) == 0;

    int64_t frozen_at = test_now_ms();
    cluster_node_pause(frozen);
    /* The frozen node's last check-in: no reset may come before it is STALL_MS old. */
    int64_t last_heartbeat = 0;
    cluster_task_view_t at_freeze[3];
    cluster_assert(c, cluster_read_task_views(c, SERVICE, at_freeze, 3) == 3, "expected 3 tasks");
    for (size_t i = 0; i < 3; i++)
        if (strcmp(at_freeze[i].claimed_by, frozen->id) == 0 &&
            at_freeze[i].heartbeat_at_ms > last_heartbeat)
            last_heartbeat = at_freeze[i].heartbeat_at_ms;
    /* No check-in for STALL_MS, then the next maintenance run (every STALL_MS / 3, on a tick)
     * resets the claims. */
    char reset_line[64];
    snprintf(reset_line, sizeof reset_line, "reset %d stalled task(s) to pending", held);
    cluster_node_t *primary = cluster_node_by_id(c, primacy.primary);
    cluster_assert(c, primary != NULL, "primary '%s' is not one of our nodes", primacy.primary);
    int64_t reset_bound = STALL_MS + STALL_MS / 3 + 2 * c->tick_ms;
    cluster_assert(c, cluster_wait_log(primary, reset_line, NULL, reset_bound + 5000),
                   "primary %s did not log '%s' within %lld ms of freezing %s", primary->id,
                   reset_line, (long long)reset_bound + 5000, frozen->id);
    int64_t reset_ms = test_now_ms() - frozen_at;
    /* The database server runs on this host, so its clock is ours; the primary's estimate of
     * it is off by at most takeover_ms / 16 + 1 ms. */
    int64_t quiet_ms = realtime_ms() - last_heartbeat;
    cluster_assert(c, quiet_ms >= STALL_MS - c->takeover_ms / 16 - 1,
                   "the tasks were reset %lld ms after their last check-in, before the %d ms "
                   "stall timeout",
                   (long long)quiet_ms, STALL_MS);

    /* The others run the reset tasks as attempt 2 while the claimer is still frozen. */
    cluster_assert(c,
                   cluster_wait_count(c, SERVICE, "{\"status\": \"succeeded\", \"attempts\": 2}",
                                      held, 2 * SLEEP_MS + 10000),
                   "the %d reset task(s) did not succeed on attempt 2 in time", held);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 3, SLEEP_MS + 10000),
                   "not all 3 tasks succeeded");

    /* Thaw: the old workers finish their sleep at once, journal, and are refused. */
    cluster_node_resume(frozen);
    for (size_t i = 0; i < 3; i++) {
        if (strcmp(tasks[i].claimed_by, frozen->id) != 0)
            continue;
        char refused[1024];
        snprintf(refused, sizeof refused, "task %.24s attempt 1: outcome not recorded",
                 tasks[i].id);
        cluster_assert(c, cluster_wait_log(frozen, refused, "no longer holds its claim", 10000),
                       "%s was resumed but did not log that the outcome of %s was refused",
                       frozen->id, tasks[i].id);
    }
    cluster_assert(c, cluster_node_alive(frozen), "%s died after SIGCONT", frozen->id);

    cluster_task_view_t final[3];
    cluster_assert(c, cluster_read_task_views(c, SERVICE, final, 3) == 3, "a task is gone");
    for (size_t i = 0; i < 3; i++) {
        cluster_task_view_t *t = &final[i];
        bool was_frozen = false;
        for (size_t k = 0; k < 3; k++)
            was_frozen = was_frozen || (strcmp(tasks[k].id, t->id) == 0 &&
                                        strcmp(tasks[k].claimed_by, frozen->id) == 0);
        int64_t want = was_frozen ? 2 : 1;
        cluster_assert(
            c,
            strcmp(t->status, "succeeded") == 0 && t->attempts == want &&
                strcmp(t->claimed_by, frozen->id) != 0 &&
                strcmp(t->last_node, t->claimed_by) == 0 && t->history == want &&
                t->last_attempt == want && strcmp(t->last_outcome, "succeeded") == 0,
            "task %s: %s, attempts %lld, claimed by %s, %d history entries (last: "
            "%s, attempt %lld, %s); expected succeeded on attempt %lld by a node "
            "other than %s, one history entry per attempt (the reset one: crashed)",
            t->id, t->status, (long long)t->attempts, t->claimed_by, t->history, t->last_node,
            (long long)t->last_attempt, t->last_outcome, (long long)want, frozen->id);
        if (was_frozen) {
            char crashed[256];
            snprintf(crashed, sizeof crashed,
                     "{\"_id\": {\"$oid\": \"%.24s\"}, \"history.0.event\": \"crashed\", "
                     "\"history.0.node\": \"%s\", \"history.0.attempt\": 1}",
                     t->id, frozen->id);
            cluster_assert(c, cluster_try_count(c, SERVICE, crashed) == 1,
                           "task %s's history does not record attempt 1 crashed on %s", t->id,
                           frozen->id);
        }
        /* At-least-once: the frozen run did its work too, and says it was attempt 1. */
        journal_view_t j;
        read_journal_for(c, t->id, &j);
        cluster_assert(c,
                       was_frozen
                           ? j.lines == 2 && strcmp(j.node_of_attempt[1], frozen->id) == 0 &&
                                 strcmp(j.node_of_attempt[2], t->claimed_by) == 0
                           : j.lines == 1 && strcmp(j.node_of_attempt[1], t->claimed_by) == 0,
                       "task %s: %d journal lines, attempt 1 by '%s', attempt 2 by '%s'", t->id,
                       j.lines, j.node_of_attempt[1], j.node_of_attempt[2]);
    }
    cluster_primacy_t after;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &after), "cannot read primacy");
    cluster_assert(c, strcmp(after.primary, primacy.primary) == 0 && after.epoch == primacy.epoch,
                   "primacy moved from %s (epoch %lld) to %s (epoch %lld) though only a "
                   "secondary was frozen",
                   primacy.primary, (long long)primacy.epoch, after.primary,
                   (long long)after.epoch);
    fprintf(stderr,
            "lease: froze secondary %s while it ran %d task(s); primary %s reset them after "
            "%lld ms (%lld ms after their last check-in); they succeeded as attempt 2 elsewhere; "
            "the late outcomes were refused\n",
            frozen->id, held, primary->id, (long long)reset_ms, (long long)quiet_ms);
    stop_all_ok(c);
}
