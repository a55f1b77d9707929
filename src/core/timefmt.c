/*
 * timefmt.c - ISO-8601 UTC times and typed durations (see timefmt.h).
 *
 * Parsing is by hand on purpose: strptime() depends on the locale and the time zone, and
 * timegm() is not in C11; the civil-date arithmetic below is exact for the proleptic
 * Gregorian calendar.
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

/* Reads exactly `n` digits. */
static bool read_digits(const char **p, int n, int *out)
{
    *out = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (**p < '0' || **p > '9')
            return false;
        *out = *out * 10 + (**p - '0');
    }
    return true;
}

static bool read_char(const char **p, char c)
{
    if (**p != c)
        return false;
    (*p)++;
    return true;
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

bool cohort_time_parse(const char *text, int64_t *ms)
{
    if (text[0] >= '0' && text[0] <= '9' && strspn(text, "0123456789") == strlen(text)) {
        errno = 0;
        *ms = strtoll(text, NULL, 10);
        return errno == 0;
    }
    const char *p = text;
    int y, mo, d, h, mi, s, frac;
    if (!read_digits(&p, 4, &y) || !read_char(&p, '-') || !read_digits(&p, 2, &mo) ||
        !read_char(&p, '-') || !read_digits(&p, 2, &d) || !read_char(&p, 'T') ||
        !read_digits(&p, 2, &h) || !read_char(&p, ':') || !read_digits(&p, 2, &mi) ||
        !read_char(&p, ':') || !read_digits(&p, 2, &s) || !read_fraction(&p, &frac))
        return false;
    if (strcmp(p, "Z") != 0 || y < 1970 || mo < 1 || mo > 12 || d < 1 ||
        d > cohort_days_in_month(y, mo) || h > 23 || mi > 59 || s > 59)
        return false;
    *ms = ((cohort_days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000LL + s * 1000LL + frac;
    return true;
}
