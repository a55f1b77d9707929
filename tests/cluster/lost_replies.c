/*
 * lost_replies.c - a claim whose reply is lost does not strand its tasks.
 *
 * The server may apply a claim and the reply never reach the node (a connection cut, a socket
 * timeout, a database restart between the two: cluster-batch32/db_restart met it on a busy
 * machine). The task is then claimed by a live node that does not know it holds it, and
 * before the fix it waited out stall_timeout_ms (30 minutes by default) as claimed. The worker
 * keeps the token of every claim call that failed and gives back what it claimed once the
 * database answers again.
 *
 * n1 reaches the database through a proxy in this process (tests/support/delay_proxy.h).
 * While its workers go through a long queue, the proxy drops a few replies at a time with
 * their connections (the server did the work), until n1 says it gave back claims whose reply
 * was lost; every task must then succeed, waiting on progress (none for STALL_S s) with the
 * default stall timeout of 30 minutes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "delay_proxy.h"
#include "support.h"

#define SERVICE "noop"
#define TASKS 5000
#define MAX_BURSTS 10
#define STALL_S 30

TestSuite(cluster_lost_replies, .fini = cluster_cleanup_all, .timeout = 240);

typedef struct log_wait {
    cluster_node_t *node;
    const char *text;
} log_wait_t;

static bool logged(void *arg)
{
    log_wait_t *w = arg;
    return cluster_log_count(w->node, w->text, NULL) > 0;
}

Test(cluster_lost_replies, claims_whose_reply_was_lost_are_given_back)
{
    cluster_options_t options = {
        .tag = "lost_replies",
        .tick_ms = 200,
        .takeover_ms = 1500,
        /* One task per claim: with the default claim_batch = auto a claim takes up to 64, so
         * few of the replies in flight are claims and the bursts may miss them all. */
        .services = {{.name = SERVICE, .settings = "workers = 2\nclaim_batch = 1"}},
    };
    cluster_t *c = cluster_new(&options);
    char uri_env[128];
    delay_proxy_t *proxy = delay_proxy_in_front_of(c->uri, uri_env, sizeof uri_env);
    const char *env[] = {uri_env, NULL};

    char count[16];
    snprintf(count, sizeof count, "%d", TASKS);
    const char *enqueue[] = {"enqueue", SERVICE, "--count", count, "--create", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue failed");
    cluster_node_t *n1 = cluster_add_node(c, env);
    cluster_node_start(n1);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 20, STALL_S * 1000),
                   "20 tasks did not succeed (none for %d s)", STALL_S);

    /* Most replies in flight are claims and outcomes: drop a few at a time until a claim's
     * was among them. */
    log_wait_t gave_back = {n1, "reply was lost"};
    int bursts = 0;
    while (!logged(&gave_back) && bursts < MAX_BURSTS &&
           cluster_count_status(c, SERVICE, "pending") > 0) {
        delay_proxy_cut_replies(proxy, 2);
        bursts++;
        test_wait_until(logged, &gave_back, 1500);
    }
    delay_proxy_cut_replies(proxy, 0);

    bool done = cluster_wait_succeeded(c, SERVICE, TASKS, STALL_S * 1000);
    int64_t succeeded = cluster_count_status(c, SERVICE, "succeeded");
    int64_t claimed = cluster_count_status(c, SERVICE, "claimed");
    fprintf(stderr,
            "lost_replies: %lld of %d succeeded, %lld claimed; %d give-back line(s) after %d "
            "burst(s)\n",
            (long long)succeeded, TASKS, (long long)claimed,
            cluster_log_count(n1, "gave back", "reply was lost"), bursts);
    cluster_assert(c, done,
                   "only %lld of %d tasks succeeded, %lld still claimed (none succeeded for "
                   "%d s): claims whose reply was lost were stranded",
                   (long long)succeeded, TASKS, (long long)claimed, STALL_S);
    cluster_assert(c, cluster_count_status(c, SERVICE, "failed") == 0, "a task failed");
    cluster_assert(c, logged(&gave_back),
                   "after %d bursts of dropped replies n1 never gave back a claim whose reply "
                   "was lost",
                   bursts);

    cluster_destroy(c);
    delay_proxy_stop(proxy);
}
