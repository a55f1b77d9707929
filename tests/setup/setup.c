/*
 * setup.c - what the README's first command installs and builds.
 *
 * - deploy/setup.sh ensures the packages building and running Cohort need; the ones only the
 *   test suite uses (prometheus among them: its package starts a server on systemd hosts)
 *   come only with COHORT_TEST_TOOLS=1.
 * - deploy/local-cluster.sh builds everything `cmake --install` installs: an install right
 *   after it, into a fresh build directory, succeeds and lays out every shipped handler.
 *
 * Label setup: the second test configures and builds a tree of its own (about a minute).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "support.h"

/* The packages deploy/setup.sh would ensure, one per line (free the result). */
static test_run_result_t packages(bool test_tools)
{
    const char *argv[] = {"/bin/bash", COHORT_SOURCE_DIR "/deploy/setup.sh", "--packages", NULL};
    const char *env[] = {test_tools ? "COHORT_TEST_TOOLS=1" : "COHORT_TEST_TOOLS", NULL};
    test_run_result_t r = test_run(argv, env, 30000);
    cr_assert_eq(r.exit_code, 0, "setup.sh --packages failed: %s", r.err);
    return r;
}

static bool listed(const char *list, const char *package)
{
    size_t n = strlen(package);
    for (const char *p = list; (p = strstr(p, package)) != NULL; p += n)
        if ((p == list || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

Test(setup, prometheus_only_with_the_test_tools)
{
    test_run_result_t quick = packages(false), tests = packages(true);
    cr_expect(listed(quick.out, "libmongoc-dev"), "setup.sh no longer ensures libmongoc-dev:\n%s",
              quick.out);
    cr_expect(!listed(quick.out, "prometheus"),
              "the quick start installs prometheus (a server on systemd hosts):\n%s", quick.out);
    cr_expect(listed(tests.out, "prometheus"),
              "the test tools lack prometheus (promtool checks /metrics):\n%s", tests.out);
    test_run_result_free(&quick);
    test_run_result_free(&tests);
}

Test(setup, local_cluster_builds_what_install_needs, .timeout = 900)
{
    char *dir = test_tmpdir("setup-build");
    char build[1024], prefix[1100], env_build[1100];
    snprintf(build, sizeof build, "%s/build", dir);
    snprintf(prefix, sizeof prefix, "%s/prefix", dir);
    snprintf(env_build, sizeof env_build, "COHORT_BUILD_DIR=%s", build);
    const char *cluster[] = {"/bin/bash", COHORT_SOURCE_DIR "/deploy/local-cluster.sh",
                             "--build-only", NULL};
    const char *env[] = {env_build, NULL};
    test_run_result_t built = test_run(cluster, env, 840000);
    cr_assert_eq(built.exit_code, 0, "local-cluster.sh --build-only failed:\n%s", built.err);

    const char *install[] = {COHORT_CMAKE, "--install", build, "--prefix", prefix, NULL};
    test_run_result_t installed = test_run(install, NULL, 60000);
    cr_expect_eq(installed.exit_code, 0,
                 "`cmake --install` right after local-cluster.sh failed:\n%s%s", installed.out,
                 installed.err);
    const char *handlers[] = {"noop", "hello", "leaderboard"};
    for (size_t i = 0; i < sizeof handlers / sizeof *handlers; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/lib/cohort/handlers/cohort_%s.so", prefix, handlers[i]);
        struct stat st;
        cr_expect(stat(path, &st) == 0, "the install lacks the %s handler", handlers[i]);
    }
    test_run_result_free(&built);
    test_run_result_free(&installed);
    char rm[1100];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    cr_expect_eq(system(rm), 0);
    free(dir);
}
