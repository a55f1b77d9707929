/*
 * timefmt.c - ISO-8601 UTC times and typed durations (see timefmt.h).
 *
 * Times are read with glibc's strptime() and timegm() (the build is _GNU_SOURCE): numeric
 * fields only, so neither the locale nor the time zone matters. strptime() is lenient where
 * Cohort is strict (it takes "2026-1-5" and " 2026", and any day up to 31), so the text must
 * first have the exact shape, and a date timegm() had to normalise (April 31st, a leap second)
 * is refused. The civil-date arithmetic below serves core/tz.c and core/cron.c.
 */
#include "core/timefmt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cohort_time_format(int64_t ms, char *buf, size_t len)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    if (ms < 0 || !gmtime_r(&secs, &tm)) {
        snprintf(buf, len, "-");
        return;
    }
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03dZ", date, (int)(ms % 1000));
}

bool cohort_duration_parse(const char *text, int64_t *ms)
{
    if (text[0] < '0' || text[0] > '9')
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno)
        return false;
    static const struct {
        const char *suffix;
        int64_t ms;
    } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (v > INT64_MAX / 4 / units[i].ms)
                return false;
            *ms = v * units[i].ms;
            return true;
        }
    }
    return false;
}

int64_t cohort_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void cohort_civil_from_days(int64_t days, int64_t *year, int *month, int *day)
{
    days += 719468;
    int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *day = (int)(doy - (153 * mp + 2) / 5 + 1);
    *month = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = yoe + era * 400 + (*month <= 2);
}

int cohort_days_in_month(int64_t y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* ".fff" (any number of digits, the first three kept) as milliseconds. */
static bool read_fraction(const char **p, int *ms)
{
    *ms = 0;
    if (**p != '.')
        return true;
    (*p)++;
    int n = 0;
    for (; **p >= '0' && **p <= '9'; (*p)++, n++)
        if (n < 3)
            *ms = *ms * 10 + (**p - '0');
    for (int i = n; i < 3; i++)
        *ms *= 10;
    return n > 0;
}

/* True if `text` starts with `pattern`'s shape: each 'd' a digit, anything else itself. */
static bool shaped(const char *text, const char *pattern)
{
    for (; *pattern; pattern++, text++)
        if (*pattern == 'd' ? *text < '0' || *text > '9' : *text != *pattern)
            return false;
    return true;
}

bool cohort_time_parse(const char *text, int64_t *ms)
{
    if (text[0] >= '0' && text[0] <= '9' && strspn(text, "0123456789") == strlen(text)) {
        errno = 0;
        *ms = strtoll(text, NULL, 10);
        return errno == 0;
    }
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    struct tm tm = {0};
    if (!shaped(text, shape) || strptime(text, "%Y-%m-%dT%H:%M:%S", &tm) != text + strlen(shape))
        return false;
    const char *p = text + strlen(shape);
    int frac = 0;
    struct tm asked = tm;
    time_t secs = timegm(&tm);
    if (!read_fraction(&p, &frac) || strcmp(p, "Z") != 0 || asked.tm_year < 70 ||
        tm.tm_mday != asked.tm_mday || tm.tm_mon != asked.tm_mon ||
        tm.tm_hour != asked.tm_hour || tm.tm_min != asked.tm_min || tm.tm_sec != asked.tm_sec)
        return false;
    *ms = (int64_t)secs * 1000 + frac;
    return true;
}
