/*
 * big_batch.c - one tracked batch of 10,000 no-op tasks through 3 nodes: its callback runs
 * exactly once and sees every task, and no node's memory grows with the batch size.
 *
 * The tasks are enqueued with `cohortctl enqueue noop --count N --tracked --create` before any
 * node starts, so they are all in batch 1. The noop handler's completed_log gets one line per
 * callback: "<batch id> <succeeded> <failed> <iterated> <node id>"; there must be exactly
 * one, "1 10000 0 10000 <node>", and the services document must count one completed batch.
 *
 * Memory: every node's VmRSS is sampled every 50 ms from its start to its stop, in a run of
 * 1,000 tasks and in a run of 10,000 with the same configuration. Cohort keeps no per-task
 * state in a node: claims, counts and check-ins are single documents or aggregations, and
 * the callback streams the batch through a cursor in batches of 500 documents. The bound:
 * the 10,000 run's peak (the highest of its three nodes) must stay below the 1,000 run's
 * peak + 4 MiB, and below 32 MiB absolute. Measured here: about 11 MiB in both runs, within
 * 0.2 MiB of each other, so 4 MiB is 20 times the noise, yet holding anything of the 9,000
 * extra tasks at ~460 bytes or more each (an id list, a copy of each claimed document, an
 * unfreed reply per claim) breaks it; 32 MiB is three times what a node with 4 workers and
 * its client pool uses, and catches growth that happens in both runs alike.
 *
 * Time: the local test server scans the whole queue for every claim, so a run costs O(N^2).
 * Measured here: 1,000 tasks in about 1.5 s, 10,000 in about 170 s, and a raw C loop of
 * claim + complete with 12 threads (tests/bench/raw_loop, no Cohort at all) needs 162 s
 * for 10,000 on the same server: the time is the server's, not Cohort's, and more workers
 * do not shorten it. On real MongoDB the claim is index-served. On 2026-11-23 the same
 * machine took 282-287 s for 10,000 (before and after the layer refactor alike), so the wait
 * is bounded by progress (no task finished for 90 s), not by a fixed 300 s; beside a busy
 * loop on each core (tests/busy/run.sh) it took 520 s, so the cap is 1,200 s.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "noop"
#define SMALL 1000
#define LARGE 10000
#define GROWTH_BOUND_KB (4 * 1024)
#define CEILING_KB (32 * 1024)
#define SAMPLE_MS 50

TestSuite(cluster_big_batch, .fini = cluster_cleanup_all, .timeout = 600);

typedef struct batch_run {
    int64_t tasks;
    int64_t elapsed_ms; /* from starting the nodes to the callback's line */
    int64_t peak_kb;    /* the highest VmRSS of any node */
    int64_t start_kb;   /* the highest VmRSS of any node once all had registered */
    int64_t samples;
} batch_run_t;

static int64_t highest(const cluster_rss_peaks_t *p)
{
    int64_t max = 0;
    for (size_t i = 0; i < CLUSTER_MAX_NODES; i++)
        max = p->peak_kb[i] > max ? p->peak_kb[i] : max;
    return max;
}

static int count_lines(const char *path, char *last, size_t lastlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        snprintf(last, lastlen, "%s", line);
    }
    fclose(f);
    return n;
}

/* Waits for the callback line while the batch makes progress: the bound is set by what the
 * nodes achieve, not by a budget for the whole run, so a slow or busy machine (the local
 * server scans linearly: 10,000 tasks run several times slower per task than 1,000) only
 * takes longer. Gives up when no task finished for STALL_MS, or after WAIT_CAP_MS, which
 * keeps the test inside its timeout. Returns the unfinished count it last saw. */
#define STALL_MS 90000
#define WAIT_CAP_MS 1200000
#define PROGRESS_EVERY_MS 15000
static int64_t sample_until_line(cluster_t *c, const char *path, cluster_rss_peaks_t *peaks,
                                 int64_t *waited_ms)
{
    char last[256];
    static const char *const unfinished = "{\"status\": {\"$in\": [\"pending\", \"claimed\"]}}";
    int64_t start = test_now_ms(), progress_at = start, next_count = start + PROGRESS_EVERY_MS;
    int64_t left = cluster_try_count(c, SERVICE, unfinished);
    while (count_lines(path, last, sizeof last) == 0) {
        int64_t now = test_now_ms();
        if (now >= next_count) {
            int64_t n = cluster_try_count(c, SERVICE, unfinished);
            if (n >= 0 && (left < 0 || n < left)) {
                left = n;
                progress_at = now;
            }
            next_count = now + PROGRESS_EVERY_MS;
        }
        if (now - progress_at > STALL_MS || now - start > WAIT_CAP_MS)
            break;
        cluster_rss_sample(c, peaks);
        test_sleep_ms(SAMPLE_MS);
    }
    *waited_ms = test_now_ms() - start;
    return left;
}

static void run_batch(int64_t tasks, batch_run_t *run)
{
    memset(run, 0, sizeof *run);
    run->tasks = tasks;
    cluster_options_t options = {
        .tag = tasks >= LARGE ? "big_batch" : "small_batch",
        .services = {{.name = SERVICE,
                      .settings = "workers = 4\ncompleted_log = @DIR@/completed.log"}},
    };
    cluster_t *c = cluster_new(&options);
    char count[24];
    snprintf(count, sizeof count, "%lld", (long long)tasks);
    const char *enqueue[] = {"enqueue", SERVICE, "--count", count, "--tracked", "--create", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue --tracked failed");
    cluster_assert(c, cluster_try_count(c, SERVICE, "{\"batch\": 1, \"tracked\": true}") == tasks,
                   "the %lld tasks are not all tracked in batch 1", (long long)tasks);

    char path[512];
    snprintf(path, sizeof path, "%s/completed.log", c->dir);
    cluster_rss_peaks_t peaks = {0};
    int64_t started = test_now_ms();
    cluster_start_nodes(c, 3);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");
    cluster_rss_sample(c, &peaks);
    run->start_kb = highest(&peaks);
    int64_t waited_ms = 0;
    int64_t left = sample_until_line(c, path, &peaks, &waited_ms);
    run->elapsed_ms = test_now_ms() - started;

    char last[256] = "";
    cluster_assert(c, count_lines(path, last, sizeof last) == 1,
                   "no callback for the batch of %lld tasks after %lld s: %lld tasks unfinished, "
                   "none finished in the last %d s (or the %d s cap was reached)",
                   (long long)tasks, (long long)(waited_ms / 1000), (long long)left,
                   STALL_MS / 1000, WAIT_CAP_MS / 1000);
    /* A second callback would come a tick or two later: give it several. */
    int64_t settle = test_now_ms() + 10 * c->tick_ms;
    while (test_now_ms() < settle) {
        cluster_rss_sample(c, &peaks);
        test_sleep_ms(SAMPLE_MS);
    }
    int lines = count_lines(path, last, sizeof last);
    long long batch, succeeded, failed, iterated;
    char node[64];
    cluster_assert(c, lines == 1, "%d callback lines for one batch (last: %s)", lines, last);
    cluster_assert(c,
                   sscanf(last, "%lld %lld %lld %lld %63s", &batch, &succeeded, &failed, &iterated,
                          node) == 5 &&
                       batch == 1 && succeeded == tasks && failed == 0 && iterated == tasks,
                   "callback line '%s', expected '1 %lld 0 %lld <node>'", last, (long long)tasks,
                   (long long)tasks);
    bson_t doc;
    cluster_assert(c, cluster_read_service_doc(c, SERVICE, &doc), "cannot read the service");
    bson_iter_t it;
    int64_t completed =
        bson_iter_init_find(&it, &doc, "batches_completed") && BSON_ITER_HOLDS_NUMBER(&it)
            ? bson_iter_as_int64(&it)
            : -1;
    bson_destroy(&doc);
    cluster_assert(c, completed == 1, "batches_completed is %lld, expected 1",
                   (long long)completed);
    cluster_assert(c, cluster_count_status(c, SERVICE, "succeeded") == tasks,
                   "not all %lld tasks succeeded", (long long)tasks);

    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
    run->peak_kb = highest(&peaks);
    run->samples = peaks.samples;
    fprintf(stderr,
            "big_batch: %lld tracked tasks: callback after %lld ms (%.0f tasks/s); VmRSS "
            "after registering %lld KiB, peak %lld KiB (%lld samples); per node:",
            (long long)tasks, (long long)run->elapsed_ms,
            run->elapsed_ms > 0 ? tasks * 1000.0 / (double)run->elapsed_ms : 0.0,
            (long long)run->start_kb, (long long)run->peak_kb, (long long)run->samples);
    for (size_t i = 0; i < c->n_nodes; i++)
        fprintf(stderr, " %s %lld", c->nodes[i].id, (long long)peaks.peak_kb[i]);
    fprintf(stderr, "\n");
    cluster_destroy(c);
}

Test(cluster_big_batch, ten_thousand_tracked_tasks_one_callback_flat_memory)
{
    batch_run_t small, large;
    run_batch(SMALL, &small);
    run_batch(LARGE, &large);
    cr_assert_gt(small.peak_kb, 0, "no VmRSS sample in the %d run", SMALL);
    cr_assert_lt(large.peak_kb, small.peak_kb + GROWTH_BOUND_KB,
                 "peak VmRSS %lld KiB with %d tasks vs %lld KiB with %d: grows with the batch "
                 "(bound: + %d KiB)",
                 (long long)large.peak_kb, LARGE, (long long)small.peak_kb, SMALL, GROWTH_BOUND_KB);
    cr_assert_lt(large.peak_kb, CEILING_KB, "peak VmRSS %lld KiB is above the %d KiB ceiling",
                 (long long)large.peak_kb, CEILING_KB);
}
