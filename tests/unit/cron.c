/*
 * cron.c - the cron parser and the fire-time search of recurring tasks (src/core/cron.h) and
 * the tz database reader under them (src/core/tz.h): fields, ranges, steps, lists, names,
 * aliases, the seconds field, day-of-month vs day-of-week, month ends and leap years, and
 * DST in Europe/Berlin and America/New_York (a time that does not exist is skipped, one that
 * happens twice fires once), plus doctored zone files.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core/cron.h"
#include "core/timefmt.h"
#include "core/tz.h"

static int64_t utc_ms(int64_t y, int mo, int d, int h, int mi, int s)
{
    return ((cohort_days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000LL + s * 1000LL;
}

static cohort_tz_t *zone(const char *name)
{
    bson_error_t error;
    cohort_tz_t *tz = cohort_tz_load(name, &error);
    cr_assert(tz, "zone %s: %s", name, error.message);
    return tz;
}

static cohort_cron_t parse_ok(const char *text)
{
    cohort_cron_t c;
    bson_error_t error;
    cr_assert(cohort_cron_parse(text, &c, &error), "'%s': %s", text, error.message);
    return c;
}

static void parse_fails(const char *text, const char *needle)
{
    cohort_cron_t c;
    bson_error_t error = {0};
    cr_assert_not(cohort_cron_parse(text, &c, &error), "'%s' was accepted", text);
    cr_assert(strstr(error.message, needle), "'%s': message '%s' lacks '%s'", text,
              error.message, needle);
}

/* The next fire of `expr` in `tz_name` after `after`, which must be `want`. */
static void next_is(const char *expr, const char *tz_name, int64_t after, int64_t want)
{
    cohort_cron_t c = parse_ok(expr);
    cohort_tz_t *tz = zone(tz_name);
    int64_t got = -1;
    bool found = cohort_cron_next(&c, tz, after, &got);
    char a[COHORT_TIME_TEXT_MAX], g[COHORT_TIME_TEXT_MAX], w[COHORT_TIME_TEXT_MAX];
    cohort_time_format(after, a, sizeof a);
    cohort_time_format(got, g, sizeof g);
    cohort_time_format(want, w, sizeof w);
    cr_assert(found, "'%s' in %s after %s: no fire time", expr, tz_name, a);
    cr_assert_eq(got, want, "'%s' in %s after %s: %s, expected %s", expr, tz_name, a, g, w);
    cohort_tz_destroy(tz);
}

/* ---- parsing ------------------------------------------------------------------------------ */

Test(cron, parses_lists_ranges_steps_and_names)
{
    cohort_cron_t c = parse_ok("0,15,30,45 9-17 * JAN-mar,Dec mon-FRI");
    cr_assert_eq(c.minutes, 1ULL << 0 | 1ULL << 15 | 1ULL << 30 | 1ULL << 45);
    cr_assert_eq(c.hours, 0x3fe00u); /* 9..17 */
    cr_assert_eq(c.months, 1u << 1 | 1u << 2 | 1u << 3 | 1u << 12);
    cr_assert_eq(c.wdays, 0x3eu); /* Monday..Friday */
    cr_assert(c.mday_star && !c.wday_star && !c.has_seconds);
    cr_assert_eq(c.seconds, 1ULL, "without a seconds field, second 0");

    c = parse_ok("*/20 5-20/5 10/10 * *");
    cr_assert_eq(c.minutes, 1ULL << 0 | 1ULL << 20 | 1ULL << 40);
    cr_assert_eq(c.hours, 1u << 5 | 1u << 10 | 1u << 15 | 1u << 20);
    cr_assert_eq(c.mdays, 1u << 10 | 1u << 20 | 1u << 30, "N/STEP runs to the field's end");
}

Test(cron, sunday_is_0_and_7)
{
    cr_assert_eq(parse_ok("0 0 * * 7").wdays, 1u);
    cr_assert_eq(parse_ok("0 0 * * 0").wdays, 1u);
    cr_assert_eq(parse_ok("0 0 * * 5-7").wdays, 1u << 5 | 1u << 6 | 1u);
    cr_assert_eq(parse_ok("0 0 * * *").wdays, 0x7fu);
}

Test(cron, seconds_field_and_aliases)
{
    cohort_cron_t c = parse_ok("*/10 * * * * *");
    cr_assert(c.has_seconds);
    cr_assert_eq(c.seconds, 1ULL | 1ULL << 10 | 1ULL << 20 | 1ULL << 30 | 1ULL << 40 |
                                1ULL << 50);
    cohort_cron_t a = parse_ok("@daily"), b = parse_ok("0 0 * * *");
    cr_assert_eq(memcmp(&a, &b, sizeof a), 0, "@daily is 0 0 * * *");
    a = parse_ok("@HOURLY");
    b = parse_ok("0 * * * *");
    cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
    a = parse_ok("@annually");
    b = parse_ok("@yearly");
    cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
    parse_ok("@weekly");
    parse_ok("@monthly");
    parse_ok("@midnight");
}

Test(cron, refuses_bad_expressions_with_the_field)
{
    parse_fails("", "has 0 fields");
    parse_fails("* * * *", "has 4 fields");
    parse_fails("* * * * * * *", "has 7 fields");
    parse_fails("60 * * * *", "field 1 (minute): 60 is out of range 0-59");
    parse_fails("0 24 * * *", "field 2 (hour): 24 is out of range 0-23");
    parse_fails("0 0 0 * *", "field 3 (day-of-month): 0 is out of range 1-31");
    parse_fails("0 0 32 * *", "out of range 1-31");
    parse_fails("0 0 * 13 *", "field 4 (month): 13 is out of range 1-12");
    parse_fails("0 0 * * 8", "field 5 (day-of-week): 8 is out of range 0-7");
    parse_fails("61 0 0 * * *", "field 1 (second): 61 is out of range 0-59");
    parse_fails("0 20-10 * * *", "range 20-10 runs backwards");
    parse_fails("*/0 * * * *", "the step must be a number from 1");
    parse_fails("*/ * * * *", "the step must be a number from 1");
    parse_fails("1,,2 * * * *", "an empty list item");
    parse_fails("1, * * * *", "an empty list item");
    parse_fails("a * * * *", "'a' is not a number");
    parse_fails("0 0 * FOO *", "'FOO' is not a number or a name");
    parse_fails("0 0 * * MONDAY", "is not a number or a name");
    parse_fails("1-* * * * *", "a range needs an end");
    parse_fails("5x * * * *", "unexpected 'x'");
    parse_fails("@reboot", "cron alias '@reboot' is unknown");
    parse_fails("@daily 5", "is unknown");
    parse_fails("0 0 30 2 *", "never fires");
    parse_fails("0 0 31 4,6,9,11 *", "never fires");
}

/* ---- fire times in UTC ------------------------------------------------------------------- */

Test(cron, next_is_strictly_after)
{
    next_is("*/15 * * * *", "UTC", utc_ms(2026, 11, 24, 10, 7, 0),
            utc_ms(2026, 11, 24, 10, 15, 0));
    next_is("*/15 * * * *", "UTC", utc_ms(2026, 11, 24, 10, 15, 0),
            utc_ms(2026, 11, 24, 10, 30, 0));
    next_is("*/15 * * * *", "UTC", utc_ms(2026, 11, 24, 10, 14, 59) + 999,
            utc_ms(2026, 11, 24, 10, 15, 0));
    next_is("* * * * * *", "UTC", utc_ms(2026, 11, 24, 10, 0, 0) + 1,
            utc_ms(2026, 11, 24, 10, 0, 1));
    next_is("* * * * * *", "UTC", utc_ms(2026, 11, 24, 23, 59, 59), utc_ms(2026, 11, 25, 0, 0, 0));
    next_is("0 3 * * *", "UTC", utc_ms(2026, 11, 24, 3, 0, 0), utc_ms(2026, 11, 25, 3, 0, 0));
}

Test(cron, month_and_year_ends)
{
    next_is("0 0 1 1 *", "UTC", utc_ms(2026, 6, 1, 0, 0, 0), utc_ms(2027, 1, 1, 0, 0, 0));
    next_is("0 0 31 * *", "UTC", utc_ms(2026, 4, 1, 0, 0, 0), utc_ms(2026, 5, 31, 0, 0, 0));
    next_is("0 0 31 * *", "UTC", utc_ms(2026, 5, 31, 0, 0, 0), utc_ms(2026, 7, 31, 0, 0, 0));
    next_is("0 12 30 * *", "UTC", utc_ms(2026, 1, 30, 12, 0, 0), utc_ms(2026, 3, 30, 12, 0, 0));
    next_is("59 23 31 12 *", "UTC", utc_ms(2026, 1, 1, 0, 0, 0), utc_ms(2026, 12, 31, 23, 59, 0));
}

Test(cron, leap_years)
{
    next_is("0 0 29 2 *", "UTC", utc_ms(2025, 3, 1, 0, 0, 0), utc_ms(2028, 2, 29, 0, 0, 0));
    next_is("0 0 29 2 *", "UTC", utc_ms(2024, 1, 1, 0, 0, 0), utc_ms(2024, 2, 29, 0, 0, 0));
    /* 2100 is not a leap year (divisible by 100), 2000 was (by 400). */
    next_is("0 0 29 2 *", "UTC", utc_ms(2096, 3, 1, 0, 0, 0), utc_ms(2104, 2, 29, 0, 0, 0));
    next_is("0 0 29 2 *", "UTC", utc_ms(1999, 1, 1, 0, 0, 0), utc_ms(2000, 2, 29, 0, 0, 0));
    next_is("0 0 28-29 2 *", "UTC", utc_ms(2100, 2, 28, 0, 0, 0), utc_ms(2101, 2, 28, 0, 0, 0));
}

Test(cron, day_of_month_or_day_of_week)
{
    /* 2026-11-24 is a Tuesday; 2026-11-27 a Friday; 2027-08-13 a Friday the 13th. */
    next_is("0 0 * * 5", "UTC", utc_ms(2026, 11, 24, 0, 0, 0), utc_ms(2026, 11, 27, 0, 0, 0));
    next_is("0 0 * * FRI", "UTC", utc_ms(2026, 11, 27, 0, 0, 0), utc_ms(2026, 12, 4, 0, 0, 0));
    /* Both restricted: either matches (the 13th, or any Friday). */
    next_is("0 0 13 * 5", "UTC", utc_ms(2026, 11, 24, 0, 0, 0), utc_ms(2026, 11, 27, 0, 0, 0));
    next_is("0 0 13 * 5", "UTC", utc_ms(2026, 12, 11, 0, 0, 0), utc_ms(2026, 12, 13, 0, 0, 0));
    /* Only day-of-month restricted: the 13th alone. */
    next_is("0 0 13 * *", "UTC", utc_ms(2026, 11, 24, 0, 0, 0), utc_ms(2026, 12, 13, 0, 0, 0));
    /* A field starting with '*' counts as unrestricted (Vixie): Mondays only. */
    next_is("0 0 */2 * 1", "UTC", utc_ms(2026, 11, 24, 0, 0, 0), utc_ms(2026, 11, 30, 0, 0, 0));
    /* Friday the 13th needs no special syntax to be reached: August 2027. */
    next_is("0 0 13 8 5", "UTC", utc_ms(2027, 8, 1, 0, 0, 0), utc_ms(2027, 8, 6, 0, 0, 0));
    /* Sunday as 7. */
    next_is("0 0 * * 7", "UTC", utc_ms(2026, 11, 24, 0, 0, 0), utc_ms(2026, 11, 29, 0, 0, 0));
}

Test(cron, seconds_and_steps)
{
    next_is("*/10 * * * * *", "UTC", utc_ms(2026, 1, 1, 0, 0, 5), utc_ms(2026, 1, 1, 0, 0, 10));
    next_is("*/10 * * * * *", "UTC", utc_ms(2026, 1, 1, 0, 0, 55), utc_ms(2026, 1, 1, 0, 1, 0));
    next_is("30 10/20 * * * *", "UTC", utc_ms(2026, 1, 1, 0, 31, 0),
            utc_ms(2026, 1, 1, 0, 50, 30));
    next_is("0 0 9-17/4 * * *", "UTC", utc_ms(2026, 1, 1, 13, 0, 0),
            utc_ms(2026, 1, 1, 17, 0, 0));
}

/* ---- time zones and DST ------------------------------------------------------------------ */

Test(cron, zone_offsets)
{
    cohort_tz_t *berlin = zone("Europe/Berlin"), *ny = zone("America/New_York");
    cr_assert_eq(cohort_tz_offset(berlin, utc_ms(2026, 1, 15, 0, 0, 0) / 1000), 3600);
    cr_assert_eq(cohort_tz_offset(berlin, utc_ms(2026, 7, 15, 0, 0, 0) / 1000), 7200);
    cr_assert_eq(cohort_tz_offset(berlin, utc_ms(2026, 3, 29, 0, 59, 59) / 1000), 3600);
    cr_assert_eq(cohort_tz_offset(berlin, utc_ms(2026, 3, 29, 1, 0, 0) / 1000), 7200);
    cr_assert_eq(cohort_tz_offset(ny, utc_ms(2026, 3, 8, 6, 59, 59) / 1000), -5 * 3600);
    cr_assert_eq(cohort_tz_offset(ny, utc_ms(2026, 3, 8, 7, 0, 0) / 1000), -4 * 3600);
    /* Far future: past the file's transitions, the footer's rule decides. */
    cr_assert_eq(cohort_tz_offset(berlin, utc_ms(2040, 3, 25, 0, 59, 0) / 1000), 3600);
    cr_assert_eq(cohort_tz_offset(berlin, utc_ms(2040, 3, 25, 1, 0, 0) / 1000), 7200);
    cr_assert_eq(cohort_tz_offset(ny, utc_ms(2060, 7, 1, 0, 0, 0) / 1000), -4 * 3600);
    cr_assert_eq(cohort_tz_offset(ny, utc_ms(2060, 12, 1, 0, 0, 0) / 1000), -5 * 3600);
    cohort_tz_destroy(berlin);
    cohort_tz_destroy(ny);
}

Test(cron, berlin_spring_forward_skips_the_missing_time)
{
    /* 2026-03-29: 02:00 CET becomes 03:00 CEST, so 02:30 does not exist that day. */
    next_is("30 2 * * *", "Europe/Berlin", utc_ms(2026, 3, 28, 3, 0, 0),
            utc_ms(2026, 3, 30, 0, 30, 0));
    /* 03:00 exists (the first minute of summer time) and 01:59 too. */
    next_is("0 3 * * *", "Europe/Berlin", utc_ms(2026, 3, 28, 3, 0, 0),
            utc_ms(2026, 3, 29, 1, 0, 0));
    next_is("59 1 * * *", "Europe/Berlin", utc_ms(2026, 3, 28, 3, 0, 0),
            utc_ms(2026, 3, 29, 0, 59, 0));
    /* Every minute: 01:59 CET is followed by 03:00 CEST, one real minute later. */
    next_is("* * * * *", "Europe/Berlin", utc_ms(2026, 3, 29, 0, 59, 0),
            utc_ms(2026, 3, 29, 1, 0, 0));
}

Test(cron, berlin_fall_back_fires_once)
{
    /* 2026-10-25: 03:00 CEST becomes 02:00 CET, so 02:30 happens at 00:30 and 01:30 UTC. */
    next_is("30 2 * * *", "Europe/Berlin", utc_ms(2026, 10, 24, 12, 0, 0),
            utc_ms(2026, 10, 25, 0, 30, 0));
    next_is("30 2 * * *", "Europe/Berlin", utc_ms(2026, 10, 25, 0, 30, 0),
            utc_ms(2026, 10, 26, 1, 30, 0));
    /* From inside the second 02:00-03:00, the repeated times are not fired again. */
    next_is("30 2 * * *", "Europe/Berlin", utc_ms(2026, 10, 25, 1, 10, 0),
            utc_ms(2026, 10, 26, 1, 30, 0));
    /* Hourly: 02:00 CEST (00:00 UTC), then 03:00 CET (02:00 UTC); 02:00 CET is a repeat. */
    next_is("0 * * * *", "Europe/Berlin", utc_ms(2026, 10, 24, 23, 30, 0),
            utc_ms(2026, 10, 25, 0, 0, 0));
    next_is("0 * * * *", "Europe/Berlin", utc_ms(2026, 10, 25, 0, 0, 0),
            utc_ms(2026, 10, 25, 2, 0, 0));
}

Test(cron, new_york_spring_and_fall)
{
    /* 2026-03-08: 02:00 EST becomes 03:00 EDT. */
    next_is("30 2 * * *", "America/New_York", utc_ms(2026, 3, 7, 12, 0, 0),
            utc_ms(2026, 3, 9, 6, 30, 0));
    next_is("0 9 * * *", "America/New_York", utc_ms(2026, 3, 7, 15, 0, 0),
            utc_ms(2026, 3, 8, 13, 0, 0));
    /* 2026-11-01: 02:00 EDT becomes 01:00 EST; 01:30 happens at 05:30 and 06:30 UTC. */
    next_is("30 1 * * *", "America/New_York", utc_ms(2026, 10, 31, 12, 0, 0),
            utc_ms(2026, 11, 1, 5, 30, 0));
    next_is("30 1 * * *", "America/New_York", utc_ms(2026, 11, 1, 5, 30, 0),
            utc_ms(2026, 11, 2, 6, 30, 0));
    next_is("0 9 * * *", "America/New_York", utc_ms(2026, 11, 1, 5, 30, 0),
            utc_ms(2026, 11, 1, 14, 0, 0));
}

Test(cron, from_wall_counts_gaps_and_overlaps)
{
    cohort_tz_t *berlin = zone("Europe/Berlin");
    int64_t first = 0;
    cr_assert_eq(cohort_tz_from_wall(berlin, utc_ms(2026, 3, 29, 2, 30, 0) / 1000, &first), 0);
    cr_assert_eq(cohort_tz_from_wall(berlin, utc_ms(2026, 10, 25, 2, 30, 0) / 1000, &first), 2);
    cr_assert_eq(first, utc_ms(2026, 10, 25, 0, 30, 0) / 1000);
    cr_assert_eq(cohort_tz_from_wall(berlin, utc_ms(2026, 6, 1, 12, 0, 0) / 1000, &first), 1);
    cr_assert_eq(first, utc_ms(2026, 6, 1, 10, 0, 0) / 1000);
    cohort_tz_destroy(berlin);
}

Test(cron, prev_finds_the_latest_fire)
{
    cohort_cron_t c = parse_ok("0 3 * * *");
    cohort_tz_t *utc = zone("UTC");
    int64_t prev = 0, at = utc_ms(2026, 11, 24, 10, 0, 0);
    cr_assert(cohort_cron_prev(&c, utc, 0, at, &prev));
    cr_assert_eq(prev, utc_ms(2026, 11, 24, 3, 0, 0));
    cr_assert(cohort_cron_prev(&c, utc, 0, utc_ms(2026, 11, 24, 3, 0, 0), &prev), "at counts");
    cr_assert_eq(prev, utc_ms(2026, 11, 24, 3, 0, 0));
    cr_assert_not(cohort_cron_prev(&c, utc, utc_ms(2026, 11, 24, 3, 0, 0), at, &prev),
                  "the floor is exclusive");
    c = parse_ok("0 0 1 1 *");
    cr_assert(cohort_cron_prev(&c, utc, 0, at, &prev));
    cr_assert_eq(prev, utc_ms(2026, 1, 1, 0, 0, 0));
    cohort_tz_destroy(utc);
}

/* ---- zone names and files ---------------------------------------------------------------- */

Test(cron, zone_names)
{
    bson_error_t error;
    cr_assert_null(cohort_tz_load("../etc/passwd", &error));
    cr_assert(strstr(error.message, "not a zone name"), "%s", error.message);
    cr_assert_null(cohort_tz_load("/etc/localtime", &error));
    cr_assert_null(cohort_tz_load("Europe/", &error));
    cr_assert_null(cohort_tz_load("Mars/Olympus_Mons", &error));
    cr_assert(strstr(error.message, "time zone 'Mars/Olympus_Mons': cannot read"), "%s",
              error.message);
    cohort_tz_t *utc = cohort_tz_load("UTC", &error);
    cr_assert(utc);
    cr_assert_str_eq(cohort_tz_name(utc), "UTC");
    cr_assert_eq(cohort_tz_offset(utc, 1795255200), 0);
    cohort_tz_destroy(utc);
}

/* A version-2 TZif with no transitions: everything comes from the footer's rule. */
static size_t footer_only(uint8_t *buf, const char *rule)
{
    size_t n = 0;
    for (int block = 0; block < 2; block++) {
        memcpy(buf + n, "TZif2", 5);
        memset(buf + n + 5, 0, 39);
        buf[n + 39] = 1; /* typecnt = 1 */
        buf[n + 43] = 4; /* charcnt = 4 */
        n += 44;
        memcpy(buf + n, "\0\0\x0e\x10\0\0", 6); /* utoff 3600, isdst 0, index 0 */
        n += 6;
        memcpy(buf + n, "CET", 4);
        n += 4;
    }
    n += (size_t)sprintf((char *)buf + n, "\n%s\n", rule);
    return n;
}

Test(cron, footer_rule_alone)
{
    uint8_t buf[256];
    size_t len = footer_only(buf, "CET-1CEST,M3.5.0,M10.5.0/3");
    bson_error_t error;
    cohort_tz_t *tz = cohort_tz_parse("test/footer", buf, len, &error);
    cr_assert(tz, "%s", error.message);
    cr_assert_eq(cohort_tz_offset(tz, utc_ms(2026, 3, 29, 0, 59, 59) / 1000), 3600);
    cr_assert_eq(cohort_tz_offset(tz, utc_ms(2026, 3, 29, 1, 0, 0) / 1000), 7200);
    cr_assert_eq(cohort_tz_offset(tz, utc_ms(2026, 10, 25, 0, 59, 59) / 1000), 7200);
    cr_assert_eq(cohort_tz_offset(tz, utc_ms(2026, 10, 25, 1, 0, 0) / 1000), 3600);
    cohort_tz_destroy(tz);

    /* Southern hemisphere: DST across the new year (Australia/Sydney's rule). */
    len = footer_only(buf, "AEST-10AEDT,M10.1.0,M4.1.0/3");
    tz = cohort_tz_parse("test/south", buf, len, &error);
    cr_assert(tz, "%s", error.message);
    cr_assert_eq(cohort_tz_offset(tz, utc_ms(2026, 1, 15, 0, 0, 0) / 1000), 11 * 3600);
    cr_assert_eq(cohort_tz_offset(tz, utc_ms(2026, 6, 15, 0, 0, 0) / 1000), 10 * 3600);
    cohort_tz_destroy(tz);
}

Test(cron, refuses_damaged_zone_files)
{
    uint8_t buf[256];
    size_t len = footer_only(buf, "CET-1CEST,M3.5.0,M10.5.0/3");
    bson_error_t error;
    for (size_t cut = 0; cut < len - 1; cut += 7) {
        cohort_tz_t *tz = cohort_tz_parse("test/cut", buf, cut, &error);
        cr_assert_null(tz, "a file cut at %zu bytes was accepted", cut);
    }
    uint8_t bad[256];
    memcpy(bad, buf, len);
    bad[0] = 'X';
    cr_assert_null(cohort_tz_parse("test/magic", bad, len, &error));
    cr_assert(strstr(error.message, "not a TZif file"), "%s", error.message);
    len = footer_only(buf, "CET-1CEST,M13.5.0,M10.5.0/3");
    cr_assert_null(cohort_tz_parse("test/rule", buf, len, &error));
    cr_assert(strstr(error.message, "TZ rule"), "%s", error.message);
}
