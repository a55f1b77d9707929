/*
 * install.c - what a plugin author gets: `cmake --install` lays out the daemon, the tool, the
 * public header and the shipped handlers; the README's handler example is the shipped
 * handlers/hello/hello.c, word for word; and it builds against the installed header alone
 * (plus libbson) into a handler the loader accepts.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin.h"
#include "support.h"

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    char *text = NULL;
    size_t len = 0;
    cr_assert_eq(getdelim(&text, &len, '\0', f) >= 0, true, "cannot read %s", path);
    fclose(f);
    return text;
}

static bool exists(const char *dir, const char *relative)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, relative);
    struct stat st;
    return stat(path, &st) == 0;
}

static int run(const char *command)
{
    int rc = system(command);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

Test(install, layout_and_handler_built_against_installed_header, .timeout = 120)
{
    char *prefix = test_tmpdir("install");
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' --install '%s' --prefix '%s' >/dev/null", COHORT_CMAKE,
             COHORT_BUILD_DIR, prefix);
    cr_assert_eq(run(cmd), 0, "cmake --install failed: %s", cmd);

    cr_expect(exists(prefix, "bin/cohortd"), "bin/cohortd missing");
    cr_expect(exists(prefix, "bin/cohortctl"), "bin/cohortctl missing");
    cr_expect(exists(prefix, "include/cohort/handler.h"), "include/cohort/handler.h missing");
    cr_expect(exists(prefix, "lib/cohort/handlers/cohort_noop.so"), "noop handler missing");
    cr_expect(exists(prefix, "lib/cohort/handlers/cohort_hello.so"), "hello handler missing");

    /* The example as the README prints it, built the way the README says. */
    char *readme = read_file(COHORT_SOURCE_DIR "/README.md");
    const char *section = strstr(readme, "## Writing a handler");
    cr_assert_not_null(section, "README has no 'Writing a handler' section");
    const char *start = strstr(section, "```c\n");
    cr_assert_not_null(start, "README's handler section has no C example");
    start += 5;
    const char *end = strstr(start, "```");
    cr_assert_not_null(end);
    char *shipped = read_file(COHORT_SOURCE_DIR "/handlers/hello/hello.c");
    cr_expect_eq(strlen(shipped), (size_t)(end - start),
                 "README example and handlers/hello/hello.c differ in length");
    cr_expect(strncmp(shipped, start, (size_t)(end - start)) == 0,
              "README example and handlers/hello/hello.c differ");

    char source[1024], so[1024];
    snprintf(source, sizeof source, "%s/hello.c", prefix);
    snprintf(so, sizeof so, "%s/hello.so", prefix);
    FILE *f = fopen(source, "w");
    cr_assert_not_null(f);
    fwrite(start, 1, (size_t)(end - start), f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "'%s' -std=c11 -Wall -Wextra -Werror -shared -fPIC -o '%s' '%s' -I'%s/include' "
             "$(pkg-config --cflags --libs libbson-1.0)",
             COHORT_CC, so, source, prefix);
    cr_assert_eq(run(cmd), 0, "the README example does not build: %s", cmd);

    char err[1024] = "";
    cohort_plugin_t *plugin = cohort_plugin_load(so, err, sizeof err);
    cr_assert_not_null(plugin, "the built example does not load: %s", err);
    cr_expect_str_eq(plugin->handler->name, "hello");
    cr_expect_not_null(plugin->handler->primary_work);
    cohort_plugin_unload(plugin);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", prefix);
    run(cmd);
    free(shipped);
    free(readme);
    free(prefix);
}
