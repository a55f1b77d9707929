/*
 * ctl_progress.c - long cohortctl commands show their progress on a terminal and stay quiet
 * when piped: `enqueue --count` over 10,000 tasks, and a bulk `retry` and `delete` past the
 * threshold. The terminal is a pseudo-terminal from util-linux's script(1), as an operator's
 * shell gives; piped, stderr must be empty and stdout exactly the count, as scripts read it.
 * The bulk changes run with COHORTCTL_PROGRESS_FROM=500 on 1,500 tasks: the local test
 * server takes about 3 s per page of 1,000 there, so 10,000 would take minutes.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "store/services.h"
#include "store/store.h"

#define COHORTCTL COHORT_BUILD_DIR "/cohortctl"
#define TASKS "10500" /* over CTL_PROGRESS_FROM (10,000) */
#define BULK "1500"   /* over the threshold of BULK_ENV */
static const char *const BULK_ENV[] = {"COHORTCTL_PROGRESS_FROM=500", NULL};

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    test_service_db_open("ctlprog", "bulk", &db, &store, &client);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(ctl_progress, .init = setup, .fini = teardown, .timeout = 150);

/* `cohortctl --database DB ARGS` with stdout and stderr piped. */
static test_run_result_t piped_env(const char *const env[], const char *args)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "exec '%s' --database '%s' %s", COHORTCTL, db, args);
    test_run_result_t r = test_run((const char *const[]){"/bin/sh", "-c", cmd, NULL}, env,
                                   120000);
    cr_assert_eq(r.exit_code, 0, "%s: exit %d: %s", args, r.exit_code, r.err);
    return r;
}

#define piped(args) piped_env(NULL, args)

/* The same on a terminal: script(1) runs it on a pseudo-terminal and copies what it wrote
 * there (stdout and stderr together, "\n" as "\r\n") to its own stdout. */
static test_run_result_t on_a_terminal_env(const char *const env[], const char *args)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' --database '%s' %s", COHORTCTL, db, args);
    test_run_result_t r = test_run(
        (const char *const[]){"/usr/bin/script", "-qefc", cmd, "/dev/null", NULL}, env, 120000);
    cr_assert_eq(r.exit_code, 0, "%s: exit %d: %s%s", args, r.exit_code, r.out, r.err);
    return r;
}

#define on_a_terminal(args) on_a_terminal_env(NULL, args)

Test(ctl_progress, enqueue_count_shows_progress_on_a_terminal_only)
{
    test_run_result_t r = piped("enqueue bulk --count " TASKS);
    cr_assert_str_eq(r.out, TASKS "\n");
    cr_assert_str_eq(r.err, "", "piped, enqueue wrote to stderr: %s", r.err);
    test_run_result_free(&r);

    r = on_a_terminal("enqueue bulk --count " TASKS);
    cr_assert_not_null(strstr(r.out, "\r\033[Kcohortctl enqueue: "),
                       "no progress on a terminal: %s", r.out);
    cr_assert_not_null(strstr(r.out, " of " TASKS " tasks, "), "%s", r.out);
    const char *last = strrchr(r.out, '\033');
    cr_assert(last && strstr(last, TASKS "\r\n"), "the count is not last on a clean line: %s",
              r.out);
    test_run_result_free(&r);
}

/* Sets every task of the queue to `status`. */
static void set_all(const char *status)
{
    mongoc_collection_t *tasks = mongoc_client_get_collection(client, db, "queue_bulk");
    bson_t *all = bson_new();
    bson_t *set = BCON_NEW("$set", "{", "status", BCON_UTF8(status), "finished_at",
                           BCON_DATE_TIME(1000), "}");
    bson_error_t error;
    cr_assert(mongoc_collection_update_many(tasks, all, set, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(set);
    bson_destroy(all);
    mongoc_collection_destroy(tasks);
}

/* A bulk change on a terminal shows "N tasks so far", then the count on a clean line. */
static void expect_progress(const char *command, const char *args, const char *count)
{
    test_run_result_t r = on_a_terminal_env(BULK_ENV, args);
    char lead[64];
    snprintf(lead, sizeof lead, "\r\033[Kcohortctl %s: ", command);
    cr_assert_not_null(strstr(r.out, lead), "%s: no progress on a terminal: %s", command, r.out);
    cr_assert_not_null(strstr(r.out, " tasks so far"), "%s", r.out);
    char line[32];
    snprintf(line, sizeof line, "%s\r\n", count);
    cr_assert_not_null(strstr(strrchr(r.out, '\033'), line), "%s", r.out);
    test_run_result_free(&r);
}

static void expect_quiet(const char *args, const char *count)
{
    test_run_result_t r = piped_env(BULK_ENV, args);
    char line[32];
    snprintf(line, sizeof line, "%s\n", count);
    cr_assert_str_eq(r.out, line);
    cr_assert_str_eq(r.err, "", "piped, '%s' wrote to stderr: %s", args, r.err);
    test_run_result_free(&r);
}

Test(ctl_progress, bulk_retry_and_delete_show_progress_on_a_terminal_only)
{
    test_run_result_t made = piped("enqueue bulk --count " BULK);
    test_run_result_free(&made);
    set_all("failed");
    expect_progress("retry", "retry bulk --status failed", BULK);
    set_all("failed");
    expect_quiet("retry bulk --status failed", BULK);
    set_all("succeeded");
    expect_progress("delete", "delete bulk --status succeeded --limit 1000", "1000");
    expect_quiet("delete bulk --status succeeded", "500");
}
