/*
 * ops_registry.c - the node registry on real nodes: a node that stops pinging is expired by
 * the primary and loses its claimed tasks long before the stall timeout.
 *
 * Three nodes x 2 workers run six 4-second tasks (noop sleep_ms), two per node. The stall
 * timeout is 600 s, so only node expiry can release a task within the test. A secondary is
 * frozen with SIGSTOP; it stops pinging, and the primary's maintenance (every
 * min(stall_timeout_ms / 3, 5 s)) expires it once its last ping is takeover_ms old:
 *   - the primary logs "1 node(s) expired (no ping for 1500 ms); released 2 of their claimed
 *     task(s) to pending", between takeover_ms - tick and takeover_ms + 5 s (+ slack) after
 *     the freeze, and nothing is reset as stalled;
 *   - `cohortctl nodes --json` shows the frozen node "expired", the others "live";
 *   - the two released tasks run again elsewhere (attempt 2) and succeed.
 * Then SIGCONT: the node logs that it was expired and re-registers (live again), its workers
 * wake up and their late outcomes are refused ("outcome not recorded, this node no longer
 * holds its claim"). Every task ends succeeded with exactly one history entry, the released
 * ones by the node that re-ran them, and the frozen node exits 0 on SIGTERM.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "reg"
#define TASKS 6
#define SLEEP_MS 4000
#define STALL_MS 600000
#define MAINTENANCE_MS 5000 /* min(STALL_MS / 3, 5 s): the primary's maintenance cadence */
#define SLACK_MS 1000

TestSuite(cluster_ops_registry, .fini = cluster_cleanup_all, .timeout = 120);

/* A node's entry in `cohortctl nodes --json`. */
typedef struct node_entry {
    bool found;
    char state[16];
    int64_t pid;
    int64_t workers; /* workers.<SERVICE> */
    int64_t last_ping_ms_ago;
} node_entry_t;

static void ctl_node_entry(cluster_t *c, const char *id, node_entry_t *out)
{
    memset(out, 0, sizeof *out);
    bson_t one;
    out->found = cluster_ctl_node(c, id, &one);
    if (out->found) {
        cluster_doc_utf8(&one, "state", out->state, sizeof out->state);
        out->pid = cluster_doc_number(&one, "pid");
        out->last_ping_ms_ago = cluster_doc_number(&one, "last_ping_ms_ago");
        bson_iter_t w, count;
        if (bson_iter_init(&w, &one) && bson_iter_find_descendant(&w, "workers." SERVICE, &count) &&
            BSON_ITER_HOLDS_NUMBER(&count))
            out->workers = bson_iter_as_int64(&count);
    }
    bson_destroy(&one);
}

/* Polls `cohortctl nodes --json` until `id` is in `state`. */
static bool wait_node_state(cluster_t *c, const char *id, const char *state, int64_t timeout_ms,
                            node_entry_t *last)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        ctl_node_entry(c, id, last);
        if (last->found && strcmp(last->state, state) == 0)
            return true;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(100);
    }
}

/* Lines "<task id> <node> <attempt>" of the journal for task `id`. */
static int journal_lines_for(cluster_t *c, const char *id)
{
    char path[512];
    snprintf(path, sizeof path, "%s/journal.txt", c->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strncmp(line, id, 24) == 0;
    fclose(f);
    return n;
}

Test(cluster_ops_registry, a_silent_node_is_expired_and_its_tasks_released_before_the_stall)
{
    static char settings[256];
    snprintf(settings, sizeof settings,
             "workers = 2\nstall_timeout_ms = %d\nsleep_ms = %d\njournal = @DIR@/journal.txt",
             STALL_MS, SLEEP_MS);
    cluster_options_t options = {
        .tag = "ops_registry",
        .tick_ms = 200,
        .takeover_ms = 1500,
        .services = {{.name = SERVICE, .settings = settings}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t primacy;
    cluster_start_elected(c, 3, SERVICE, 5000, &primacy);
    for (size_t i = 0; i < c->n_nodes; i++) {
        node_entry_t e;
        cluster_assert(c, wait_node_state(c, c->nodes[i].id, "live", 5000, &e),
                       "cohortctl nodes does not show %s live (found %d, state '%s')",
                       c->nodes[i].id, e.found, e.state);
        cluster_assert(c, e.pid == c->nodes[i].pid && e.workers == 2,
                       "cohortctl nodes shows %s with pid %lld and %lld workers; expected %d "
                       "and 2",
                       c->nodes[i].id, (long long)e.pid, (long long)e.workers,
                       (int)c->nodes[i].pid);
    }

    const char *enqueue[] = {"enqueue", SERVICE, "--count", "6", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue failed");
    cluster_assert(c,
                   cluster_wait_count(c, SERVICE, "{\"status\": \"claimed\", \"attempts\": 1}",
                                      TASKS, 10000),
                   "the %d tasks were not all claimed within 10 s", TASKS);
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &primacy), "cannot read primacy");
    cluster_node_t *primary = cluster_node_by_id(c, primacy.primary);
    cluster_assert(c, primary != NULL, "primary '%s' is not one of our nodes", primacy.primary);

    /* 3 nodes x 2 workers and 6 tasks: every node holds two. Freeze a secondary. */
    cluster_task_view_t before[TASKS];
    cluster_assert(c, cluster_read_task_views(c, SERVICE, before, TASKS) == TASKS,
                   "expected %d tasks", TASKS);
    cluster_node_t *frozen = NULL;
    for (size_t i = 0; i < TASKS && !frozen; i++)
        if (strcmp(before[i].claimed_by, primary->id) != 0)
            frozen = cluster_node_by_id(c, before[i].claimed_by);
    cluster_assert(c, frozen != NULL, "no task is claimed by a secondary");
    int held = 0;
    for (size_t i = 0; i < TASKS; i++)
        held += strcmp(before[i].claimed_by, frozen->id) == 0;

    int64_t frozen_at = test_now_ms();
    cluster_node_pause(frozen);
    char expired_line[160];
    snprintf(expired_line, sizeof expired_line,
             "1 node(s) expired (no ping for %lld ms); released %d of their claimed task(s) to "
             "pending",
             (long long)c->takeover_ms, held);
    int64_t bound = c->takeover_ms + MAINTENANCE_MS + 2 * c->tick_ms;
    bool expired = cluster_wait_log(primary, expired_line, NULL, bound + SLACK_MS + 5000);
    int64_t expired_ms = test_now_ms() - frozen_at;
    cluster_assert(c, expired, "primary %s did not log '%s' within %lld ms of freezing %s",
                   primary->id, expired_line, (long long)(bound + SLACK_MS + 5000), frozen->id);
    cluster_assert(c, expired_ms <= bound + SLACK_MS,
                   "%s was expired %lld ms after it froze, more than takeover_ms + the "
                   "maintenance interval + 2 ticks = %lld ms (+%d)",
                   frozen->id, (long long)expired_ms, (long long)bound, SLACK_MS);
    /* Its last ping was at most a tick before the freeze; the cluster clock errs by at most
     * takeover_ms / 16 (the log is read up to 20 ms late, which only adds). */
    cluster_assert(c, expired_ms >= c->takeover_ms - c->tick_ms - c->takeover_ms / 16,
                   "%s was expired only %lld ms after it froze (takeover_ms = %lld)", frozen->id,
                   (long long)expired_ms, (long long)c->takeover_ms);

    /* Released at once: none of its tasks is still claimed by it. */
    char still_held[160];
    snprintf(still_held, sizeof still_held, "{\"status\": \"claimed\", \"claimed_by\": \"%s\"}",
             frozen->id);
    int64_t still = cluster_try_count(c, SERVICE, still_held);
    cluster_assert(c, still == 0, "%lld task(s) are still claimed by the expired node %s",
                   (long long)still, frozen->id);
    node_entry_t entry;
    cluster_assert(c, wait_node_state(c, frozen->id, "expired", 2000, &entry),
                   "cohortctl nodes shows %s as '%s', not expired", frozen->id, entry.state);
    for (size_t i = 0; i < c->n_nodes; i++) {
        if (&c->nodes[i] == frozen)
            continue;
        ctl_node_entry(c, c->nodes[i].id, &entry);
        cluster_assert(c, entry.found && strcmp(entry.state, "live") == 0,
                       "cohortctl nodes shows %s as '%s' while it runs", c->nodes[i].id,
                       entry.state);
    }

    /* The released tasks run again elsewhere while the frozen node sleeps on. */
    cluster_assert(c,
                   cluster_wait_count(c, SERVICE, "{\"status\": \"succeeded\", \"attempts\": 2}",
                                      held, 3 * SLEEP_MS + 5000),
                   "the %d released task(s) did not succeed on attempt 2 in time", held);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, TASKS, 2 * SLEEP_MS),
                   "not all %d tasks succeeded", TASKS);
    int64_t rerun_ms = test_now_ms() - frozen_at;

    /* Thaw: the node learns it was expired and re-registers; its late outcomes are refused. */
    cluster_node_resume(frozen);
    cluster_assert(
        c, cluster_wait_log(frozen, "this node was expired by the cluster", "re-registering", 5000),
        "%s was resumed but did not log that it had been expired", frozen->id);
    cluster_assert(c, wait_node_state(c, frozen->id, "live", 5000, &entry),
                   "%s did not become live again after re-registering (state '%s')", frozen->id,
                   entry.state);
    for (size_t i = 0; i < TASKS; i++) {
        if (strcmp(before[i].claimed_by, frozen->id) != 0)
            continue;
        char refused[96];
        snprintf(refused, sizeof refused, "task %.24s attempt 1: outcome not recorded",
                 before[i].id);
        cluster_assert(c, cluster_wait_log(frozen, refused, "no longer holds its claim", 10000),
                       "%s did not log that its late outcome of %s was refused", frozen->id,
                       before[i].id);
    }
    cluster_assert(c, cluster_node_alive(frozen), "%s died after SIGCONT", frozen->id);

    cluster_task_view_t after[TASKS];
    cluster_assert(c, cluster_read_task_views(c, SERVICE, after, TASKS) == TASKS, "a task is gone");
    for (size_t i = 0; i < TASKS; i++) {
        cluster_task_view_t *t = &after[i];
        bool released = false;
        for (size_t k = 0; k < TASKS; k++)
            released = released || (strcmp(before[k].id, t->id) == 0 &&
                                    strcmp(before[k].claimed_by, frozen->id) == 0);
        /* A released task's history: the crashed first attempt (the frozen node was expired),
         * then the success. */
        int64_t want = released ? 2 : 1;
        cluster_assert(c,
                       strcmp(t->status, "succeeded") == 0 && t->attempts == want &&
                           t->history == want && t->succeeded_entries == 1 &&
                           t->last_attempt == want && strcmp(t->last_node, frozen->id) != 0 &&
                           strcmp(t->last_node, t->claimed_by) == 0,
                       "task %s: %s after %lld attempt(s), claimed by %s, %d history entries "
                       "(%d succeeded; last by %s, attempt %lld); expected one success on "
                       "attempt %lld by a node other than %s",
                       t->id, t->status, (long long)t->attempts, t->claimed_by, t->history,
                       t->succeeded_entries, t->last_node, (long long)t->last_attempt,
                       (long long)want, frozen->id);
        /* At least once: the frozen run did its work too, before it was refused. */
        int lines = journal_lines_for(c, t->id);
        cluster_assert(c, lines == want, "task %s has %d journal lines, expected %lld", t->id,
                       lines, (long long)want);
    }
    cluster_assert(c, cluster_log_count_all(c, "stalled", NULL) == 0,
                   "a task was reset as stalled: the stall timeout is %d ms", STALL_MS);
    cluster_primacy_t now;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &now), "cannot read primacy");
    cluster_assert(c, strcmp(now.primary, primacy.primary) == 0 && now.epoch == primacy.epoch,
                   "primacy moved from %s (epoch %lld) to %s (epoch %lld); only a secondary "
                   "froze",
                   primacy.primary, (long long)primacy.epoch, now.primary, (long long)now.epoch);
    fprintf(stderr,
            "ops_registry: froze %s holding %d task(s); primary %s expired it and released "
            "them %lld ms later (takeover %lld ms, maintenance every %d ms, stall timeout %d "
            "ms); all %d tasks succeeded %lld ms after the freeze; on SIGCONT it re-registered "
            "and its %d late outcome(s) were refused\n",
            frozen->id, held, primary->id, (long long)expired_ms, (long long)c->takeover_ms,
            MAINTENANCE_MS, STALL_MS, TASKS, (long long)rerun_ms, held);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + SLEEP_MS + 5000);
}
