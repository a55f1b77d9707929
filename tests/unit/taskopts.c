/*
 * taskopts.c - the task options' one table (core/taskopts.c) and the three edges that read
 * it: the parser of cohort_task_create(), the HTTP API's task fields and cohortctl enqueue's
 * flags. The old spellings are aliases every edge accepts; an unknown option is refused with
 * the list of known ones; and docs/API.md and docs/CLI.md hold what the table renders.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/taskopts.h"
#include "node/http/api_parse.h"
#include "support.h"

#define COHORTCTL COHORT_BUILD_DIR "/cohortctl"
#define COHORTD COHORT_BUILD_DIR "/cohortd"
#define UNREACHABLE "MONGODB_URI=mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=200"
#define BEGIN_MARK "<!-- task options: generated"
#define END_MARK "<!-- end of task options -->"

static bson_t *doc(const char *json)
{
    bson_error_t error;
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &error);
    cr_assert_not_null(b, "bad JSON %s: %s", json, error.message);
    return b;
}

/* cohort_task_options_parse() of `json`; false with `error` filled if refused. */
static bool parse(const char *json, cohort_task_options_t *out, bson_error_t *error)
{
    bson_t *b = doc(json);
    bool ok = cohort_task_options_parse(b, false, out, error);
    bson_destroy(b);
    return ok;
}

/* cohort_api_parse_task() of `json`; false with `err` filled if refused. */
static bool api_parse(const char *json, cohort_task_options_t *out, cohort_api_error_t *err)
{
    bson_t *body = doc(json), data, options;
    bool has_data = false;
    bool ok = cohort_api_parse_task(body, "", &data, &has_data, &options, err);
    if (ok) {
        bson_error_t why;
        cr_assert(cohort_task_options_parse(&options, false, out, &why), "%s", why.message);
    }
    bson_destroy(&options);
    bson_destroy(body);
    return ok;
}

Test(taskopts, every_option_is_one_documented_row)
{
    size_t n = 0;
    for (const cohort_task_option_t *r = cohort_task_option_table; r->name; r++, n++) {
        cr_expect(r->doc && r->doc[0], "%s has no doc line", r->name);
        cr_expect(r->flag && r->flag[0], "%s has no cohortctl flag", r->name);
        cr_expect_eq(cohort_task_option_find(r->name), r, "%s is not found by name", r->name);
        if (r->alias)
            cr_expect_eq(cohort_task_option_find(r->alias), r, "%s is not found by its alias",
                         r->name);
        if (r->excludes) {
            const cohort_task_option_t *other = cohort_task_option_find(r->excludes);
            cr_expect(other && !other->excludes, "%s excludes %s, which must be a row that "
                      "names no exclusion itself (one side names the pair)", r->name,
                      r->excludes);
        }
        for (const cohort_task_option_t *q = r + 1; q->name; q++) {
            cr_expect(strcmp(r->flag, q->flag) != 0, "two rows have --%s", r->flag);
            cr_expect_null(cohort_task_option_find(q->name) == r ? r : NULL,
                           "%s and %s share a name", r->name, q->name);
        }
    }
    cr_expect_leq(n, COHORT_TASK_OPTIONS_MAX);
}

/* The old spellings: `timeout_ms` (the API's) is the option `task_timeout_ms` everywhere. */
Test(taskopts, the_old_spellings_are_aliases_at_every_edge)
{
    cohort_task_options_t o;
    bson_error_t error;
    cr_assert(parse("{\"timeout_ms\": 5000}", &o, &error), "%s", error.message);
    cr_expect(o.has_timeout);
    cr_expect_eq(o.timeout_ms, 5000);
    cr_assert(parse("{\"task_timeout_ms\": 6000}", &o, &error), "%s", error.message);
    cr_expect_eq(o.timeout_ms, 6000);

    cohort_api_error_t err;
    cr_assert(api_parse("{\"task_timeout_ms\": 7000}", &o, &err), "%s", err.message);
    cr_expect(o.has_timeout);
    cr_expect_eq(o.timeout_ms, 7000);
    cr_assert(api_parse("{\"timeout_ms\": 8000, \"data\": {}}", &o, &err), "%s", err.message);
    cr_expect_eq(o.timeout_ms, 8000);
}

Test(taskopts, a_name_and_its_alias_together_are_refused)
{
    cohort_task_options_t o;
    bson_error_t error;
    cr_assert_not(parse("{\"task_timeout_ms\": 1, \"timeout_ms\": 2}", &o, &error));
    cr_expect_not_null(strstr(error.message, "given twice"), "%s", error.message);
    cr_assert_not(parse("{\"priority\": 1, \"priority\": 2}", &o, &error));
    cr_expect_not_null(strstr(error.message, "'priority' is given twice"), "%s", error.message);

    cohort_api_error_t err;
    cr_assert_not(api_parse("{\"timeout_ms\": 1, \"task_timeout_ms\": 2}", &o, &err));
    cr_expect_eq(err.status, 400);
    cr_expect_not_null(strstr(err.message, "given twice"), "%s", err.message);
}

Test(taskopts, an_unknown_option_is_refused_with_the_known_ones)
{
    cohort_task_options_t o;
    bson_error_t error;
    cr_assert_not(parse("{\"timeout\": 5000}", &o, &error));
    cr_expect_not_null(strstr(error.message, "unknown task option 'timeout' (known: tracked, "),
                       "%s", error.message);
    cr_expect_not_null(strstr(error.message, "task_timeout_ms (or timeout_ms)"), "%s",
                       error.message);

    cohort_api_error_t err;
    cr_assert_not(api_parse("{\"colour\": \"red\"}", &o, &err));
    cr_expect_eq(err.status, 400);
    cr_expect_not_null(strstr(err.message, "unknown field 'colour' (known: data, tracked, "),
                       "%s", err.message);
    cr_expect_not_null(strstr(err.message, "unique_key"), "%s", err.message);
}

/* Each row's own bounds and exclusions, as the parser applies them. */
Test(taskopts, each_row_bounds_its_value)
{
    static const struct {
        const char *json, *expect;
    } cases[] = {
        {"{\"tracked\": 1}", "'tracked' must be a bool"},
        {"{\"priority\": 1000001}", "'priority' = 1000001 is out of range"},
        {"{\"weight\": 0}", "'weight' = 0 is out of range [1, 1000]"},
        {"{\"timeout_ms\": -1}", "'timeout_ms' = -1 is out of range [0, 604800000]"},
        {"{\"kind\": \"a b\"}", "'kind' must be 1-64 of [A-Za-z0-9_-]"},
        {"{\"group\": \"\"}", "'group' must be a string of 1 to 512 bytes"},
        {"{\"not_before\": 0}", "'not_before' = 0 is out of range"},
        {"{\"delay_ms\": 1, \"not_before\": 5}", "'delay_ms' and 'not_before' exclude"},
        {"{\"not_after_ms\": 1, \"not_after\": 5}", "'not_after' and 'not_after_ms' exclude"},
        {"{\"coalesce_key\": \"a\", \"unique_key\": \"b\"}",
         "'unique_key' and 'coalesce_key' exclude"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cohort_task_options_t o;
        bson_error_t error;
        cr_expect_not(parse(cases[i].json, &o, &error), "%s was accepted", cases[i].json);
        cr_expect_not_null(strstr(error.message, cases[i].expect), "%s: %s", cases[i].json,
                           error.message);
    }
}

/* The part of `path` between the task options markers. Caller frees. */
static char *generated_part(const char *path)
{
    char *text = test_read_file(path);
    char *begin = strstr(text, BEGIN_MARK);
    cr_assert_not_null(begin, "%s has no '%s' marker", path, BEGIN_MARK);
    begin = strstr(begin, "-->\n");
    cr_assert_not_null(begin);
    begin += 4;
    char *end = strstr(begin, END_MARK);
    cr_assert_not_null(end, "%s has no '%s' marker", path, END_MARK);
    char *part = strndup(begin, (size_t)(end - begin));
    free(text);
    return part;
}

/* The regeneration command the docs name prints the table; both docs hold exactly that. */
Test(taskopts, the_docs_hold_what_the_table_renders)
{
    static const char *const argv[] = {COHORTD, "--print-task-options=markdown", NULL};
    test_run_result_t r = test_run(argv, NULL, 20000);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "| `task_timeout_ms` (alias `timeout_ms`) | `--timeout DUR`"),
                       "%s", r.out);
    static const char *const docs[] = {COHORT_SOURCE_DIR "/docs/API.md",
                                       COHORT_SOURCE_DIR "/docs/CLI.md"};
    for (size_t i = 0; i < 2; i++) {
        char *part = generated_part(docs[i]);
        cr_expect_str_eq(part, r.out,
                         "%s's task options are not what the table renders; regenerate them: "
                         "build/cohortd --print-task-options=markdown",
                         docs[i]);
        free(part);
    }
    test_run_result_free(&r);
}

/* cohortctl enqueue's flags are the table's rows: each is in its help, and each is parsed
 * (a bad value is refused naming the flag, before any database is needed). */
Test(taskopts, cohortctl_enqueue_has_a_flag_per_row)
{
    const char *help[] = {COHORTCTL, "help", "enqueue", NULL};
    test_run_result_t h = test_run(help, NULL, 20000);
    cr_assert_eq(h.exit_code, 0, "%s", h.err);
    for (const cohort_task_option_t *r = cohort_task_option_table; r->name; r++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", r->flag);
        cr_expect_not_null(strstr(h.out, flag), "cohortctl help enqueue lacks %s", flag);
        if (r->type == COHORT_TASK_OPTION_BOOL)
            continue;
        const char *argv[] = {COHORTCTL, "enqueue", "svc", flag, "", NULL};
        const char *env[] = {UNREACHABLE, NULL};
        test_run_result_t e = test_run(argv, env, 20000);
        cr_expect_eq(e.exit_code, 2, "%s '': exit %d: %s", flag, e.exit_code, e.err);
        cr_expect_not_null(strstr(e.err, flag), "%s '' refused without naming it: %s", flag,
                           e.err);
        test_run_result_free(&e);
    }
    test_run_result_free(&h);

    const char *unknown[] = {COHORTCTL, "enqueue", "svc", "--colour", "red", NULL};
    const char *env[] = {UNREACHABLE, NULL};
    test_run_result_t u = test_run(unknown, env, 20000);
    cr_expect_eq(u.exit_code, 2);
    cr_expect_not_null(strstr(u.err, "unexpected argument '--colour'"), "%s", u.err);
    test_run_result_free(&u);
}
