/*
 * ctl.h - cohortctl as the integration tests run it: the built binary on the test's database,
 * every argument spelled out, its exit status and output returned for the test to check.
 */
#ifndef COHORT_TEST_CTL_H
#define COHORT_TEST_CTL_H

#include "support.h"

/* How long cohortctl may run before the test fails: a guard against a hang, not a measure. */
#define TEST_CTL_TIMEOUT_MS 60000

/* Runs cohortctl --database `db` with `args` (NULL-terminated, at most 60) in this process's
 * environment changed by `env` (as for test_run(); may be NULL). Fails the test if it cannot
 * be started or has not finished within TEST_CTL_TIMEOUT_MS. Free the result with
 * test_run_result_free(). */
test_run_result_t test_ctl_run(const char *db, const char *const env[], const char *const args[]);

/* test_ctl_run() with the arguments listed: test_ctl(db, "status", "--json"). */
#define test_ctl(db, ...) test_ctl_run((db), NULL, (const char *const[]){__VA_ARGS__, NULL})

#endif
