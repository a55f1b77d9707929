/*
 * purge.c - retention on real nodes: the primary of each service deletes finished tasks
 * once they are older than that status's retention, and keeps them when it is 0.
 *
 * Three services on 3 nodes, 50 untracked tasks each, all with stall_timeout_ms 1500 so
 * maintenance runs every 500 ms:
 *   ok    tasks succeed;               succeeded_retention_ms 1500, failed_retention_ms 0
 *   keep  tasks fail at once           succeeded_retention_ms 1500, failed_retention_ms 0
 *         (fail_first_n 99, max_attempts 1)
 *   drop  tasks fail at once too;      failed_retention_ms 1500
 * Checks: ok's succeeded tasks and drop's failed tasks are all deleted, none before it was
 * 1500 ms finished, within retention + a few maintenance rounds; keep's failed tasks all
 * remain well past that; the primaries log "purged N succeeded|failed task(s)" with counts
 * adding up to what was deleted, and nothing is purged from keep.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "support.h"

#define TASKS 50
#define RETENTION_MS 1500
/* Maintenance every 500 ms on 200 ms ticks, the local server's scans, a noisy machine. */
#define PURGE_SLACK_MS 5000

TestSuite(cluster_purge, .fini = cluster_cleanup_all, .timeout = 120);

static int64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The earliest and latest finished_at of the service's tasks in `status`. */
static void finished_range(cluster_t *c, const char *service, const char *status, int64_t *earliest,
                           int64_t *latest)
{
    char name[64];
    snprintf(name, sizeof name, "queue_%s", service);
    mongoc_collection_t *queue = mongoc_client_get_collection(c->client, c->db, name);
    bson_t *filter = BCON_NEW("status", BCON_UTF8(status));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(queue, filter, NULL, NULL);
    const bson_t *doc;
    *earliest = INT64_MAX;
    *latest = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        cluster_assert(
            c, bson_iter_init_find(&it, doc, "finished_at") && BSON_ITER_HOLDS_DATE_TIME(&it),
            "a %s task of %s has no finished_at", status, service);
        int64_t at = bson_iter_date_time(&it);
        *earliest = at < *earliest ? at : *earliest;
        *latest = at > *latest ? at : *latest;
    }
    bson_error_t error;
    bool failed = mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
    bson_destroy(filter);
    mongoc_collection_destroy(queue);
    cluster_assert(c, !failed, "cannot read the tasks of %s: %s", service, error.message);
}

/* Widens [*earliest, *latest] by the finished_at range of the service's tasks in `status`. */
static void merge_range(cluster_t *c, const char *service, const char *status, int64_t *earliest,
                        int64_t *latest)
{
    int64_t first, last;
    finished_range(c, service, status, &first, &last);
    if (last == 0)
        return; /* none in that status now */
    *earliest = first < *earliest ? first : *earliest;
    *latest = last > *latest ? last : *latest;
}

/* One service's earliest and latest finish, widened at every reading. */
typedef struct finish_range {
    const char *service, *status;
    int64_t first, last; /* last 0: none read yet */
} finish_range_t;

static void merge_ranges(cluster_t *c, finish_range_t *ranges, size_t n)
{
    for (size_t i = 0; i < n; i++)
        merge_range(c, ranges[i].service, ranges[i].status, &ranges[i].first, &ranges[i].last);
}

typedef struct purge_sum {
    const char *status;
    int64_t total;
} purge_sum_t;

static bool add_purged(const char *line, void *arg)
{
    purge_sum_t *sum = arg;
    const char *at = strstr(line, "| purged ");
    char status[16];
    long long n;
    if (at && sscanf(at, "| purged %lld %15s task(s)", &n, status) == 2 &&
        strcmp(status, sum->status) == 0)
        sum->total += n;
    return true;
}

/* Sum of N over every node's "purged N <status> task(s)" lines for `service`. */
static int64_t purged_in_logs(cluster_t *c, const char *service, const char *status)
{
    char tag[64];
    snprintf(tag, sizeof tag, " service=%s ", service);
    purge_sum_t sum = {status, 0};
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_log_scan(&c->nodes[i], tag, "| purged ", add_purged, &sum);
    return sum.total;
}

static void enqueue(cluster_t *c, const char *service)
{
    char count[16];
    snprintf(count, sizeof count, "%d", TASKS);
    const char *args[] = {"enqueue", service, "--count", count, NULL};
    cluster_assert(c, cluster_run_ctl(c, args) == 0, "cohortctl enqueue %s failed", service);
}

/* Polls until every task of `service` in `status` is gone; returns whether they went, and
 * checks at every poll that none went before it was RETENTION_MS finished. */
static bool wait_purged(cluster_t *c, const char *service, const char *status,
                        int64_t earliest_finish, int64_t timeout_ms)
{
    char filter[64];
    snprintf(filter, sizeof filter, "{\"status\": \"%s\"}", status);
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        int64_t before = realtime_ms();
        int64_t left = cluster_try_count(c, service, filter);
        cluster_assert(c, left >= 0, "cannot count the tasks of %s", service);
        /* The server runs on this host: its clock is ours, up to the primary's clock error
         * (takeover_ms / 16 + 1 ms). */
        cluster_assert(c, left == TASKS || before >= earliest_finish + RETENTION_MS - 100,
                       "%lld %s task(s) of %s were purged %lld ms after the first finished, "
                       "before the %d ms retention",
                       (long long)(TASKS - left), status, service,
                       (long long)(before - earliest_finish), RETENTION_MS);
        if (left == 0)
            return true;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(20);
    }
}

Test(cluster_purge, finished_tasks_go_after_their_retention_and_stay_with_zero)
{
    cluster_options_t options = {
        .tag = "purge",
        .services =
            {
                {.name = "ok",
                 .settings = "stall_timeout_ms = 1500\nsucceeded_retention_ms = 1500\n"
                             "failed_retention_ms = 0"},
                {.name = "keep",
                 .settings = "stall_timeout_ms = 1500\nsucceeded_retention_ms = 1500\n"
                             "failed_retention_ms = 0\nfail_first_n = 99\nmax_attempts = 1"},
                {.name = "drop",
                 .settings = "stall_timeout_ms = 1500\nfailed_retention_ms = 1500\n"
                             "fail_first_n = 99\nmax_attempts = 1"},
            },
    };
    cluster_t *c = cluster_new(&options);
    cluster_start_nodes(c, 3);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");
    const char *services[] = {"ok", "keep", "drop"};
    for (size_t i = 0; i < 3; i++) {
        cluster_primacy_t p;
        cluster_assert(c, cluster_wait_primary(c, services[i], NULL, 5000, &p),
                       "no primary for %s in 5 s", services[i]);
    }
    for (size_t i = 0; i < 3; i++)
        enqueue(c, services[i]);

    /* Finished: each task is final (no retries with max_attempts 1), so the counts can only
     * fall from here, by purging. Each service's finish range is read at every poll and
     * merged: one service may finish well before another, and its first tasks may be purged
     * before the last one finishes. */
    finish_range_t ranges[] = {{"ok", "succeeded", INT64_MAX, 0},
                               {"keep", "failed", INT64_MAX, 0},
                               {"drop", "failed", INT64_MAX, 0}};
    int64_t start = test_now_ms();
    for (;;) {
        merge_ranges(c, ranges, 3);
        if (test_now_ms() - start >= 20000 ||
            (cluster_try_count(c, "ok", "{\"status\": {\"$ne\": \"succeeded\"}}") == 0 &&
             cluster_try_count(c, "keep", "{\"status\": {\"$ne\": \"failed\"}}") == 0 &&
             cluster_try_count(c, "drop", "{\"status\": {\"$ne\": \"failed\"}}") == 0))
            break;
        test_sleep_ms(20);
    }
    merge_ranges(c, ranges, 3);
    int64_t ok_first = ranges[0].first, ok_last = ranges[0].last;
    int64_t keep_last = ranges[1].last;
    int64_t drop_first = ranges[2].first, drop_last = ranges[2].last;
    cluster_assert(c, ok_last > 0 && keep_last > 0 && drop_last > 0,
                   "not every service's tasks finished within 20 s");
    cluster_assert(c, cluster_count_status(c, "keep", "failed") == TASKS,
                   "keep does not have its %d failed tasks", TASKS);

    int64_t bound = RETENTION_MS + PURGE_SLACK_MS;
    int64_t waited = test_now_ms();
    cluster_assert(c, wait_purged(c, "ok", "succeeded", ok_first, ok_last - ok_first + bound),
                   "ok still has succeeded tasks %lld ms after they finished",
                   (long long)(ok_last - ok_first + bound));
    cluster_assert(c, wait_purged(c, "drop", "failed", drop_first, drop_last - drop_first + bound),
                   "drop still has failed tasks %lld ms after they finished",
                   (long long)(drop_last - drop_first + bound));
    int64_t purge_ms = test_now_ms() - waited;

    /* keep: failed tasks stay well past the point where drop's were gone. */
    int64_t keep_until = keep_last + 2 * RETENTION_MS;
    while (realtime_ms() < keep_until)
        test_sleep_ms(50);
    cluster_assert(c, cluster_count_status(c, "keep", "failed") == TASKS,
                   "keep (failed_retention_ms = 0) lost failed tasks: %lld left of %d",
                   (long long)cluster_count_status(c, "keep", "failed"), TASKS);

    cluster_assert(c, purged_in_logs(c, "ok", "succeeded") == TASKS,
                   "the logs of ok say %lld succeeded tasks were purged, expected %d",
                   (long long)purged_in_logs(c, "ok", "succeeded"), TASKS);
    cluster_assert(c, purged_in_logs(c, "drop", "failed") == TASKS,
                   "the logs of drop say %lld failed tasks were purged, expected %d",
                   (long long)purged_in_logs(c, "drop", "failed"), TASKS);
    cluster_assert(c, cluster_log_count_all(c, " service=keep ", "| purged ") == 0,
                   "a node purged tasks of keep");
    fprintf(stderr,
            "purge: ok's %d succeeded and drop's %d failed tasks were gone %lld ms after all "
            "had finished (retention %d ms); keep's %d failed tasks stayed\n",
            TASKS, TASKS, (long long)purge_ms, RETENTION_MS, TASKS);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
