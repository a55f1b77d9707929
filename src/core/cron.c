/*
 * cron.c - parses cron expressions and computes their fire times (see cron.h).
 *
 * The search walks local wall-clock time field by field (month, day, hour, minute, second),
 * jumping to the start of the next unit whenever a field does not match, and converts each
 * matching wall time with the zone. The conversion is what makes DST right: a wall time in a
 * gap has no instant and is passed over, a wall time in an overlap maps to its first
 * instant only. Mapping each wall time to its first instant is increasing in the wall time,
 * so the first match whose instant lies after `after` is the next fire time.
 *
 * Written here because Debian packages no cron-expression library for C (only Go, PHP,
 * Ruby and Node ones); tests/unit/cron.c holds it to the cases peers got wrong.
 */
#include "core/cron.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/timefmt.h"

#define SEARCH_YEARS 30 /* 29 February of a restricted weekday recurs within 28 years */

typedef struct field_spec {
    const char *name;
    int min, max;
    const char *const *names; /* names for min, min+1, ... or NULL */
} field_spec_t;

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL",
                                          "AUG", "SEP", "OCT", "NOV", "DEC", NULL};
static const char *const wday_names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", NULL};

enum { F_SECOND, F_MINUTE, F_HOUR, F_MDAY, F_MONTH, F_WDAY };
static const field_spec_t specs[] = {
    [F_SECOND] = {"second", 0, 59, NULL},    [F_MINUTE] = {"minute", 0, 59, NULL},
    [F_HOUR] = {"hour", 0, 23, NULL},        [F_MDAY] = {"day-of-month", 1, 31, NULL},
    [F_MONTH] = {"month", 1, 12, month_names}, [F_WDAY] = {"day-of-week", 0, 7, wday_names},
};

static const struct alias {
    const char *name, *expansion;
} aliases[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
};

static bool bad(bson_error_t *error, int position, int field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool bad(bson_error_t *error, int position, int field, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID, "cron field %d (%s): %s",
                   position, specs[field].name, what);
    return false;
}

/* A number or, where the field has names, a name; advances *p. */
static bool read_value(const char **p, const field_spec_t *spec, int *out)
{
    if (isdigit((unsigned char)**p)) {
        int v = 0;
        while (isdigit((unsigned char)**p)) {
            v = v * 10 + (*(*p)++ - '0');
            if (v > 1000)
                return false;
        }
        *out = v;
        return true;
    }
    if (!spec->names)
        return false;
    for (int i = 0; spec->names[i]; i++) {
        if (strncasecmp(*p, spec->names[i], 3) == 0 && !isalpha((unsigned char)(*p)[3])) {
            *p += 3;
            *out = spec->min + i;
            return true;
        }
    }
    return false;
}

/* One field's text (no blanks) into the bit set *bits. */
static bool parse_field(const char *text, int field, int position, uint64_t *bits,
                        bson_error_t *error)
{
    const field_spec_t *spec = &specs[field];
    int end = spec->max == 7 ? 6 : spec->max; /* '*' of day-of-week: 0-6 */
    const char *p = text;
    *bits = 0;
    for (;;) {
        int lo, hi, step = 1;
        bool single = false;
        const char *item = p;
        int item_len = (int)strcspn(item, ",");
        if (*p == '*') {
            p++;
            lo = spec->min;
            hi = end;
        } else {
            if (!read_value(&p, spec, &lo))
                return bad(error, position, field, "'%.*s' is not a number%s", item_len, item,
                           spec->names ? " or a name" : "");
            hi = lo;
            single = true;
            if (*p == '-') {
                p++;
                single = false;
                if (!read_value(&p, spec, &hi))
                    return bad(error, position, field, "'%.*s': a range needs an end",
                               item_len, item);
            }
        }
        if (*p == '/') {
            p++;
            const char *digits = p;
            step = 0;
            while (isdigit((unsigned char)*p) && step <= 1000)
                step = step * 10 + (*p++ - '0');
            if (p == digits || step == 0)
                return bad(error, position, field, "'%.*s': the step must be a number from 1",
                           item_len, item);
            if (single)
                hi = end; /* N/STEP: from N to the field's end */
        }
        if (*p != ',' && *p != '\0')
            return bad(error, position, field, "unexpected '%.*s' in '%.*s'",
                       (int)strcspn(p, ","), p, item_len, item);
        if (lo < spec->min || lo > spec->max || hi < spec->min || hi > spec->max)
            return bad(error, position, field, "%d is out of range %d-%d",
                       lo < spec->min || lo > spec->max ? lo : hi, spec->min, spec->max);
        if (lo > hi)
            return bad(error, position, field, "range %d-%d runs backwards", lo, hi);
        for (int v = lo; v <= hi; v += step)
            *bits |= 1ULL << (field == F_WDAY && v == 7 ? 0 : v);
        if (*p == '\0')
            return true;
        p++;
        if (*p == '\0' || *p == ',')
            return bad(error, position, field, "an empty list item in '%s'", text);
    }
}

/* Whether day-of-month `mday` of month `month` exists in some year (29 Feb does). */
static bool can_fire(const cohort_cron_t *c)
{
    static const int most[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (!c->mday_star && !c->wday_star)
        return true; /* any matching weekday will do */
    if (c->mday_star)
        return true;
    for (int m = 1; m <= 12; m++)
        for (int d = 1; d <= most[m - 1]; d++)
            if ((c->months >> m & 1) && (c->mdays >> d & 1))
                return true;
    return false;
}

bool cohort_cron_parse(const char *text, cohort_cron_t *cron, bson_error_t *error)
{
    memset(cron, 0, sizeof *cron);
    const char *src = text + strspn(text, " \t");
    if (src[0] == '@') {
        size_t n = strcspn(src, " \t");
        const char *expansion = NULL;
        for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
            if (strlen(aliases[i].name) == n && strncasecmp(src, aliases[i].name, n) == 0)
                expansion = aliases[i].expansion;
        if (!expansion || src[n + strspn(src + n, " \t")] != '\0') {
            bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                           "cron alias '%s' is unknown (known: @yearly, @annually, @monthly, "
                           "@weekly, @daily, @midnight, @hourly)",
                           src);
            return false;
        }
        src = expansion;
    }
    char copy[256];
    if (strlen(src) >= sizeof copy) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "cron expression is too long (at most %zu characters)",
                       sizeof copy - 1);
        return false;
    }
    strcpy(copy, src);
    char *fields[7];
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(copy, " \t", &save); tok;
         tok = strtok_r(NULL, " \t", &save))
        if (n < 7)
            fields[n++] = tok;
        else
            n = 8;
    if (n != 5 && n != 6) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "cron expression '%s' has %s%d fields (expected 5: minute hour "
                       "day-of-month month day-of-week, or 6 with seconds first)",
                       text, n > 7 ? "more than " : "", n > 7 ? 7 : n);
        return false;
    }
    cron->has_seconds = n == 6;
    int first = n == 6 ? F_SECOND : F_MINUTE;
    uint64_t bits[6] = {1, 0, 0, 0, 0, 0}; /* without a seconds field: second 0 */
    for (int i = 0; i < n; i++) {
        int field = first + i;
        if (!parse_field(fields[i], field, i + 1, &bits[field], error))
            return false;
    }
    cron->seconds = bits[F_SECOND];
    cron->minutes = bits[F_MINUTE];
    cron->hours = (uint32_t)bits[F_HOUR];
    cron->mdays = (uint32_t)bits[F_MDAY];
    cron->months = (uint16_t)bits[F_MONTH];
    cron->wdays = (uint8_t)bits[F_WDAY];
    cron->mday_star = fields[F_MDAY - first][0] == '*';
    cron->wday_star = fields[F_WDAY - first][0] == '*';
    if (!can_fire(cron)) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "cron expression '%s' never fires (no month has that day)", text);
        return false;
    }
    return true;
}

/* ---- fire times ---------------------------------------------------------------------- */

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static bool day_matches(const cohort_cron_t *c, int64_t days, int mday)
{
    int wday = (int)(((days + 4) % 7 + 7) % 7); /* 1970-01-01 was a Thursday */
    bool by_mday = c->mdays >> mday & 1, by_wday = c->wdays >> wday & 1;
    if (c->mday_star && c->wday_star)
        return true;
    if (c->mday_star)
        return by_wday;
    if (c->wday_star)
        return by_mday;
    return by_mday || by_wday;
}

bool cohort_cron_next(const cohort_cron_t *c, const cohort_tz_t *tz, int64_t after_ms,
                      int64_t *next_ms)
{
    int64_t after = floor_div(after_ms, 1000); /* fire times > after_ms are >= after + 1 */
    int64_t wall = after + cohort_tz_offset(tz, after) + 1;
    int64_t year;
    int month, mday;
    cohort_civil_from_days(floor_div(wall, 86400), &year, &month, &mday);
    int64_t last_year = year + SEARCH_YEARS;
    while (year <= last_year) {
        int64_t days = floor_div(wall, 86400);
        cohort_civil_from_days(days, &year, &month, &mday);
        int64_t in_day = wall - days * 86400;
        int hour = (int)(in_day / 3600), minute = (int)(in_day / 60 % 60);
        int second = (int)(in_day % 60);
        if (!(c->months >> month & 1)) {
            wall = (month == 12 ? cohort_days_from_civil(year + 1, 1, 1)
                                : cohort_days_from_civil(year, month + 1, 1)) *
                   86400;
        } else if (!day_matches(c, days, mday)) {
            wall = (days + 1) * 86400;
        } else if (!(c->hours >> hour & 1)) {
            wall = days * 86400 + (hour + 1) * 3600;
        } else if (!(c->minutes >> minute & 1)) {
            wall = days * 86400 + hour * 3600 + (minute + 1) * 60;
        } else if (!(c->seconds >> second & 1)) {
            wall++;
        } else {
            int64_t utc;
            if (cohort_tz_from_wall(tz, wall, &utc) > 0 && utc > after) {
                *next_ms = utc * 1000;
                return true;
            }
            wall++;
        }
    }
    return false;
}

bool cohort_cron_prev(const cohort_cron_t *c, const cohort_tz_t *tz, int64_t floor_ms,
                      int64_t at_ms, int64_t *prev_ms)
{
    /* Windows of growing length ending at at_ms: the first that holds a fire time gives
     * the last one, found by walking forward through that window alone. */
    static const int64_t spans_s[] = {60, 3600, 86400, 32 * 86400, 366 * 86400,
                                      SEARCH_YEARS * 366 * 86400LL};
    for (size_t i = 0; i < sizeof spans_s / sizeof spans_s[0]; i++) {
        int64_t from = at_ms - spans_s[i] * 1000;
        if (from < floor_ms)
            from = floor_ms;
        bool found = false;
        int64_t t = from, next;
        while (cohort_cron_next(c, tz, t, &next) && next <= at_ms) {
            found = true;
            t = next;
        }
        if (found) {
            *prev_ms = t;
            return true;
        }
        if (from == floor_ms)
            return false;
    }
    return false;
}
