/*
 * settings.c - what reads the settings table row by row (see settings.h): number parsing
 * with ranges, the checks of text values, storing into the config structs, defaults, and the
 * live settings of `cohortctl settings`. The table itself is in settings_table.c.
 *
 * Invariants: every key appears in exactly one row; the rows marked live are exactly the
 * fields of cohort_settings_t (cohort_setting_names lists them in the struct's order, and
 * tests/unit/settings.c checks the two agree); a live row's range is the file's range, so a
 * value the file accepts is a value `cohortctl settings set` accepts and back.
 */
#include "core/settings.h"

#include <errno.h>
#include <mongoc/mongoc.h>
#include <stdlib.h>
#include <string.h>

#include "core/address.h"
#include "core/error.h"
#include "core/timefmt.h"

static bool parse_enum(const cohort_setting_t *row, const char *value, int64_t *out,
                       bson_error_t *error)
{
    if (row->parse) {
        if (row->parse(value, out))
            return true;
    } else {
        for (int64_t i = 0; row->choices[i]; i++) {
            if (strcmp(row->choices[i], value) == 0) {
                *out = i;
                return true;
            }
        }
    }
    char names[128] = "";
    for (size_t i = 0; row->choices[i]; i++) {
        strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, row->choices[i], sizeof names - strlen(names) - 1);
    }
    bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                   "%s = '%s' is not one of %s", row->name, value, names);
    return false;
}

bool cohort_setting_parse_number(const cohort_setting_t *row, const char *value, int64_t *out,
                                 bson_error_t *error)
{
    /* Kind rows report the key's last part, the way the service's own key reads. */
    const char *key = row->pattern && strrchr(row->name, '.') ? strrchr(row->name, '.') + 1
                                                              : row->name;
    if (row->type == COHORT_SETTING_ENUM)
        return parse_enum(row, value, out, error);
    if (row->parse && row->parse(value, out))
        return true;
    if (!*value) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "%s is empty (expected a number)", key);
        return false;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    bool duration = row->type == COHORT_SETTING_DURATION_MS;
    /* A duration takes the units `cohortctl enqueue` takes; a bare number is milliseconds. */
    int64_t ms;
    if (duration && cohort_duration_parse(value, &ms)) {
        v = ms;
    } else if (errno == ERANGE || *end != '\0' || end == value) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "%s = '%s' is not a number%s", key, value,
                       duration ? " of ms or a duration such as 250ms, 30s, 5m, 2h or 1d" : "");
        return false;
    }
    if (v < row->min || v > row->max) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "%s = %lld is out of range [%lld, %lld]", key, v, (long long)row->min,
                       (long long)row->max);
        return false;
    }
    *out = v;
    return true;
}

void cohort_setting_store_number(const cohort_setting_t *row, void *base, int64_t value)
{
    if (row->field.offset < 0)
        return;
    char *at = (char *)base + row->field.offset;
    switch (row->field.width) {
    case 1: {
        bool b = value != 0;
        memcpy(at, &b, 1);
        break;
    }
    case 4: {
        int32_t i = (int32_t)value;
        memcpy(at, &i, 4);
        break;
    }
    default:
        memcpy(at, &value, 8);
        break;
    }
}

bool cohort_setting_store_text(const cohort_setting_t *row, void *base, const char *value,
                               bson_error_t *error)
{
    if (row->field.offset < 0)
        return true;
    char **at = (char **)((char *)base + row->field.offset);
    char *copy = NULL;
    if (value && !(row->empty_unsets && !*value)) {
        copy = strdup(value);
        if (!copy)
            return cohort_error_nomem(error, row->name);
    }
    free(*at);
    *at = copy;
    return true;
}

/* True if `row`'s stored values in `a` and `b` are equal. */
static bool same_value(const cohort_setting_t *row, const void *a, const void *b)
{
    const char *x = (const char *)a + row->field.offset, *y = (const char *)b + row->field.offset;
    if (row->type == COHORT_SETTING_STRING || row->type == COHORT_SETTING_PATH) {
        const char *s = *(char *const *)x, *t = *(char *const *)y;
        return (!s && !t) || (s && t && strcmp(s, t) == 0);
    }
    return memcmp(x, y, row->field.width ? row->field.width : 8) == 0;
}

const cohort_setting_t *cohort_settings_restart_change(cohort_setting_section_t section,
                                                       const void *a, const void *b)
{
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++)
        if (r->section == section && !r->pattern && !r->reloads && r->field.offset >= 0 &&
            !same_value(r, a, b))
            return r;
    return NULL;
}

bool cohort_settings_apply_defaults(cohort_setting_section_t section, void *base,
                                    bson_error_t *error)
{
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
        if (r->section != section || r->pattern || r->field.offset < 0)
            continue;
        if (r->type == COHORT_SETTING_STRING) {
            const char *env = r->env ? getenv(r->env) : NULL;
            if (!cohort_setting_store_text(r, base, env && *env ? env : r->def_text, error))
                return false;
        } else if (r->type != COHORT_SETTING_PATH) {
            cohort_setting_store_number(r, base, r->def);
        }
    }
    return true;
}

/* libmongoc's own parser judges the URI, so a URI the node could not use is refused here
 * (by --check-config too) rather than when the node starts. The message does not repeat
 * the URI: it may hold a password. */
bool cohort_setting_check_uri(const char *value, bson_error_t *error)
{
    if (!*value) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "mongodb_uri is empty");
        return false;
    }
    bson_error_t why;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(value, &why);
    if (uri) {
        mongoc_uri_destroy(uri);
        return true;
    }
    bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                   "mongodb_uri is not a MongoDB connection string: %s", why.message);
    return false;
}

bool cohort_setting_check_database(const char *value, bson_error_t *error)
{
    if (*value && !strpbrk(value, "/\\. \"$") && strlen(value) <= 63)
        return true;
    bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                   "database = '%s' is not a valid MongoDB database name", value);
    return false;
}

bool cohort_setting_check_node_id(const char *value, bson_error_t *error)
{
    size_t len = strlen(value);
    bool ok = len > 0 && len <= COHORT_NODE_ID_MAX;
    for (size_t i = 0; ok && i < len; i++)
        ok = (unsigned char)value[i] > ' ' && (unsigned char)value[i] < 0x7f;
    if (!ok)
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "node_id = '%s' is invalid (1-%d printable characters, no spaces)",
                       value, COHORT_NODE_ID_MAX);
    return ok;
}

/* HOST:PORT with a port in 1-65535; the host is resolved when the listener starts. */
bool cohort_setting_check_listen(const char *value, bson_error_t *error)
{
    cohort_address_t address;
    if (cohort_address_parse(value, &address, error))
        return true;
    cohort_error_prefix(error, "http_listen = ");
    return false;
}

/* ---- live settings ------------------------------------------------------------------------ */

const cohort_setting_t *cohort_setting_find_live(const char *key)
{
    for (const cohort_setting_t *r = cohort_settings_table; key && r->name; r++)
        if (r->live && strcmp(r->name, key) == 0)
            return r;
    return NULL;
}

void cohort_settings_defaults(cohort_settings_t *settings)
{
    for (size_t i = 0; cohort_setting_names[i]; i++)
        *cohort_settings_field(settings, cohort_setting_names[i]) =
            cohort_setting_find_live(cohort_setting_names[i])->def;
}

int64_t *cohort_settings_field(cohort_settings_t *settings, const char *key)
{
    const cohort_setting_t *r = cohort_setting_find_live(key);
    return r ? (int64_t *)((char *)settings + r->live_field.offset) : NULL;
}

void cohort_settings_append(bson_t *doc, const char *key, const cohort_settings_t *settings)
{
    bson_t child;
    cohort_settings_t copy = *settings;
    BSON_APPEND_DOCUMENT_BEGIN(doc, key, &child);
    for (size_t i = 0; cohort_setting_names[i]; i++)
        BSON_APPEND_INT64(&child, cohort_setting_names[i],
                          *cohort_settings_field(&copy, cohort_setting_names[i]));
    bson_append_document_end(doc, &child);
}

void cohort_settings_overlay_iter(cohort_settings_t *settings, bson_iter_t *iter)
{
    while (bson_iter_next(iter)) {
        int64_t *field = cohort_settings_field(settings, bson_iter_key(iter));
        if (field && BSON_ITER_HOLDS_NUMBER(iter))
            *field = bson_iter_as_int64(iter);
    }
}

void cohort_settings_overlay(cohort_settings_t *settings, const bson_t *doc)
{
    bson_iter_t it;
    if (bson_iter_init(&it, doc))
        cohort_settings_overlay_iter(settings, &it);
}

void cohort_settings_list_live_names(char *buf, size_t len)
{
    cohort_settings_list_names(COHORT_SECTION_CLUSTER, true, buf, len);
    size_t used = strlen(buf);
    if (used + 2 < len) {
        snprintf(buf + used, len - used, ", ");
        cohort_settings_list_names(COHORT_SECTION_SERVICE, true, buf + used + 2,
                                   len - used - 2);
    }
}

bool cohort_settings_validate_value(const char *key, int64_t value, bson_error_t *error)
{
    const cohort_setting_t *r = cohort_setting_find_live(key);
    if (r && value >= r->min && value <= r->max)
        return true;
    if (r) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "%s = %lld is out of range [%lld, %lld]", key, (long long)value,
                       (long long)r->min, (long long)r->max);
    } else {
        char names[256];
        cohort_settings_list_live_names(names, sizeof names);
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_NOT_FOUND,
                       "'%s' is not a live setting (known: %s)", key ? key : "", names);
    }
    return false;
}

bool cohort_settings_validate(const cohort_settings_t *settings, bson_error_t *error)
{
    cohort_settings_t copy = *settings;
    for (size_t i = 0; cohort_setting_names[i]; i++)
        if (!cohort_settings_validate_value(cohort_setting_names[i],
                                            *cohort_settings_field(&copy, cohort_setting_names[i]),
                                            error))
            return false;
    for (int rule = 0; rule < COHORT_RULES; rule++)
        if (!cohort_settings_rule_holds((cohort_settings_rule_t)rule, settings, NULL, error))
            return false;
    return true;
}

bool cohort_settings_rule_holds(cohort_settings_rule_t rule, const cohort_settings_t *settings,
                                const char **key, bson_error_t *error)
{
    const cohort_settings_t *s = settings;
    if (rule == COHORT_RULE_TAKEOVER_OVER_TICK && s->takeover_ms <= s->tick_ms) {
        if (key)
            *key = "takeover_ms";
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "takeover_ms (%lld) must be greater than tick_ms (%lld)",
                       (long long)s->takeover_ms, (long long)s->tick_ms);
        return false;
    }
    /* Check-ins happen on the tick, every stall_timeout_ms/3: keep several per timeout. */
    if (rule == COHORT_RULE_STALL_OVER_TICKS && s->stall_timeout_ms < 3 * s->tick_ms) {
        if (key)
            *key = "stall_timeout_ms";
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "stall_timeout_ms (%lld) must be at least 3 * tick_ms (%lld)",
                       (long long)s->stall_timeout_ms, (long long)(3 * s->tick_ms));
        return false;
    }
    return true;
}
