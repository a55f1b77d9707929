/*
 * quick_start.c - the README's first command as a new user runs it: `bash
 * deploy/local-cluster.sh` in a shell without MONGODB_URI.
 *
 * - It starts its own local server and 3 nodes, and tasks flow: its status table shows
 *   succeeded tasks within its run.
 * - The cohortctl command it prints for another sign-in link works when pasted into another
 *   shell, which has no MONGODB_URI either (it failed with "cannot reach the database ...
 *   127.0.0.1:27017": the nodes' files did not name the server).
 * - When it ends (--duration) it leaves no node and no server behind.
 *
 * Label setup. Builds nothing new: it uses the suite's build directory (COHORT_BUILD_DIR), where
 * the script's build step finds everything up to date. About 40 s.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* The script, run by bash with $1 = a state directory for its output: starts the quick start
 * for 30 s, waits for the "Another link:" line, runs that command as printed (no MONGODB_URI),
 * then waits for the quick start to end and reports what it saw. */
static const char *const DRIVER =
    "set -u\n"
    "unset MONGODB_URI\n"
    "out=\"$1/quick-start.out\"\n"
    "bash \"$2/deploy/local-cluster.sh\" --duration 30 > \"$out\" 2>&1 &\n"
    "qs=$!\n"
    "for i in $(seq 1 300); do\n"
    "    grep -q 'Another link: ' \"$out\" && break\n"
    "    kill -0 $qs 2>/dev/null || break\n"
    "    sleep 0.5\n"
    "done\n"
    "cmd=$(sed -n 's/.*Another link: //p' \"$out\" | head -n 1)\n"
    "echo \"printed: $cmd\"\n"
    "if [ -n \"$cmd\" ]; then\n"
    "    link=$($cmd 2>&1); echo \"link exit $?: $link\"\n"
    "fi\n"
    "wait $qs; echo \"quick start exit $?\"\n"
    "echo '--- its output:'; grep -v '^\\[' \"$out\" | tail -n 40\n";

Test(setup, quick_start_as_a_new_user, .timeout = 400)
{
    char *dir = test_tmpdir("quick-start");
    char build_env[1100];
    snprintf(build_env, sizeof build_env, "COHORT_BUILD_DIR=%s", COHORT_BUILD_DIR);
    const char *argv[] = {"/bin/bash", "-c", DRIVER, "driver", dir, COHORT_SOURCE_DIR, NULL};
    /* A quick start must not find the suite's server through the environment. */
    const char *env[] = {build_env, "MONGODB_URI", NULL};
    test_run_result_t r = test_run(argv, env, 380000);
    cr_assert(!r.timed_out, "the quick start did not end within its duration:\n%s", r.out);

    cr_expect(strstr(r.out, "printed: /") != NULL,
              "the quick start printed no cohortctl command for another link:\n%s", r.out);
    cr_expect(strstr(r.out, "link exit 0: http://127.0.0.1:") != NULL &&
                  strstr(r.out, "/ui/login?code=") != NULL,
              "the printed cohortctl command fails in a shell without MONGODB_URI:\n%s", r.out);
    cr_expect(strstr(r.out, "quick start exit 0") != NULL, "the quick start failed:\n%s",
              r.out);
    /* The last status table: demo's SUCCEEDED column (the 7th field) above 0. */
    char *last = NULL;
    for (char *p = r.out; (p = strstr(p, "\ndemo ")) != NULL; p++)
        last = p + 1;
    long long succeeded = 0;
    if (last)
        sscanf(last, "demo %*s %*s %*s %*s %*s %*s %lld", &succeeded);
    cr_expect(succeeded > 0, "no task succeeded during the quick start:\n%s", r.out);

    /* Nothing left behind: no node of this run, no server on its state directory. */
    const char *ps[] = {"/bin/sh", "-c", "pgrep -f \"cohortd -c $0/.cohort/cluster/\"",
                        COHORT_SOURCE_DIR, NULL};
    test_run_result_t left = test_run(ps, NULL, 10000);
    cr_expect_neq(left.exit_code, 0, "the quick start left nodes running:\n%s", left.out);
    test_run_result_free(&left);
    test_run_result_free(&r);
    char rm[1100];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    cr_expect_eq(system(rm), 0);
    free(dir);
}
