/*
 * shutdown.c - SIGTERM to a primary that is running 300 ms tasks: it logs "stepped down",
 * finishes what it is running (those tasks end succeeded, none is left claimed), exits 0
 * within shutdown_grace_ms, and since it stepped down another node becomes primary within
 * about a tick - well under takeover_ms.
 *
 * The primary must hold a claim when it gets SIGTERM, but every node claims, and with batch
 * claims (cluster-batch32) the secondaries' prefetches can take a small queue whole before
 * the primary's tick comes. So the queue is arranged to outlast them: besides the 60 tasks
 * for the primary, as many as the two secondaries can hold at once (each its workers plus its
 * ready queue of two batch claims), and the test waits for the primary's claim for as long
 * as tasks are still pending, not for a fixed time.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "slow"
#define FOR_PRIMARY 60
#define WORKERS 2
#define MAX_RUNNING 16
#define NO_PROGRESS_MS 20000 /* the queue's end: no task finished for this long */

TestSuite(cluster_shutdown, .fini = cluster_cleanup_all, .timeout = 120);

/* Ids of the tasks `node` holds claimed right now. Returns how many (at most max). */
static size_t claimed_by(cluster_t *c, const char *node, char ids[][25], size_t max)
{
    mongoc_collection_t *tasks = mongoc_client_get_collection(c->client, c->db, "queue_" SERVICE);
    bson_t *filter = BCON_NEW("status", BCON_UTF8("claimed"), "claimed_by", BCON_UTF8(node));
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, filter, opts, NULL);
    const bson_t *doc;
    size_t count = 0;
    while (count < max && mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it))
            bson_oid_to_string(bson_iter_oid(&it), ids[count++]);
    }
    bson_error_t error;
    bool failed = mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(tasks);
    cluster_assert(c, !failed, "cannot list the tasks claimed by %s: %s", node, error.message);
    return count;
}

/* Whether task `id` is succeeded. */
static bool task_succeeded(cluster_t *c, const char id[25])
{
    char filter[128];
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%.24s\"}, \"status\": \"succeeded\"}",
             id);
    int64_t n = cluster_try_count(c, SERVICE, filter);
    cluster_assert(c, n >= 0, "cannot read task %s", id);
    return n == 1;
}

/* Whether task `id` was given back untouched by `node` (a batch claim's task it had not
 * started at SIGTERM): no run of it is recorded by that node, and it did not fail. */
static bool given_back(cluster_t *c, const char id[25], const char *node)
{
    char filter[256];
    snprintf(filter, sizeof filter,
             "{\"_id\": {\"$oid\": \"%.24s\"}, \"history.node\": {\"$ne\": \"%s\"}, "
             "\"status\": {\"$in\": [\"pending\", \"claimed\", \"succeeded\"]}}",
             id, node);
    int64_t n = cluster_try_count(c, SERVICE, filter);
    cluster_assert(c, n >= 0, "cannot read task %s", id);
    return n == 1;
}

/* The claim_batch the harness writes (COHORT_TEST_CLAIM_BATCH; cluster.h), else 1: the
 * default, auto, claims one task at a time until runs were measured, and these are long. */
static int64_t claim_batch(void)
{
    const char *batch = getenv("COHORT_TEST_CLAIM_BATCH");
    int64_t n = batch ? strtoll(batch, NULL, 10) : 1;
    return n > 0 ? n : 1;
}

/* Waits until the primary holds at least one claim, as long as tasks are pending (while they
 * are, its next tick claims some). Returns how many it holds (ids in `running`). */
static size_t wait_primary_claims(cluster_t *c, const char *primary, char running[][25])
{
    size_t n = 0;
    int64_t cap = test_now_ms() + 60000;
    while ((n = claimed_by(c, primary, running, MAX_RUNNING)) == 0 && test_now_ms() < cap &&
           cluster_try_count(c, SERVICE, "{\"status\": \"pending\"}") != 0)
        test_sleep_ms(10);
    return n;
}

Test(cluster_shutdown, sigterm_primary_steps_down_and_drains)
{
    /* What two secondaries can hold at once, so FOR_PRIMARY tasks stay pending for it. */
    int64_t tasks = FOR_PRIMARY + 2 * (WORKERS + 2 * claim_batch());
    char count[24];
    snprintf(count, sizeof count, "%lld", (long long)tasks);
    char settings[64];
    snprintf(settings, sizeof settings, "workers = %d\nsleep_ms = 300", WORKERS);
    cluster_options_t options = {
        .tag = "shutdown",
        .services = {{.name = SERVICE, .settings = settings}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t old;
    cluster_start_elected(c, 3, SERVICE, 5000, &old);
    cluster_node_t *primary = cluster_node_by_id(c, old.primary);
    cluster_assert(c, primary != NULL, "primary '%s' is not one of our nodes", old.primary);

    const char *enqueue[] = {"enqueue", SERVICE, "--count", count, NULL};
    int rc = cluster_run_ctl(c, enqueue);
    cluster_assert(c, rc == 0, "cohortctl enqueue exited %d", rc);

    /* Wait until the primary is running tasks, at a random point of the nodes' ticks (they
     * started together, so their ticks are nearly in phase). */
    srand((unsigned)getpid() ^ (unsigned)test_now_ms());
    test_sleep_ms(rand() % c->tick_ms);
    char running[MAX_RUNNING][25];
    size_t n_running = wait_primary_claims(c, primary->id, running);
    cluster_assert(c, n_running > 0,
                   "primary %s claimed none of %lld tasks while some were pending (60 s cap)",
                   primary->id, (long long)tasks);

    int64_t term_at = test_now_ms();
    cluster_node_send_term(primary);
    cluster_takeover_t t;
    bool taken = cluster_wait_takeover(c, SERVICE, primary->id, term_at, 10000, &t);
    int64_t exit_ms = cluster_node_wait_exit(primary, term_at, c->shutdown_grace_ms + 5000);
    fprintf(stderr,
            "shutdown: %s (epoch %lld) running %zu task(s) got SIGTERM; %s became primary "
            "(epoch %lld) after %lld ms; %s exited after %lld ms\n",
            primary->id, (long long)old.epoch, n_running, t.after.primary, (long long)t.after.epoch,
            (long long)t.elapsed_ms, primary->id, (long long)exit_ms);

    cluster_assert(c, exit_ms >= 0, "%s still runs %lld ms after SIGTERM", primary->id,
                   (long long)(c->shutdown_grace_ms + 5000));
    cluster_node_assert_clean_exit(primary);
    cluster_assert(c, exit_ms <= c->shutdown_grace_ms,
                   "%s took %lld ms to exit, more than shutdown_grace_ms = %lld", primary->id,
                   (long long)exit_ms, (long long)c->shutdown_grace_ms);
    char stepped[64];
    snprintf(stepped, sizeof stepped, "stepped down from epoch %lld", (long long)old.epoch);
    cluster_assert(c, cluster_log_count(primary, stepped, NULL) == 1, "%s does not log '%s' once",
                   primary->id, stepped);
    cluster_assert(c,
                   cluster_log_count(primary, "still running after shutdown_grace_ms", NULL) == 0,
                   "%s abandoned running tasks at exit", primary->id);

    /* Another node took over quickly, because the old primary stepped down. */
    cluster_assert(c, taken, "no new primary within 10 s of stopping %s", primary->id);
    cluster_assert(c, t.after.epoch > old.epoch, "new epoch %lld is not above %lld",
                   (long long)t.after.epoch, (long long)old.epoch);
    cluster_assert(c, t.elapsed_ms < c->takeover_ms / 2,
                   "the new primary took %lld ms, not well under takeover_ms = %lld",
                   (long long)t.elapsed_ms, (long long)c->takeover_ms);

    /* What the primary was running finished; what a batch claim held but had not started
     * went back untouched; it left nothing claimed. */
    size_t finished = 0;
    for (size_t i = 0; i < n_running; i++) {
        bool done = task_succeeded(c, running[i]);
        finished += done;
        cluster_assert(c, done || given_back(c, running[i], primary->id),
                       "task %s, claimed by %s at SIGTERM, neither succeeded nor went back "
                       "untouched",
                       running[i], primary->id);
    }
    cluster_assert(c, finished > 0, "none of the %zu tasks %s held at SIGTERM finished",
                   n_running, primary->id);
    char left[MAX_RUNNING][25];
    size_t n_left = claimed_by(c, primary->id, left, MAX_RUNNING);
    cluster_assert(c, n_left == 0, "%s exited but task %s is still claimed by it", primary->id,
                   n_left ? left[0] : "");
    char *summary = cluster_log_find(primary, "stopped: claimed=", NULL);
    cluster_assert(c, summary != NULL, "%s logged no 'stopped:' summary", primary->id);
    long long claimed = strtoll(strstr(summary, "claimed=") + strlen("claimed="), NULL, 10);
    long long succeeded = strtoll(strstr(summary, "succeeded=") + strlen("succeeded="), NULL, 10);
    cluster_assert(c, claimed == succeeded, "%s: %s", primary->id, summary);
    free(summary);

    /* The others finish the queue, each task once, and stop cleanly too. */
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, tasks, NO_PROGRESS_MS),
                   "not all %lld tasks succeeded (none finished for %d s)", (long long)tasks,
                   NO_PROGRESS_MS / 1000);
    int64_t retried = cluster_try_count(c, SERVICE, "{\"attempts\": {\"$gt\": 1}}");
    cluster_assert(c, retried == 0, "%lld task(s) needed more than one attempt",
                   (long long)retried);
    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
