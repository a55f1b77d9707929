/*
 * ctl_enqueue_input.c - `cohortctl enqueue` reading its input from files and stdin: --data
 * @FILE and --data - (data past the shell's 128 KiB argument limit), and --from FILE (one
 * task per line, as the HTTP API's POST body, the command's own options filling in what a
 * line does not set; every line checked before any is inserted, a bad one named by its
 * number; 12,000 lines from stdin in bulk writes, quiet when piped).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"
#include "store/services.h"
#include "store/store.h"

#define COHORTCTL COHORT_BUILD_DIR "/cohortctl"

static char *db, dir[] = "/tmp/cohort-enqueue-input-XXXXXX";
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    db = test_db_name("ctlinput");
    store = test_store_new(db);
    client = cohort_store_pop(store);
    bson_error_t error;
    cr_assert(test_ensure_service(store, client, "mail", &error), "%s", error.message);
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (store) {
        cohort_store_push(store, client);
        cohort_store_destroy(store);
        test_drop_db(db);
    }
    free(db);
}

TestSuite(ctl_enqueue_input, .init = setup, .fini = teardown, .timeout = 120);

/* Runs `cohortctl --database DB enqueue mail ARGS` through sh (so ARGS may redirect stdin). */
static test_run_result_t enqueue(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec '%s' --database '%s' enqueue mail %s", COHORTCTL, db, args);
    test_run_result_t r = test_run((const char *const[]){"/bin/sh", "-c", cmd, NULL}, NULL,
                                   100000);
    cr_assert_not(r.timed_out, "%s: timed out", args);
    return r;
}

static int64_t count(const char *filter)
{
    return test_count(client, db, "queue_mail", filter);
}

Test(ctl_enqueue_input, data_from_a_file_and_from_stdin_past_the_argument_limit)
{
    size_t big = 200 * 1024; /* over 128 KiB: one argument of the shell cannot hold it */
    char *json = malloc(big + 32);
    cr_assert_not_null(json);
    int n = snprintf(json, big + 32, "{\"text\": \"");
    memset(json + n, 'x', big);
    snprintf(json + n + big, 32, "\", \"n\": 7}");
    char *path = test_write_file(dir, "data.json", json);
    char args[512];
    snprintf(args, sizeof args, "--data @'%s'", path);
    test_run_result_t r = enqueue(args);
    cr_assert_eq(r.exit_code, 0, "--data @FILE: exit %d: %s", r.exit_code, r.err);
    test_run_result_free(&r);
    snprintf(args, sizeof args, "--data - --count 2 < '%s'", path);
    r = enqueue(args);
    cr_assert_eq(r.exit_code, 0, "--data -: exit %d: %s", r.exit_code, r.err);
    cr_assert_str_eq(r.out, "2\n");
    test_run_result_free(&r);
    cr_assert_eq(count("{\"data.n\": 7}"), 3);
    char filter[64];
    snprintf(filter, sizeof filter, "{\"data.text\": {\"$regex\": \"^x{%zu}$\"}}", big);
    cr_assert_eq(count(filter), 3, "the data did not arrive whole");

    /* A missing file, and a file that is not a JSON object: refused, nothing inserted. */
    r = enqueue("--data @/nonexistent/data.json");
    cr_assert_eq(r.exit_code, 2);
    cr_assert_not_null(strstr(r.err, "/nonexistent/data.json"), "%s", r.err);
    test_run_result_free(&r);
    free(path);
    path = test_write_file(dir, "bad.json", "[1, 2]");
    snprintf(args, sizeof args, "--data @'%s'", path);
    r = enqueue(args);
    cr_assert_eq(r.exit_code, 2, "%s", r.err);
    test_run_result_free(&r);
    cr_assert_eq(count("{}"), 3);
    free(path);
    free(json);
}

Test(ctl_enqueue_input, from_a_file_each_line_is_a_task_with_its_options)
{
    char *path = test_write_file(dir, "tasks.jsonl",
                                 "{\"data\": {\"n\": 1}, \"priority\": 9}\n"
                                 "\n"
                                 "{\"data\": {\"n\": 2}, \"kind\": \"report\"}\n"
                                 "{\"unique_key\": \"once\"}\n"
                                 "{\"unique_key\": \"once\"}\n");
    char args[512];
    snprintf(args, sizeof args, "--from '%s' --priority 3 --tracked", path);
    test_run_result_t r = enqueue(args);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    cr_assert_str_eq(r.out, "created=3 coalesced=0 existing=1\n");
    test_run_result_free(&r);
    cr_assert_eq(count("{\"data.n\": 1, \"priority\": 9, \"tracked\": true}"), 1,
                 "a line's own option wins over the command line's");
    cr_assert_eq(count("{\"data.n\": 2, \"kind\": \"report\", \"priority\": 3}"), 1,
                 "the command line's options fill in what a line does not set");
    cr_assert_eq(count("{\"unique_key\": \"once\"}"), 1);
    free(path);

    /* One bad line: named by its number, and nothing of the file inserted. */
    path = test_write_file(dir, "bad.jsonl",
                           "{\"data\": {\"n\": 3}}\n"
                           "{\"data\": {\"n\": 4}, \"priority\": \"high\"}\n"
                           "{\"data\": {\"n\": 5}}\n");
    snprintf(args, sizeof args, "--from '%s'", path);
    r = enqueue(args);
    cr_assert_eq(r.exit_code, 2, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.err, "line 2: "), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "nothing inserted"), "%s", r.err);
    test_run_result_free(&r);
    cr_assert_eq(count("{}"), 3);
    snprintf(args, sizeof args, "--from '%s' --count 2", path);
    r = enqueue(args);
    cr_assert_eq(r.exit_code, 2, "--from with --count: exit %d", r.exit_code);
    test_run_result_free(&r);
    free(path);
}

/* 12,000 lines from stdin, piped: bulk writes, the count alone on stdout, nothing on stderr. */
Test(ctl_enqueue_input, from_stdin_in_bulk)
{
    char *lines = malloc(12000 * 32);
    cr_assert_not_null(lines);
    size_t used = 0;
    for (int i = 0; i < 12000; i++)
        used += (size_t)sprintf(lines + used, "{\"data\": {\"i\": %d}}\n", i);
    char *path = test_write_file(dir, "many.jsonl", lines);
    char args[512];
    snprintf(args, sizeof args, "--from - < '%s'", path);
    test_run_result_t r = enqueue(args);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    cr_assert_str_eq(r.out, "12000\n");
    cr_assert_str_eq(r.err, "");
    test_run_result_free(&r);
    cr_assert_eq(count("{}"), 12000);
    cr_assert_eq(count("{\"data.i\": 11999}"), 1);
    free(path);
    free(lines);
}
