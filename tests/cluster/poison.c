/*
 * poison.c - a poison task beside innocent ones, with isolation = thread and batch claims
 * (both the defaults): the task abort()s its node, taking down the tasks running or
 * prefetched beside it (issue 22, defect 4).
 *
 *   a_poison_task_fails_alone_and_its_neighbours_succeed: one node with 4 workers and
 *     max_attempts 3, restarted by the test whenever it dies. Each round enqueues a poison
 *     task (the crasher handler: runs 150 ms, then abort(); at a higher priority, so it is
 *     claimed first and its neighbours are claimed while it runs) and 20 innocent ones,
 *     which sleep 300 ms (each worker claims its own) in the first two rounds and 30 ms
 *     (batch claims, outcomes held for a bulk write) in the third. Every innocent task
 *     must end succeeded, with one counted attempt (attempts - uncounted: no crash of its
 *     neighbour counted against it), and the poison task failed with "exceeds
 *     max_attempts" after at least max_attempts crashes. Before the suspect rule, the
 *     three tasks running beside the poison one were claimed with it again after each
 *     restart and ended failed with it. cluster-batch32/poison runs it with claim_batch 32.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster.h"
#include "support.h"

#define CRASHER "../tests/handlers/test_handler_crasher.so"
#define SERVICE "poison"
#define INNOCENT 20
#define MAX_ATTEMPTS 3
#define ROUNDS 3

TestSuite(cluster_poison, .fini = cluster_cleanup_all, .timeout = 150);

/* Runs one round: enqueues its tasks, restarts the node each time the poison task kills it,
 * until all of them are final. Returns the number of crashes. */
static int run_round(cluster_t *c, cluster_node_t *n, int round, int sleep_ms)
{
    char data[96], filter[128];
    snprintf(data, sizeof data, "{\"round\": %d, \"crash\": \"abort\", \"crash_after_ms\": 150}",
             round);
    cluster_enqueue(c, SERVICE, data, "{\"priority\": 5}", NULL);
    snprintf(data, sizeof data, "{\"round\": %d, \"sleep_ms\": %d}", round, sleep_ms);
    for (int i = 0; i < INNOCENT; i++)
        cluster_enqueue(c, SERVICE, data, NULL, NULL);

    snprintf(filter, sizeof filter,
             "{\"data.round\": %d, \"status\": {\"$in\": [\"succeeded\", \"failed\"]}}", round);
    int crashes = 0;
    int64_t deadline = test_now_ms() + 45000;
    while (cluster_try_count(c, SERVICE, filter) != INNOCENT + 1) {
        cluster_assert(c, test_now_ms() < deadline,
                       "round %d: only %lld of %d tasks final after 45 s (%d crashes)", round,
                       (long long)cluster_try_count(c, SERVICE, filter), INNOCENT + 1, crashes);
        if (!cluster_node_alive(n)) {
            cluster_assert(c, WIFSIGNALED(n->wait_status) && WTERMSIG(n->wait_status) == SIGABRT,
                           "round %d: the node ended otherwise than by the poison's abort() "
                           "(wait status %d)",
                           round, n->wait_status);
            crashes++;
            cluster_node_start(n);
        }
        test_sleep_ms(20);
    }
    return crashes;
}

/* Asserts every task of `round`: innocent ones succeeded at their first attempt, the poison
 * one failed for exceeding max_attempts. */
static void check_round(cluster_t *c, int round, int crashes)
{
    char name[64];
    snprintf(name, sizeof name, "queue_%s", SERVICE);
    mongoc_collection_t *queue = mongoc_client_get_collection(c->client, c->db, name);
    bson_t *filter = BCON_NEW("data.round", BCON_INT32(round));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(queue, filter, NULL, NULL);
    const bson_t *doc;
    int innocent = 0, poison = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
        cluster_task_view_t v;
        cluster_task_view(doc, &v);
        char last_error[256];
        cluster_doc_utf8(doc, "last_error", last_error, sizeof last_error);
        bson_iter_t it, crash;
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "data.crash", &crash)) {
            poison++;
            cluster_assert(c,
                           strcmp(v.status, "failed") == 0 &&
                               strstr(last_error, "exceeds max_attempts") != NULL,
                           "round %d: the poison task %s is %s (attempts %lld, last error "
                           "'%s'), expected failed for exceeding max_attempts",
                           round, v.id, v.status, (long long)v.attempts, last_error);
            continue;
        }
        innocent++;
        int64_t uncounted = cluster_doc_number(doc, "uncounted");
        cluster_assert(c, strcmp(v.status, "succeeded") == 0 && v.attempts - uncounted == 1,
                       "round %d: innocent task %s is %s with attempts %lld, %lld uncounted "
                       "(last error '%s'), expected succeeded with 1 counted attempt (%d "
                       "crashes this round)",
                       round, v.id, v.status, (long long)v.attempts, (long long)uncounted,
                       last_error, crashes);
    }
    bson_error_t error;
    cluster_assert(c, !mongoc_cursor_error(cursor, &error), "cannot read the tasks: %s",
                   error.message);
    mongoc_cursor_destroy(cursor);
    bson_destroy(filter);
    mongoc_collection_destroy(queue);
    cluster_assert(c, innocent == INNOCENT && poison == 1,
                   "round %d: found %d innocent and %d poison tasks", round, innocent, poison);
    cluster_assert(c, crashes >= MAX_ATTEMPTS,
                   "round %d: the poison task failed after %d crashes, fewer than max_attempts",
                   round, crashes);
}

Test(cluster_poison, a_poison_task_fails_alone_and_its_neighbours_succeed)
{
    cluster_options_t options = {
        .tag = "poison",
        .services = {{.name = SERVICE,
                      .handler = CRASHER,
                      .settings = "workers = 4\nmax_attempts = 3\nretry_base_ms = 50"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 1, SERVICE, 10000, &p);
    cluster_node_t *n = &c->nodes[0];
    static const int sleeps[ROUNDS] = {300, 300, 30};
    for (int round = 1; round <= ROUNDS; round++) {
        int64_t started = test_now_ms();
        int crashes = run_round(c, n, round, sleeps[round - 1]);
        check_round(c, round, crashes);
        cr_log_info("round %d: %d crashes, %lld ms", round, crashes,
                    (long long)(test_now_ms() - started));
    }
    cluster_node_stop_ok(n, 10000);
}

/* A crash under thread isolation ends every task of the process, whatever its service: so a
 * suspect runs alone in the process, not only in its service. One node hosts the poison
 * service and another one whose 8 innocent tasks (400 ms each, 2 workers) run when the
 * poison task (150 ms, then abort()) crashes the node. Each of them must succeed with one
 * counted attempt. With suspects alone per service only, an innocent suspect of the other
 * service ran beside the poison suspect and paid for its crashes (attempts - uncounted 2 to
 * 4, or failed). */
#define OTHER "other"
#define OTHER_TASKS 8

static int64_t final_in(cluster_t *c, const char *service)
{
    return cluster_try_count(c, service,
                             "{\"status\": {\"$in\": [\"succeeded\", \"failed\"]}}");
}

Test(cluster_poison, a_suspect_runs_alone_in_the_process_not_only_in_its_service)
{
    const char *settings = "workers = 2\nmax_attempts = 3\nretry_base_ms = 50";
    cluster_options_t options = {
        .tag = "poison2",
        .services = {{.name = SERVICE, .handler = CRASHER, .settings = settings},
                     {.name = OTHER, .handler = CRASHER, .settings = settings}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 1, SERVICE, 10000, &p);
    cluster_node_t *n = &c->nodes[0];
    for (int i = 0; i < OTHER_TASKS; i++)
        cluster_enqueue(c, OTHER, "{\"sleep_ms\": 400}", NULL, NULL);
    cluster_enqueue(c, SERVICE, "{\"crash\": \"abort\", \"crash_after_ms\": 150}", NULL, NULL);
    int crashes = 0;
    int64_t deadline = test_now_ms() + 60000;
    while (final_in(c, OTHER) != OTHER_TASKS || final_in(c, SERVICE) != 1) {
        cluster_assert(c, test_now_ms() < deadline,
                       "only %lld of %d tasks of '%s' and %lld of 1 of '%s' final after 60 s "
                       "(%d crashes)",
                       (long long)final_in(c, OTHER), OTHER_TASKS, OTHER,
                       (long long)final_in(c, SERVICE), SERVICE, crashes);
        if (!cluster_node_alive(n)) {
            cluster_assert(c, WIFSIGNALED(n->wait_status) && WTERMSIG(n->wait_status) == SIGABRT,
                           "the node ended otherwise than by the poison's abort() (wait "
                           "status %d)",
                           n->wait_status);
            crashes++;
            cluster_node_start(n);
        }
        test_sleep_ms(20);
    }
    int64_t innocent_ok = cluster_try_count(
        c, OTHER,
        "{\"status\": \"succeeded\", \"$expr\": {\"$eq\": [{\"$subtract\": [\"$attempts\", "
        "{\"$ifNull\": [\"$uncounted\", 0]}]}, 1]}}");
    cluster_assert(c, innocent_ok == OTHER_TASKS,
                   "%lld of the %d tasks of '%s' succeeded with one counted attempt after %d "
                   "crashes of the poison task of '%s' (see %s)",
                   (long long)innocent_ok, OTHER_TASKS, OTHER, crashes, SERVICE, c->dir);
    cluster_assert(c,
                   cluster_try_count(c, SERVICE, "{\"status\": \"failed\"}") == 1 &&
                       crashes >= MAX_ATTEMPTS,
                   "the poison task did not fail after max_attempts crashes (%d crashes)",
                   crashes);
    cluster_node_stop_ok(n, 10000);
}
