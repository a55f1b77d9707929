/*
 * abi_exports.c - cohortd exports the handler ABI and nothing else of its own (issue 24,
 * item 2). Every function in its dynamic symbol table (`nm -D --defined-only`) must be
 * declared in include/cohort/handler.h, and every function declared there must be exported:
 * an internal function a handler could call would become ABI by accident, and a missing one
 * would fail every handler that calls it at load.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static char *read_header(void)
{
    FILE *f = fopen(COHORT_SOURCE_DIR "/include/cohort/handler.h", "r");
    cr_assert_not_null(f, "cannot open include/cohort/handler.h");
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

/* The functions handler.h declares: a declaration starts a line (column 0, not a comment or
 * a directive) and names `cohort_*(`. Returns how many; fills `names` (at most `cap`). */
static int declarations(const char *header, char names[][64], int cap)
{
    int n = 0;
    for (const char *line = header; *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
        if (*line == ' ' || *line == '\t' || *line == '/' || *line == '*' || *line == '#' ||
            *line == '}' || *line == '\n')
            continue;
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        for (const char *p = line; p < line + len; p++) {
            if (strncmp(p, "cohort_", 7) != 0 || (p > line && p[-1] != ' ' && p[-1] != '*'))
                continue;
            size_t word = strspn(p, "abcdefghijklmnopqrstuvwxyz_0123456789");
            if (p[word] == '(' && n < cap) {
                snprintf(names[n++], 64, "%.*s", (int)word, p);
                break;
            }
        }
    }
    return n;
}

static bool declared(char names[][64], int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

Test(abi_exports, cohortd_exports_exactly_the_functions_of_handler_h)
{
    const char *header = read_header();
    static char names[128][64];
    int declared_count = declarations(header, names, 128);
    cr_assert_gt(declared_count, 20, "found only %d declarations in handler.h", declared_count);
    FILE *nm = popen("nm -D --defined-only --format=posix " COHORT_BUILD_DIR "/cohortd", "r");
    cr_assert_not_null(nm, "cannot run nm");
    char line[512];
    int exported = 0, foreign = 0;
    while (fgets(line, sizeof line, nm)) {
        char name[256], type[8];
        if (sscanf(line, "%255s %7s", name, type) != 2 || (type[0] != 'T' && type[0] != 'W'))
            continue;
        if (name[0] == '_' || strcmp(name, "data_start") == 0)
            continue; /* the C runtime's (_start, _init, data_start...) */
        if (strcmp(name, "mangle_path") == 0)
            continue; /* libgcov's, linked into coverage builds (tests/run.sh --coverage) */
        if (declared(names, declared_count, name)) {
            exported++;
            continue;
        }
        foreign++;
        cr_log_error("cohortd exports '%s', which handler.h does not declare", name);
    }
    int rc = pclose(nm);
    cr_assert_eq(rc, 0, "nm -D failed on " COHORT_BUILD_DIR "/cohortd (status %d)", rc);
    cr_assert_eq(foreign, 0, "%d function(s) exported beyond the handler ABI (listed above)",
                 foreign);
    /* And each ABI function is exported. */
    cr_assert_eq(exported, declared_count,
                 "cohortd exports %d of the %d functions handler.h declares", exported,
                 declared_count);
}
