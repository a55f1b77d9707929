/*
 * settings.c - the settings table (src/core/settings.h) and what is driven from it: the
 * parser's ranges and unknown-key list, the live settings, the SIGHUP diff and the
 * committed reference docs/CONFIGURATION.md.
 *
 * The point of one table is that nothing can drift from it, so each test holds one reader
 * of the table to the table: a range in a row is the range the parser enforces, a live row
 * is a field of cohort_settings_t, and the committed reference is what the table renders.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/settings.h"
#include "support.h"

#define NOOP_SO COHORT_BUILD_DIR "/handlers/cohort_noop.so"
#define COHORTD COHORT_BUILD_DIR "/cohortd"

static cohort_config_errors_t errors;

static void setup(void)
{
    unsetenv("MONGODB_URI");
}

static void teardown(void)
{
    cohort_config_errors_clear(&errors);
}

TestSuite(settings, .init = setup, .fini = teardown);

/* Loads "[cluster]\n<cluster>[service:a]\nhandler = ...\n<service>". */
static cohort_config_t *load(const char *cluster, const char *service)
{
    char *text = NULL;
    cr_assert_geq(asprintf(&text, "[cluster]\n%s[service:a]\nhandler = " NOOP_SO "\n%s", cluster,
                           service),
                  0);
    cohort_config_errors_clear(&errors);
    cohort_config_t *c = cohort_config_load_string(text, "test.ini", NULL, &errors);
    free(text);
    return c;
}

/* True if some problem mentions both `a` and `b`. */
static bool reported(const char *a, const char *b)
{
    for (size_t i = 0; i < errors.count; i++)
        if (strstr(errors.messages[i], a) && strstr(errors.messages[i], b))
            return true;
    return false;
}

Test(settings, the_committed_reference_is_what_the_table_renders)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    cohort_settings_print_markdown(f);
    cr_assert_eq(fclose(f), 0);
    char *committed = test_read_file(COHORT_SOURCE_DIR "/docs/CONFIGURATION.md");
    cr_expect_str_eq(committed, text,
                     "docs/CONFIGURATION.md is not what the settings table renders; regenerate "
                     "it: build/cohortd --print-settings=markdown > docs/CONFIGURATION.md");
    free(committed);
    free(text);
}

Test(settings, cohortd_prints_the_reference)
{
    /* The regeneration command the test above names must print the same thing. */
    static const char *const argv[] = {COHORTD, "--print-settings=markdown", NULL};
    test_run_result_t r = test_run(argv, NULL, 20000);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    char *committed = test_read_file(COHORT_SOURCE_DIR "/docs/CONFIGURATION.md");
    cr_expect_str_eq(r.out, committed);
    free(committed);
    test_run_result_free(&r);

    static const char *const bad[] = {COHORTD, "--print-settings=xml", NULL};
    r = test_run(bad, NULL, 20000);
    cr_expect_eq(r.exit_code, 2);
    cr_expect_not_null(strstr(r.err, "markdown"), "%s", r.err);
    test_run_result_free(&r);
}

Test(settings, every_key_is_one_row)
{
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
        cr_expect_not_null(r->doc, "%s has no documentation", r->name);
        for (const cohort_setting_t *q = r + 1; q->name; q++)
            cr_expect(strcmp(r->name, q->name) != 0 || r->section != q->section,
                      "%s has two rows", r->name);
    }
}

Test(settings, the_live_rows_are_the_fields_of_cohort_settings_t)
{
    size_t n = 0;
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
        if (!r->live)
            continue;
        cr_assert_lt(n, sizeof(cohort_settings_t) / sizeof(int64_t), "more live rows than fields");
        cr_expect_str_eq(cohort_setting_names[n], r->name, "live row %zu", n);
        cr_expect_eq(r->live_field.offset, (ptrdiff_t)(n * sizeof(int64_t)), "%s", r->name);
        cr_expect_eq(r->field.width, sizeof(int64_t), "%s", r->name);
        n++;
    }
    cr_expect_eq(n, sizeof(cohort_settings_t) / sizeof(int64_t), "a field has no live row");
    cr_expect_null(cohort_setting_names[n]);
}

Test(settings, the_defaults_are_what_a_file_without_the_keys_gives)
{
    cohort_config_t *c = load("", "");
    cr_assert_not_null(c, "%s", errors.count ? errors.messages[0] : "");
    cohort_settings_t from_file, defaults;
    cohort_settings_from_config(c, &c->services[0], &from_file);
    cohort_settings_defaults(&defaults);
    cr_expect_eq(memcmp(&from_file, &defaults, sizeof defaults), 0);
    cohort_settings_t none;
    cohort_settings_from_config(NULL, NULL, &none);
    cr_expect_eq(memcmp(&none, &defaults, sizeof defaults), 0, "no file: the defaults");
    cohort_settings_t cluster_only;
    c->tick_ms = 250;
    cohort_settings_from_config(c, NULL, &cluster_only);
    cr_expect_eq(cluster_only.tick_ms, 250, "the file's [cluster] values without its service");
    cr_expect_eq(cluster_only.stall_timeout_ms, defaults.stall_timeout_ms);
    cr_expect_eq(defaults.tick_ms, 1000);
    cr_expect_eq(defaults.takeover_ms, 10000);
    bson_error_t why;
    cr_expect(cohort_settings_validate(&defaults, &why), "%s", why.message);
    cohort_config_destroy(c);
}

/* For every number row: the bounds load, one past them is refused as out of range. */
Test(settings, the_parser_enforces_each_rows_range)
{
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
        if (r->pattern ||
            (r->type != COHORT_SETTING_COUNT && r->type != COHORT_SETTING_DURATION_MS))
            continue;
        bool cluster = r->section == COHORT_SECTION_CLUSTER;
        int64_t probes[] = {r->min, r->max, r->min - 1, r->max + 1};
        for (size_t i = 0; i < 4; i++) {
            char line[128];
            snprintf(line, sizeof line, "%s = %lld\n", r->name, (long long)probes[i]);
            cohort_config_t *c = load(cluster ? line : "", cluster ? "" : line);
            char tag[128];
            snprintf(tag, sizeof tag, "%s = %lld", r->name, (long long)probes[i]);
            cr_expect_eq(reported(tag, "out of range"), i >= 2, "%s: %s", tag,
                         i >= 2 ? "accepted" : "refused");
            cohort_config_destroy(c);
        }
    }
}

Test(settings, unknown_cluster_keys_list_every_cluster_row)
{
    cr_assert_null(load("colour = blue\n", ""));
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++)
        if (r->section == COHORT_SECTION_CLUSTER)
            cr_expect(reported("unknown key 'colour'", r->name), "%s is not listed", r->name);
}

Test(settings, enum_rows_take_their_choices_and_refuse_others)
{
    cohort_config_t *c = load("log_format = json\nlog_level = WARNING\n", "isolation = process\n");
    cr_assert_not_null(c, "%s", errors.count ? errors.messages[0] : "");
    cr_expect(c->log_json);
    cr_expect_eq(c->log_level, COHORT_LOG_WARN);
    cr_expect_eq(c->services[0].isolation, COHORT_ISOLATION_PROCESS);
    cohort_config_destroy(c);
    cr_assert_null(load("log_format = xml\n", "isolation = fiber\n"));
    cr_expect(reported("log_format = 'xml'", "text, json"));
    cr_expect(reported("isolation = 'fiber'", "thread, process"));
}

Test(settings, live_values_are_checked_against_the_rows)
{
    bson_error_t why = {0};
    cr_expect(cohort_settings_validate_value("takeover_ms", 5000, &why));
    cr_expect_not(cohort_settings_validate_value("takeover_ms", 19, &why));
    cr_expect_not_null(strstr(why.message, "takeover_ms = 19 is out of range [20, 86400000]"),
                       "%s", why.message);
    cr_expect_not(cohort_settings_validate_value("workers", 3, &why));
    cr_expect_not_null(strstr(why.message, "'workers' is not a live setting"), "%s",
                       why.message);
    cr_expect_not_null(strstr(why.message, "failed_retention_ms"),
                       "the known names are listed: %s", why.message);

    cohort_settings_t s;
    cohort_settings_defaults(&s);
    s.tick_ms = 20000;
    bson_error_t error;
    cr_expect_not(cohort_settings_validate(&s, &error));
    cr_expect_not_null(strstr(error.message, "takeover_ms (10000) must be greater than tick_ms"),
                       "%s", error.message);
}

Test(settings, the_example_config_shows_every_key)
{
    /* docs/CONFIGURATION.md points operators at deploy/cohort.example.ini for every key. */
    char *example = test_read_file(COHORT_SOURCE_DIR "/deploy/cohort.example.ini");
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
        if (r->pattern)
            continue;
        char line[128];
        snprintf(line, sizeof line, "\n%s ", r->name);
        char commented[128];
        snprintf(commented, sizeof commented, "\n; %s ", r->name);
        cr_expect(strstr(example, line) || strstr(example, commented),
                  "deploy/cohort.example.ini does not show '%s'", r->name);
    }
    free(example);
}

Test(settings, the_committed_example_config_is_what_the_table_renders)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    cohort_settings_print_ini(f);
    cr_assert_eq(fclose(f), 0);
    char *committed = test_read_file(COHORT_SOURCE_DIR "/deploy/cohort.example.ini");
    cr_expect_str_eq(committed, text,
                     "deploy/cohort.example.ini is not what the settings table renders; "
                     "regenerate it: build/cohortd --print-settings=ini > "
                     "deploy/cohort.example.ini");
    free(committed);
    free(text);

    static const char *const argv[] = {COHORTD, "--print-settings=ini", NULL};
    test_run_result_t r = test_run(argv, NULL, 20000);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    committed = test_read_file(COHORT_SOURCE_DIR "/deploy/cohort.example.ini");
    cr_expect_str_eq(r.out, committed);
    free(committed);
    test_run_result_free(&r);
}

/* The number or enum rows of `section` whose value in `loaded` differs from the table's
 * default: the example claims to show the defaults, so a node running it runs with them. */
static void expect_defaults(cohort_setting_section_t section, const void *loaded,
                            void *defaults)
{
    bson_error_t error;
    cr_assert(cohort_settings_apply_defaults(section, defaults, &error), "%s", error.message);
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
        if (r->section != section || r->pattern || r->field.offset < 0)
            continue;
        if (r->type == COHORT_SETTING_STRING || r->type == COHORT_SETTING_PATH) {
            cohort_setting_store_text(r, defaults, NULL, &error); /* frees the default's copy */
            continue;
        }
        cr_expect(memcmp((const char *)loaded + r->field.offset,
                         (const char *)defaults + r->field.offset, r->field.width) == 0,
                  "deploy/cohort.example.ini sets %s to something else than its default", r->name);
    }
}

Test(settings, the_example_config_runs_with_the_table_defaults)
{
    char *example = test_read_file(COHORT_SOURCE_DIR "/deploy/cohort.example.ini");
    /* Its handler path is relative to deploy/ in the source tree: use the build's. */
    const char *handler = "../build/handlers/cohort_noop.so";
    char *at = strstr(example, handler);
    cr_assert_not_null(at, "the example's handler is not %s", handler);
    char *text = NULL;
    cr_assert_geq(asprintf(&text, "%.*s%s%s", (int)(at - example), example, NOOP_SO,
                           at + strlen(handler)),
                  0);
    cohort_config_t *c = cohort_config_load_string(text, "cohort.example.ini", NULL, &errors);
    cr_assert_not_null(c, "the example does not load: %s",
                       errors.count ? errors.messages[0] : "?");
    cr_assert_eq(c->n_services, 1);
    cohort_config_t cluster = {0};
    cohort_service_config_t service = {0};
    expect_defaults(COHORT_SECTION_CLUSTER, c, &cluster);
    expect_defaults(COHORT_SECTION_SERVICE, &c->services[0], &service);
    cohort_config_destroy(c);
    free(text);
    free(example);
}

/* What a SIGHUP must refuse is read from the table's rows that do not reload. */
Test(settings, a_reload_refuses_what_the_table_says_needs_a_restart)
{
    cohort_config_t *a = load("takeover_ms = 5000\n", "workers = 2\nmax_attempts = 5\n");
    cohort_config_t *live = load("takeover_ms = 6000\n", "workers = 4\nmax_attempts = 5\n");
    cohort_config_t *attempts = load("takeover_ms = 5000\n", "workers = 2\nmax_attempts = 6\n");
    cohort_config_t *grace = load("takeover_ms = 5000\nshutdown_grace_ms = 1\n",
                                  "workers = 2\nmax_attempts = 5\n");
    cr_assert(a && live && attempts && grace);
    cr_expect_null(cohort_settings_restart_change(COHORT_SECTION_CLUSTER, a, live));
    cr_expect_null(cohort_settings_restart_change(COHORT_SECTION_SERVICE, &a->services[0],
                                                  &live->services[0]),
                   "workers reload");
    const cohort_setting_t *row =
        cohort_settings_restart_change(COHORT_SECTION_SERVICE, &a->services[0],
                                       &attempts->services[0]);
    cr_expect(row && strcmp(row->name, "max_attempts") == 0, "%s", row ? row->name : "(none)");
    row = cohort_settings_restart_change(COHORT_SECTION_CLUSTER, a, grace);
    cr_expect(row && strcmp(row->name, "shutdown_grace_ms") == 0, "%s",
              row ? row->name : "(none)");
    cohort_config_destroy(a);
    cohort_config_destroy(live);
    cohort_config_destroy(attempts);
    cohort_config_destroy(grace);
}

/* The rules between live settings are one function: the config file's check and the live
 * check (cohort_settings_validate) give the same verdict and the same words. */
Test(settings, the_rules_between_values_are_one_function_for_file_and_live)
{
    static const struct {
        int64_t tick, takeover, stall;
        const char *why; /* NULL: valid */
    } cases[] = {
        {200, 1000, 1800000, NULL},
        {3000, 2000, 1800000, "takeover_ms (2000) must be greater than tick_ms (3000)"},
        {1000, 1000, 1800000, "takeover_ms (1000) must be greater than tick_ms (1000)"},
        {1000, 5000, 2999, "stall_timeout_ms (2999) must be at least 3 * tick_ms (3000)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cohort_settings_t s;
        cohort_settings_defaults(&s);
        s.tick_ms = cases[i].tick;
        s.takeover_ms = cases[i].takeover;
        s.stall_timeout_ms = cases[i].stall;
        bson_error_t live;
        bool ok = cohort_settings_validate(&s, &live);
        cr_expect_eq(ok, cases[i].why == NULL, "case %zu: live check says %d", i, ok);
        char text[512];
        snprintf(text, sizeof text,
                 "[cluster]\ntick_ms = %lld\ntakeover_ms = %lld\n[service:s]\nhandler = "
                 "external\nstall_timeout_ms = %lld\n",
                 (long long)cases[i].tick, (long long)cases[i].takeover,
                 (long long)cases[i].stall);
        cohort_config_errors_t problems = {0};
        cohort_config_t *c = cohort_config_load_string(text, "t.ini", NULL, &problems);
        cr_expect_eq(c != NULL, cases[i].why == NULL, "case %zu: the file check disagrees", i);
        if (cases[i].why) {
            cr_expect(strstr(live.message, cases[i].why), "live: %s", live.message);
            cr_expect(problems.count == 1 && strstr(problems.messages[0], cases[i].why),
                      "file: %s", problems.count ? problems.messages[0] : "(none)");
        }
        cohort_config_destroy(c);
        cohort_config_errors_clear(&problems);
    }
}
