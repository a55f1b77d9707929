/*
 * cli_help.c - the command lines describe themselves completely, from one table per binary
 * (src/cli/help.h): `cohortctl help`, `help COMMAND`, `COMMAND --help` and `cohortd --help`
 * exit 0 on stdout; every option a command's help lists is one its parser accepts, and no
 * getopt_long() array in src/cli is written outside the tables (so the parser accepts
 * nothing the help does not list); a bad option exits 2 with the usage on stderr; the man
 * pages built into build/man are what the binaries print now and parse without a warning;
 * the bash completion script is valid and completes commands and options.
 * No database: options are tried against an unreachable one.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cohort/handler.h>
#include <mongoc/mongoc.h>

#include "core/version.h"
#include "support.h"

#define COHORTCTL COHORT_BUILD_DIR "/cohortctl"
#define COHORTD COHORT_BUILD_DIR "/cohortd"
#define UNREACHABLE "MONGODB_URI=mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200"

#define MAX_WORDS 64

static test_run_result_t run_args(const char *const argv[])
{
    const char *env[] = {UNREACHABLE, NULL};
    test_run_result_t r = test_run(argv, env, 20000);
    cr_assert_not(r.timed_out, "%s did not finish in 20 s", argv[0]);
    return r;
}

#define run(...) run_args((const char *const[]){__VA_ARGS__, NULL})

/* The words starting with "--" in `text`, each once. */
static size_t long_options(const char *text, char out[][64], size_t max)
{
    size_t n = 0;
    for (const char *p = strstr(text, "--"); p && n < max; p = strstr(p + 2, "--")) {
        if (p > text && p[-1] != ' ' && p[-1] != '[' && p[-1] != '|' && p[-1] != '\n')
            continue;
        size_t len = strspn(p + 2, "abcdefghijklmnopqrstuvwxyz-");
        if (len == 0)
            continue;
        char word[64];
        snprintf(word, sizeof word, "--%.*s", (int)len, p + 2);
        bool seen = false;
        for (size_t i = 0; i < n && !seen; i++)
            seen = strcmp(out[i], word) == 0;
        if (!seen)
            snprintf(out[n++], 64, "%s", word);
    }
    return n;
}

/* The commands of `cohortctl help`: the lines "  NAME ..." under "Commands". */
static size_t commands(char out[][64], size_t max)
{
    test_run_result_t r = run(COHORTCTL, "help");
    cr_assert_eq(r.exit_code, 0, "cohortctl help: exit %d: %s", r.exit_code, r.err);
    const char *list = strstr(r.out, "\nCommands");
    cr_assert_not_null(list, "cohortctl help lists no commands:\n%s", r.out);
    size_t n = 0;
    for (const char *line = strchr(list + 1, '\n'); line && line[1] != '\n' && n < max;
         line = strchr(line + 1, '\n')) {
        if (strncmp(line, "\n  ", 3) == 0 && line[3] != ' ')
            snprintf(out[n++], 64, "%.*s", (int)strcspn(line + 3, " \n"), line + 3);
    }
    test_run_result_free(&r);
    return n;
}

Test(cli_help, every_command_has_help_on_stdout)
{
    char names[MAX_WORDS][64];
    size_t n = commands(names, MAX_WORDS);
    static const char *const expected[] = {"status", "enqueue", "pause",    "resume", "block",
                                           "unblock", "counts", "tasks",   "task",   "data",
                                           "settings", "nodes",  "help"};
    for (size_t e = 0; e < sizeof expected / sizeof expected[0]; e++) {
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = strcmp(names[i], expected[e]) == 0;
        cr_expect(found, "cohortctl help does not list '%s'", expected[e]);
    }
    for (size_t i = 0; i < n; i++) {
        test_run_result_t a = run(COHORTCTL, "help", names[i]);
        test_run_result_t b = run(COHORTCTL, names[i], "--help");
        cr_expect_eq(a.exit_code, 0, "help %s: exit %d: %s", names[i], a.exit_code, a.err);
        cr_expect_eq(b.exit_code, 0, "%s --help: exit %d: %s", names[i], b.exit_code, b.err);
        cr_expect_str_eq(a.out, b.out, "help %s and %s --help differ", names[i], names[i]);
        char usage[160];
        snprintf(usage, sizeof usage, "Usage: cohortctl [GLOBAL OPTIONS] %s ", names[i]);
        cr_expect(strncmp(a.out, usage, strlen(usage)) == 0, "help %s:\n%s", names[i], a.out);
        cr_expect_str_eq(a.err, "");
        test_run_result_free(&a);
        test_run_result_free(&b);
    }
}

/* A value that passes the option's own parsing, so that only an unknown option fails. */
static const char *plausible_value(const char *option)
{
    if (strcmp(option, "--data") == 0)
        return "{}";
    if (strcmp(option, "--by") == 0 || strcmp(option, "--status") == 0)
        return strcmp(option, "--by") == 0 ? "kind" : "pending";
    return "1";
}

/* Every option a command's help lists is accepted by its parser: the command then gets as
 * far as the (unreachable) database or another complaint, never "unexpected argument". */
Test(cli_help, every_listed_option_is_accepted, .timeout = 120)
{
    char names[MAX_WORDS][64];
    size_t n = commands(names, MAX_WORDS);
    for (size_t i = 0; i < n; i++) {
        test_run_result_t h = run(COHORTCTL, names[i], "--help");
        const char *options = strstr(h.out, "\nOptions:");
        cr_assert_not_null(options, "%s --help has no Options:\n%s", names[i], h.out);
        char opts[MAX_WORDS][64];
        size_t k = long_options(options, opts, MAX_WORDS);
        for (size_t j = 0; j < k; j++) {
            if (strcmp(opts[j], "--help") == 0)
                continue;
            /* a value after each: an option without one leaves it as an extra operand */
            const char *argv[] = {COHORTCTL, names[i], "svc", opts[j], plausible_value(opts[j]),
                                  NULL};
            test_run_result_t r = run_args(argv);
            char refused[128];
            snprintf(refused, sizeof refused, "argument '%.64s'", opts[j]);
            cr_expect_null(strstr(r.err, refused), "cohortctl %s lists %s but refuses it: %s",
                           names[i], opts[j], r.err);
            test_run_result_free(&r);
        }
        test_run_result_free(&h);
    }
}

/* Every getopt_long() array of src/cli is built from a help table (cli_longopts): an array
 * written by hand would let a parser accept an option its help does not list. */
Test(cli_help, no_option_array_outside_the_tables)
{
    DIR *dir = opendir(COHORT_SOURCE_DIR "/src/cli");
    cr_assert_not_null(dir);
    struct dirent *e;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        /* help.c is where the arrays are built from the tables */
        if (len < 3 || strcmp(e->d_name + len - 2, ".c") != 0 || strcmp(e->d_name, "help.c") == 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/src/cli/%s", COHORT_SOURCE_DIR, e->d_name);
        char *text = test_read_file(path);
        cr_expect_null(strstr(text, "_argument, NULL,"),
                       "%s builds a getopt_long() array by hand; add rows to its help table",
                       e->d_name);
        cr_expect_null(strstr(text, "struct option){"), "%s builds a struct option by hand",
                       e->d_name);
        free(text);
    }
    closedir(dir);
}

Test(cli_help, bad_options_exit_2_with_the_usage_on_stderr)
{
    static const struct {
        const char *argv[4];
        const char *usage;
    } cases[] = {
        {{COHORTCTL, "--frobnicate"}, "Usage: cohortctl "},
        {{COHORTCTL, "status", "--frobnicate"}, "usage: cohortctl status [--json]"},
        {{COHORTCTL, "nodes", "--frobnicate"}, "usage: cohortctl nodes [--json]"},
        {{COHORTCTL, "enqueue", "svc", "--frobnicate"}, "usage: cohortctl enqueue SERVICE"},
        {{COHORTCTL, "frobnicate"}, "Usage: cohortctl "},
        {{COHORTCTL, "help", "frobnicate"}, "Usage: cohortctl "},
        {{COHORTD, "--frobnicate"}, "Usage: cohortd "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_run_result_t r = run_args(cases[i].argv);
        cr_expect_eq(r.exit_code, 2, "%s %s: exit %d", cases[i].argv[0], cases[i].argv[1],
                     r.exit_code);
        cr_expect_not_null(strstr(r.err, cases[i].usage), "case %zu: no '%s' in:\n%s", i,
                           cases[i].usage, r.err);
        cr_expect_str_eq(r.out, "", "case %zu printed on stdout", i);
        test_run_result_free(&r);
    }
}

/* cohortd --help lists every option the man page lists, and each one it has. */
Test(cli_help, cohortd_help_describes_every_option)
{
    test_run_result_t h = run(COHORTD, "--help");
    cr_assert_eq(h.exit_code, 0, "cohortd --help: exit %d: %s", h.exit_code, h.err);
    static const char *const known[] = {"--config",  "--check-config", "--print-settings",
                                        "--version", "--help",         "--worker",
                                        "--service", "--node-id",      "--print-man",
                                        "--print-completion"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        cr_expect_not_null(strstr(h.out, known[i]), "cohortd --help lacks %s:\n%s", known[i],
                           h.out);
    cr_expect_not_null(strstr(h.out, "SIGTERM"), "no signals in cohortd --help");
    test_run_result_free(&h);
}

/* The built man page is what the binary prints now: a table change rebuilds it. */
static void check_man(const char *binary, const char *name)
{
    test_run_result_t r = run(binary, "--print-man");
    cr_assert_eq(r.exit_code, 0);
    char path[512];
    snprintf(path, sizeof path, "%s/man/%s.1", COHORT_BUILD_DIR, name);
    char *built = test_read_file(path);
    cr_expect_str_eq(built, r.out, "%s is stale: rebuild", path);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "command -v groff >/dev/null || exit 0; groff -man -Tutf8 -ww -z "
                              "'%s' 2>&1 | head -5",
             path);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    test_run_result_t g = test_run(argv, NULL, 20000);
    cr_expect_str_eq(g.out, "", "groff warns about %s:\n%s", path, g.out);
    test_run_result_free(&g);
    free(built);
    test_run_result_free(&r);
}

Test(cli_help, man_pages_are_current_and_parse)
{
    check_man(COHORTCTL, "cohortctl");
    check_man(COHORTD, "cohortd");
    test_run_result_t r = run(COHORTD, "--print-man");
    cr_expect_not_null(strstr(r.out, ".SH SETTINGS"), "cohortd.1 has no settings");
    cr_expect_not_null(strstr(r.out, "takeover_ms"), "cohortd.1 lacks takeover_ms");
    test_run_result_free(&r);
    r = run(COHORTCTL, "--print-man");
    cr_expect_not_null(strstr(r.out, ".SS enqueue"), "cohortctl.1 lacks enqueue");
    test_run_result_free(&r);
}

/* The completion script sourced in bash completes a command, an option and a value. */
Test(cli_help, bash_completion_completes)
{
    char script[512];
    snprintf(script, sizeof script, "%s/completion/cohortctl", COHORT_BUILD_DIR);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "source '%s' && t() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); "
             "_cohortctl; echo \"${COMPREPLY[*]}\"; }; t cohortctl enq; t cohortctl enqueue x "
             "--cre; t cohortctl counts x --by k",
             script);
    const char *argv[] = {"/bin/bash", "-c", cmd, NULL};
    test_run_result_t r = test_run(argv, NULL, 20000);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "enqueue\n--create\nkind\n");
    test_run_result_free(&r);
}

/* The operands complete too: data's and tokens' verbs, schedules pause|resume, settings keys
 * (from the settings table), and the service names of the -c file after a verb. */
Test(cli_help, bash_completion_completes_operands)
{
    char dir[] = "/tmp/cohort-completion-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char *ini = test_write_file(dir, "c.ini",
                                "[cluster]\n[service:alpha]\nhandler = x.so\n"
                                "  [service:beta] ; the second\nhandler = x.so\n");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "source '%s/completion/cohortctl' && t() { COMP_WORDS=(\"$@\"); "
             "COMP_CWORD=$(($# - 1)); COMPREPLY=(); _cohortctl; echo \"${COMPREPLY[*]}\"; }; "
             "t cohortctl data i; t cohortctl -c '%s' data get ''; "
             "t cohortctl settings set x take; t cohortctl settings unset x ''; "
             "t cohortctl schedules pa; t cohortctl -c '%s' schedules pause al; "
             "t cohortctl -c '%s' schedules ''; t cohortctl tokens re; "
             "t cohortctl -c '%s' step-down b; t cohortctl -c '%s' data cas alpha k ''",
             COHORT_BUILD_DIR, ini, ini, ini, ini, ini);
    const char *argv[] = {"/bin/bash", "-c", cmd, NULL};
    test_run_result_t r = test_run(argv, NULL, 20000);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "inc\n"
                            "alpha beta\n"
                            "takeover_ms\n"
                            "tick_ms takeover_ms primary_task_count secondary_task_count "
                            "stall_timeout_ms succeeded_retention_ms failed_retention_ms\n"
                            "pause\n"
                            "alpha\n"
                            "pause resume alpha beta\n"
                            "revoke\n"
                            "beta\n"
                            "\n");
    test_run_result_free(&r);
    unlink(ini);
    rmdir(dir);
    free(ini);
}

/* docs/CLI.md has a section for every command of cohortctl (a `## ` heading naming it): the
 * reference an operator reads follows the table the parser reads. */
Test(cli_help, every_command_has_a_section_in_cli_md)
{
    const char *argv[] = {COHORT_BUILD_DIR "/cohortctl", "--print-completion", NULL};
    test_run_result_t r = test_run(argv, NULL, 20000);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    const char *list = strstr(r.out, "local commands='");
    cr_assert_not_null(list);
    list += strlen("local commands='");
    char *doc = test_read_file(COHORT_SOURCE_DIR "/docs/CLI.md");
    for (const char *p = list; *p && *p != '\'';) {
        size_t len = strcspn(p, " '");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        p += len + (p[len] == ' ');
        if (strcmp(name, "help") == 0)
            continue; /* "Help, man pages, completion" */
        bool found = false;
        for (const char *h = strstr(doc, "\n## "); h && !found; h = strstr(h + 1, "\n## ")) {
            size_t line = strcspn(h + 1, "\n");
            for (const char *w = h + 4; w + len <= h + 1 + line && !found; w++)
                found = strncmp(w, name, len) == 0 && strchr(" ,\n", w[len]) &&
                        strchr(" ,", w[-1]);
        }
        cr_expect(found, "docs/CLI.md has no section (a '## ' heading) for `cohortctl %s`", name);
    }
    free(doc);
    test_run_result_free(&r);
}

/* --version of both binaries (issue 25): the release first, then the database schema version
 * it writes and serves, the handler ABI range it loads and libmongoc's version. */
Test(cli_help, version_names_release_schema_and_abi)
{
    const char *const programs[][2] = {{COHORTD, "cohortd"}, {COHORTCTL, "cohortctl"}};
    char expect[5][96];
    snprintf(expect[1], sizeof expect[1], "\ndatabase schema version %d (serves %d..%d)\n",
             COHORT_SCHEMA_VERSION, COHORT_SCHEMA_VERSION_OLDEST, COHORT_SCHEMA_VERSION);
    snprintf(expect[2], sizeof expect[2], "\nhandler ABI 1..%d\n", COHORT_HANDLER_ABI_VERSION);
    snprintf(expect[3], sizeof expect[3], "\nlibmongoc %s\n", mongoc_get_version());
    for (size_t i = 0; i < 2; i++) {
        test_run_result_t r = run(programs[i][0], "--version");
        cr_expect_eq(r.exit_code, 0, "%s --version: exit %d: %s", programs[i][1], r.exit_code,
                     r.err);
        snprintf(expect[0], sizeof expect[0], "%s " COHORT_VERSION "\n", programs[i][1]);
        cr_expect_eq(strncmp(r.out, expect[0], strlen(expect[0])), 0,
                     "%s --version does not start with '%s': %s", programs[i][1], expect[0], r.out);
        for (size_t k = 1; k < 4; k++)
            cr_expect(strstr(r.out, expect[k]), "%s --version lacks '%s': %s", programs[i][1],
                      expect[k], r.out);
        test_run_result_free(&r);
    }
}
