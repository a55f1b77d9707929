/*
 * data_totals.c - what docs/HANDLERS.md promises about counting with generic data across a
 * crash (issue 22, defect 8): cohort_data_inc from process_task is at least once per task,
 * and a total kept by on_tasks_completed (cohort_set, applied with the batch's completion)
 * is exact.
 *
 * Two nodes run the counter test handler (tests/support/handlers/counter.c) on 40 tracked
 * tasks of 400 ms, 2 workers each. Once the secondary holds claims (its runs have counted
 * already), it is killed with SIGKILL; the primary expires it, its tasks run again there, and
 * every task succeeds. Then the exact total is 40, exactly, whatever the crash did; the
 * at-least-once counter is 40 or more (the tasks that ran again count twice).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "totals"
#define COUNTER "../tests/handlers/test_handler_counter.so"
#define TASKS 40

TestSuite(cluster_data_totals, .fini = cluster_cleanup_all, .timeout = 120);

/* The generic data `key` of the service (data.<key> in its config document), or -1. */
static int64_t data_value(cluster_t *c, const char *key)
{
    bson_t doc;
    bson_iter_t it, found;
    int64_t v = -1;
    char path[64];
    snprintf(path, sizeof path, "data.%s", key);
    if (cluster_read_service_doc(c, SERVICE, &doc) && bson_iter_init(&it, &doc) &&
        bson_iter_find_descendant(&it, path, &found) && BSON_ITER_HOLDS_NUMBER(&found))
        v = bson_iter_as_int64(&found);
    bson_destroy(&doc);
    return v;
}

Test(cluster_data_totals, a_total_kept_by_the_batch_callback_is_exact_after_a_kill)
{
    cluster_options_t options = {
        .tag = "data_totals",
        .tick_ms = 200,
        .takeover_ms = 1500,
        .services = {{.name = SERVICE, .settings = "workers = 2", .handler = COUNTER}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 2, SERVICE, 10000, &p);
    cluster_node_t *victim = strcmp(p.primary, c->nodes[0].id) == 0 ? &c->nodes[1] : &c->nodes[0];
    char count[16];
    snprintf(count, sizeof count, "%d", TASKS);
    const char *enqueue[] = {"enqueue", SERVICE,     "--count",   count,
                             "--data",  "{\"sleep_ms\": 400}", "--tracked", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue --tracked failed");
    char held[96];
    snprintf(held, sizeof held, "{\"status\": \"claimed\", \"claimed_by\": \"%s\"}", victim->id);
    cluster_assert(c, cluster_wait_count(c, SERVICE, held, 1, 20000),
                   "%s claimed nothing within 20 s", victim->id);
    test_sleep_ms(100); /* its runs have started, and counted */
    cluster_node_kill(victim);

    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, TASKS, 60000),
                   "the %d tasks did not all succeed within 60 s", TASKS);
    int64_t deadline = test_now_ms() + 30000;
    while (data_value(c, "total") < TASKS && test_now_ms() < deadline)
        test_sleep_ms(100);
    test_sleep_ms(3 * c->tick_ms); /* a doubled callback write would show by now */
    int64_t total = data_value(c, "total"), runs = data_value(c, "runs");
    fprintf(stderr, "data_totals: %d tasks, %s killed: exact total %lld, runs counted %lld\n",
            TASKS, victim->id, (long long)total, (long long)runs);
    cluster_assert(c, total == TASKS,
                   "the total kept by on_tasks_completed is %lld, not exactly %d", (long long)total,
                   TASKS);
    cluster_assert(c, runs >= TASKS, "cohort_data_inc counted %lld runs of %d tasks",
                   (long long)runs, TASKS);
}
