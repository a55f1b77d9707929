/*
 * tz.c - reads a zone of the tz database (see tz.h): the TZif transitions, and the POSIX TZ
 * rule of the footer ("CET-1CEST,M3.5.0,M10.5.0/3") for times past the last transition,
 * which a "slim" TZif file relies on for every year after it was built.
 *
 * Every read of the file is bounds-checked: a truncated or doctored file is refused with a
 * reason, never read past its end.
 */
#include "core/tz.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/timefmt.h"

#define TZ_FILE_MAX (1 << 20) /* no zone file is anywhere near 1 MiB */
#define TZ_NAME_MAX 64
#define OFFSET_LIMIT (26 * 3600) /* |UTC offset| beyond this is not a real zone */
#define NEAR (36 * 3600)         /* the window from_wall() looks for offsets in */

/* A POSIX TZ rule's date: Jn (1-365, no Feb 29), n (0-365) or Mm.w.d; time of day in s. */
typedef struct tz_date {
    char kind; /* 'J', 'N' or 'M' */
    int n, m, w, d;
    int32_t time;
} tz_date_t;

typedef struct posix_rule {
    bool valid;
    bool has_dst;
    int32_t std_off, dst_off; /* seconds east of UTC */
    tz_date_t start, end;     /* DST starts (in standard time), ends (in DST) */
} posix_rule_t;

struct cohort_tz {
    char *name;
    bool utc;
    int64_t *times; /* transitions, ascending */
    uint8_t *types; /* the type each transition starts */
    size_t n_times;
    int32_t *offsets; /* per type, seconds east */
    size_t n_types;
    posix_rule_t footer;
};

static bool fail(bson_error_t *error, const char *name, const char *why)
{
    bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID, "time zone '%s': %s",
                   name, why);
    return false;
}

/* ---- the POSIX TZ rule ------------------------------------------------------------------- */

static bool rule_name(const char **p)
{
    const char *s = *p;
    if (*s == '<') {
        const char *close = strchr(s, '>');
        if (!close || close - s < 4)
            return false;
        *p = close + 1;
        return true;
    }
    int n = 0;
    while ((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z'))
        n++;
    *p = s + n;
    return n >= 3;
}

static bool rule_number(const char **p, int max, int *out)
{
    if (**p < '0' || **p > '9')
        return false;
    int v = 0;
    while (**p >= '0' && **p <= '9') {
        v = v * 10 + (*(*p)++ - '0');
        if (v > max)
            return false;
    }
    *out = v;
    return true;
}

/* [+-]hh[:mm[:ss]], hours up to `max_hours` (24 for offsets, 167 for rule times). */
static bool rule_time(const char **p, int max_hours, int32_t *out)
{
    int sign = 1;
    if (**p == '+' || **p == '-')
        sign = *(*p)++ == '-' ? -1 : 1;
    int h = 0, m = 0, s = 0;
    if (!rule_number(p, max_hours, &h))
        return false;
    if (**p == ':') {
        (*p)++;
        if (!rule_number(p, 59, &m))
            return false;
        if (**p == ':') {
            (*p)++;
            if (!rule_number(p, 59, &s))
                return false;
        }
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return true;
}

static bool rule_date(const char **p, tz_date_t *date)
{
    date->time = 7200; /* 02:00 unless given */
    if (**p == 'J') {
        (*p)++;
        date->kind = 'J';
        if (!rule_number(p, 365, &date->n) || date->n < 1)
            return false;
    } else if (**p == 'M') {
        (*p)++;
        date->kind = 'M';
        if (!rule_number(p, 12, &date->m) || date->m < 1 || *(*p)++ != '.' ||
            !rule_number(p, 5, &date->w) || date->w < 1 || *(*p)++ != '.' ||
            !rule_number(p, 6, &date->d))
            return false;
    } else {
        date->kind = 'N';
        if (!rule_number(p, 365, &date->n))
            return false;
    }
    if (**p == '/') {
        (*p)++;
        return rule_time(p, 167, &date->time);
    }
    return true;
}

/* Parses "STDoffset[DST[offset][,start[/time],end[/time]]]"; an empty rule stays invalid. */
static bool parse_rule(const char *text, posix_rule_t *rule)
{
    memset(rule, 0, sizeof *rule);
    if (!*text)
        return true;
    const char *p = text;
    int32_t west;
    if (!rule_name(&p) || !rule_time(&p, 24, &west))
        return false;
    rule->std_off = -west;
    rule->dst_off = rule->std_off + 3600;
    if (*p) {
        if (!rule_name(&p))
            return false;
        rule->has_dst = true;
        if (*p && *p != ',') {
            if (!rule_time(&p, 24, &west))
                return false;
            rule->dst_off = -west;
        }
        if (*p == ',') {
            p++;
            if (!rule_date(&p, &rule->start) || *p++ != ',' || !rule_date(&p, &rule->end))
                return false;
        } else { /* no rule given: the US rule, as POSIX leaves it to the implementation */
            rule->start = (tz_date_t){.kind = 'M', .m = 3, .w = 2, .d = 0, .time = 7200};
            rule->end = (tz_date_t){.kind = 'M', .m = 11, .w = 1, .d = 0, .time = 7200};
        }
    }
    if (*p || rule->std_off <= -OFFSET_LIMIT || rule->std_off >= OFFSET_LIMIT ||
        rule->dst_off <= -OFFSET_LIMIT || rule->dst_off >= OFFSET_LIMIT)
        return false;
    rule->valid = true;
    return true;
}

/* The local (wall) second at which `date` happens in `year`. */
static int64_t rule_wall(const tz_date_t *date, int64_t year)
{
    int64_t jan1 = cohort_days_from_civil(year, 1, 1);
    bool leap = cohort_days_in_month(year, 2) == 29;
    int64_t day;
    if (date->kind == 'J') {
        day = jan1 + date->n - 1 + (leap && date->n >= 60);
    } else if (date->kind == 'N') {
        day = jan1 + date->n;
    } else {
        int64_t first = cohort_days_from_civil(year, date->m, 1);
        int wday = (int)(((first + 4) % 7 + 7) % 7); /* 1970-01-01 was a Thursday */
        day = first + (date->d - wday + 7) % 7 + (date->w - 1) * 7;
        while (day >= first + cohort_days_in_month(year, date->m))
            day -= 7;
    }
    return day * 86400 + date->time;
}

static int32_t rule_offset(const posix_rule_t *rule, int64_t utc)
{
    if (!rule->has_dst)
        return rule->std_off;
    int64_t year;
    int month, day;
    cohort_civil_from_days((utc + rule->std_off) / 86400 - ((utc + rule->std_off) % 86400 < 0),
                           &year, &month, &day);
    int64_t start = rule_wall(&rule->start, year) - rule->std_off;
    int64_t end = rule_wall(&rule->end, year) - rule->dst_off;
    bool dst = start < end ? (utc >= start && utc < end) : !(utc >= end && utc < start);
    return dst ? rule->dst_off : rule->std_off;
}

/* ---- TZif ------------------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p, *end;
} reader_t;

static bool take(reader_t *r, size_t n, const uint8_t **out)
{
    if ((size_t)(r->end - r->p) < n)
        return false;
    *out = r->p;
    r->p += n;
    return true;
}

static uint32_t be32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static int64_t be64(const uint8_t *b)
{
    return (int64_t)((uint64_t)be32(b) << 32 | be32(b + 4));
}

typedef struct header {
    char version;
    uint32_t isut, isstd, leap, time, type, chars;
} header_t;

static bool read_header(reader_t *r, header_t *h)
{
    const uint8_t *b;
    if (!take(r, 44, &b) || memcmp(b, "TZif", 4) != 0)
        return false;
    h->version = (char)b[4];
    h->isut = be32(b + 20);
    h->isstd = be32(b + 24);
    h->leap = be32(b + 28);
    h->time = be32(b + 32);
    h->type = be32(b + 36);
    h->chars = be32(b + 40);
    return h->type >= 1 && h->type <= 256 && h->time <= 100000 && h->chars <= 100000 &&
           h->leap <= 100000 && h->isut <= 256 && h->isstd <= 256;
}

/* The data block after `h`, with `tsize`-byte times, into `tz`. */
static bool read_block(reader_t *r, const header_t *h, size_t tsize, cohort_tz_t *tz)
{
    const uint8_t *times, *idx, *types, *skip;
    if (!take(r, (size_t)h->time * tsize, &times) || !take(r, h->time, &idx) ||
        !take(r, (size_t)h->type * 6, &types) || !take(r, h->chars, &skip) ||
        !take(r, (size_t)h->leap * (tsize + 4), &skip) || !take(r, h->isstd, &skip) ||
        !take(r, h->isut, &skip))
        return false;
    tz->times = calloc(h->time ? h->time : 1, sizeof *tz->times);
    tz->types = calloc(h->time ? h->time : 1, 1);
    tz->offsets = calloc(h->type, sizeof *tz->offsets);
    if (!tz->times || !tz->types || !tz->offsets)
        return false;
    for (uint32_t i = 0; i < h->type; i++) {
        int32_t off = (int32_t)be32(types + 6 * i);
        if (off <= -OFFSET_LIMIT || off >= OFFSET_LIMIT)
            return false;
        tz->offsets[i] = off;
    }
    for (uint32_t i = 0; i < h->time; i++) {
        tz->times[i] = tsize == 8 ? be64(times + 8 * i) : (int32_t)be32(times + 4 * i);
        tz->types[i] = idx[i];
        if (idx[i] >= h->type || (i > 0 && tz->times[i] <= tz->times[i - 1]))
            return false;
    }
    tz->n_times = h->time;
    tz->n_types = h->type;
    return true;
}

static bool parse_tzif(const uint8_t *data, size_t len, cohort_tz_t *tz, const char **why)
{
    reader_t r = {data, data + len};
    header_t h;
    *why = "not a TZif file (or a damaged one)";
    if (!read_header(&r, &h))
        return false;
    if (h.version == '\0') {
        *why = "damaged TZif data";
        return read_block(&r, &h, 4, tz);
    }
    /* Version 2+: skip the 32-bit block, read the 64-bit one and the footer. */
    const uint8_t *skip;
    if (!take(&r, (size_t)h.time * 5 + (size_t)h.type * 6 + h.chars + (size_t)h.leap * 8 +
                      h.isstd + h.isut,
              &skip) ||
        !read_header(&r, &h) || !read_block(&r, &h, 8, tz)) {
        *why = "damaged TZif data";
        return false;
    }
    const uint8_t *nl;
    if (!take(&r, 1, &nl) || *nl != '\n') {
        *why = "TZif footer missing";
        return false;
    }
    const uint8_t *start = r.p, *end = memchr(r.p, '\n', (size_t)(r.end - r.p));
    char rule[128];
    if (!end || (size_t)(end - start) >= sizeof rule) {
        *why = "TZif footer damaged";
        return false;
    }
    memcpy(rule, start, (size_t)(end - start));
    rule[end - start] = '\0';
    if (!parse_rule(rule, &tz->footer)) {
        *why = "TZif footer has a TZ rule Cohort cannot read";
        return false;
    }
    return true;
}

static bool is_utc(const char *name)
{
    return strcmp(name, "UTC") == 0 || strcmp(name, "Etc/UTC") == 0;
}

cohort_tz_t *cohort_tz_parse(const char *name, const uint8_t *data, size_t len,
                             bson_error_t *error)
{
    cohort_tz_t *tz = calloc(1, sizeof *tz);
    if (!tz || !(tz->name = strdup(name))) {
        free(tz);
        cohort_error_nomem(error, "a time zone");
        return NULL;
    }
    const char *why = NULL;
    if (!parse_tzif(data, len, tz, &why)) {
        fail(error, name, why);
        cohort_tz_destroy(tz);
        return NULL;
    }
    return tz;
}

static bool valid_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > TZ_NAME_MAX || name[0] == '/')
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '/' || c == '_' || c == '+' || c == '-';
        if (!ok)
            return false;
        if (c == '/' && (name[i + 1] == '/' || name[i + 1] == '\0'))
            return false;
    }
    return true;
}

cohort_tz_t *cohort_tz_load(const char *name, bson_error_t *error)
{
    if (!valid_name(name)) {
        fail(error, name, "not a zone name (like Europe/Berlin: 1-64 of A-Z a-z 0-9 / _ + -)");
        return NULL;
    }
    if (is_utc(name)) {
        cohort_tz_t *tz = calloc(1, sizeof *tz);
        if (!tz || !(tz->name = strdup(name))) {
            free(tz);
            cohort_error_nomem(error, "a time zone");
            return NULL;
        }
        tz->utc = true;
        return tz;
    }
    const char *dir = getenv("TZDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "/usr/share/zoneinfo", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        char why[600];
        snprintf(why, sizeof why, "cannot read %s: %s%s", path, strerror(errno),
                 errno == ENOENT ? " (unknown zone, or the tzdata package is not installed)"
                                 : "");
        fail(error, name, why);
        return NULL;
    }
    uint8_t *data = malloc(TZ_FILE_MAX);
    size_t len = data ? fread(data, 1, TZ_FILE_MAX, f) : 0;
    fclose(f);
    if (!data) {
        cohort_error_nomem(error, "a time zone file");
        return NULL;
    }
    cohort_tz_t *tz = len == TZ_FILE_MAX ? (fail(error, name, "file too large"), NULL)
                                         : cohort_tz_parse(name, data, len, error);
    free(data);
    return tz;
}

void cohort_tz_destroy(cohort_tz_t *tz)
{
    if (!tz)
        return;
    free(tz->name);
    free(tz->times);
    free(tz->types);
    free(tz->offsets);
    free(tz);
}

const char *cohort_tz_name(const cohort_tz_t *tz)
{
    return tz->name;
}

int32_t cohort_tz_offset(const cohort_tz_t *tz, int64_t utc)
{
    if (tz->utc)
        return 0;
    if (tz->n_times == 0 || utc >= tz->times[tz->n_times - 1]) {
        if (tz->footer.valid)
            return rule_offset(&tz->footer, utc);
        return tz->n_times ? tz->offsets[tz->types[tz->n_times - 1]] : tz->offsets[0];
    }
    if (utc < tz->times[0])
        return tz->offsets[0];
    size_t lo = 0, hi = tz->n_times - 1; /* times[lo] <= utc < times[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (tz->times[mid] <= utc)
            lo = mid;
        else
            hi = mid;
    }
    return tz->offsets[tz->types[lo]];
}

int cohort_tz_from_wall(const cohort_tz_t *tz, int64_t wall, int64_t *first)
{
    int32_t candidates[3] = {cohort_tz_offset(tz, wall - NEAR), cohort_tz_offset(tz, wall),
                             cohort_tz_offset(tz, wall + NEAR)};
    int found = 0;
    int64_t seen[3];
    for (int i = 0; i < 3; i++) {
        int64_t utc = wall - candidates[i];
        if (cohort_tz_offset(tz, utc) != candidates[i])
            continue;
        bool again = false;
        for (int j = 0; j < found; j++)
            again |= seen[j] == utc;
        if (!again)
            seen[found++] = utc;
    }
    for (int j = 0; j < found; j++)
        if (j == 0 || seen[j] < *first)
            *first = seen[j];
    return found;
}
