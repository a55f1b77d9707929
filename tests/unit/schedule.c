/*
 * schedule.c - `schedule.ID = CRON ; key=value ...` lines (src/core/schedule.h) as the config
 * parser reads them: the whole line despite inih's inline comments (`;` separates the
 * options), JSON data with `;` inside, defaults, the task options handed on exactly as
 * cohort_task_options_parse() accepts them, and every bad line refused with its line
 * number and the part at fault (docs/RELIABILITY.md's bad-input table cites these).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/schedule.h"
#include "core/taskopts.h"
#include "core/timefmt.h"
#include "support.h"

#define NOOP_SO COHORT_BUILD_DIR "/handlers/cohort_noop.so"

static cohort_config_errors_t errors;

static void clear(void)
{
    cohort_config_errors_clear(&errors);
}

TestSuite(schedule, .fini = clear);

/* A config whose service section has `lines` (line 4 on). */
static cohort_config_t *load(const char *lines)
{
    char *text = NULL;
    cr_assert_geq(asprintf(&text,
                           "[cluster]\n"
                           "[service:svc]\n"
                           "handler = " NOOP_SO "\n"
                           "%s",
                           lines),
                  0);
    cohort_config_t *c = cohort_config_load_string(text, "test.ini", NULL, &errors);
    free(text);
    return c;
}

static const cohort_schedule_config_t *only(cohort_config_t *c)
{
    cr_assert_not_null(c, "refused: %s", errors.count ? errors.messages[0] : "?");
    cr_assert_eq(c->services[0].n_schedules, 1);
    return &c->services[0].schedules[0];
}

Test(schedule, the_issues_example_loads_whole)
{
    cohort_config_t *c = load("schedule.nightly = 0 3 * * * ; kind=report ; "
                              "data={\"scope\":\"all\"} ; tz=Europe/Berlin ; catch_up=latest\n");
    const cohort_schedule_config_t *s = only(c);
    cr_assert_str_eq(s->id, "nightly");
    cr_assert_str_eq(s->cron_text, "0 3 * * *");
    cr_assert_eq(s->line, 4);
    cr_assert_str_eq(cohort_tz_name(s->tz), "Europe/Berlin");
    cr_assert_eq(s->catch_up, COHORT_CATCH_UP_LATEST);
    cr_assert_eq(s->catch_up_max, 10);
    bson_iter_t it;
    cr_assert(s->data && bson_iter_init_find(&it, s->data, "scope"));
    cr_assert_str_eq(bson_iter_utf8(&it, NULL), "all");
    cr_assert(bson_iter_init_find(&it, s->options, "kind"));
    cr_assert_str_eq(bson_iter_utf8(&it, NULL), "report");
    char series[320];
    cohort_schedule_series(s, series, sizeof series);
    cr_assert_str_eq(series, "0 3 * * * @ Europe/Berlin");
    cohort_config_destroy(c);
}

Test(schedule, defaults_and_data_with_semicolons)
{
    cohort_config_t *c = load("schedule.x = @hourly ; data = {\"a\": \"x;y\", \"b\": [1, {\"c\": "
                              "\";\"}]} ;\n");
    const cohort_schedule_config_t *s = only(c);
    cr_assert_str_eq(cohort_tz_name(s->tz), "UTC");
    cr_assert_eq(s->catch_up, COHORT_CATCH_UP_LATEST, "latest by default");
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, s->data, "a"));
    cr_assert_str_eq(bson_iter_utf8(&it, NULL), "x;y");
    cr_assert_eq(bson_count_keys(s->options), 0);
    cohort_config_destroy(c);
}

Test(schedule, task_options_pass_the_shared_parser)
{
    cohort_config_t *c = load("schedule.x = */5 * * * * ; kind=rep-1 ; priority=-7 ; "
                              "weight=40 ; timeout=30s ; deadline=2h ; group=g1 ; tracked=true ; "
                              "catch_up=all ; catch_up_max=1000\n");
    const cohort_schedule_config_t *s = only(c);
    cohort_task_options_t o;
    bson_error_t error;
    cr_assert(cohort_task_options_parse(s->options, false, &o, &error), "%s", error.message);
    cr_assert_str_eq(o.kind, "rep-1");
    cr_assert(o.has_priority && o.priority == -7);
    cr_assert(o.has_weight && o.weight == 40);
    cr_assert(o.has_timeout && o.timeout_ms == 30000);
    cr_assert(o.has_not_after_ms && o.not_after_rel_ms == 7200000);
    cr_assert_str_eq(o.group, "g1");
    cr_assert(o.tracked);
    cr_assert_eq(s->catch_up, COHORT_CATCH_UP_ALL);
    cr_assert_eq(s->catch_up_max, 1000);
    cohort_config_destroy(c);
}

Test(schedule, a_line_longer_than_inihs_buffer_loads_whole)
{
    char line[1200];
    int n = snprintf(line, sizeof line, "schedule.long = 0 0 * * * ; data={\"pad\":\"");
    memset(line + n, 'p', 800);
    snprintf(line + n + 800, sizeof line - (size_t)n - 800, "\"} ; catch_up=none\n");
    cohort_config_t *c = load(line);
    const cohort_schedule_config_t *s = only(c);
    cr_assert_eq(s->catch_up, COHORT_CATCH_UP_NONE, "the options after the data were cut");
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, s->data, "pad"));
    cohort_config_destroy(c);
}

Test(schedule, several_schedules_keep_their_order_and_lines)
{
    cohort_config_t *c = load("schedule.b = @daily\nworkers = 2\nschedule.a = @weekly\n");
    cr_assert_not_null(c);
    cr_assert_eq(c->services[0].n_schedules, 2);
    cr_assert_str_eq(c->services[0].schedules[0].id, "b");
    cr_assert_eq(c->services[0].schedules[0].line, 4);
    cr_assert_str_eq(c->services[0].schedules[1].id, "a");
    cr_assert_eq(c->services[0].schedules[1].line, 6);
    cohort_config_destroy(c);
}

/* Each bad line: refused, at line 4, with the words that name the fault. */
static const struct bad_line {
    const char *line, *needle;
} bad_lines[] = {
    {"schedule.a = 0 24 * * *", "cron field 2 (hour): 24 is out of range 0-23"},
    {"schedule.a = 0 3 * * ; kind=x", "has 4 fields"},
    {"schedule.a = 0 0 30 2 *", "never fires"},
    {"schedule.a = @reboot", "cron alias '@reboot' is unknown"},
    {"schedule.a =", "no cron expression"},
    {"schedule.a = ; kind=x", "no cron expression"},
    {"schedule.a$ = @daily", "schedule id 'a$' must be 1-64"},
    {"schedule. = @daily", "schedule id '' must be 1-64"},
    {"schedule.a = @daily ; tz=Mars/Base", "time zone 'Mars/Base': cannot read"},
    {"schedule.a = @daily ; tz=../../etc/passwd", "not a zone name"},
    {"schedule.a = @daily ; catch_up=some", "'catch_up' = 'some' must be none, latest or all"},
    {"schedule.a = @daily ; catch_up_max=0", "'catch_up_max' = '0' must be a whole number"},
    {"schedule.a = @daily ; catch_up_max=1001", "in [1, 1000]"},
    {"schedule.a = @daily ; unique_key=k", "'unique_key' is not for schedules"},
    {"schedule.a = @daily ; coalesce_key=k", "'coalesce_key' is not for schedules"},
    {"schedule.a = @daily ; data=[1]", "'data' must be a JSON object"},
    {"schedule.a = @daily ; data={\"a\":", "'data' must be a JSON object"},
    /* what libbson would store wrongly or the database refuse (issue 23) */
    {"schedule.a = @daily ; data={\"n\": 18446744073709551621}",
     "field 'n': 18446744073709551621 is outside the 64-bit integer range"},
    {"schedule.a = @daily ; data={\"k\": 1, \"k\": 2}", "field 'k' given twice"},
    {"schedule.a = @daily ; data={\"k\": 1} {\"j\": 2}", "something follows it"},
    {"schedule.a = @daily ; priority=18446744073709551621", "must be an integer in"},
    {"schedule.a = @daily ; kind=a b", "'kind' = 'a b' must be 1-64"},
    {"schedule.a = @daily ; priority=high", "'priority' = 'high' must be an integer"},
    {"schedule.a = @daily ; priority=1000001", "must be an integer in [-1000000, 1000000]"},
    {"schedule.a = @daily ; weight=0", "option 'weight' = '0' must be an integer in [1, 1000]"},
    {"schedule.a = @daily ; weight=heavy", "'weight' = 'heavy' must be an integer"},
    {"schedule.a = @daily ; timeout=8d", "at most 7 days"},
    {"schedule.a = @daily ; deadline=soon", "must be a duration"},
    {"schedule.a = @daily ; tracked=yes", "'tracked' = 'yes' must be true or false"},
    {"schedule.a = @daily ; frob=1", "unknown option 'frob' (known: kind"},
    {"schedule.a = @daily ; kind", "option 'kind' is not key=value"},
};

Test(schedule, bad_lines_are_refused_with_their_line)
{
    for (size_t i = 0; i < sizeof bad_lines / sizeof bad_lines[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s\n", bad_lines[i].line);
        cohort_config_t *c = load(text);
        cr_assert_null(c, "'%s' was accepted", bad_lines[i].line);
        cr_assert_eq(errors.count, 1, "'%s': %zu problems", bad_lines[i].line, errors.count);
        cr_assert(strstr(errors.messages[0], "test.ini line 4: [service:svc] schedule."),
                  "'%s': %s", bad_lines[i].line, errors.messages[0]);
        cr_assert(strstr(errors.messages[0], bad_lines[i].needle), "'%s': '%s' lacks '%s'",
                  bad_lines[i].line, errors.messages[0], bad_lines[i].needle);
        cohort_config_errors_clear(&errors);
    }
}

Test(schedule, a_duplicate_or_misplaced_line_is_refused)
{
    cr_assert_null(load("schedule.a = @daily\nschedule.a = @hourly\n"));
    cr_assert(strstr(errors.messages[0], "duplicate key 'schedule.a'"), "%s",
              errors.messages[0]);
    cohort_config_errors_clear(&errors);
    cohort_config_t *c = cohort_config_load_string("[cluster]\nschedule.a = @daily\n"
                                                   "[service:svc]\nhandler = " NOOP_SO "\n",
                                                   "test.ini", NULL, &errors);
    cr_assert_null(c, "a schedule in [cluster] was accepted");
    cr_assert(strstr(errors.messages[0], "line 2"), "%s", errors.messages[0]);
}

Test(schedule, slot_keys_name_the_schedule_and_the_slot)
{
    char key[COHORT_SCHEDULE_KEY_MAX];
    cohort_schedule_slot_key("nightly", 1795255200000LL, key, sizeof key);
    cr_assert_str_eq(key, "schedule:nightly:2026-11-21T10:00:00.000Z");
    char longest[COHORT_SCHEDULE_ID_MAX + 1];
    memset(longest, 'x', COHORT_SCHEDULE_ID_MAX);
    longest[COHORT_SCHEDULE_ID_MAX] = '\0';
    cohort_schedule_slot_key(longest, 4102444799000LL, key, sizeof key);
    cr_assert(strstr(key, ":2099-12-31T23:59:59.000Z"), "cut: %s", key);
}
