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
#include "store/store.h"

typedef struct cohort_task_options {
    bool tracked;
    const char *unique_key; /* views into the options document; NULL if unset */
    const char *kind;
    const char *group;
    const char *coalesce_key;
    bool has_priority, has_timeout, has_not_after, has_not_after_ms, has_delay;
    int64_t priority;
    int64_t delay_ms;      /* from delay_ms */
    int64_t not_before_ms; /* absolute, from not_before; 0: unset */
    int64_t not_after_ms;  /* absolute, from not_after */
    int64_t not_after_rel_ms; /* from not_after_ms: after the task is due */
    int64_t timeout_ms;
} cohort_task_options_t;

/* Parses `opts` (may be NULL: every default). `tracked_default` is what `tracked` is when
 * unset. False with a message naming the bad option. */
bool cohort_task_options_parse(const bson_t *opts, bool tracked_default,
                               cohort_task_options_t *out, char *why, size_t whylen);

/* Fills the scheduling fields of `task` from `opts` and the service's defaults (for the
 * task's kind); task->now_ms must be set. */
void cohort_task_options_apply(const cohort_task_options_t *opts,
                               const cohort_service_config_t *service, cohort_new_task_t *task);

#endif
