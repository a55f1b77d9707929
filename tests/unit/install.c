/*
 * install.c - what a plugin author gets: `cmake --install` lays out the daemon, the tool, the
 * public header, the shipped handlers and the pkg-config file cohort-handler.pc; the handler
 * example of docs/HANDLERS.md is the shipped handlers/hello/hello.c, word for word; and it
 * builds with exactly the flags `pkg-config --cflags --libs cohort-handler` gives for the
 * installed tree into a handler the loader accepts.
 *
 * And what an operator gets: the man pages cohortd(1) and cohortctl(1), which `man -l` renders
 * when man is installed, and the bash completions; deploy/container/Dockerfile's image (the
 * Debian package, whose paths are this layout under /usr) holds its ENTRYPOINT, and the
 * Kubernetes configuration (deploy/kubernetes/cohort.ini, whose handlers live in the package's
 * handler directory) passes the installed cohortd's --check-config.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/handler/plugin.h"
#include "support.h"

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

/* Runs a shell command line; its stdout without the trailing newline (caller frees). Fails
 * the test if it does not exit 0. */
static char *output_of(const char *command, const char *const env[])
{
    const char *argv[] = {"/bin/sh", "-c", command, NULL};
    test_run_result_t r = test_run(argv, env, 30000);
    cr_assert_eq(r.exit_code, 0, "`%s` failed (%d): %s", command, r.exit_code, r.err);
    char *out = strdup(r.out);
    cr_assert_not_null(out);
    out[strcspn(out, "\n")] = '\0';
    test_run_result_free(&r);
    return out;
}

/* The words of `line` after `skip` words, each at most 1023 characters; returns how many. */
static size_t words(const char *line, size_t skip, char out[][1024], size_t max)
{
    size_t n = 0, seen = 0;
    while (*line && *line != '\n' && n < max) {
        size_t len = strcspn(line, " \t\n");
        if (len > 0 && seen++ >= skip)
            snprintf(out[n++], 1024, "%.*s", (int)len, line);
        line += len;
        line += strspn(line, " \t");
    }
    return n;
}

/* What deploy/container/Dockerfile's image holds: the Debian package, built for the prefix
 * its `-DCMAKE_INSTALL_PREFIX=` names (the package's paths relative to it are this build's
 * install layout: cmake/package.cmake), and its ENTRYPOINT. */
typedef struct image_layout {
    char prefix[1024];
    char entrypoint[1024];
} image_layout_t;

static void read_image_layout(image_layout_t *image)
{
    memset(image, 0, sizeof *image);
    char *dockerfile = test_read_file(COHORT_SOURCE_DIR "/deploy/container/Dockerfile");
    cr_assert_not_null(strstr(dockerfile, "cpack -G DEB"), "the Dockerfile builds no package");
    const char *prefix = strstr(dockerfile, "-DCMAKE_INSTALL_PREFIX=");
    cr_assert_not_null(prefix, "the Dockerfile's package names no -DCMAKE_INSTALL_PREFIX");
    prefix += strlen("-DCMAKE_INSTALL_PREFIX=");
    snprintf(image->prefix, sizeof image->prefix, "%.*s", (int)strcspn(prefix, " \t\n\\"), prefix);
    for (const char *line = dockerfile; line; line = strchr(line, '\n')) {
        line += *line == '\n';
        if (strncmp(line, "ENTRYPOINT [\"", 13) == 0)
            snprintf(image->entrypoint, sizeof image->entrypoint, "%.*s",
                     (int)strcspn(line + 13, "\""), line + 13);
    }
    free(dockerfile);
}

/* Whether the image holds `path` (absolute, in the image): the package installs it, which is
 * the install tree at `installed` for the paths under the image's prefix. */
static bool image_has(const image_layout_t *image, const char *installed, const char *path)
{
    size_t plen = strlen(image->prefix);
    return strncmp(path, image->prefix, plen) == 0 && path[plen] == '/' &&
           exists(installed, path + plen + 1);
}

/* The image's entry point is the packaged cohortd, and the Kubernetes configuration names
 * only handlers the package holds and passes the installed cohortd's --check-config. */
static void check_image(const char *prefix)
{
    image_layout_t image;
    read_image_layout(&image);
    cr_expect(image_has(&image, prefix, image.entrypoint),
              "the image's ENTRYPOINT %s is not in the package", image.entrypoint);

    char *ini = test_read_file(COHORT_SOURCE_DIR "/deploy/kubernetes/cohort.ini");
    for (const char *h = strstr(ini, "\nhandler"); h; h = strstr(h + 1, "\nhandler")) {
        const char *path = strchr(h, '=');
        cr_assert_not_null(path);
        path += 1 + strspn(path + 1, " \t");
        char handler[1024];
        snprintf(handler, sizeof handler, "%.*s", (int)strcspn(path, " \t;\n"), path);
        cr_expect(image_has(&image, prefix, handler),
                  "deploy/kubernetes/cohort.ini names handler %s, which the image lacks", handler);
    }
    char *local = test_replace_all(ini, image.prefix, prefix);
    char *config = test_write_file(prefix, "k8s-cohort.ini", local);
    char cohortd[1024];
    snprintf(cohortd, sizeof cohortd, "%s/bin/cohortd", prefix);
    const char *argv[] = {cohortd, "--check-config", "-c", config, NULL};
    test_run_result_t r = test_run(argv, NULL, 30000);
    cr_expect_eq(r.exit_code, 0, "deploy/kubernetes/cohort.ini fails --check-config: %s%s", r.out,
                 r.err);
    test_run_result_free(&r);
    free(config);
    free(local);
    free(ini);
}

/* The man pages and completions are installed where man and bash-completion look, and read
 * as what they are: `man -l` renders each page with its NAME (and without a warning from
 * groff), bash accepts each script. */
static void check_operator_docs(const char *prefix)
{
    static const char *const programs[] = {"cohortd", "cohortctl"};
    for (size_t i = 0; i < 2; i++) {
        char page_in[256], completion_in[256], page[1024], completion[1024];
        snprintf(page_in, sizeof page_in, "share/man/man1/%s.1", programs[i]);
        snprintf(completion_in, sizeof completion_in, "share/bash-completion/completions/%s",
                 programs[i]);
        snprintf(page, sizeof page, "%s/%s", prefix, page_in);
        snprintf(completion, sizeof completion, "%s/%s", prefix, completion_in);
        cr_assert(exists(prefix, page_in), "%s missing", page);
        cr_assert(exists(prefix, completion_in), "%s missing", completion);
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "bash -n '%s' && if command -v man >/dev/null; then MANWIDTH=80 man -l '%s' "
                 "2>&1 | grep -c '^NAME'; else echo 1; fi",
                 completion, page);
        char *out = output_of(cmd, NULL);
        cr_expect_str_eq(out, "1", "`man -l %s` does not render a NAME section", page);
        free(out);
        snprintf(cmd, sizeof cmd,
                 "command -v groff >/dev/null || exit 0; groff -man -Tutf8 -ww -z '%s' 2>&1",
                 page);
        out = output_of(cmd, NULL);
        cr_expect_str_eq(out, "", "groff warns about %s: %s", page, out);
        free(out);
    }
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
    cr_expect(exists(prefix, "lib/pkgconfig/cohort-handler.pc"),
              "lib/pkgconfig/cohort-handler.pc missing");
    check_operator_docs(prefix);
    check_image(prefix);

    /* The example as docs/HANDLERS.md prints it, built the way the guide says. */
    char *guide = test_read_file(COHORT_SOURCE_DIR "/docs/HANDLERS.md");
    const char *section = strstr(guide, "## Writing a handler");
    cr_assert_not_null(section, "docs/HANDLERS.md has no 'Writing a handler' section");
    const char *start = strstr(section, "```c\n");
    cr_assert_not_null(start, "docs/HANDLERS.md's handler section has no C example");
    start += 5;
    const char *end = strstr(start, "```");
    cr_assert_not_null(end);
    char *shipped = test_read_file(COHORT_SOURCE_DIR "/handlers/hello/hello.c");
    cr_expect_eq(strlen(shipped), (size_t)(end - start),
                 "docs/HANDLERS.md's example and handlers/hello/hello.c differ in length");
    cr_expect(strncmp(shipped, start, (size_t)(end - start)) == 0,
              "docs/HANDLERS.md's example and handlers/hello/hello.c differ");

    char source[1024], so[1024];
    snprintf(source, sizeof source, "%s/hello.c", prefix);
    snprintf(so, sizeof so, "%s/hello.so", prefix);
    FILE *f = fopen(source, "w");
    cr_assert_not_null(f);
    fwrite(start, 1, (size_t)(end - start), f);
    fclose(f);
    /* The installed pkg-config file: the installed header, libbson, and where handlers go. */
    char pc_path[1024];
    snprintf(pc_path, sizeof pc_path, "PKG_CONFIG_PATH=%s/lib/pkgconfig", prefix);
    const char *pc_env[] = {pc_path, NULL};
    char *flags = output_of("pkg-config --cflags --libs cohort-handler", pc_env);
    char *bson_flags = output_of("pkg-config --cflags --libs libbson-1.0", NULL);
    char include_flag[1024];
    snprintf(include_flag, sizeof include_flag, "-I%s/include", prefix);
    cr_expect(strstr(flags, include_flag) != NULL, "cohort-handler flags '%s' lack %s", flags,
              include_flag);
    char bson_words[16][1024];
    size_t n_bson = words(bson_flags, 0, bson_words, 16);
    for (size_t i = 0; i < n_bson; i++)
        cr_expect(strstr(flags, bson_words[i]) != NULL,
                  "cohort-handler flags '%s' lack libbson's %s", flags, bson_words[i]);
    char *handlerdir = output_of("pkg-config --variable=handlerdir cohort-handler", pc_env);
    char shipped_dir[1024];
    snprintf(shipped_dir, sizeof shipped_dir, "%s/lib/cohort/handlers", prefix);
    cr_expect_str_eq(handlerdir, shipped_dir, "handlerdir is not where the handlers went");
    cr_expect(strstr(section, "pkg-config --cflags --libs cohort-handler") != NULL,
              "docs/HANDLERS.md's handler section does not show the pkg-config build line");

    snprintf(cmd, sizeof cmd, "'%s' -std=c11 -Wall -Wextra -Werror -shared -fPIC -o '%s' '%s' %s",
             COHORT_CC, so, source, flags);
    cr_assert_eq(run(cmd), 0, "the docs/HANDLERS.md example does not build: %s", cmd);

    bson_error_t err;
    cohort_plugin_t *plugin = cohort_plugin_load(so, &err);
    cr_assert_not_null(plugin, "the built example does not load: %s", err.message);
    cr_expect_str_eq(plugin->handler->name, "hello");
    cr_expect_not_null(plugin->handler->primary_work);
    cohort_plugin_unload(plugin);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", prefix);
    run(cmd);
    free(handlerdir);
    free(bson_flags);
    free(flags);
    free(shipped);
    free(guide);
    free(prefix);
}
