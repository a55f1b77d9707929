/*
 * groups.c - task groups on three real nodes (issue 6): no two tasks of one group ever run at
 * the same time anywhere in the cluster, and a long task of one group blocks neither other
 * groups nor ungrouped tasks (no head-of-line blocking).
 *
 * The service runs the sleeper test handler (tests/support/handlers/sleeper.c), which appends
 * to one journal, for every run, its task, node, attempt, group and its start and end on the
 * cluster clock (the server's time as each node measures it; nodes agree on it to a few
 * ms). Exclusion is checked from those intervals. So that the check is known to be able to
 * fail, the same overlap count is run on the ungrouped tasks, which must overlap.
 *
 * Tasks are created with `cohortctl enqueue --group` where they are alike, and otherwise
 * through the same path inside the test (the task options parser shared by cohortctl and
 * cohort_task_create(), then cohort_store_insert_task()): see cluster_enqueue().
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SLEEPER "../tests/handlers/test_handler_sleeper.so"
/* Two runs "overlap" when one starts more than this before the other ends. The runs are
 * compared on the host's wall clock (the sleeper's wall_start/wall_end: every node of the
 * test runs on this machine), so no tolerance is needed: a run that starts after another's
 * outcome released the group's lock starts at or after that run's end, to the ms. (The
 * nodes' cluster clocks, each an estimate of the server's, once disagreed by 22 ms here.) */
#define CLOCK_TOLERANCE_MS 0

TestSuite(cluster_groups, .fini = cluster_cleanup_all, .timeout = 120);

static cluster_t *start_cluster(const char *tag, const char *service, const char *settings)
{
    cluster_options_t options = {
        .tag = tag,
        .services = {{.name = service, .settings = settings, .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t primacy;
    cluster_start_elected(c, 3, service, 10000, &primacy);
    return c;
}

static char *journal_path(cluster_t *c)
{
    char *path = NULL;
    cr_assert_geq(asprintf(&path, "%s/journal.txt", c->dir), 0, "out of memory");
    return path;
}

static int by_start(const void *a, const void *b)
{
    const cluster_run_t *x = a, *y = b;
    return x->wall_start_ms < y->wall_start_ms ? -1 : x->wall_start_ms > y->wall_start_ms;
}

/* The runs of `group` ("-": ungrouped; NULL: every run), copied and sorted by start. */
static size_t select_runs(const cluster_run_t *runs, size_t n, const char *group,
                          cluster_run_t **out)
{
    *out = calloc(n ? n : 1, sizeof **out);
    cr_assert_not_null(*out, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!group || strcmp(runs[i].group, group) == 0)
            (*out)[k++] = runs[i];
    qsort(*out, k, sizeof **out, by_start);
    return k;
}

typedef struct overlap_report {
    int64_t overlaps;     /* pairs of runs that overlap by more than the tolerance */
    int max_concurrent;   /* most runs in progress at one moment */
    int64_t min_gap_ms;   /* smallest start - (latest earlier end); negative: overlap */
    char example[640];    /* the first overlapping pair */
} overlap_report_t;

/* Counts overlapping pairs among `runs` (sorted by start). */
static overlap_report_t find_overlaps(const cluster_run_t *runs, size_t n)
{
    overlap_report_t r = {.min_gap_ms = INT64_MAX};
    for (size_t j = 0; j < n; j++) {
        int concurrent = 1;
        for (size_t i = 0; i < j; i++) {
            int64_t gap = runs[j].wall_start_ms - runs[i].wall_end_ms;
            if (gap < r.min_gap_ms)
                r.min_gap_ms = gap;
            if (gap < -CLOCK_TOLERANCE_MS) {
                concurrent++;
                if (r.overlaps++ == 0)
                    snprintf(r.example, sizeof r.example,
                             "task %s on %s ran %lld..%lld, task %s on %s ran %lld..%lld",
                             runs[i].id, runs[i].node, (long long)runs[i].wall_start_ms,
                             (long long)runs[i].wall_end_ms, runs[j].id, runs[j].node,
                             (long long)runs[j].wall_start_ms, (long long)runs[j].wall_end_ms);
            }
        }
        if (concurrent > r.max_concurrent)
            r.max_concurrent = concurrent;
    }
    return r;
}

/* Each task ran exactly once, at attempt 1 (a claim given back because its group was busy
 * restores the attempt). */
static void assert_each_ran_once(cluster_t *c, const cluster_run_t *runs, size_t n,
                                 size_t expected)
{
    cluster_assert(c, n == expected, "the journal has %zu runs, expected %zu", n, expected);
    cluster_run_t *sorted = calloc(n ? n : 1, sizeof *sorted);
    cr_assert_not_null(sorted, "out of memory");
    memcpy(sorted, runs, n * sizeof *runs);
    for (size_t i = 0; i < n; i++) {
        cluster_assert(c, sorted[i].attempt == 1, "task %s ran at attempt %d on %s",
                       sorted[i].id, sorted[i].attempt, sorted[i].node);
        for (size_t j = 0; j < i; j++)
            cluster_assert(c, strcmp(sorted[i].id, sorted[j].id) != 0, "task %s ran twice",
                           sorted[i].id);
    }
    free(sorted);
}

static int64_t count(cluster_t *c, const char *service, const char *filter)
{
    int64_t n = cluster_try_count(c, service, filter);
    cluster_assert(c, n >= 0, "cannot count %s", filter);
    return n;
}

/* ---- exclusion ------------------------------------------------------------------------- */

#define GROUPS 5
#define PER_GROUP 10
#define UNGROUPED 30

Test(cluster_groups, no_two_runs_of_a_group_overlap_on_three_nodes)
{
    const char *service = "grp";
    cluster_t *c = start_cluster("groups", service,
                                 "workers = 4\n"
                                 "journal = @DIR@/journal.txt");
    char *journal = journal_path(c);

    /* Interleaved, so every claim sees several groups and ungrouped work at once. */
    int64_t started = test_now_ms();
    for (int i = 0; i < PER_GROUP; i++) {
        for (int g = 0; g < GROUPS; g++) {
            char data[48], opts[48];
            snprintf(data, sizeof data, "{\"sleep_ms\": %d}", 50 + (i * 17 + g * 29) % 51);
            snprintf(opts, sizeof opts, "{\"group\": \"g%d\"}", g);
            cluster_enqueue(c, service, data, opts, NULL);
        }
        for (int u = 0; u < UNGROUPED / PER_GROUP; u++)
            cluster_enqueue(c, service, "{\"sleep_ms\": 150}", NULL, NULL);
    }
    const int64_t total = GROUPS * PER_GROUP + UNGROUPED;
    bool done = cluster_wait_succeeded(c, service, total, 45000);
    int64_t took = test_now_ms() - started;
    cluster_assert(c, done, "only %lld of %lld tasks succeeded (none for 45 s)",
                   (long long)cluster_count_status(c, service, "succeeded"), (long long)total);
    cluster_assert(c, count(c, service, "{\"group_lock\": {\"$exists\": true}}") == 0,
                   "a finished task still holds its group's lock");
    cluster_assert(c, count(c, service, "{\"attempts\": {\"$ne\": 1}}") == 0,
                   "some tasks have attempts other than 1");

    cluster_run_t *runs;
    size_t n = cluster_sleeper_runs(journal, &runs);
    assert_each_ran_once(c, runs, n, (size_t)total);

    int groups_on_several_nodes = 0;
    for (int g = 0; g < GROUPS; g++) {
        char group[8];
        snprintf(group, sizeof group, "g%d", g);
        cluster_run_t *mine;
        size_t k = select_runs(runs, n, group, &mine);
        cluster_assert(c, k == PER_GROUP, "group %s has %zu runs, expected %d", group, k,
                       PER_GROUP);
        overlap_report_t r = find_overlaps(mine, k);
        fprintf(stderr, "groups: %s: %zu runs, smallest gap between runs %lld ms\n", group, k,
                (long long)r.min_gap_ms);
        cluster_assert(c, r.overlaps == 0, "group %s: %lld overlapping runs, e.g. %s", group,
                       (long long)r.overlaps, r.example);
        bool several = false;
        for (size_t i = 1; i < k; i++)
            several = several || strcmp(mine[i].node, mine[0].node) != 0;
        groups_on_several_nodes += several;
        free(mine);
    }
    /* The exclusion was exercised across nodes, not only inside one. */
    cluster_assert(c, groups_on_several_nodes > 0, "every group ran on a single node");

    /* The check can fail: the same count on ungrouped tasks (and on all runs) finds overlaps. */
    cluster_run_t *loose;
    size_t k = select_runs(runs, n, "-", &loose);
    overlap_report_t u = find_overlaps(loose, k);
    cluster_run_t *all;
    size_t m = select_runs(runs, n, NULL, &all);
    overlap_report_t a = find_overlaps(all, m);
    fprintf(stderr,
            "groups: %lld tasks in %lld ms; %d of %d groups ran on several nodes; ungrouped: "
            "%lld overlapping pairs, up to %d at once; all runs: up to %d at once\n",
            (long long)total, (long long)took, groups_on_several_nodes, GROUPS,
            (long long)u.overlaps, u.max_concurrent, a.max_concurrent);
    cluster_assert(c, k == UNGROUPED && u.overlaps > 0 && u.max_concurrent >= 3,
                   "the ungrouped tasks hardly overlapped (%lld pairs, at most %d at once): "
                   "the overlap check proves nothing",
                   (long long)u.overlaps, u.max_concurrent);
    cluster_assert(c, a.max_concurrent > GROUPS, "at most %d runs at once", a.max_concurrent);

    free(all);
    free(loose);
    free(runs);
    free(journal);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

/* ---- no head-of-line blocking ---------------------------------------------------------- */

#define LONG_MS 5000
#define SHORT_A 10
#define SHORT_B 6
#define LOOSE 20

typedef struct claimed_wait {
    cluster_t *c;
    const char *service;
    const char *id;
} claimed_wait_t;

static bool holds_group_lock(void *arg)
{
    claimed_wait_t *w = arg;
    bson_t doc;
    bool found = cluster_read_task(w->c, w->service, w->id, &doc);
    bson_iter_t it;
    bool locked = found && bson_iter_init_find(&it, &doc, "group_lock") &&
                  BSON_ITER_HOLDS_UTF8(&it);
    bson_destroy(&doc);
    return locked;
}

static bool task_has_status(cluster_t *c, const char *service, const char *id,
                            const char *status)
{
    bson_t doc;
    bool found = cluster_read_task(c, service, id, &doc);
    bson_iter_t it;
    bool match = found && bson_iter_init_find(&it, &doc, "status") && BSON_ITER_HOLDS_UTF8(&it) &&
                 strcmp(bson_iter_utf8(&it, NULL), status) == 0;
    bson_destroy(&doc);
    return match;
}

/* `cohortctl enqueue SERVICE --count N --data {"sleep_ms": 50}` plus up to two flags with
 * their values (NULL: none), as an operator would. */
static void ctl_enqueue(cluster_t *c, const char *service, int count, const char *flag1,
                        const char *value1, const char *flag2, const char *value2)
{
    char n[16];
    snprintf(n, sizeof n, "%d", count);
    const char *args[12] = {"enqueue", service, "--count", n, "--data", "{\"sleep_ms\": 50}"};
    size_t k = 6;
    if (flag1) {
        args[k++] = flag1;
        args[k++] = value1;
    }
    if (flag2) {
        args[k++] = flag2;
        args[k++] = value2;
    }
    args[k] = NULL;
    int rc = cluster_run_ctl(c, args);
    cluster_assert(c, rc == 0, "cohortctl enqueue %s %s exited %d (see %s/cohortctl.log)",
                   flag1 ? flag1 : "", value1 ? value1 : "", rc, c->dir);
}

Test(cluster_groups, a_long_group_task_blocks_no_other_work)
{
    const char *service = "hol";
    cluster_t *c = start_cluster("groups-hol", service,
                                 "workers = 3\n"
                                 "journal = @DIR@/journal.txt");
    char *journal = journal_path(c);

    char long_id[25];
    char data[48];
    snprintf(data, sizeof data, "{\"sleep_ms\": %d}", LONG_MS);
    cluster_enqueue(c, service, data, "{\"group\": \"A\"}", long_id);
    claimed_wait_t w = {c, service, long_id};
    cluster_assert(c, test_wait_until(holds_group_lock, &w, 10000),
                   "the long task %s of group A did not take its group's lock in 10 s", long_id);

    /* Group A's short tasks come first in claim order (higher priority), so every claim
     * meets the busy group before anything else. */
    int64_t enqueued_at = test_now_ms();
    ctl_enqueue(c, service, SHORT_A, "--group", "A", "--priority", "10");
    ctl_enqueue(c, service, SHORT_B, "--group", "B", NULL, NULL);
    ctl_enqueue(c, service, LOOSE, NULL, NULL, NULL, NULL);

    const char *others_done = "{\"status\": \"succeeded\", \"group\": {\"$ne\": \"A\"}}";
    int64_t deadline = enqueued_at + 30000;
    int64_t others = 0;
    while ((others = count(c, service, others_done)) < SHORT_B + LOOSE &&
           test_now_ms() < deadline)
        test_sleep_ms(20);
    int64_t others_took = test_now_ms() - enqueued_at;
    bool long_still_running = task_has_status(c, service, long_id, "claimed");
    int64_t short_a_done = count(c, service,
                                 "{\"status\": \"succeeded\", \"group\": \"A\", \"priority\": 10}");
    fprintf(stderr,
            "groups-hol: %lld group-B and ungrouped tasks done %lld ms after they were "
            "enqueued; the %d ms task of group A still running: %s; short A tasks done: %lld\n",
            (long long)others, (long long)others_took, LONG_MS,
            long_still_running ? "yes" : "no", (long long)short_a_done);
    cluster_assert(c, others == SHORT_B + LOOSE,
                   "only %lld of %d group-B and ungrouped tasks succeeded within 30 s",
                   (long long)others, SHORT_B + LOOSE);
    cluster_assert(c, long_still_running,
                   "the group-B and ungrouped tasks took %lld ms: they did not all finish while "
                   "the %d ms task of group A ran (head-of-line blocking)",
                   (long long)others_took, LONG_MS);
    cluster_assert(c, short_a_done == 0, "%lld short tasks of group A ran beside the long one",
                   (long long)short_a_done);

    /* Then group A's short tasks run, one at a time, after the long one. */
    const int64_t total = 1 + SHORT_A + SHORT_B + LOOSE;
    cluster_assert(c, cluster_wait_succeeded(c, service, total, LONG_MS + 30000),
                   "only %lld of %lld tasks succeeded",
                   (long long)cluster_count_status(c, service, "succeeded"), (long long)total);
    cluster_run_t *runs;
    size_t n = cluster_sleeper_runs(journal, &runs);
    assert_each_ran_once(c, runs, n, (size_t)total);
    const cluster_run_t *long_run = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(runs[i].id, long_id) == 0)
            long_run = &runs[i];
    cluster_assert(c, long_run != NULL, "the long task is not in the journal");
    for (size_t i = 0; i < n; i++) {
        const cluster_run_t *r = &runs[i];
        if (r == long_run)
            continue;
        if (strcmp(r->group, "A") == 0)
            cluster_assert(c, r->wall_start_ms >= long_run->wall_end_ms - CLOCK_TOLERANCE_MS,
                           "short task %s of group A started at %lld, before the long one ended "
                           "at %lld",
                           r->id, (long long)r->wall_start_ms, (long long)long_run->wall_end_ms);
        else
            cluster_assert(c, r->wall_end_ms < long_run->wall_end_ms,
                           "task %s (group %s) ended at %lld, after the long task of group A "
                           "(%lld)",
                           r->id, r->group, (long long)r->wall_end_ms,
                           (long long)long_run->wall_end_ms);
    }
    cluster_run_t *a_runs;
    size_t k = select_runs(runs, n, "A", &a_runs);
    overlap_report_t r = find_overlaps(a_runs, k);
    cluster_assert(c, r.overlaps == 0, "group A: %lld overlapping runs, e.g. %s",
                   (long long)r.overlaps, r.example);

    free(a_runs);
    free(runs);
    free(journal);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

/* The same property when the long task is claimed together with short ones: with batch
 * claims (claim_batch, default 8) a claimer takes the long task and the next ones in one
 * claim. The short ones must not wait for the long one to end while worker slots sit idle.
 * The tasks are created before any node starts, so the first claims see them all. */
#define LONG_ALONE_MS 5000
#define SHORT_AFTER 20

Test(cluster_groups, tasks_claimed_with_a_long_one_do_not_wait_for_it)
{
    const char *service = "hol2";
    cluster_options_t options = {
        .tag = "groups-batch",
        .services = {{.name = service,
                      .settings = "workers = 3\n"
                                  "journal = @DIR@/journal.txt",
                      .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    char *journal = journal_path(c);
    char long_id[25], data[48];
    snprintf(data, sizeof data, "{\"sleep_ms\": %d}", LONG_ALONE_MS);
    for (int i = 0; i < SHORT_AFTER; i++) {
        /* A node's first claim probes with one task; past the three probes, the long task
         * falls inside a batch claim whichever node makes it. */
        if (i == 5)
            cluster_enqueue(c, service, data, "{\"group\": \"A\"}", long_id);
        cluster_enqueue(c, service, "{\"sleep_ms\": 50}", i % 2 ? "{\"group\": \"B\"}" : NULL,
                        NULL);
    }
    int64_t started = test_now_ms();
    cluster_start_nodes(c, 3);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");

    const char *others_done = "{\"status\": \"succeeded\", \"group\": {\"$ne\": \"A\"}}";
    int64_t deadline = started + 30000, others = 0;
    while ((others = count(c, service, others_done)) < SHORT_AFTER && test_now_ms() < deadline)
        test_sleep_ms(20);
    int64_t took = test_now_ms() - started;
    bool long_running = task_has_status(c, service, long_id, "claimed");
    cluster_assert(c, cluster_wait_succeeded(c, service, 1 + SHORT_AFTER, LONG_ALONE_MS + 30000),
                   "not every task succeeded");
    cluster_run_t *runs;
    size_t n = cluster_sleeper_runs(journal, &runs);
    assert_each_ran_once(c, runs, n, 1 + SHORT_AFTER);
    const cluster_run_t *long_run = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(runs[i].id, long_id) == 0)
            long_run = &runs[i];
    cluster_assert(c, long_run != NULL, "the long task is not in the journal");
    int held_back = 0;
    char example[320] = "";
    for (size_t i = 0; i < n; i++) {
        if (&runs[i] != long_run &&
            runs[i].wall_start_ms >= long_run->wall_end_ms - CLOCK_TOLERANCE_MS) {
            if (held_back++ == 0)
                snprintf(example, sizeof example, "task %s on %s started %lld ms after", runs[i].id,
                         runs[i].node,
                         (long long)(runs[i].wall_start_ms - long_run->wall_start_ms));
        }
    }
    fprintf(stderr,
            "groups-batch: %lld short tasks done %lld ms after the nodes started; the %d ms "
            "task still running then: %s; %d short task(s) started only after it ended\n",
            (long long)others, (long long)took, LONG_ALONE_MS, long_running ? "yes" : "no",
            held_back);
    cluster_assert(c, held_back == 0 && long_running,
                   "%d short task(s) waited for the %d ms task (on %s) to end before starting, "
                   "e.g. %s the long one began: a batch claim queues the tasks it took behind "
                   "one long task while other worker slots idle",
                   held_back, LONG_ALONE_MS, long_run->node, example);
    free(runs);
    free(journal);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
