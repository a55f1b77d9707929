/*
 * settings.h - the one table of configuration keys (in the manner of Redis's standardConfig):
 * every key of the config file once, [cluster] and [service:NAME] alike, with its type,
 * default, range, whether it can change at run time, and its one-line documentation.
 *
 * Everything that knows about keys reads this table: the INI parser in config.c (defaults,
 * types, ranges, unknown keys), `cohortd --check-config`, the live settings of
 * `cohortctl settings` (the rows marked live), what a SIGHUP must refuse and the generated
 * docs/CONFIGURATION.md (`cohortd --print-settings=markdown`). Adding a key is adding a row.
 *
 * Keys with a variable part (`kind.KIND.priority`, the handler's own options) are rows too,
 * marked as patterns, so the reference documents them; the parser matches them by shape.
 *
 * Errors are bson_error_t (core/error.h), in the domain COHORT_DOMAIN_CONFIG.
 */
#ifndef COHORT_SETTINGS_H
#define COHORT_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <bson/bson.h>

#define COHORT_SERVICE_NAME_MAX 64
#define COHORT_NODE_ID_MAX 128
#define COHORT_TAKEOVER_MS_MAX 86400000 /* the largest takeover_ms (and declared lease) */
#define COHORT_KIND_MAX 64            /* a kind name: 1-64 of [A-Za-z0-9_-] */
#define COHORT_PRIORITY_LIMIT 1000000 /* priorities lie in [-LIMIT, LIMIT] */
#define COHORT_CLAIM_BATCH_MAX 256
#define COHORT_WEIGHT_MAX 1000        /* a task's weight lies in [1, MAX] (node/work/capacity.h) */
#define COHORT_CAPACITY_MAX 1000000   /* a node's capacity, in weight units */
#define COHORT_CLAIM_BATCH_AUTO 0 /* claim_batch = auto: node/work/prefetch.h sizes each claim */

typedef enum cohort_setting_section {
    COHORT_SECTION_CLUSTER, /* [cluster] */
    COHORT_SECTION_SERVICE, /* [service:NAME] */
} cohort_setting_section_t;

typedef enum cohort_setting_type {
    COHORT_SETTING_DURATION_MS, /* whole milliseconds, in [min, max] */
    COHORT_SETTING_COUNT,       /* a whole number, in [min, max] */
    COHORT_SETTING_STRING,      /* text, checked by the row's `check` if any */
    COHORT_SETTING_PATH,        /* a file path, relative to the config file's folder */
    COHORT_SETTING_ENUM,        /* one of the row's `choices` */
    COHORT_SETTING_OPTION,      /* any other key: handed to the handler (a pattern row) */
} cohort_setting_type_t;

/* Where a parsed value is stored: a field of cohort_config_t ([cluster] rows), of
 * cohort_service_config_t ([service:NAME] rows) or of cohort_kind_config_t (kind rows),
 * given by offset and width (1, 4 or 8 bytes for numbers and enums; a char * for text). */
typedef struct cohort_setting_field {
    ptrdiff_t offset; /* -1: the parser handles the key itself */
    unsigned char width;
} cohort_setting_field_t;

typedef struct cohort_setting {
    const char *name; /* "tick_ms"; a pattern: "kind.KIND.priority", "KEY" */
    cohort_setting_section_t section;
    cohort_setting_type_t type;
    int64_t def;          /* numbers and enums: the default (an enum's value) */
    const char *def_text; /* text: the default (NULL: unset); others: how the docs show it */
    int64_t min, max;     /* numbers: the range */
    const char *const *choices; /* enums: the names, NULL-terminated, values 0, 1, ... */
    /* enums: a parser accepting more than `choices` (aliases, any case); NULL: exact names.
     * Counts: a word accepted besides numbers (claim_batch's `auto`); NULL: numbers only */
    bool (*parse)(const char *text, int64_t *value);
    /* text: extra rule; false with `error` set (the message names the key and value) */
    bool (*check)(const char *value, bson_error_t *error);
    bool empty_unsets;   /* text: an empty value means "none" (the field stays NULL) */
    const char *env;     /* an environment variable that wins over the file, or NULL */
    bool pattern;        /* `name` has a variable part */
    bool live;           /* changeable with `cohortctl settings set` (in cohort_settings_t) */
    bool reloads;        /* a SIGHUP applies a new value from the file */
    cohort_setting_field_t field;      /* in the section's struct (or the kind's) */
    cohort_setting_field_t live_field; /* in cohort_settings_t, for live rows */
    const char *doc; /* one line for the reference: what it does, what to watch */
} cohort_setting_t;

/* The checks of the text rows (the table's `check`): mongodb_uri not empty, database a valid
 * MongoDB database name, node_id 1-128 printable characters without spaces, http_listen
 * HOST:PORT. */
bool cohort_setting_check_uri(const char *value, bson_error_t *error);
bool cohort_setting_check_database(const char *value, bson_error_t *error);
bool cohort_setting_check_node_id(const char *value, bson_error_t *error);
bool cohort_setting_check_listen(const char *value, bson_error_t *error);

/* The table, NULL-name-terminated, in the reference's order. Static; never freed. */
extern const cohort_setting_t cohort_settings_table[];

/* The first fixed row of `section` that a SIGHUP cannot apply (not `reloads`) whose value
 * differs between `a` and `b` (two cohort_config_t or two cohort_service_config_t), or NULL
 * if they agree on all of them: what a reload must refuse, named by the table. */
const cohort_setting_t *cohort_settings_restart_change(cohort_setting_section_t section,
                                                       const void *a, const void *b);

/* The row of a fixed key in `section`, or NULL (patterns are not matched here). */
const cohort_setting_t *cohort_setting_find(cohort_setting_section_t section, const char *name);

/* The row of the live setting `key` (NULL, or not live: NULL). */
const cohort_setting_t *cohort_setting_find_live(const char *key);

/* The row of a `kind.KIND.KEY` key for KEY ("priority"...), or NULL. */
const cohort_setting_t *cohort_setting_find_kind(const char *key);

/* The names of `section`'s fixed keys, ", "-separated, into `buf` (for "known: ..."). */
void cohort_settings_list_names(cohort_setting_section_t section, bool live_only, char *buf,
                                size_t len);

/* The fixed key of `section` that `key` is most likely a typo of ("wokers" -> "workers"), or
 * NULL if none is near enough (suggest.c says how near). Static. */
const char *cohort_settings_did_you_mean(cohort_setting_section_t section, const char *key);

/* Parses `value` for a number or enum row: false with a message a person can act on
 * ("workers = 1025 is out of range [1, 1024]"). */
bool cohort_setting_parse_number(const cohort_setting_t *row, const char *value, int64_t *out,
                                 bson_error_t *error);

/* Stores `value` into `base` (the row's struct) at the row's field, or does nothing if the
 * row has no field. Text rows store a strdup'd copy (NULL for NULL, or for an empty value of
 * an empty_unsets row), freeing the old one; false (with `error`) only if that copy cannot
 * be made. */
void cohort_setting_store_number(const cohort_setting_t *row, void *base, int64_t value);
bool cohort_setting_store_text(const cohort_setting_t *row, void *base, const char *value,
                               bson_error_t *error);

/* Fills the section's struct `base` with every row's default. False (with `error`) if a
 * default text cannot be copied. */
bool cohort_settings_apply_defaults(cohort_setting_section_t section, void *base,
                                    bson_error_t *error);

/* ---- live settings --------------------------------------------------------------------- */

/* The values an operator may change live with `cohortctl settings set` (stored in the
 * service's config document, where they win over the file while set). The rows marked live
 * in the table, in this order. */
typedef struct cohort_settings {
    int64_t tick_ms;
    int64_t takeover_ms;
    int64_t primary_task_count;
    int64_t secondary_task_count;
    int64_t stall_timeout_ms;
    int64_t succeeded_retention_ms;
    int64_t failed_retention_ms;
} cohort_settings_t;

/* The names of the live settings, NULL-terminated, in the order of cohort_settings_t. */
extern const char *const cohort_setting_names[];

/* The table's defaults: what a node without those keys in its file runs with (cohortctl
 * without -c, a service made without file settings). */
void cohort_settings_defaults(cohort_settings_t *settings);

/* A pointer to the field named `key`, or NULL if it is not a live setting. */
int64_t *cohort_settings_field(cohort_settings_t *settings, const char *key);

/* Appends `settings` to `doc` as the sub-document `key`, one int64 per live setting. */
void cohort_settings_append(bson_t *doc, const char *key, const cohort_settings_t *settings);

/* Puts in `settings` each number of `doc` (a sub-document's iterator with `iter`, or NULL to
 * read `doc` itself) named like a live setting; other keys are ignored. */
void cohort_settings_overlay(cohort_settings_t *settings, const bson_t *doc);
void cohort_settings_overlay_iter(cohort_settings_t *settings, bson_iter_t *iter);

/* The rules between live settings, written once for the config file's check (config.c) and
 * the live path (cohort_settings_validate: cohortctl, the API, each node applying the
 * database's values). */
typedef enum cohort_settings_rule {
    COHORT_RULE_TAKEOVER_OVER_TICK, /* takeover_ms > tick_ms */
    COHORT_RULE_STALL_OVER_TICKS,   /* stall_timeout_ms >= 3 * tick_ms */
    COHORT_RULES                    /* how many */
} cohort_settings_rule_t;

/* True if `rule` holds for `settings`; else false with `error` (COHORT_DOMAIN_CONFIG) saying
 * which values break it, and *key (may be NULL) the key the message blames (the one whose
 * config line is reported). Static strings. */
bool cohort_settings_rule_holds(cohort_settings_rule_t rule, const cohort_settings_t *settings,
                                const char **key, bson_error_t *error);

/* How many database round trips fit in a takeover: `cohortctl settings set` (and the API's
 * PATCH) refuse, unless forced, a takeover_ms under this multiple of a live node's measured
 * p99 round trip. Guarantee 7 keeps a primary's lease while the database answers within a
 * third of takeover_ms: below 3 x p99 more than 1 round trip in 100 already breaks it. */
#define COHORT_TAKEOVER_RTT_MULTIPLE 3

/* Checks one value's range, then the rules between values (cohort_settings_rule_holds()).
 * False with `error` (COHORT_DOMAIN_CONFIG) set to a reason a person can act on. */
bool cohort_settings_validate_value(const char *key, int64_t value, bson_error_t *error);
bool cohort_settings_validate(const cohort_settings_t *settings, bson_error_t *error);

/* ---- the reference ----------------------------------------------------------------------- */

/* Writes docs/CONFIGURATION.md, rendered from the table, to `out`. */
void cohort_settings_print_markdown(FILE *out);

#endif
