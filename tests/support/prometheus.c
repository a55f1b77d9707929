/*
 * prometheus.c - a strict checker of the Prometheus text exposition format, and a runner
 * of promtool (see prometheus.h).
 *
 * The grammar checked, line by line:
 *   # HELP name docstring          (escapes \\ and \n only)
 *   # TYPE name counter|gauge|histogram|summary|untyped
 *   # anything else                (a comment)
 *   name[{label="value",...}] value [timestamp]
 * Names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*, label values
 * allow the escapes \\ \" \n only. The text ends with a newline.
 */
#include "prometheus.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

#define MAX_LABELS 16

typedef struct label {
    char name[128];
    char *value; /* unescaped; owned */
} label_t;

typedef struct parser {
    prom_text_t *out;
    char *why;
    size_t whylen;
    int line;
    char current[256]; /* the family whose samples come now */
    char **done;       /* families whose samples are over */
    size_t n_done;
} parser_t;

static bool fail(parser_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(parser_t *p, const char *fmt, ...)
{
    int n = snprintf(p->why, p->whylen, "line %d: ", p->line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < p->whylen)
        vsnprintf(p->why + n, p->whylen - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static char *xstrndup(const char *s, size_t n)
{
    char *copy = strndup(s, n);
    cr_assert_not_null(copy, "out of memory");
    return copy;
}

static bool name_start(char c, bool colon)
{
    return isalpha((unsigned char)c) || c == '_' || (colon && c == ':');
}

static bool name_char(char c, bool colon)
{
    return name_start(c, colon) || isdigit((unsigned char)c);
}

/* Length of the name at `s` (0 if none). */
static size_t scan_name(const char *s, bool colon)
{
    size_t n = 0;
    if (!name_start(s[0], colon))
        return 0;
    while (name_char(s[n], colon))
        n++;
    return n;
}

static prom_family_t *family(prom_text_t *t, const char *name)
{
    for (size_t i = 0; i < t->n_families; i++)
        if (strcmp(t->families[i].name, name) == 0)
            return &t->families[i];
    return NULL;
}

static prom_family_t *add_family(prom_text_t *t, const char *name)
{
    prom_family_t *f = family(t, name);
    if (f)
        return f;
    t->families = realloc(t->families, (t->n_families + 1) * sizeof *t->families);
    cr_assert_not_null(t->families, "out of memory");
    f = &t->families[t->n_families++];
    memset(f, 0, sizeof *f);
    f->name = xstrndup(name, strlen(name));
    return f;
}

static bool is_done(parser_t *p, const char *name)
{
    for (size_t i = 0; i < p->n_done; i++)
        if (strcmp(p->done[i], name) == 0)
            return true;
    return false;
}

/* Samples of `name`'s family start or go on here; a family may not come back later. */
static bool enter_family(parser_t *p, const char *name)
{
    if (strcmp(p->current, name) == 0)
        return true;
    if (is_done(p, name))
        return fail(p, "family %s appears in two places", name);
    if (p->current[0]) {
        p->done = realloc(p->done, (p->n_done + 1) * sizeof *p->done);
        cr_assert_not_null(p->done, "out of memory");
        p->done[p->n_done++] = xstrndup(p->current, strlen(p->current));
    }
    snprintf(p->current, sizeof p->current, "%s", name);
    return true;
}

static bool sample_seen(const prom_text_t *t, const char *name)
{
    for (size_t i = 0; i < t->n_samples; i++)
        if (strcmp(t->samples[i].name, name) == 0)
            return true;
    return false;
}

/* The family a sample name belongs to: a histogram's _bucket, _sum and _count (and a
 * summary's _sum and _count) belong to the declared base. */
static void family_of(const prom_text_t *t, const char *name, char *out, size_t len)
{
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    snprintf(out, len, "%s", name);
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(name), s = strlen(suffixes[i]);
        if (n <= s || strcmp(name + n - s, suffixes[i]) != 0)
            continue;
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(n - s), name);
        prom_family_t *f = family((prom_text_t *)t, base);
        if (f && f->type &&
            (strcmp(f->type, "histogram") == 0 || (i > 0 && strcmp(f->type, "summary") == 0)))
            snprintf(out, len, "%s", base);
    }
}

static bool metadata(parser_t *p, const char *line)
{
    const char *s = line + 1;
    while (*s == ' ' || *s == '\t')
        s++;
    bool help = strncmp(s, "HELP", 4) == 0 && (s[4] == ' ' || s[4] == '\t');
    bool type = strncmp(s, "TYPE", 4) == 0 && (s[4] == ' ' || s[4] == '\t');
    if (!help && !type)
        return true; /* a comment */
    s += 4;
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = scan_name(s, true);
    if (n == 0 || n >= 256)
        return fail(p, "bad metric name in %s line", help ? "HELP" : "TYPE");
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)n, s);
    s += n;
    if (*s && *s != ' ' && *s != '\t')
        return fail(p, "bad metric name in %s line", help ? "HELP" : "TYPE");
    while (*s == ' ' || *s == '\t')
        s++;
    if (sample_seen(p->out, name) || is_done(p, name))
        return fail(p, "%s of %s after its samples", help ? "HELP" : "TYPE", name);
    if (!enter_family(p, name))
        return false;
    prom_family_t *f = add_family(p->out, name);
    if (help) {
        if (f->has_help)
            return fail(p, "second HELP for %s", name);
        for (const char *c = s; *c; c++)
            if (*c == '\\' && c[1] != '\\' && c[1] != 'n')
                return fail(p, "bad escape in the HELP of %s", name);
            else if (*c == '\\')
                c++;
        f->has_help = true;
        return true;
    }
    static const char *const types[] = {"counter", "gauge", "histogram", "summary", "untyped"};
    if (f->type)
        return fail(p, "second TYPE for %s", name);
    for (size_t i = 0; i < 5; i++)
        if (strcmp(s, types[i]) == 0) {
            f->type = xstrndup(s, strlen(s));
            return true;
        }
    return fail(p, "unknown type '%s' for %s", s, name);
}

/* Reads {a="x",...} at *s; labels are unescaped into `labels`. */
static bool parse_labels(parser_t *p, const char **s, label_t *labels, size_t *n)
{
    const char *c = *s + 1; /* after '{' */
    *n = 0;
    if (*c == '}') {
        *s = c + 1;
        return true;
    }
    for (;;) {
        size_t len = scan_name(c, false);
        if (len == 0 || len >= sizeof labels[0].name)
            return fail(p, "bad label name");
        if (*n >= MAX_LABELS)
            return fail(p, "too many labels");
        label_t *l = &labels[(*n)++];
        l->value = NULL;
        snprintf(l->name, sizeof l->name, "%.*s", (int)len, c);
        for (size_t i = 0; i + 1 < *n; i++)
            if (strcmp(labels[i].name, l->name) == 0)
                return fail(p, "label %s twice", l->name);
        c += len;
        if (c[0] != '=' || c[1] != '"')
            return fail(p, "label %s: expected =\"", l->name);
        c += 2;
        char *value = malloc(strlen(c) + 1);
        cr_assert_not_null(value, "out of memory");
        size_t k = 0;
        while (*c && *c != '"') {
            if (*c == '\\') {
                if (c[1] == '\\' || c[1] == '"')
                    value[k++] = c[1];
                else if (c[1] == 'n')
                    value[k++] = '\n';
                else {
                    free(value);
                    return fail(p, "label %s: bad escape", l->name);
                }
                c += 2;
            } else {
                value[k++] = *c++;
            }
        }
        value[k] = '\0';
        l->value = value;
        if (*c != '"')
            return fail(p, "label %s: unterminated value", l->name);
        c++;
        if (*c == '}') {
            *s = c + 1;
            return true;
        }
        if (*c != ',')
            return fail(p, "label %s: expected , or }", l->name);
        c++;
    }
}

static int compare_labels(const void *a, const void *b)
{
    return strcmp(((const label_t *)a)->name, ((const label_t *)b)->name);
}

/* name{a="x",b="y"} with labels sorted, `skip` (may be NULL) left out; caller frees. */
static char *canonical(const char *name, label_t *labels, size_t n, const char *skip)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f, "out of memory");
    fputs(name, f);
    size_t written = 0;
    for (size_t i = 0; i < n; i++) {
        if (skip && strcmp(labels[i].name, skip) == 0)
            continue;
        fprintf(f, "%s%s=\"", written++ ? "," : "{", labels[i].name);
        for (const char *c = labels[i].value; *c; c++)
            if (*c == '\\' || *c == '"')
                fprintf(f, "\\%c", *c);
            else if (*c == '\n')
                fputs("\\n", f);
            else
                fputc(*c, f);
        fputc('"', f);
    }
    if (written)
        fputc('}', f);
    fclose(f);
    return text;
}

static bool parse_value(const char *s, double *value)
{
    if (strcmp(s, "+Inf") == 0 || strcmp(s, "Inf") == 0) {
        *value = INFINITY;
        return true;
    }
    if (strcmp(s, "-Inf") == 0) {
        *value = -INFINITY;
        return true;
    }
    if (strcmp(s, "NaN") == 0) {
        *value = NAN;
        return true;
    }
    if (!*s || strchr(s, 'x') || strchr(s, 'X') || strpbrk(s, "iInN"))
        return false;
    char *end = NULL;
    *value = strtod(s, &end);
    return end && *end == '\0';
}

static bool sample(parser_t *p, const char *line)
{
    size_t n = scan_name(line, true);
    if (n == 0 || n >= 256)
        return fail(p, "bad metric name");
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)n, line);
    const char *s = line + n;
    label_t labels[MAX_LABELS];
    size_t n_labels = 0;
    bool ok = true;
    if (*s == '{')
        ok = parse_labels(p, &s, labels, &n_labels);
    char *series = NULL;
    if (ok && *s != ' ' && *s != '\t')
        ok = fail(p, "%s: expected a space before the value", name);
    if (ok) {
        while (*s == ' ' || *s == '\t')
            s++;
        char value_text[64];
        size_t vlen = strcspn(s, " \t");
        snprintf(value_text, sizeof value_text, "%.*s", (int)vlen, s);
        double value;
        if (vlen == 0 || vlen >= sizeof value_text || !parse_value(value_text, &value))
            ok = fail(p, "%s: bad value '%.*s'", name, (int)vlen, s);
        s += vlen;
        while (ok && (*s == ' ' || *s == '\t'))
            s++;
        if (ok && *s) { /* a timestamp: an integer of milliseconds */
            char *end = NULL;
            strtoll(s, &end, 10);
            if (!end || end == s || *end)
                ok = fail(p, "%s: bad timestamp '%s'", name, s);
        }
        char fam[256];
        family_of(p->out, name, fam, sizeof fam);
        if (ok)
            ok = enter_family(p, fam);
        qsort(labels, n_labels, sizeof labels[0], compare_labels);
        series = ok ? canonical(name, labels, n_labels, NULL) : NULL;
        if (ok && prom_get(p->out, series, &(double){0}))
            ok = fail(p, "series %s twice", series);
        if (ok) {
            prom_text_t *t = p->out;
            t->samples = realloc(t->samples, (t->n_samples + 1) * sizeof *t->samples);
            cr_assert_not_null(t->samples, "out of memory");
            const char *le = NULL;
            for (size_t i = 0; i < n_labels; i++)
                if (strcmp(labels[i].name, "le") == 0)
                    le = labels[i].value;
            t->samples[t->n_samples++] =
                (prom_sample_t){.series = series,
                                .name = xstrndup(name, n),
                                .group = canonical(name, labels, n_labels, "le"),
                                .le = le ? xstrndup(le, strlen(le)) : NULL,
                                .value = value};
            series = NULL;
        }
    }
    free(series);
    for (size_t i = 0; i < n_labels; i++)
        free(labels[i].value);
    return ok;
}

/* Counters are never negative; histograms are cumulative, sorted, and end in +Inf = _count. */
static bool check_families(parser_t *p)
{
    p->line = 0;
    prom_text_t *t = p->out;
    for (size_t f = 0; f < t->n_families; f++) {
        const prom_family_t *fam = &t->families[f];
        if (!fam->type)
            continue;
        if (strcmp(fam->type, "counter") == 0) {
            for (size_t i = 0; i < t->n_samples; i++)
                if (strcmp(t->samples[i].name, fam->name) == 0 && !(t->samples[i].value >= 0))
                    return fail(p, "counter %s is negative or NaN", t->samples[i].series);
            continue;
        }
        if (strcmp(fam->type, "histogram") != 0)
            continue;
        char bucket[300], sum[300], count[300];
        snprintf(bucket, sizeof bucket, "%s_bucket", fam->name);
        snprintf(sum, sizeof sum, "%s_sum", fam->name);
        snprintf(count, sizeof count, "%s_count", fam->name);
        for (size_t i = 0; i < t->n_samples; i++) {
            if (strcmp(t->samples[i].name, count) != 0)
                continue;
            /* The buckets of this _count: the same labels, plus le. */
            const char *labels = t->samples[i].series + strlen(count);
            char group[1024], sum_series[1024];
            snprintf(group, sizeof group, "%s%s", bucket, labels);
            snprintf(sum_series, sizeof sum_series, "%s%s", sum, labels);
            double last_le = -INFINITY, last_value = 0;
            size_t buckets = 0;
            for (size_t j = 0; j < t->n_samples; j++) {
                const prom_sample_t *b = &t->samples[j];
                if (strcmp(b->name, bucket) != 0 || strcmp(b->group, group) != 0)
                    continue;
                double le;
                if (!b->le || !parse_value(b->le, &le) || isnan(le))
                    return fail(p, "%s: missing or bad le", b->series);
                if (buckets > 0 && !(le > last_le))
                    return fail(p, "%s: le not increasing", b->series);
                if (b->value < last_value)
                    return fail(p, "%s: bucket counts not cumulative", b->series);
                last_le = le;
                last_value = b->value;
                buckets++;
            }
            if (buckets == 0 || !isinf(last_le))
                return fail(p, "histogram %s%s has no +Inf bucket", fam->name, labels);
            if (last_value != t->samples[i].value)
                return fail(p, "histogram %s%s: _count %g differs from the +Inf bucket %g",
                            fam->name, labels, t->samples[i].value, last_value);
            if (!prom_get(t, sum_series, &(double){0}))
                return fail(p, "histogram %s%s has no _sum", fam->name, labels);
        }
        for (size_t j = 0; j < t->n_samples; j++)
            if (strcmp(t->samples[j].name, bucket) == 0) {
                char count_series[1024];
                snprintf(count_series, sizeof count_series, "%s%s", count,
                         t->samples[j].group + strlen(bucket));
                if (!prom_get(t, count_series, &(double){0}))
                    return fail(p, "%s has no _count", t->samples[j].series);
            }
    }
    return true;
}

bool prom_parse(const char *text, prom_text_t *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    parser_t p = {.out = out, .why = why, .whylen = whylen};
    bool ok = true;
    size_t len = strlen(text);
    if (len > 0 && text[len - 1] != '\n') {
        p.line = 0;
        ok = fail(&p, "the text does not end with a newline");
    }
    for (const char *at = text; ok && *at;) {
        p.line++;
        size_t n = strcspn(at, "\n");
        char *line = xstrndup(at, n);
        if (strchr(line, '\r'))
            ok = fail(&p, "carriage return in a line");
        else if (line[0] == '#')
            ok = metadata(&p, line);
        else if (line[0])
            ok = sample(&p, line);
        free(line);
        at += n + (at[n] == '\n');
    }
    if (ok)
        ok = check_families(&p);
    for (size_t i = 0; i < p.n_done; i++)
        free(p.done[i]);
    free(p.done);
    return ok;
}

void prom_free(prom_text_t *t)
{
    for (size_t i = 0; i < t->n_samples; i++) {
        free(t->samples[i].series);
        free(t->samples[i].name);
        free(t->samples[i].group);
        free(t->samples[i].le);
    }
    for (size_t i = 0; i < t->n_families; i++) {
        free(t->families[i].name);
        free(t->families[i].type);
    }
    free(t->samples);
    free(t->families);
    memset(t, 0, sizeof *t);
}

bool prom_get(const prom_text_t *t, const char *series, double *value)
{
    for (size_t i = 0; i < t->n_samples; i++)
        if (strcmp(t->samples[i].series, series) == 0) {
            *value = t->samples[i].value;
            return true;
        }
    return false;
}

double prom_value(const prom_text_t *t, const char *series)
{
    double value;
    return prom_get(t, series, &value) ? value : -1;
}

const char *prom_type(const prom_text_t *t, const char *name)
{
    prom_family_t *f = family((prom_text_t *)t, name);
    return f ? f->type : NULL;
}

size_t prom_count(const prom_text_t *t, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n_samples; i++)
        n += strcmp(t->samples[i].name, name) == 0;
    return n;
}

/* promtool on PATH, or NULL. */
static const char *find_promtool(void)
{
    static char path[PATH_MAX];
    const char *dirs = getenv("PATH");
    char *copy = strdup(dirs && *dirs ? dirs : "/usr/local/bin:/usr/bin:/bin");
    cr_assert_not_null(copy, "out of memory");
    const char *found = NULL;
    for (char *save = NULL, *dir = strtok_r(copy, ":", &save); dir && !found;
         dir = strtok_r(NULL, ":", &save)) {
        snprintf(path, sizeof path, "%s/promtool", dir);
        if (access(path, X_OK) == 0)
            found = path;
    }
    free(copy);
    return found;
}

int prom_promtool(const char *text, char *why, size_t whylen)
{
    const char *promtool = find_promtool();
    if (!promtool)
        return -1;
    char *dir = test_tmpdir("promtool");
    char *file = test_write_file(dir, "metrics.txt", text);
    const char *argv[] = {"/bin/sh", "-c", "exec \"$0\" check metrics < \"$1\"",
                          promtool,  file, NULL};
    test_run_result_t r = test_run(argv, NULL, 30000);
    int passed = r.exit_code == 0 && !r.timed_out;
    if (!passed)
        snprintf(why, whylen, "promtool check metrics exited %d: %s%s", r.exit_code, r.out, r.err);
    test_run_result_free(&r);
    unlink(file);
    rmdir(dir);
    free(file);
    free(dir);
    return passed;
}

void prom_assert_valid(const char *text, const char *what, prom_text_t *out)
{
    char why[2048] = "";
    cr_assert(prom_parse(text, out, why, sizeof why), "%s is not valid exposition text: %s\n%s",
              what, why, text);
    int promtool = prom_promtool(text, why, sizeof why);
    if (promtool < 0) {
        static bool warned;
        if (!warned)
            cr_log_warn("promtool is not installed (Debian package prometheus): only the "
                        "tests' own strict parser checked %s",
                        what);
        warned = true;
    }
    cr_assert_neq(promtool, 0, "%s: %s\n%s", what, why, text);
}
