/*
 * prometheus.h - checks text in the Prometheus exposition format (version 0.0.4), for the
 * tests of /metrics.
 *
 * prom_parse() is a strict parser of our own: it rejects what Prometheus would reject
 * (malformed names, labels, escapes or values; a TYPE or HELP line after the family's
 * samples or twice; a family split in two; the same series twice) and checks what the
 * format promises for histograms (buckets sorted by le, cumulative, a +Inf bucket equal to
 * _count, a _sum) and counters (never negative). prom_promtool() also runs Prometheus's own
 * `promtool check metrics` (parser and linter) when it is installed (Debian package
 * prometheus; deploy/setup.sh installs it).
 */
#ifndef COHORT_TEST_PROMETHEUS_H
#define COHORT_TEST_PROMETHEUS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct prom_sample {
    char *series; /* canonical: name{a="x",b="y"} with labels sorted by name; name alone */
    char *name;
    char *group; /* the series without its le label (histogram buckets) */
    char *le;    /* the le label's value, or NULL */
    double value;
} prom_sample_t;

typedef struct prom_family {
    char *name;
    char *type; /* "counter", "gauge", "histogram", "summary", "untyped" */
    bool has_help;
} prom_family_t;

typedef struct prom_text {
    prom_sample_t *samples;
    size_t n_samples;
    prom_family_t *families;
    size_t n_families;
} prom_text_t;

/* Parses and checks `text`. False with the first problem (and its line) in `why`; `out` is
 * then still safe to free. */
bool prom_parse(const char *text, prom_text_t *out, char *why, size_t whylen);
void prom_free(prom_text_t *text);

/* The value of a series, written canonically (labels sorted by name), e.g.
 * cohort_primary{service="demo"}. False if it is absent. */
bool prom_get(const prom_text_t *text, const char *series, double *value);

/* The value of a series, or -1 if it is absent (for assertions on counters). */
double prom_value(const prom_text_t *text, const char *series);

/* The family's TYPE, or NULL. */
const char *prom_type(const prom_text_t *text, const char *family);

/* Samples named `name` (any labels). */
size_t prom_count(const prom_text_t *text, const char *name);

/* Runs `promtool check metrics` on `text`: 1 if it passed, 0 if it found problems
 * (described in `why`), -1 if promtool is not installed. */
int prom_promtool(const char *text, char *why, size_t whylen);

/* Asserts (Criterion) that `text` passes prom_parse() and, if installed, promtool; fills
 * `out` (free it with prom_free). `what` names the text in failure messages. Warns once
 * if promtool is missing. */
void prom_assert_valid(const char *text, const char *what, prom_text_t *out);

#endif
