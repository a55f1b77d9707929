/*
 * handlers.c - handlers survive the upgrade (issue 25, item 5): .so files built against the
 * previous release's include/cohort/handler.h load unchanged in this build's cohortd and run
 * its tasks.
 *
 * tests/upgrade/run.sh builds them from the previous release's tree (COHORT_UPGRADE_OLD):
 * build/handlers/cohort_noop.so with that release's CMake, and handlers/hello.so with the
 * compile line its docs/HANDLERS.md gives handler authors (cc -std=c11 ... -Iinclude). One
 * node of this build hosts a service on each: both must load (the node logs the file and the
 * ABI version it found), the noop service must run 20 tracked tasks once each (its journal)
 * and call its batch callback once for them (its completed_log), and hello's primary_work must
 * create tasks that its process_task then runs to success.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "support.h"

#define NOOP "oldnoop"
#define HELLO "oldhello"
#define TASKS 20

TestSuite(upgrade_handlers, .fini = cluster_cleanup_all, .timeout = 120);

Test(upgrade_handlers, previous_release_handlers_load_and_run_in_the_new_cohortd)
{
    const char *old = getenv("COHORT_UPGRADE_OLD");
    cr_assert(old && *old, "COHORT_UPGRADE_OLD is not set: run this test through "
                           "tests/upgrade/run.sh (ctest -L upgrade)");
    char noop[1024], hello[1024];
    snprintf(noop, sizeof noop, "%s/build/handlers/cohort_noop.so", old);
    snprintf(hello, sizeof hello, "%s/handlers/hello.so", old);
    cr_assert_eq(access(noop, R_OK), 0, "%s is missing", noop);
    cr_assert_eq(access(hello, R_OK), 0, "%s is missing", hello);
    cluster_options_t options = {
        .tag = "upgrade_handlers",
        .services =
            {
                {.name = NOOP,
                 .handler = noop,
                 .settings = "workers = 2\njournal = @DIR@/journal.txt\n"
                             "completed_log = @DIR@/completed.txt"},
                {.name = HELLO, .handler = hello, .settings = "workers = 1"},
            },
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 1, NOOP, 10000, &p); /* this build's cohortd */
    cluster_node_t *n = &c->nodes[0];
    cluster_assert(c, cluster_log_count(n, "loaded from", noop) == 1,
                   "the node does not log loading %s", noop);
    cluster_assert(c, cluster_log_count(n, "loaded from", hello) == 1,
                   "the node does not log loading %s", hello);
    char *line = cluster_log_find(n, "loaded from", noop);
    fprintf(stderr, "upgrade_handlers: %s\n", line);
    free(line);

    const char *enqueue[] = {"enqueue", NOOP, "--count", "20", "--tracked", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue failed");
    cluster_assert(c, cluster_wait_succeeded(c, NOOP, TASKS, 20000),
                   "the old noop handler did not run the %d tasks", TASKS);
    char journal[512];
    snprintf(journal, sizeof journal, "%s/journal.txt", c->dir);
    cluster_journal_report_t r;
    cluster_journal_check(c, NOOP, journal, &r);
    cluster_assert(c,
                   r.lines == TASKS && r.tasks_in_db == TASKS && r.duplicates == 0 &&
                       r.missing == 0 && r.unknown == 0 && r.not_first_attempt == 0,
                   "journal: %lld lines for %lld tasks (e.g. %s)", (long long)r.lines,
                   (long long)r.tasks_in_db, r.example);

    /* The batch callback (ABI 2) of the old handler ran once, for all 20 tasks. */
    char completed[512];
    snprintf(completed, sizeof completed, "%s/completed.txt", c->dir);
    char *text = NULL;
    for (int64_t deadline = test_now_ms() + 20000; test_now_ms() < deadline; test_sleep_ms(100)) {
        free(text);
        text = test_try_read_file(completed);
        if (text && *text)
            break;
    }
    long long batch = 0, good = 0, bad = 0, iterated = 0;
    cluster_assert(
        c, text && sscanf(text, "%lld %lld %lld %lld", &batch, &good, &bad, &iterated) == 4,
        "the old handler's batch callback did not run (completed_log '%s')", text ? text : "");
    const char *newline = strchr(text, '\n');
    cluster_assert(c, good == TASKS && bad == 0 && iterated == TASKS && newline && !newline[1],
                   "completed_log: '%s', expected one line for batch of %d", text, TASKS);
    free(text);

    /* hello: the primary creates a task per tick, every node greets. */
    cluster_assert(c, cluster_wait_succeeded(c, HELLO, 5, 20000),
                   "the old hello handler did not run 5 tasks");
    int64_t failed = cluster_try_count(c, HELLO, "{\"status\": \"failed\"}");
    cluster_assert(c, failed == 0, "%lld hello task(s) failed", (long long)failed);
    cluster_node_stop_ok(n, c->shutdown_grace_ms + 5000);
}
