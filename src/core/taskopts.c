/*
 * taskopts.c - parses and applies task creation options (see taskopts.h).
 */
#include "core/taskopts.h"

#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define KEY_MAX 512 /* unique_key, group, coalesce_key */

/* Fills `error` with a message naming the bad option; returns false. */
#define bad(error, ...) \
    (bson_set_error((error), COHORT_DOMAIN_USAGE, COHORT_CODE_INVALID, __VA_ARGS__), false)

static bool string_option(bson_iter_t *it, const char **out, bson_error_t *error)
{
    uint32_t len = 0;
    if (!BSON_ITER_HOLDS_UTF8(it) || (bson_iter_utf8(it, &len), len == 0 || len > KEY_MAX))
        return bad(error, "task option '%s' must be a string of 1 to %d bytes",
                   bson_iter_key(it), KEY_MAX);
    *out = bson_iter_utf8(it, NULL);
    return true;
}

static bool int_option(bson_iter_t *it, int64_t min, int64_t max, int64_t *out, bson_error_t *error)
{
    if (!BSON_ITER_HOLDS_INT32(it) && !BSON_ITER_HOLDS_INT64(it))
        return bad(error, "task option '%s' must be an integer", bson_iter_key(it));
    int64_t v = bson_iter_as_int64(it);
    if (v < min || v > max)
        return bad(error, "task option '%s' = %lld is out of range [%lld, %lld]",
                   bson_iter_key(it), (long long)v, (long long)min, (long long)max);
    *out = v;
    return true;
}

/* A date, or an integer of ms since the Unix epoch. */
static bool time_option(bson_iter_t *it, int64_t *out, bson_error_t *error)
{
    if (BSON_ITER_HOLDS_DATE_TIME(it)) {
        *out = bson_iter_date_time(it);
        return *out > 0 || bad(error, "task option '%s' must be after 1970",
                               bson_iter_key(it));
    }
    return int_option(it, 1, INT64_MAX / 2, out, error);
}

bool cohort_task_options_parse(const bson_t *opts, bool tracked_default,
                               cohort_task_options_t *o, bson_error_t *error)
{
    memset(o, 0, sizeof *o);
    o->tracked = tracked_default;
    if (!opts)
        return true;
    bson_iter_t it;
    if (!bson_iter_init(&it, opts))
        return bad(error, "task options are not a valid BSON document");
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        bool ok = true;
        if (strcmp(key, "tracked") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return bad(error, "task option 'tracked' must be a bool");
            o->tracked = bson_iter_bool(&it);
        } else if (strcmp(key, "unique_key") == 0) {
            ok = string_option(&it, &o->unique_key, error);
        } else if (strcmp(key, "group") == 0) {
            ok = string_option(&it, &o->group, error);
        } else if (strcmp(key, "coalesce_key") == 0) {
            ok = string_option(&it, &o->coalesce_key, error);
        } else if (strcmp(key, "kind") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it) || !cohort_config_valid_kind(bson_iter_utf8(&it, NULL)))
                return bad(error, "task option 'kind' must be 1-64 of [A-Za-z0-9_-]");
            o->kind = bson_iter_utf8(&it, NULL);
        } else if (strcmp(key, "priority") == 0) {
            ok = o->has_priority = int_option(&it, -COHORT_PRIORITY_LIMIT, COHORT_PRIORITY_LIMIT,
                                              &o->priority, error);
        } else if (strcmp(key, "weight") == 0) {
            ok = o->has_weight = int_option(&it, 1, COHORT_WEIGHT_MAX, &o->weight, error);
        } else if (strcmp(key, "delay_ms") == 0) {
            ok = o->has_delay = int_option(&it, 0, 3650LL * 86400000, &o->delay_ms, error);
        } else if (strcmp(key, "not_before") == 0) {
            ok = time_option(&it, &o->not_before_ms, error);
        } else if (strcmp(key, "not_after") == 0) {
            ok = o->has_not_after = time_option(&it, &o->not_after_ms, error);
        } else if (strcmp(key, "not_after_ms") == 0) {
            ok = o->has_not_after_ms =
                int_option(&it, 0, 3650LL * 86400000, &o->not_after_rel_ms, error);
        } else if (strcmp(key, "task_timeout_ms") == 0) {
            ok = o->has_timeout = int_option(&it, 0, 7LL * 86400000, &o->timeout_ms, error);
        } else {
            return bad(error,
                       "unknown task option '%s' (known: tracked, unique_key, priority, "
                       "delay_ms, not_before, not_after, not_after_ms, kind, group, "
                       "coalesce_key, task_timeout_ms, weight)",
                       key);
        }
        if (!ok)
            return false;
    }
    if (o->has_delay && o->not_before_ms > 0)
        return bad(error, "task options 'delay_ms' and 'not_before' exclude each other");
    if (o->has_not_after && o->has_not_after_ms)
        return bad(error, "task options 'not_after' and 'not_after_ms' exclude each other");
    if (o->unique_key && o->coalesce_key)
        return bad(error, "task options 'unique_key' and 'coalesce_key' exclude each other");
    return true;
}

void cohort_task_options_apply(const cohort_task_options_t *o,
                               const cohort_service_config_t *service, cohort_new_task_t *task)
{
    cohort_task_defaults_t d = {0};
    if (service)
        d = cohort_config_task_defaults(service, o->kind);
    task->kind = o->kind;
    task->group = o->group;
    task->coalesce_key = o->coalesce_key;
    task->priority = o->has_priority ? o->priority : d.priority;
    task->weight = o->has_weight ? o->weight : d.weight > 0 ? d.weight : 1;
    task->timeout_ms = o->has_timeout ? o->timeout_ms : d.task_timeout_ms;
    task->timeout_set = o->has_timeout;
    task->not_before_ms = o->not_before_ms > 0 ? o->not_before_ms
                          : o->delay_ms > 0    ? task->now_ms + o->delay_ms
                                               : 0;
    int64_t due = task->not_before_ms > task->now_ms ? task->not_before_ms : task->now_ms;
    int64_t rel = o->has_not_after_ms ? o->not_after_rel_ms : d.not_after_ms;
    task->not_after_ms = o->has_not_after ? o->not_after_ms : rel > 0 ? due + rel : 0;
}
