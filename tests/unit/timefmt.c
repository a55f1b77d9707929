/*
 * timefmt.c - Cohort's one time formatter and its parsers (src/core/timefmt.h): ISO-8601 UTC
 * with milliseconds out, the same (or ms since the epoch) and typed durations in, exact
 * across leap years and refusing what is not a time.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "core/timefmt.h"

Test(timefmt, formats_utc_with_milliseconds)
{
    char buf[COHORT_TIME_TEXT_MAX];
    cohort_time_format(0, buf, sizeof buf);
    cr_assert_str_eq(buf, "1970-01-01T00:00:00.000Z");
    cohort_time_format(1795255200123LL, buf, sizeof buf);
    cr_assert_str_eq(buf, "2026-11-21T10:00:00.123Z");
    cohort_time_format(951782400000LL, buf, sizeof buf); /* a leap day */
    cr_assert_str_eq(buf, "2000-02-29T00:00:00.000Z");
    cohort_time_format(-1, buf, sizeof buf);
    cr_assert_str_eq(buf, "-");
}

Test(timefmt, parse_reads_what_format_writes)
{
    const int64_t times[] = {0, 1, 999, 951782400000LL, 1795255200123LL, 4102444799999LL};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        char buf[COHORT_TIME_TEXT_MAX];
        cohort_time_format(times[i], buf, sizeof buf);
        int64_t back = -1;
        cr_assert(cohort_time_parse(buf, &back), "'%s' did not parse", buf);
        cr_assert_eq(back, times[i], "'%s' read as %lld, not %lld", buf, (long long)back,
                     (long long)times[i]);
    }
}

Test(timefmt, parse_takes_ms_and_short_forms)
{
    int64_t ms = -1;
    cr_assert(cohort_time_parse("1795255200000", &ms));
    cr_assert_eq(ms, 1795255200000LL);
    cr_assert(cohort_time_parse("2026-11-21T10:00:00Z", &ms));
    cr_assert_eq(ms, 1795255200000LL);
    cr_assert(cohort_time_parse("2026-11-21T10:00:00.5Z", &ms));
    cr_assert_eq(ms, 1795255200500LL);
}

Test(timefmt, parse_refuses_what_is_not_a_utc_time)
{
    const char *const bad[] = {"", "yesterday", "2026-11-21", "2026-11-21T10:00:00",
                               "2026-11-21T10:00:00+01:00", "2026-02-29T00:00:00Z",
                               "2026-13-01T00:00:00Z", "2026-11-21T24:00:00Z",
                               "1969-12-31T23:59:59Z", "2026-11-21T10:00:00.Z", "-5", "12x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 42;
        cr_assert_not(cohort_time_parse(bad[i], &ms), "'%s' was taken for a time", bad[i]);
    }
}

/* Each edge the parser has always drawn, pinned before it moved onto strptime()/timegm():
 * fractions (any length, the first three digits kept), only Z (no offset), and every field
 * in its range, the day in its month. */
Test(timefmt, parse_keeps_its_edges)
{
    static const struct {
        const char *text;
        int64_t ms;
    } good[] = {
        {"2026-11-21T10:00:00.1Z", 1795255200100LL},
        {"2026-11-21T10:00:00.12Z", 1795255200120LL},
        {"2026-11-21T10:00:00.123456Z", 1795255200123LL},
        {"2026-11-21T10:00:00.999999999Z", 1795255200999LL},
        {"2024-02-29T00:00:00Z", 1709164800000LL},
        {"2000-02-29T23:59:59Z", 951868799000LL},
        {"1970-01-01T00:00:00Z", 0},
        {"9999-12-31T23:59:59.999Z", 253402300799999LL},
        {"0", 0},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t ms = -1;
        cr_expect(cohort_time_parse(good[i].text, &ms), "'%s' was refused", good[i].text);
        cr_expect_eq(ms, good[i].ms, "'%s' read as %lld, not %lld", good[i].text,
                     (long long)ms, (long long)good[i].ms);
    }
    const char *const bad[] = {
        "2026-11-21T10:00:00-05:00", "2026-11-21T10:00:00+0100", "2026-11-21T10:00:00.5+01:00",
        "2026-11-21T10:00:00z", "2026-11-21t10:00:00Z", "2026-11-21 10:00:00Z",
        " 2026-11-21T10:00:00Z", "2026-11-21T10:00:00Z ", "2026-11-21T10:00:00ZZ",
        "+2026-11-21T10:00:00Z", "02026-11-21T10:00:00Z", "2026-1-21T10:00:00Z",
        "2026-11-1T10:00:00Z", "2026-11-21T1:00:00Z", "2026-11-21T10:0:00Z",
        "2026-11-21T10:00:0Z", "2026-11-21T10:00Z", "2026-00-10T00:00:00Z",
        "2026-11-00T00:00:00Z", "2026-04-31T00:00:00Z", "2100-02-29T00:00:00Z",
        "2026-11-21T10:60:00Z", "2026-11-21T10:00:60Z", "2026-11-21T10:00:61Z",
        "2026-11-21T99:00:00Z", "2026-11-21T10:00:00.5", "2026-11-21T10:00:00..5Z",
        "2026-11-21T10:00:00.5.5Z", "2026-11-21T10:00:00,5Z", "99999999999999999999",
        "1e3", "0x10", "2026-11-21T10:00:00.-5Z", "2026-11-21T10:00:00.+5Z",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 42;
        cr_expect_not(cohort_time_parse(bad[i], &ms), "'%s' was taken for a time", bad[i]);
    }
}

Test(timefmt, durations_in_every_unit)
{
    static const struct {
        const char *text;
        int64_t ms;
    } cases[] = {{"0", 0},          {"250", 250},       {"250ms", 250},       {"30s", 30000},
                 {"5m", 300000},    {"2h", 7200000},    {"1d", 86400000}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t ms = -1;
        cr_assert(cohort_duration_parse(cases[i].text, &ms), "'%s' did not parse", cases[i].text);
        cr_assert_eq(ms, cases[i].ms, "'%s' read as %lld", cases[i].text, (long long)ms);
    }
    const char *const bad[] = {"", "-5s", "5 s", "5w", "s", "1.5h", "99999999999999999999",
                               "9999999999999999d"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 42;
        cr_assert_not(cohort_duration_parse(bad[i], &ms), "'%s' was taken for a duration",
                      bad[i]);
    }
}
