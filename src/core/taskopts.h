/*
 * taskopts.h - the options a task is created with, from a handler's cohort_task_create()
 * or from `cohortctl enqueue`: one parser, so both accept and reject the same things.
 *
 * Options are a BSON document (see cohort_task_create() in cohort/handler.h for the list);
 * the service's configuration fills in what a task does not set.
 */
#ifndef COHORT_TASKOPTS_H
#define COHORT_TASKOPTS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/config.h"

/* A task to create, as the store writes it: its data, who creates it, and its scheduling once
 * the options and the service's defaults are applied. Pointers are borrowed from the
 * caller for the duration of the insert. */
typedef struct cohort_new_task {
    const bson_t *data; /* may be NULL: {} */
    bool tracked;
    int64_t batch;          /* for tracked tasks: the open batch's number */
    const char *unique_key; /* may be NULL */
    const char *created_by;
    int64_t epoch; /* > 0 when created by a primary */
    int64_t now_ms; /* cluster clock */
    /* Scheduling (see cohort_task_create() in cohort/handler.h). */
    int64_t priority;
    int64_t weight;          /* 1..COHORT_WEIGHT_MAX: the load it puts on a node (capacity.h) */
    int64_t not_before_ms;   /* 0: due now */
    int64_t not_after_ms;    /* absolute; 0: none */
    int64_t timeout_ms;      /* stored if > 0 or timeout_set (then 0 means none) */
    bool timeout_set;        /* the creator chose it: even 0 overrides the service default */
    const char *kind;         /* may be NULL */
    const char *group;        /* may be NULL */
    const char *coalesce_key; /* may be NULL */
    const char *idempotency_key; /* may be NULL: the HTTP API's Idempotency-Key header */
} cohort_new_task_t;

typedef struct cohort_task_options {
    bool tracked;
    const char *unique_key; /* views into the options document; NULL if unset */
    const char *kind;
    const char *group;
    const char *coalesce_key;
    bool has_priority, has_timeout, has_not_after, has_not_after_ms, has_delay, has_weight;
    int64_t priority;
    int64_t weight;
    int64_t delay_ms;      /* from delay_ms */
    int64_t not_before_ms; /* absolute, from not_before; 0: unset */
    int64_t not_after_ms;  /* absolute, from not_after */
    int64_t not_after_rel_ms; /* from not_after_ms: after the task is due */
    int64_t timeout_ms;
} cohort_task_options_t;

/* What a task option's value is, for every edge that reads one: a handler's BSON, the API's
 * JSON field, cohortctl's flag. */
typedef enum cohort_task_option_type {
    COHORT_TASK_OPTION_BOOL,     /* true or false; the flag takes no value and sets true */
    COHORT_TASK_OPTION_INT,      /* an integer in [min, max] */
    COHORT_TASK_OPTION_DURATION, /* ms in [min, max]; the flag takes DUR (250ms, 30s, ...) */
    COHORT_TASK_OPTION_TIME,     /* ms since the epoch or a date; the API and flag also take
                                  * UTC ISO-8601 text */
    COHORT_TASK_OPTION_STRING,   /* 1 to max bytes */
    COHORT_TASK_OPTION_KIND,     /* a kind: 1-64 of [A-Za-z0-9_-] */
} cohort_task_option_type_t;

/* One task option: the single row from which the parser, the HTTP API's fields, cohortctl
 * enqueue's flags and the reference in docs/API.md and docs/CLI.md come. */
typedef struct cohort_task_option {
    const char *name;     /* the key in the options document and the API's field */
    const char *alias;    /* an older spelling every edge also accepts, or NULL */
    const char *flag;     /* cohortctl enqueue's long option, without "--" */
    const char *arg;      /* the flag's value placeholder ("N", "DUR"), NULL for a bool */
    cohort_task_option_type_t type;
    int64_t min, max;     /* bounds of an integer or duration; max: bytes of a string */
    const char *excludes; /* the option it cannot be given with, or NULL; one row of each
                           * such pair names the other, and is named first when refused */
    const char *doc;      /* what it does, one line (Markdown backquotes allowed) */
    size_t value_at;      /* the parser's: where it goes in cohort_task_options_t */
    size_t has_at;        /* the parser's: its has_* flag there, or SIZE_MAX: none */
} cohort_task_option_t;

#define COHORT_TASK_OPTIONS_MAX 32 /* rows of the table, at most (for arrays indexed by row) */

/* Every task option, terminated by a row with a NULL name. */
extern const cohort_task_option_t cohort_task_option_table[];

/* The row named `key` by its name or its alias, or NULL. */
const cohort_task_option_t *cohort_task_option_find(const char *key);

/* "tracked, priority, ..., task_timeout_ms (or timeout_ms), ..." into `out` (truncated to
 * `len`): the known names, for an unknown option's message. */
void cohort_task_option_names(char *out, size_t len);

/* The reference table of the task options (Markdown), as docs/API.md and docs/CLI.md hold it
 * between their "task options" markers (`cohortd --print-task-options=markdown`). */
void cohort_task_options_print_markdown(FILE *out);

/* Parses `opts` (may be NULL: every default). `tracked_default` is what `tracked` is when
 * unset. False with a message naming the bad option. */
bool cohort_task_options_parse(const bson_t *opts, bool tracked_default,
                               cohort_task_options_t *out, bson_error_t *error);

/* Fills the scheduling fields of `task` from `opts` and the service's defaults (for the
 * task's kind); task->now_ms must be set. */
void cohort_task_options_apply(const cohort_task_options_t *opts,
                               const cohort_service_config_t *service, cohort_new_task_t *task);

#endif
