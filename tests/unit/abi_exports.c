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

/* True if the header declares `name(` as a function (not only mentions it in a comment). */
static bool declared(const char *header, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = strstr(header, name); p; p = strstr(p + 1, name)) {
        bool starts = p == header || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'));
        if (starts && p[len] == '(' && p > header && (p[-1] == ' ' || p[-1] == '*'))
            return true;
    }
    return false;
}

Test(abi_exports, cohortd_exports_exactly_the_functions_of_handler_h)
{
    const char *header = read_header();
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
        if (declared(header, name)) {
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
    /* Each ABI function is exported: count the declarations the same way. */
    int declared_count = 0;
    for (const char *p = strstr(header, "cohort_"); p; p = strstr(p + 1, "cohort_")) {
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz_0123456789");
        if (p[len] == '(' && p > header && (p[-1] == ' ' || p[-1] == '*'))
            declared_count++;
    }
    cr_assert_eq(exported, declared_count,
                 "cohortd exports %d of the %d functions handler.h declares", exported,
                 declared_count);
}
