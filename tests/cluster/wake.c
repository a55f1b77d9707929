/*
 * wake.c - wake-ups instead of polling (node/work/watch.h): a task enqueued into an idle cluster
 * starts at once with `wake = change_stream`, only on the next tick with `wake = poll`; a
 * server without change streams is logged once and the ticks still run the tasks; a database
 * restart, or the queue dropped under the node, reopens the stream and wake-ups work again.
 *
 * The tick is 5 s, so "at once" and "on the tick" are far apart. Each check enqueues a first
 * task with cohortctl (not through the node), waits for it to succeed, and at once enqueues a
 * second one: the first was claimed right after a tick (or a wake-up), so without a wake-up
 * the second waits for almost a whole tick. The latency is the task's claimed_at minus its
 * created_at. The nodes here set wake_await_ms = 100, from when the local server answered
 * each getMore at once; it holds them now, as a replica set does, so that only bounds how
 * long a getMore is held.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "http_client.h"
#include "prometheus.h"
#include "support.h"

#define SERVICE "noop"
#define TICK_MS 5000
#define AWAKE_MS 1000 /* a woken claim starts well within this; a tick is 5 s */
#define FALLBACK_LOG "new tasks are found on each tick (polling)"
#define BACK_LOG "is back"

TestSuite(cluster_wake, .fini = cluster_cleanup_all, .timeout = 240);

static int metrics_port;

static cluster_t *idle_cluster(const char *tag, bool private_db, const char *wake)
{
    cluster_options_t options = {
        .tag = tag,
        .tick_ms = TICK_MS,
        .takeover_ms = 3 * TICK_MS + 1000,
        .private_db = private_db,
        .services = {{.name = SERVICE, .settings = "workers = 2"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_node_t *n = cluster_add_node(c, NULL);
    char *lines = NULL;
    metrics_port = cluster_free_port();
    cr_assert(asprintf(&lines, "wake = %s\nwake_await_ms = 100\nhttp_listen = 127.0.0.1:%d",
                       wake, metrics_port) > 0);
    cluster_node_config_add(n, lines);
    free(lines);
    cluster_node_start(n);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the node did not register in 20 s");
    return c;
}

/* Enqueues task number `k` (1-based: k-1 have succeeded), waits for it to succeed and
 * returns its claimed_at - created_at in ms. */
static int64_t enqueue_latency(cluster_t *c, int k)
{
    char key[32];
    snprintf(key, sizeof key, "wake-%d", k);
    const char *enqueue[] = {"enqueue", SERVICE, "--create", "--unique-key", key, NULL};
    int rc = cluster_run_ctl(c, enqueue);
    cluster_assert(c, rc == 0, "cohortctl enqueue exited %d (see %s/cohortctl.log)", rc, c->dir);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, k, 3 * TICK_MS),
                   "task %d did not succeed within 3 ticks", k);
    char filter[96];
    snprintf(filter, sizeof filter, "{\"unique_key\": \"%s\"}", key);
    bson_t doc;
    cr_assert(test_find_one(c->client, c->db, "queue_" SERVICE, filter, &doc), "no task %s",
              key);
    bson_iter_t created, claimed;
    cr_assert(bson_iter_init_find(&created, &doc, "created_at") &&
                  bson_iter_init_find(&claimed, &doc, "claimed_at"),
              "task %s has no created_at or claimed_at", key);
    int64_t ms = bson_iter_date_time(&claimed) - bson_iter_date_time(&created);
    bson_destroy(&doc);
    fprintf(stderr, "wake: task %d started %lld ms after it was enqueued\n", k, (long long)ms);
    return ms;
}

/* The node's sample of `name` (from /metrics), for the service unless `node_wide`; -1 if it
 * has none. */
static double sample(cluster_t *c, const char *name, bool node_wide)
{
    http_response_t r;
    cluster_assert(c, http_request(metrics_port, "GET", "/metrics", 15000, &r),
                   "no answer from /metrics");
    prom_text_t m;
    prom_assert_valid(r.body, "/metrics", &m);
    http_response_free(&r);
    char series[128];
    snprintf(series, sizeof series, node_wide ? "%s" : "%s{service=\"%s\"}", name, SERVICE);
    double value = -1;
    prom_get(&m, series, &value);
    prom_free(&m);
    return value;
}

static double metric(cluster_t *c, const char *name)
{
    return sample(c, name, false);
}

/* Tasks first+1 and first+2 (see the top of the file); returns the second one's latency. */
static int64_t after_a_claim_latency(cluster_t *c, int first)
{
    enqueue_latency(c, first + 1);
    return enqueue_latency(c, first + 2);
}

Test(cluster_wake, an_insert_wakes_an_idle_node_at_once)
{
    cluster_t *c = idle_cluster("wake", false, "change_stream");
    int64_t worst = 0;
    for (int round = 0; round < 3; round++) {
        int64_t ms = after_a_claim_latency(c, 2 * round);
        worst = ms > worst ? ms : worst;
    }
    cluster_assert(c, worst < AWAKE_MS,
                   "a task waited %lld ms to start in an idle cluster with wake = change_stream "
                   "(tick %d ms)",
                   (long long)worst, TICK_MS);
    cluster_assert(c, cluster_log_count(&c->nodes[0], FALLBACK_LOG, NULL) == 0,
                   "the node fell back to polling on a server with change streams");
    double wakeups = metric(c, "cohort_wakeups_total");
    cluster_assert(c, wakeups >= 6, "cohort_wakeups_total is %g after 6 inserts", wakeups);
    cluster_assert(c, metric(c, "cohort_wake_stream_up") == 1, "cohort_wake_stream_up is not 1");
    /* The stream's getMores (about 10 a second here) are counted with the node's commands;
     * without them an idle node sends a few per 5 s tick and heartbeat. */
    double before = sample(c, "cohort_db_commands_total", true);
    test_sleep_ms(3000);
    double sent = sample(c, "cohort_db_commands_total", true) - before;
    cluster_assert(c, sent >= 15, "%g commands counted in 3 idle seconds", sent);
    /* The stream thread waits at most for its getMore in flight: the stop stays prompt. */
    int64_t stop_ms = cluster_node_stop_ok(&c->nodes[0], 10000);
    cluster_assert(c, stop_ms < 3000, "the node took %lld ms to stop", (long long)stop_ms);
}

/* A task made pending again by an update (here an operator's retry; a claim given back or a
 * stalled reset alike) wakes the idle node as an insert does. */
Test(cluster_wake, a_task_made_pending_again_wakes_an_idle_node)
{
    cluster_t *c = idle_cluster("wakeretry", false, "change_stream");
    const char *later[] = {"enqueue", SERVICE, "--create", "--delay", "1h", NULL};
    cluster_assert(c, cluster_run_ctl(c, later) == 0, "cannot enqueue");
    const char *cancel[] = {"cancel", SERVICE, "--status", "pending", NULL};
    cluster_assert(c, cluster_run_ctl(c, cancel) == 0, "cannot cancel");
    test_sleep_ms(TICK_MS + 500); /* the node's tick found nothing due: it is idle */
    const char *retry[] = {"retry", SERVICE, "--status", "cancelled", NULL};
    int64_t t0 = test_now_ms();
    cluster_assert(c, cluster_run_ctl(c, retry) == 0, "cannot retry");
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 1, 3 * TICK_MS),
                   "the retried task did not run within 3 ticks");
    int64_t took = test_now_ms() - t0;
    fprintf(stderr, "wake: a retried task succeeded %lld ms after the retry\n", (long long)took);
    cluster_assert(c, took < AWAKE_MS,
                   "a task made pending again waited %lld ms in an idle node (tick %d ms): the "
                   "update did not wake it",
                   (long long)took, TICK_MS);
}

Test(cluster_wake, poll_waits_for_the_tick)
{
    cluster_t *c = idle_cluster("wakepoll", false, "poll");
    int64_t ms = after_a_claim_latency(c, 0);
    cluster_assert(c, ms > TICK_MS / 2,
                   "with wake = poll a task enqueued just after a tick started after %lld ms, "
                   "not on the next tick: the check above cannot tell wake-ups from ticks",
                   (long long)ms);
    cluster_assert(c, metric(c, "cohort_wakeups_total") == -1,
                   "wake = poll shows cohort_wakeups_total");
    cluster_node_stop_ok(&c->nodes[0], 10000);
}

Test(cluster_wake, no_change_streams_logs_once_and_polls)
{
    setenv("LOCALDB_OPLOG", "0", 1); /* a server that refuses change streams */
    cluster_t *c = idle_cluster("wakefallback", true, "change_stream");
    unsetenv("LOCALDB_OPLOG");
    cluster_assert(c, cluster_wait_log(&c->nodes[0], FALLBACK_LOG, NULL, 10000),
                   "the node did not log that it falls back to polling");
    test_sleep_ms(8000); /* reopens after 1, 2 and 4 s: all refused, none logged again */
    int logged = cluster_log_count(&c->nodes[0], FALLBACK_LOG, NULL);
    cluster_assert(c, logged == 1, "the fallback was logged %d times, expected once", logged);
    cluster_assert(c, metric(c, "cohort_wake_stream_up") == 0, "cohort_wake_stream_up is not 0");
    int64_t ms = after_a_claim_latency(c, 0);
    cluster_assert(c, ms > TICK_MS / 2,
                   "without change streams a task started after %lld ms, before the tick",
                   (long long)ms);
    cluster_node_stop_ok(&c->nodes[0], 10000);
}

Test(cluster_wake, a_database_restart_reopens_the_stream)
{
    cluster_t *c = idle_cluster("wakerestart", true, "change_stream");
    cluster_assert(c, after_a_claim_latency(c, 0) < AWAKE_MS, "no wake-up before the restart");
    cluster_db_stop(c);
    cluster_assert(c, cluster_wait_log(&c->nodes[0], FALLBACK_LOG, NULL, 15000),
                   "the node did not log that its stream broke");
    cluster_db_start(c);
    cluster_assert(c, cluster_wait_log(&c->nodes[0], BACK_LOG, NULL, 40000),
                   "the stream did not come back within 40 s of the restart");
    int64_t ms = after_a_claim_latency(c, 2);
    cluster_assert(c, ms < AWAKE_MS, "after the restart a task waited %lld ms to start",
                   (long long)ms);
    cluster_node_stop_ok(&c->nodes[0], 10000);
}

Test(cluster_wake, a_dropped_queue_reopens_the_stream)
{
    cluster_t *c = idle_cluster("wakedrop", false, "change_stream");
    cluster_assert(c, after_a_claim_latency(c, 0) < AWAKE_MS, "no wake-up before the drop");
    mongoc_collection_t *queue = mongoc_client_get_collection(c->client, c->db, "queue_" SERVICE);
    bson_error_t error;
    cr_assert(mongoc_collection_drop(queue, &error), "cannot drop the queue: %s", error.message);
    mongoc_collection_destroy(queue);
    /* The drop ends the stream: it is logged, and a new stream watches the new queue. */
    cluster_assert(c, cluster_wait_log(&c->nodes[0], "ended (drop)", NULL, 10000),
                   "the node did not see its stream end with the drop");
    cluster_assert(c, cluster_wait_log(&c->nodes[0], BACK_LOG, NULL, 10000),
                   "the stream did not come back after the drop");
    int64_t ms = after_a_claim_latency(c, 0);
    cluster_assert(c, ms < AWAKE_MS, "after the drop a task waited %lld ms to start",
                   (long long)ms);
    cluster_node_stop_ok(&c->nodes[0], 10000);
}
