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

/* Parses `opts` (may be NULL: every default). `tracked_default` is what `tracked` is when
 * unset. False with a message naming the bad option. */
bool cohort_task_options_parse(const bson_t *opts, bool tracked_default,
                               cohort_task_options_t *out, bson_error_t *error);

/* Fills the scheduling fields of `task` from `opts` and the service's defaults (for the
 * task's kind); task->now_ms must be set. */
void cohort_task_options_apply(const cohort_task_options_t *opts,
                               const cohort_service_config_t *service, cohort_new_task_t *task);

#endif
