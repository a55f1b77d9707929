/*
 * api_ops_parse.c - the bodies of the operators' endpoints (see api_ops.h): tasks:bulk and
 * settings. Pure functions, as in api_parse.c: they check every field alone so a refusal
 * names it, and apply cohortctl's rules (which statuses an action takes, which filter a
 * cancel needs, each setting's range) without touching the database.
 */
#include "node/http/api_ops.h"

#include <string.h>

#include "core/config.h"
#include "core/settings.h"

#define bad_request(err, ...) cohort_api_fail((err), 400, "bad_request", __VA_ARGS__)

static const struct action_rule {
    const char *name;
    cohort_task_action_t action;
    const char *default_status; /* NULL: filter.status is required */
    const char *statuses;       /* for the refusal */
} action_rules[] = {
    {"retry", COHORT_ACTION_RETRY, NULL, "failed, timed_out or cancelled"},
    {"cancel", COHORT_ACTION_CANCEL, "pending", "pending (a claimed task is running)"},
    {"delete", COHORT_ACTION_DELETE, NULL, "succeeded, failed, timed_out or cancelled"},
};

/* A whole number (int32 or int64; a double only if it has no fraction) into *out. */
static bool whole_number(const bson_iter_t *it, int64_t *out)
{
    if (BSON_ITER_HOLDS_INT32(it) || BSON_ITER_HOLDS_INT64(it)) {
        *out = bson_iter_as_int64(it);
        return true;
    }
    if (BSON_ITER_HOLDS_DOUBLE(it)) {
        double d = bson_iter_double(it);
        if (d >= -9.0e15 && d <= 9.0e15 && d == (double)(int64_t)d) {
            *out = (int64_t)d;
            return true;
        }
    }
    return false;
}

/* The index of `key` among the N_FIELDS `names`, marked in `seen`; or -1 with `err` filled:
 * an unknown field (the refusal lists the known ones) or one given twice. `where` prefixes the
 * field's name in the refusal ("filter." inside the filter, else ""). */
#define N_FIELDS 4
static int known_field(const char *key, const char *const names[N_FIELDS], bool seen[N_FIELDS],
                       const char *where, cohort_api_error_t *err)
{
    int i = 0;
    while (i < N_FIELDS && strcmp(key, names[i]) != 0)
        i++;
    if (i == N_FIELDS) {
        bad_request(err, "unknown field '%s%.64s' (known: %s, %s, %s, %s)", where, key, names[0],
                    names[1], names[2], names[3]);
        return -1;
    }
    if (seen[i]) {
        bad_request(err, "field '%s%s' given twice", where, key);
        return -1;
    }
    seen[i] = true;
    return i;
}

/* The filter object of a bulk body. *status_name receives filter.status if given. */
static bool parse_filter(bson_iter_t *filter, cohort_api_bulk_t *bulk, const char **status_name,
                         bool *filtered, cohort_api_error_t *err)
{
    bool seen[N_FIELDS] = {false};
    static const char *const names[N_FIELDS] = {"status", "kind", "group", "older_than_ms"};
    while (bson_iter_next(filter)) {
        const char *key = bson_iter_key(filter);
        int i = known_field(key, names, seen, "filter.", err);
        if (i < 0)
            return false;
        *filtered = true;
        const char *text = BSON_ITER_HOLDS_UTF8(filter) ? bson_iter_utf8(filter, NULL) : NULL;
        if (i == 0) {
            if (!text || !cohort_status_parse(text, &bulk->status))
                return bad_request(err, "field 'filter.status' must be one of pending, claimed, "
                                        "succeeded, failed, timed_out, cancelled");
            *status_name = text;
        } else if (i == 1 || i == 2) {
            if (!text || !cohort_config_valid_kind(text))
                return bad_request(err, "field 'filter.%s' must be 1-64 of [A-Za-z0-9_-]", key);
            *(i == 1 ? &bulk->kind : &bulk->group) = text;
        } else if (!whole_number(filter, &bulk->older_than_ms) || bulk->older_than_ms <= 0) {
            return bad_request(err, "field 'filter.older_than_ms' must be a whole number of "
                                    "milliseconds, at least 1");
        }
    }
    return true;
}

bool cohort_api_parse_bulk(const bson_t *body, cohort_api_bulk_t *bulk, cohort_api_error_t *err)
{
    memset(bulk, 0, sizeof *bulk);
    bulk->limit = COHORT_API_BULK_MAX;
    const struct action_rule *rule = NULL;
    const char *status_name = NULL;
    bool filtered = false, seen[N_FIELDS] = {false};
    static const char *const names[N_FIELDS] = {"action", "filter", "limit", "dry_run"};
    bson_iter_t it, filter;
    if (!bson_iter_init(&it, body))
        return bad_request(err, "the body is not a valid document");
    while (bson_iter_next(&it)) {
        int i = known_field(bson_iter_key(&it), names, seen, "", err);
        if (i < 0)
            return false;
        if (i == 0) {
            const char *text = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
            for (size_t r = 0; r < sizeof action_rules / sizeof action_rules[0]; r++)
                if (strcmp(text, action_rules[r].name) == 0)
                    rule = &action_rules[r];
            if (!rule)
                return bad_request(err, "field 'action' must be retry, cancel or delete");
        } else if (i == 1) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &filter))
                return bad_request(err, "field 'filter' must be an object");
            if (!parse_filter(&filter, bulk, &status_name, &filtered, err))
                return false;
        } else if (i == 2) {
            if (!whole_number(&it, &bulk->limit) || bulk->limit < 1 ||
                bulk->limit > COHORT_API_BULK_MAX)
                return bad_request(err, "field 'limit' must be a whole number in 1..%d",
                                   COHORT_API_BULK_MAX);
        } else {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return bad_request(err, "field 'dry_run' must be true or false");
            bulk->dry_run = bson_iter_bool(&it);
        }
    }
    if (!rule)
        return bad_request(err, "field 'action' is required: retry, cancel or delete");
    bulk->action = rule->action;
    bulk->action_name = rule->name;
    /* cohortctl's rules: a status the action applies to, given or the action's default */
    if (!status_name && !rule->default_status)
        return bad_request(err, "field 'filter.status' is required for %s (which tasks?)",
                           rule->name);
    if (!status_name)
        cohort_status_parse(rule->default_status, &bulk->status);
    if (!cohort_task_action_applies(bulk->action, bulk->status))
        return cohort_api_fail(err, 409, "conflict",
                               "filter.status %s: %s applies to %s tasks only",
                               cohort_status_name(bulk->status), rule->name, rule->statuses);
    if (bulk->action == COHORT_ACTION_CANCEL && !filtered)
        return bad_request(err, "which tasks? give a filter: {\"status\": \"pending\"} (all of "
                                "them), a kind or a group");
    return true;
}

bool cohort_api_parse_settings(const bson_t *body, cohort_api_settings_patch_t *patch,
                               cohort_api_error_t *err)
{
    memset(patch, 0, sizeof *patch);
    bson_iter_t it;
    if (!bson_iter_init(&it, body))
        return bad_request(err, "the body is not a valid document");
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        bson_error_t why;
        cohort_settings_t probe = {0};
        if (!cohort_settings_field(&probe, key)) {
            cohort_settings_validate_value(key, 0, &why);
            return bad_request(err, "field '%.64s': %s", key, why.message);
        }
        for (size_t i = 0; i < patch->n; i++)
            if (strcmp(patch->items[i].name, key) == 0)
                return bad_request(err, "field '%s' given twice", key);
        if (patch->n == COHORT_API_SETTINGS_MAX)
            return bad_request(err, "too many fields");
        int64_t value = 0;
        bool set = !BSON_ITER_HOLDS_NULL(&it);
        if (set && !whole_number(&it, &value))
            return bad_request(err, "field '%s' must be a whole number, or null to unset it",
                               key);
        if (set && !cohort_settings_validate_value(key, value, &why))
            return bad_request(err, "field '%s': %s", key, why.message);
        patch->items[patch->n].name = key;
        patch->items[patch->n].set = set;
        patch->items[patch->n].value = value;
        patch->n++;
    }
    if (patch->n == 0)
        return bad_request(err, "the body names no setting: {\"tick_ms\": 500, "
                                "\"takeover_ms\": null, ...}");
    return true;
}
