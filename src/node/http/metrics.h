/*
 * metrics.h - what a node exposes to Prometheus, rendered in the text exposition format
 * (version 0.0.4): the services' counters (cohort_service_t.stats, the election's leader
 * changes), a task duration histogram, gauges (primacy, epoch, queue depth, running tasks)
 * the change streams' wake-ups and state (watch.h), and node-wide counters (database commands,
 * start time, build info).
 *
 * The counters are the ones the node already keeps for its log summary and its `nodes`
 * document; this module only reads them. The histogram is the one thing recorded here: a
 * fixed set of buckets of atomics, so worker threads observe without a lock and memory
 * does not grow with the number of tasks.
 */
#ifndef COHORT_METRICS_H
#define COHORT_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "node/work/histogram.h"

struct cohort_service;
struct cohort_store;
struct cohort_watcher;

/* What the node shows: everything is borrowed for the duration of the call. */
typedef struct cohort_metrics_source {
    struct cohort_service *const *services;
    size_t n_services;
    const struct cohort_store *store; /* database command counters */
    const struct cohort_watcher *watcher; /* change stream wake-ups; NULL: wake = poll */
    int64_t started_at_ms;            /* the node's start, ms since the epoch */
    const char *version;
} cohort_metrics_source_t;

/* Renders every metric family. Returns a NUL-terminated string (caller frees with free())
 * and its length in *len, or NULL if memory ran out. Reads atomics and takes each
 * service's lock briefly (for its running count): call it from the main thread or any
 * other, but not with a service's lock held. */
char *cohort_metrics_render(const cohort_metrics_source_t *source, size_t *len);

/* The Content-Type of the rendered text. */
#define COHORT_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
