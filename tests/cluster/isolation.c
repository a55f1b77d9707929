/*
 * isolation.c - `isolation = process` on real nodes, with the crasher test handler
 * (tests/support/handlers/crasher.c), whose tasks segfault, abort or exit on request.
 *
 *   crashes_cost_only_their_worker_process: tasks that segfault, abort() and _exit(7) run
 *     among ordinary ones on one node. The node stays up, every ordinary task succeeds, and
 *     each crashing task ends failed after max_attempts (3) runs, its history showing one
 *     entry per crash (event "crashed") with the signal or exit status, in the outcomes
 *     retry, retry, failed.
 *     Its worker processes are "cohortd --worker" children of the node, logged at each
 *     crash, and a clean stop leaves none behind.
 *   timeout_kills_the_worker_and_frees_the_slot: with one worker and task_timeout_ms 1500,
 *     a task that sleeps for a minute ends timed_out (attempts 1, never retried) within
 *     its timeout plus slack, and the tasks queued behind it on that single slot succeed.
 *   pool_survives_many_crashes_and_dies_with_its_node: 40 segfaulting tasks (max_attempts
 *     1) and 20 ordinary ones on 2 nodes: all 40 failed, all 20 succeeded, both nodes up.
 *     Then a node running a long task is killed with SIGKILL: its worker processes die
 *     with it (PR_SET_PDEATHSIG), and once the survivor takes the claim back, the task's
 *     history records the attempt as crashed on that node.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

TestSuite(cluster_isolation, .fini = cluster_cleanup_all, .timeout = 180);

#define CRASHER "../tests/handlers/test_handler_crasher.so"

/* Processes running "cohortd --worker -c <the node's config>". */
static int count_workers(const cluster_node_t *n)
{
    DIR *proc = opendir("/proc");
    cr_assert_not_null(proc, "cannot read /proc");
    int count = 0;
    struct dirent *e;
    while ((e = readdir(proc))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], args[4096];
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(args, 1, sizeof args - 1, f);
        fclose(f);
        bool worker = false, ours = false;
        for (size_t at = 0; at < len; at += strlen(args + at) + 1) {
            args[len] = '\0';
            worker = worker || strcmp(args + at, "--worker") == 0;
            ours = ours || strcmp(args + at, n->config_path) == 0;
        }
        count += worker && ours;
    }
    closedir(proc);
    return count;
}

static bool wait_workers(const cluster_node_t *n, int want, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    while (count_workers(n) != want) {
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(20);
    }
    return true;
}

static void enqueue(cluster_t *c, const char *data, int count)
{
    char n[16];
    snprintf(n, sizeof n, "%d", count);
    const char *args[] = {"enqueue", "iso", "--count", n, "--data", data, NULL};
    cluster_assert(c, cluster_run_ctl(c, args) == 0, "cohortctl enqueue %s failed", data);
}

static bool wait_count(cluster_t *c, const char *filter, int64_t want, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    while (cluster_try_count(c, "iso", filter) != want) {
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(50);
    }
    return true;
}

/* The first task matching the JSON filter, copied into *doc (initialised by this call). */
static void read_task(cluster_t *c, const char *filter_json, bson_t *doc)
{
    char name[64];
    snprintf(name, sizeof name, "queue_%s", "iso");
    mongoc_collection_t *queue = mongoc_client_get_collection(c->client, c->db, name);
    bson_error_t error;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &error);
    cr_assert_not_null(filter, "bad filter %s: %s", filter_json, error.message);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(queue, filter, NULL, NULL);
    const bson_t *found = NULL;
    bool got = mongoc_cursor_next(cursor, &found);
    if (got)
        bson_copy_to(found, doc);
    mongoc_cursor_destroy(cursor);
    bson_destroy(filter);
    mongoc_collection_destroy(queue);
    cluster_assert(c, got, "no task matches %s", filter_json);
}

static int64_t doc_int(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_NUMBER(&it)
               ? bson_iter_as_int64(&it)
               : -1;
}

static const char *doc_str(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it)
               ? bson_iter_utf8(&it, NULL)
               : "";
}

/* Checks the history of a crashed task: `runs` entries, outcomes retry.. then failed, each
 * error containing `error`. */
static void check_crash_history(cluster_t *c, const char *how, int runs, const char *error)
{
    char filter[128];
    snprintf(filter, sizeof filter, "{\"data.crash\": \"%s\"}", how);
    bson_t doc;
    read_task(c, filter, &doc);
    cluster_assert(
        c, strcmp(doc_str(&doc, "status"), "failed") == 0 && doc_int(&doc, "attempts") == runs,
        "the %s task is %s after %lld attempts, expected failed after %d", how,
        doc_str(&doc, "status"), (long long)doc_int(&doc, "attempts"), runs);
    bson_iter_t it, history;
    cluster_assert(c,
                   bson_iter_init_find(&it, &doc, "history") && BSON_ITER_HOLDS_ARRAY(&it) &&
                       bson_iter_recurse(&it, &history),
                   "the %s task has no history", how);
    int entries = 0;
    while (bson_iter_next(&history)) {
        bson_t entry;
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&history, &len, &data);
        cr_assert(bson_init_static(&entry, data, len));
        entries++;
        const char *outcome = doc_str(&entry, "outcome");
        const char *want = entries < runs ? "retry" : "failed";
        cluster_assert(c, strcmp(doc_str(&entry, "event"), "crashed") == 0,
                       "the %s task's run %d is not marked crashed (event '%s')", how, entries,
                       doc_str(&entry, "event"));
        cluster_assert(c, strcmp(outcome, want) == 0,
                       "the %s task's run %d has outcome '%s', expected '%s'", how, entries,
                       outcome, want);
        cluster_assert(c, doc_int(&entry, "attempt") == entries,
                       "the %s task's run %d records attempt %lld", how, entries,
                       (long long)doc_int(&entry, "attempt"));
        cluster_assert(c, strstr(doc_str(&entry, "error"), error) != NULL,
                       "the %s task's run %d has error '%s', expected it to contain '%s'", how,
                       entries, doc_str(&entry, "error"), error);
    }
    cluster_assert(c, entries == runs, "the %s task has %d history entries, expected %d", how,
                   entries, runs);
    bson_destroy(&doc);
}

Test(cluster_isolation, crashes_cost_only_their_worker_process)
{
    cluster_options_t options = {
        .tag = "isolation",
        .services = {{.name = "iso",
                      .handler = CRASHER,
                      .settings = "isolation = process\nworkers = 2\nmax_attempts = 3\n"
                                  "retry_base_ms = 50"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_start_nodes(c, 1);
    cluster_node_t *n = &c->nodes[0];
    cluster_assert(c, cluster_wait_registered(c, 20000), "the node did not register in 20 s");
    cluster_primacy_t p;
    cluster_assert(c, cluster_wait_primary(c, "iso", NULL, 5000, &p), "no primary in 5 s");

    enqueue(c, "{\"n\": 1}", 10);
    enqueue(c, "{\"crash\": \"segv\"}", 1);
    enqueue(c, "{\"crash\": \"abort\"}", 1);
    enqueue(c, "{\"crash\": \"exit\", \"exit_code\": 7}", 1);
    enqueue(c, "{\"n\": 2}", 10);

    cluster_assert(c, wait_count(c, "{\"status\": \"failed\"}", 3, 30000),
                   "the 3 crashing tasks did not all end failed in 30 s (%lld failed)",
                   (long long)cluster_try_count(c, "iso", "{\"status\": \"failed\"}"));
    cluster_assert(c, cluster_wait_succeeded(c, "iso", 20, 20000),
                   "the 20 ordinary tasks did not all succeed (%lld did)",
                   (long long)cluster_count_status(c, "iso", "succeeded"));
    cluster_assert(c, cluster_node_alive(n), "the node died with its handler");

    check_crash_history(c, "segv", 3, "worker process killed by signal 11 (Segmentation fault)");
    check_crash_history(c, "abort", 3, "worker process killed by signal 6 (Aborted)");
    check_crash_history(c, "exit", 3, "worker process exited with status 7");
    /* 9 crashes, each logged with the worker's pid and the task. */
    int crashes = cluster_log_count(n, "| worker process ", "ended while running task");
    cluster_assert(c, crashes == 9, "%d worker crashes logged, expected 9", crashes);

    /* Still serving after all that. */
    enqueue(c, "{\"n\": 3}", 5);
    cluster_assert(c, cluster_wait_succeeded(c, "iso", 25, 20000),
                   "tasks queued after the crashes did not succeed");
    cluster_assert(c, count_workers(n) >= 1, "no worker process of the node is running");

    cluster_node_stop_ok(n, 15000);
    cluster_assert(c, cluster_log_count(n, "worker processes stopped:", "9 crashed") == 1,
                   "no summary of the worker processes at exit");
    cluster_assert(c, wait_workers(n, 0, 2000), "%d worker process(es) outlived their node",
                   count_workers(n));
}

Test(cluster_isolation, timeout_kills_the_worker_and_frees_the_slot)
{
    cluster_options_t options = {
        .tag = "isolation",
        .services = {{.name = "iso",
                      .handler = CRASHER,
                      .settings = "isolation = process\nworkers = 1\nmax_attempts = 3\n"
                                  "task_timeout_ms = 1500"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_start_nodes(c, 1);
    cluster_node_t *n = &c->nodes[0];
    cluster_assert(c, cluster_wait_registered(c, 20000), "the node did not register in 20 s");
    cluster_primacy_t p;
    cluster_assert(c, cluster_wait_primary(c, "iso", NULL, 5000, &p), "no primary in 5 s");

    enqueue(c, "{\"sleep_ms\": 60000}", 1);
    cluster_assert(c, wait_count(c, "{\"status\": \"claimed\"}", 1, 10000),
                   "the long task was not claimed in 10 s");
    enqueue(c, "{\"n\": 1}", 5);

    cluster_assert(c, wait_count(c, "{\"status\": \"timed_out\"}", 1, 15000),
                   "the long task did not end timed_out");
    cluster_assert(c, cluster_wait_succeeded(c, "iso", 5, 15000),
                   "the tasks behind the timed-out one did not run on the freed slot");
    bson_t doc;
    read_task(c, "{\"data.sleep_ms\": 60000}", &doc);
    bson_iter_t it;
    int64_t claimed = 0, finished = 0;
    if (bson_iter_init_find(&it, &doc, "claimed_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        claimed = bson_iter_date_time(&it);
    if (bson_iter_init_find(&it, &doc, "finished_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        finished = bson_iter_date_time(&it);
    cluster_assert(c, claimed > 0 && finished >= claimed + 1400 && finished <= claimed + 8000,
                   "the timed-out task ran %lld ms (claimed_at %lld, finished_at %lld), "
                   "expected its 1500 ms timeout plus slack",
                   (long long)(finished - claimed), (long long)claimed, (long long)finished);
    cluster_assert(c,
                   strstr(doc_str(&doc, "last_error"),
                          "timed out after 1500 ms (worker process killed)") != NULL,
                   "the timed-out task's error is '%s'", doc_str(&doc, "last_error"));
    cluster_assert(c, doc_int(&doc, "attempts") == 1, "the timed-out task has %lld attempts",
                   (long long)doc_int(&doc, "attempts"));
    bson_destroy(&doc);

    /* Final: never retried (several ticks and a retry delay later, still attempt 1). */
    test_sleep_ms(1500);
    cluster_assert(c,
                   cluster_try_count(c, "iso", "{\"status\": \"timed_out\", \"attempts\": 1}") == 1,
                   "the timed-out task was retried");
    cluster_assert(c, cluster_node_alive(n), "the node died");
    cluster_node_stop_ok(n, 15000);
    cluster_assert(c, wait_workers(n, 0, 2000), "worker processes outlived their node");
}

Test(cluster_isolation, pool_survives_many_crashes_and_dies_with_its_node)
{
    cluster_options_t options = {
        .tag = "isolation",
        .services = {{.name = "iso",
                      .handler = CRASHER,
                      .settings = "isolation = process\nworkers = 2\nmax_attempts = 1"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 2, "iso", 5000, &p);

    enqueue(c, "{\"crash\": \"segv\"}", 40);
    enqueue(c, "{\"n\": 1}", 20);
    cluster_assert(c, wait_count(c, "{\"status\": \"failed\"}", 40, 60000),
                   "the 40 crashing tasks did not all fail in 60 s (%lld did)",
                   (long long)cluster_try_count(c, "iso", "{\"status\": \"failed\"}"));
    cluster_assert(c, cluster_wait_succeeded(c, "iso", 20, 20000),
                   "the 20 ordinary tasks did not all succeed");
    cluster_assert(c, cluster_node_alive(&c->nodes[0]) && cluster_node_alive(&c->nodes[1]),
                   "a node died");
    int crashes = cluster_log_count_all(c, "| worker process ", "ended while running task");
    cluster_assert(c, crashes == 40, "%d worker crashes logged, expected 40", crashes);

    /* A node killed outright takes its worker processes along, even one inside a task. */
    enqueue(c, "{\"sleep_ms\": 60000}", 2);
    cluster_assert(c, wait_count(c, "{\"status\": \"claimed\"}", 2, 10000),
                   "the long tasks were not claimed in 10 s");
    /* The victim is a node running one of them: both nodes have worker processes by now. */
    bson_t doc;
    read_task(c, "{\"data.sleep_ms\": 60000, \"status\": \"claimed\"}", &doc);
    cluster_node_t *victim = cluster_node_by_id(c, doc_str(&doc, "claimed_by"));
    bson_destroy(&doc);
    cluster_assert(c, victim && count_workers(victim) > 0, "no node runs a long task");
    cluster_node_kill(victim);
    cluster_assert(c, wait_workers(victim, 0, 5000),
                   "%d worker process(es) of %s outlived its SIGKILL", count_workers(victim),
                   victim->id);

    /* The survivor takes the dead node's claim back; the task's history says so. */
    char crashed[160];
    snprintf(crashed, sizeof crashed,
             "{\"data.sleep_ms\": 60000, \"history.event\": \"crashed\", "
             "\"history.node\": \"%s\"}",
             victim->id);
    int64_t deadline = test_now_ms() + 60000;
    while (cluster_try_count(c, "iso", crashed) < 1 && test_now_ms() < deadline)
        test_sleep_ms(100);
    cluster_assert(c, cluster_try_count(c, "iso", crashed) >= 1,
                   "no task's history records the crash of %s's attempt within 60 s",
                   victim->id);
}
