/*
 * ctl_data.c - `cohortctl data inc` and `data cas` end to end against the local database:
 * the printed results and exit codes CLI.md documents (inc prints the sum, a missing key
 * starts at 0, a non-integer or an overflow is refused with exit 2 and nothing changes; cas
 * exits 0 when it set, 3 with the current value printed when it did not), an unknown
 * service refused, and concurrent increments from several processes losing no update.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "store/services.h"
#include "store/store.h"

#define COHORTCTL COHORT_BUILD_DIR "/cohortctl"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    test_service_db_open("ctldata", "mail", &db, &store, &client);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(ctl_data, .init = setup, .fini = teardown, .timeout = 90);

/* Runs `cohortctl --database DB data ARGS...` (NULL-terminated) and checks its exit code
 * and, if `out` is not NULL, its stdout. */
static void data_args(int exit_code, const char *out, const char *const args[])
{
    const char *argv[20] = {COHORTCTL, "--database", db, "data"};
    size_t n = 4;
    for (size_t i = 0; args[i] && n < 19; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    test_run_result_t r = test_run(argv, NULL, 30000);
    cr_assert_eq(r.exit_code, exit_code, "data %s %s: exit %d (expected %d): %s", args[0],
                 args[2] ? args[2] : "", r.exit_code, exit_code, r.err);
    if (out)
        cr_assert_str_eq(r.out, out, "data %s: printed '%s'", args[0], r.out);
    test_run_result_free(&r);
}

#define data(code, out, ...) data_args(code, out, (const char *const[]){__VA_ARGS__, NULL})

Test(ctl_data, inc_adds_prints_the_sum_and_starts_a_missing_key_at_zero)
{
    data(0, "1\n", "inc", "mail", "sent");
    data(0, "11\n", "inc", "mail", "sent", "10");
    data(0, "4\n", "inc", "mail", "sent", "-7");
    data(0, "4\n", "get", "mail", "sent");
}

Test(ctl_data, inc_refuses_a_value_that_is_not_an_integer_or_would_overflow)
{
    data(0, "", "set", "mail", "name", "\"ada\"");
    data(2, "", "inc", "mail", "name");
    data(0, "\"ada\"\n", "get", "mail", "name");
    data(0, "", "set", "mail", "ratio", "1.5");
    data(2, "", "inc", "mail", "ratio");
    data(0, "9223372036854775806\n", "inc", "mail", "big", "9223372036854775806");
    data(2, "", "inc", "mail", "big", "2");
    data(0, "9223372036854775806\n", "get", "mail", "big");
    data(2, "", "inc", "mail", "big", "x");                      /* DELTA not an integer */
    data(2, "", "inc", "mail", "big", "99999999999999999999"); /* nor a 64-bit one */
    data(2, "", "inc", "nosuch", "big");                        /* an unknown service */
}

Test(ctl_data, cas_sets_only_over_the_expected_value)
{
    data(0, "", "cas", "mail", "owner", "null", "\"node-1\""); /* null: absent */
    data(3, "\"node-1\"\n", "cas", "mail", "owner", "null", "\"node-2\"");
    data(3, "\"node-1\"\n", "cas", "mail", "owner", "\"node-3\"", "\"node-2\"");
    data(0, "\"node-1\"\n", "get", "mail", "owner");
    data(0, "", "cas", "mail", "owner", "\"node-1\"", "{\"n\": 1, \"at\": \"b\"}");
    data(3, "{ \"n\" : 1, \"at\" : \"b\" }\n", "cas", "mail", "owner",
         "{\"n\": 2, \"at\": \"b\"}", "0");
    /* NEW null: removed */
    data(0, "", "cas", "mail", "owner", "{\"n\": 1, \"at\": \"b\"}", "null");
    data(1, "", "get", "mail", "owner");
    data(3, "null\n", "cas", "mail", "owner", "1", "2");
    /* numbers compare by value, as $eq does */
    data(0, "", "set", "mail", "n", "1");
    data(0, "", "cas", "mail", "n", "1.0", "2");
    data(0, "2\n", "get", "mail", "n");
    data(2, "", "cas", "mail", "n", "{bad", "3");
    data(2, "", "cas", "mail", "n", "2");        /* NEW missing */
    data(2, "", "cas", "nosuch", "n", "2", "3"); /* an unknown service */
    data(0, "2\n", "get", "mail", "n");
}

/* 4 processes x 10 increments at once: every one counted. (Each is waited for by its pid:
 * `wait -n` returns 127 once two of them ended together and none is left to wait for.) */
Test(ctl_data, concurrent_increments_lose_no_update)
{
    char script[1024];
    snprintf(script, sizeof script,
             "pids=; for p in 1 2 3 4; do (for i in 1 2 3 4 5 6 7 8 9 10; do "
             "'%s' --database '%s' data inc mail hits >/dev/null || exit 1; done) & "
             "pids=\"$pids $!\"; done; for p in $pids; do wait $p || exit 1; done",
             COHORTCTL, db);
    test_run_result_t r = test_run((const char *const[]){"/bin/bash", "-c", script, NULL},
                                   NULL, 80000);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    test_run_result_free(&r);
    data(0, "40\n", "get", "mail", "hits");
}
