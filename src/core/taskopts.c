/*
 * taskopts.c - the task options: their table (one row each, see taskopts.h), the parser that
 * reads it, its Markdown reference, and how parsed options and a service's defaults make a
 * task's scheduling.
 */
#include "core/taskopts.h"

#include "core/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define KEY_MAX 512 /* unique_key, group, coalesce_key */
#define DAY_MS 86400000LL
#define TIME_MAX (INT64_MAX / 2) /* ms since the epoch */

/* A row whose value goes to `field` of cohort_task_options_t, and `has` to its has_* flag. */
#define AT(field) offsetof(cohort_task_options_t, field)
#define NO_HAS SIZE_MAX

const cohort_task_option_t cohort_task_option_table[] = {
    {"tracked", NULL, "tracked", NULL, COHORT_TASK_OPTION_BOOL, 0, 1, NULL,
     "the task joins the service's open batch (default false)", AT(tracked), NO_HAS},
    {"priority", NULL, "priority", "N", COHORT_TASK_OPTION_INT, -COHORT_PRIORITY_LIMIT,
     COHORT_PRIORITY_LIMIT, NULL, "higher is claimed first (default the kind's or service's)",
     AT(priority), AT(has_priority)},
    {"weight", NULL, "weight", "N", COHORT_TASK_OPTION_INT, 1, COHORT_WEIGHT_MAX, NULL,
     "the load the task puts on a node, counted against its `capacity` (default the kind's or "
     "service's `weight`, 1)",
     AT(weight), AT(has_weight)},
    {"delay_ms", NULL, "delay", "DUR", COHORT_TASK_OPTION_DURATION, 0, 3650 * DAY_MS,
     "not_before", "not claimable before now (the server's clock) + this", AT(delay_ms),
     AT(has_delay)},
    {"not_before", NULL, "not-before", "TIME", COHORT_TASK_OPTION_TIME, 1, TIME_MAX, NULL,
     "not claimable before this time", AT(not_before_ms), NO_HAS},
    {"not_after", NULL, "not-after", "TIME", COHORT_TASK_OPTION_TIME, 1, TIME_MAX,
     "not_after_ms", "promoted (priority + `not_after_boost`) if still pending at this time",
     AT(not_after_ms), AT(has_not_after)},
    {"not_after_ms", NULL, "deadline", "DUR", COHORT_TASK_OPTION_DURATION, 0, 3650 * DAY_MS,
     NULL, "the same, this long after the task is due (default the kind's or service's)",
     AT(not_after_rel_ms), AT(has_not_after_ms)},
    {"task_timeout_ms", "timeout_ms", "timeout", "DUR", COHORT_TASK_OPTION_DURATION, 0,
     7 * DAY_MS, NULL,
     "a run longer than this ends `timed_out`, never retried; 0: none (default the kind's or "
     "service's)",
     AT(timeout_ms), AT(has_timeout)},
    {"kind", NULL, "kind", "K", COHORT_TASK_OPTION_KIND, 1, 64, NULL,
     "the task's kind, whose `kind.NAME.*` settings give its defaults", AT(kind), NO_HAS},
    {"group", NULL, "group", "G", COHORT_TASK_OPTION_STRING, 1, KEY_MAX, NULL,
     "no two tasks of the group run at the same time", AT(group), NO_HAS},
    {"coalesce_key", NULL, "coalesce-key", "K", COHORT_TASK_OPTION_STRING, 1, KEY_MAX, NULL,
     "while a task with this key is pending, it takes the new data instead",
     AT(coalesce_key), NO_HAS},
    {"unique_key", NULL, "unique-key", "K", COHORT_TASK_OPTION_STRING, 1, KEY_MAX,
     "coalesce_key", "at most one task with this key ever exists", AT(unique_key), NO_HAS},
    {NULL, NULL, NULL, NULL, 0, 0, 0, NULL, NULL, 0, 0},
};
#define N_ROWS (sizeof cohort_task_option_table / sizeof cohort_task_option_table[0] - 1)
_Static_assert(N_ROWS <= COHORT_TASK_OPTIONS_MAX, "more task options than COHORT_TASK_OPTIONS_MAX");

const cohort_task_option_t *cohort_task_option_find(const char *key)
{
    for (const cohort_task_option_t *r = cohort_task_option_table; r->name; r++)
        if (strcmp(key, r->name) == 0 || (r->alias && strcmp(key, r->alias) == 0))
            return r;
    return NULL;
}

void cohort_task_option_names(char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (const cohort_task_option_t *r = cohort_task_option_table; r->name && used < len; r++) {
        int n = snprintf(out + used, len - used, "%s%s%s%s%s", used ? ", " : "", r->name,
                         r->alias ? " (or " : "", r->alias ? r->alias : "", r->alias ? ")" : "");
        used += n > 0 ? (size_t)n : 0;
    }
}

/* Fills `error` with a message naming the bad option; returns false. */
#define bad(error, ...) \
    (bson_set_error((error), COHORT_DOMAIN_USAGE, COHORT_CODE_INVALID, __VA_ARGS__), false)

static bool string_option(bson_iter_t *it, int64_t max, const char **out, bson_error_t *error)
{
    uint32_t len = 0;
    if (!BSON_ITER_HOLDS_UTF8(it) || (bson_iter_utf8(it, &len), len == 0 || len > max))
        return bad(error, "task option '%s' must be a string of 1 to %d bytes",
                   bson_iter_key(it), (int)max);
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
    return int_option(it, 1, TIME_MAX, out, error);
}

/* Reads the option of row `r` at `it` into `o`. False with a message naming it. */
static bool row_option(const cohort_task_option_t *r, bson_iter_t *it, cohort_task_options_t *o,
                       bson_error_t *error)
{
    char *at = (char *)o + r->value_at;
    bool ok = true;
    switch (r->type) {
    case COHORT_TASK_OPTION_BOOL:
        if (!BSON_ITER_HOLDS_BOOL(it))
            return bad(error, "task option '%s' must be a bool", bson_iter_key(it));
        *(bool *)at = bson_iter_bool(it);
        break;
    case COHORT_TASK_OPTION_INT:
    case COHORT_TASK_OPTION_DURATION:
        ok = int_option(it, r->min, r->max, (int64_t *)at, error);
        break;
    case COHORT_TASK_OPTION_TIME:
        ok = time_option(it, (int64_t *)at, error);
        break;
    case COHORT_TASK_OPTION_STRING:
        ok = string_option(it, r->max, (const char **)at, error);
        break;
    case COHORT_TASK_OPTION_KIND:
        if (!BSON_ITER_HOLDS_UTF8(it) || !cohort_config_valid_kind(bson_iter_utf8(it, NULL)))
            return bad(error, "task option '%s' must be 1-64 of [A-Za-z0-9_-]",
                       bson_iter_key(it));
        *(const char **)at = bson_iter_utf8(it, NULL);
        break;
    }
    if (ok && r->has_at != NO_HAS)
        *((bool *)((char *)o + r->has_at)) = true;
    return ok;
}

/* The row named `key`, given for the first time; else false with a message. */
static const cohort_task_option_t *known_option(const char *key, bool seen[N_ROWS],
                                                bson_error_t *error)
{
    const cohort_task_option_t *r = cohort_task_option_find(key);
    if (!r) {
        char names[512];
        cohort_task_option_names(names, sizeof names);
        (void)bad(error, "unknown task option '%s' (known: %s)", key, names);
        return NULL;
    }
    size_t i = (size_t)(r - cohort_task_option_table);
    if (seen[i]) {
        if (r->alias)
            (void)bad(error, "task option '%s' is given twice (as '%s' or '%s')", key,
                      r->name, r->alias);
        else
            (void)bad(error, "task option '%s' is given twice", key);
        return NULL;
    }
    seen[i] = true;
    return r;
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
    bool seen[N_ROWS] = {false};
    while (bson_iter_next(&it)) {
        const cohort_task_option_t *r = known_option(bson_iter_key(&it), seen, error);
        if (!r || !row_option(r, &it, o, error))
            return false;
    }
    for (size_t i = 0; i < N_ROWS; i++) {
        const cohort_task_option_t *r = &cohort_task_option_table[i];
        const cohort_task_option_t *other =
            r->excludes ? cohort_task_option_find(r->excludes) : NULL;
        if (seen[i] && other && seen[other - cohort_task_option_table])
            return bad(error, "task options '%s' and '%s' exclude each other", r->name,
                       other->name);
    }
    return true;
}

/* The value column of row `r`: its type and bounds. */
static void print_value(FILE *out, const cohort_task_option_t *r)
{
    switch (r->type) {
    case COHORT_TASK_OPTION_BOOL:
        fprintf(out, "bool");
        break;
    case COHORT_TASK_OPTION_INT:
        fprintf(out, "integer, %lld..%lld", (long long)r->min, (long long)r->max);
        break;
    case COHORT_TASK_OPTION_DURATION:
        fprintf(out, "ms, %lld..%lld (flag: DUR)", (long long)r->min, (long long)r->max);
        break;
    case COHORT_TASK_OPTION_TIME:
        fprintf(out, "ms since the epoch, a BSON date, or (API, flag) UTC ISO-8601 text");
        break;
    case COHORT_TASK_OPTION_STRING:
        fprintf(out, "string, 1..%lld bytes", (long long)r->max);
        break;
    case COHORT_TASK_OPTION_KIND:
        fprintf(out, "1-64 of `[A-Za-z0-9_-]`");
        break;
    }
}

void cohort_task_options_print_markdown(FILE *out)
{
    fprintf(out, "| option (API field) | `cohortctl enqueue` | value | what it does |\n"
                 "|---|---|---|---|\n");
    for (const cohort_task_option_t *r = cohort_task_option_table; r->name; r++) {
        fprintf(out, "| `%s`", r->name);
        if (r->alias)
            fprintf(out, " (alias `%s`)", r->alias);
        fprintf(out, " | `--%s%s%s` | ", r->flag, r->arg ? " " : "", r->arg ? r->arg : "");
        print_value(out, r);
        fprintf(out, " | %s", r->doc);
        for (const cohort_task_option_t *q = cohort_task_option_table; q->name; q++)
            if (q == r ? q->excludes != NULL : q->excludes && strcmp(q->excludes, r->name) == 0)
                fprintf(out, "; not with `%s`", q == r ? q->excludes : q->name);
        fprintf(out, " |\n");
    }
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
