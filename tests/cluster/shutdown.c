/*
 * shutdown.c - SIGTERM to a primary that is running 300 ms tasks: it logs "stepped down",
 * finishes what it is running (those tasks end succeeded, none is left claimed), exits 0
 * within shutdown_grace_ms, and since it stepped down another node becomes primary within
 * about a tick - well under takeover_ms.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "slow"
#define TASKS 60
#define MAX_RUNNING 16

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

Test(cluster_shutdown, sigterm_primary_steps_down_and_drains)
{
    cluster_options_t options = {
        .tag = "shutdown",
        .services = {{.name = SERVICE, .settings = "workers = 2\nsleep_ms = 300"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t old;
    cluster_start_elected(c, 3, SERVICE, 5000, &old);
    cluster_node_t *primary = cluster_node_by_id(c, old.primary);
    cluster_assert(c, primary != NULL, "primary '%s' is not one of our nodes", old.primary);

    const char *enqueue[] = {"enqueue", SERVICE, "--count", "60", NULL};
    int rc = cluster_run_ctl(c, enqueue);
    cluster_assert(c, rc == 0, "cohortctl enqueue exited %d", rc);

    /* Wait until the primary is running tasks, at a random point of the nodes' ticks (they
     * started together, so their ticks are nearly in phase). */
    srand((unsigned)getpid() ^ (unsigned)test_now_ms());
    test_sleep_ms(rand() % c->tick_ms);
    char running[MAX_RUNNING][25];
    size_t n_running = 0;
    int64_t deadline = test_now_ms() + 10000;
    while ((n_running = claimed_by(c, primary->id, running, MAX_RUNNING)) == 0 &&
           test_now_ms() < deadline)
        test_sleep_ms(10);
    cluster_assert(c, n_running > 0, "primary %s claimed no task within 10 s", primary->id);

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
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, TASKS, 30000),
                   "not all %d tasks succeeded within 30 s", TASKS);
    int64_t retried = cluster_try_count(c, SERVICE, "{\"attempts\": {\"$gt\": 1}}");
    cluster_assert(c, retried == 0, "%lld task(s) needed more than one attempt",
                   (long long)retried);
    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
