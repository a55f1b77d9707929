/*
 * ctl.c - runs cohortctl for the integration tests (see ctl.h).
 */
#include "ctl.h"

#include <criterion/criterion.h>

test_run_result_t test_ctl_run(const char *db, const char *const env[], const char *const args[])
{
    const char *argv[64] = {COHORT_BUILD_DIR "/cohortctl", "--database", db};
    size_t n = 3;
    for (size_t i = 0; args[i]; i++) {
        cr_assert_lt(n, sizeof argv / sizeof argv[0] - 1, "too many cohortctl arguments");
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    test_run_result_t r = test_run(argv, env, TEST_CTL_TIMEOUT_MS);
    cr_assert_not(r.timed_out, "cohortctl did not finish within %d s; stderr:\n%s",
                  TEST_CTL_TIMEOUT_MS / 1000, r.err);
    return r;
}
