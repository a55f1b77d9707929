/*
 * schedule.c - parses a `schedule.ID` line (see schedule.h).
 *
 * The line is split on `;` outside JSON strings and brackets, so `data={"a": "x;y"}` stays
 * whole. The task options are built into the BSON document cohort_task_options_parse()
 * reads, each checked here against the same bounds (this file cannot include taskopts.h,
 * which includes config.h, which includes this; tests/unit/schedule.c proves every document
 * built here passes cohort_task_options_parse()).
 */
#include "core/schedule.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/jsondoc.h"
#include "core/settings.h"
#include "core/timefmt.h"

#define DAY_MS 86400000LL
#define GROUP_MAX 512 /* as taskopts.c's KEY_MAX */

#define bad(error, ...) \
    (bson_set_error((error), COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID, __VA_ARGS__), false)

static const char *const catch_up_names[] = {"none", "latest", "all"};

const char *cohort_catch_up_name(cohort_catch_up_t mode)
{
    return catch_up_names[mode];
}

/* 1-64 of [A-Za-z0-9_-]: the alphabet of ids and of kinds, safe in a field name. */
static bool valid_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > COHORT_KIND_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '-')
            return false;
    return true;
}

bool cohort_schedule_valid_id(const char *id)
{
    return valid_name(id);
}

void cohort_schedule_clear(cohort_schedule_config_t *s)
{
    free(s->id);
    free(s->spec);
    free(s->cron_text);
    cohort_tz_destroy(s->tz);
    if (s->options)
        bson_destroy(s->options);
    if (s->data)
        bson_destroy(s->data);
    memset(s, 0, sizeof *s);
}

/* The next `;`-separated part of *p (outside strings and brackets), trimmed, into a new
 * string; NULL at the end or out of memory (*oom then). */
static char *next_part(const char **p, bool *oom)
{
    const char *s = *p;
    if (!s)
        return NULL;
    int depth = 0;
    bool in_string = false;
    const char *end = s;
    for (; *end; end++) {
        if (in_string) {
            if (*end == '\\' && end[1])
                end++;
            else if (*end == '"')
                in_string = false;
        } else if (*end == '"') {
            in_string = true;
        } else if (*end == '{' || *end == '[') {
            depth++;
        } else if ((*end == '}' || *end == ']') && depth > 0) {
            depth--;
        } else if (*end == ';' && depth == 0) {
            break;
        }
    }
    *p = *end ? end + 1 : NULL;
    while (s < end && isspace((unsigned char)*s))
        s++;
    while (end > s && isspace((unsigned char)end[-1]))
        end--;
    char *part = strndup(s, (size_t)(end - s));
    *oom = !part;
    return part;
}

static bool parse_int(const char *text, int64_t *out)
{
    char *end;
    if (!*text)
        return false;
    long long v = strtoll(text, &end, 10);
    *out = v;
    return *end == '\0';
}

/* One `key=value` option into `s` (and the task options `opts`). */
static bool option(cohort_schedule_config_t *s, bson_t *opts, const char *key, const char *value,
                   bson_error_t *error)
{
    int64_t n;
    if (strcmp(key, "tz") == 0) {
        cohort_tz_destroy(s->tz);
        s->tz = cohort_tz_load(value, error);
        return s->tz != NULL;
    }
    if (strcmp(key, "catch_up") == 0) {
        for (int i = 0; i < 3; i++)
            if (strcmp(value, catch_up_names[i]) == 0) {
                s->catch_up = (cohort_catch_up_t)i;
                return true;
            }
        return bad(error, "option 'catch_up' = '%s' must be none, latest or all", value);
    }
    if (strcmp(key, "catch_up_max") == 0) {
        if (!parse_int(value, &n) || n < 1 || n > COHORT_CATCH_UP_MAX_LIMIT)
            return bad(error, "option 'catch_up_max' = '%s' must be a whole number in [1, %d]",
                       value, COHORT_CATCH_UP_MAX_LIMIT);
        s->catch_up_max = n;
        return true;
    }
    if (strcmp(key, "data") == 0) {
        bson_error_t why;
        bson_t parsed;
        if (value[0] != '{' || !cohort_json_parse_doc(value, false, &parsed, &why))
            return bad(error, "option 'data' must be a JSON object: %s",
                       value[0] != '{' ? "not an object" : why.message);
        bson_t *data = bson_copy(&parsed);
        bson_destroy(&parsed);
        if (s->data)
            bson_destroy(s->data);
        s->data = data;
        return true;
    }
    if (strcmp(key, "unique_key") == 0 || strcmp(key, "coalesce_key") == 0)
        return bad(error,
                   "option '%s' is not for schedules: each slot's task has the unique key "
                   "schedule:ID:SLOT, which is what makes a slot run once",
                   key);
    /* The task options, under the names `cohortctl enqueue` gives its flags. */
    if (strcmp(key, "kind") == 0) {
        if (!valid_name(value))
            return bad(error, "option 'kind' = '%s' must be 1-64 of [A-Za-z0-9_-]", value);
        BSON_APPEND_UTF8(opts, key, value);
    } else if (strcmp(key, "group") == 0) {
        if (!*value || strlen(value) > GROUP_MAX)
            return bad(error, "option 'group' must be 1 to %d bytes", GROUP_MAX);
        BSON_APPEND_UTF8(opts, key, value);
    } else if (strcmp(key, "priority") == 0) {
        if (!parse_int(value, &n) || n < -COHORT_PRIORITY_LIMIT || n > COHORT_PRIORITY_LIMIT)
            return bad(error, "option 'priority' = '%s' must be an integer in [%d, %d]", value,
                       -COHORT_PRIORITY_LIMIT, COHORT_PRIORITY_LIMIT);
        BSON_APPEND_INT64(opts, "priority", n);
    } else if (strcmp(key, "weight") == 0) {
        if (!parse_int(value, &n) || n < 1 || n > COHORT_WEIGHT_MAX)
            return bad(error, "option 'weight' = '%s' must be an integer in [1, %d]", value,
                       COHORT_WEIGHT_MAX);
        BSON_APPEND_INT64(opts, "weight", n);
    } else if (strcmp(key, "timeout") == 0 || strcmp(key, "deadline") == 0) {
        int64_t max = key[0] == 't' ? 7 * DAY_MS : 3650 * DAY_MS;
        if (!cohort_duration_parse(value, &n) || n > max)
            return bad(error, "option '%s' = '%s' must be a duration like 30s, 5m or 2h, at "
                       "most %lld days", key, value, (long long)(max / DAY_MS));
        BSON_APPEND_INT64(opts, key[0] == 't' ? "task_timeout_ms" : "not_after_ms", n);
    } else if (strcmp(key, "tracked") == 0) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
            return bad(error, "option 'tracked' = '%s' must be true or false", value);
        BSON_APPEND_BOOL(opts, "tracked", value[0] == 't');
    } else {
        return bad(error,
                   "unknown option '%s' (known: kind, priority, weight, data, timeout, deadline, "
                   "group, tracked, tz, catch_up, catch_up_max)",
                   key);
    }
    return true;
}

bool cohort_schedule_parse(const char *id, const char *value, int line,
                           cohort_schedule_config_t *s, bson_error_t *error)
{
    memset(s, 0, sizeof *s);
    s->line = line;
    s->catch_up = COHORT_CATCH_UP_LATEST;
    s->catch_up_max = COHORT_CATCH_UP_MAX_DEFAULT;
    if (!cohort_schedule_valid_id(id))
        return bad(error, "schedule id '%s' must be 1-%d of [A-Za-z0-9_-]", id,
                   COHORT_SCHEDULE_ID_MAX);
    s->id = strdup(id);
    s->spec = strdup(value);
    s->options = bson_new();
    if (!s->id || !s->spec || !s->options)
        return cohort_error_nomem(error, "a schedule");
    const char *p = value;
    bool oom = false;
    s->cron_text = next_part(&p, &oom);
    if (oom)
        return cohort_error_nomem(error, "a schedule");
    if (!s->cron_text || !*s->cron_text)
        return bad(error, "no cron expression (expected 'schedule.%s = CRON ; key=value ...')",
                   id);
    if (!cohort_cron_parse(s->cron_text, &s->cron, error))
        return false;
    bool seen_tz = false;
    char *part;
    while ((part = next_part(&p, &oom))) {
        char *eq = strchr(part, '=');
        if (!*part) {
            free(part);
            continue;
        }
        if (!eq) {
            (void)bad(error, "option '%s' is not key=value", part);
            free(part);
            return false;
        }
        char *key = part, *val = eq + 1;
        char *kend = eq;
        while (kend > key && isspace((unsigned char)kend[-1]))
            kend--;
        *kend = '\0';
        val += strspn(val, " \t");
        seen_tz |= strcmp(key, "tz") == 0;
        bool ok = option(s, s->options, key, val, error);
        free(part);
        if (!ok)
            return false;
    }
    if (oom)
        return cohort_error_nomem(error, "a schedule");
    if (!seen_tz && !(s->tz = cohort_tz_load("UTC", error)))
        return false;
    return true;
}

void cohort_schedule_slot_key(const char *id, int64_t slot_ms, char *buf, size_t len)
{
    char when[COHORT_TIME_TEXT_MAX];
    cohort_time_format(slot_ms, when, sizeof when);
    snprintf(buf, len, "schedule:%s:%s", id, when);
}

void cohort_schedule_series(const cohort_schedule_config_t *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s @ %s", s->cron_text, cohort_tz_name(s->tz));
}
