/*
 * db_restart.c - the database goes away for a few seconds while tasks are flowing and comes
 * back: no node crashes, each logs "database unreachable" and then "database reachable
 * again", every task still ends succeeded, and every node stops cleanly afterwards.
 *
 * The test needs a database it may stop, so the cluster runs on a private server
 * (deploy/localdb with an H2 file, which keeps the data across a clean stop) on a port of
 * its own. Claims are limited per tick so that 300 tasks of 5 ms take a few seconds, and the
 * server is stopped once some but far from all have succeeded.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "noop"
#define TASKS 300
#define OUTAGE_MS 3000
#define MAX_OUTAGE_MS 20000

TestSuite(cluster_db_restart, .fini = cluster_cleanup_all, .timeout = 180);

static void check_all_alive(cluster_t *c, const char *when)
{
    for (size_t i = 0; i < c->n_nodes; i++) {
        cluster_node_t *n = &c->nodes[i];
        cluster_assert(c, cluster_node_alive(n), "%s exited %s (wait status 0x%x)", n->id, when,
                       n->wait_status);
    }
}

/* Every node's log has a line containing `needle`. */
static bool all_logged(cluster_t *c, const char *needle)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        if (cluster_log_count(&c->nodes[i], needle, NULL) == 0)
            return false;
    return true;
}

Test(cluster_db_restart, tasks_survive_a_database_restart)
{
    cluster_options_t options = {
        .tag = "dbrestart",
        .private_db = true,
        .services = {{.name = SERVICE,
                      .settings = "workers = 2\n"
                                  "sleep_ms = 5\n"
                                  "primary_task_count = 5\n"
                                  "secondary_task_count = 5\n"
                                  "retry_base_ms = 100"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_start_nodes(c, 3);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");

    const char *enqueue[] = {"enqueue", SERVICE, "--count", "300", "--create", NULL};
    int rc = cluster_run_ctl(c, enqueue);
    cluster_assert(c, rc == 0, "cohortctl enqueue exited %d (see %s/cohortctl.log)", rc, c->dir);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 30, 20000),
                   "30 tasks did not succeed (none for 20 s)");
    int64_t before = cluster_count_status(c, SERVICE, "succeeded");
    cluster_assert(c, before < TASKS - 50,
                   "%lld of %d tasks had already succeeded: nothing left to interrupt",
                   (long long)before, TASKS);

    int64_t stopped_at = test_now_ms();
    cluster_db_stop(c);
    int64_t stop_took = test_now_ms() - stopped_at;
    /* The outage itself is the point here: keep the server away for at least OUTAGE_MS and
     * until every node has noticed, watching that the nodes stay up meanwhile. A node notices
     * when its per-tick ping fails; a primary busy in primary_work calls that each wait out
     * the 2 s server selection may only ping again 4 s or more into the outage. */
    while (test_now_ms() < stopped_at + OUTAGE_MS ||
           (!all_logged(c, "database unreachable") && test_now_ms() < stopped_at + MAX_OUTAGE_MS)) {
        check_all_alive(c, "while the database was down");
        test_sleep_ms(100);
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_assert(c, cluster_log_count(&c->nodes[i], "database unreachable", NULL) > 0,
                       "%s did not log 'database unreachable' within %d ms of the database "
                       "stopping",
                       c->nodes[i].id, MAX_OUTAGE_MS);
    int64_t restart_at = test_now_ms();
    cluster_db_start(c);
    int64_t back_at = test_now_ms();
    fprintf(stderr,
            "db_restart: stopped the database after %lld of %d tasks (stop took %lld ms); down "
            "for %lld ms in all (restart took %lld ms)\n",
            (long long)before, TASKS, (long long)stop_took, (long long)(back_at - stopped_at),
            (long long)(back_at - restart_at));

    bool done = cluster_wait_succeeded(c, SERVICE, TASKS, 60000);
    int64_t succeeded = cluster_count_status(c, SERVICE, "succeeded");
    fprintf(stderr, "db_restart: %lld of %d succeeded %lld ms after the restart\n",
            (long long)succeeded, TASKS, (long long)(test_now_ms() - back_at));
    if (!done) {
        int64_t claimed = cluster_count_status(c, SERVICE, "claimed");
        int64_t pending = cluster_count_status(c, SERVICE, "pending");
        int64_t failed = cluster_count_status(c, SERVICE, "failed");
        cluster_assert(c, done,
                       "60 s after the restart only %lld of %d tasks succeeded (pending %lld, "
                       "claimed %lld, failed %lld)",
                       (long long)succeeded, TASKS, (long long)pending, (long long)claimed,
                       (long long)failed);
    }
    cluster_assert(c, succeeded == TASKS, "%lld tasks succeeded, expected %d", (long long)succeeded,
                   TASKS);
    check_all_alive(c, "after the database came back");

    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_assert(c, cluster_wait_log(&c->nodes[i], "database reachable again", NULL, 10000),
                       "%s never logged 'database reachable again'", c->nodes[i].id);
    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
