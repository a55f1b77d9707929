/*
 * config.c - loads and validates the INI configuration (see config.h).
 *
 * inih does the parsing. It does not tell its callback which line a key is on, so the file
 * is fed to ini_parse_stream() through a reader that counts lines: when the callback runs,
 * the last line read is the key's line. Validation happens in two passes: per key while
 * parsing (types, ranges, unknown keys), then across keys (takeover_ms > tick_ms, a handler
 * per service) once everything is known.
 */
#include "core/config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct key_seen {
    char *section;
    char *key;
    int line;
} key_seen_t;

typedef struct parser {
    cohort_config_t *config;
    cohort_config_errors_t *errors;
    const char *origin;
    const char *base_dir;
    const char *next; /* the text not read yet */
    char section[256]; /* the section of the line being read */
    int line;         /* the line last handed to inih */
    key_seen_t *seen;
    size_t n_seen;
} parser_t;

/* Stored when a message cannot be formatted; never freed. */
static char out_of_memory[] = "out of memory (a problem could not be described)";

void cohort_config_errors_add(cohort_config_errors_t *errors, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = out_of_memory;
    va_end(ap);
    char **grown = realloc(errors->messages, (errors->count + 1) * sizeof *grown);
    if (!grown) {
        if (msg != out_of_memory)
            free(msg);
        errors->unrecorded++;
        return;
    }
    errors->messages = grown;
    errors->messages[errors->count++] = msg;
}

void cohort_config_errors_clear(cohort_config_errors_t *errors)
{
    for (size_t i = 0; i < errors->count; i++)
        if (errors->messages[i] != out_of_memory)
            free(errors->messages[i]);
    free(errors->messages);
    errors->messages = NULL;
    errors->count = 0;
    errors->unrecorded = 0;
}

bool cohort_config_valid_service_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > COHORT_SERVICE_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

static void problem(parser_t *p, int line, const char *fmt, ...) COHORT_PRINTF(3, 4);
static void problem(parser_t *p, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        cohort_config_errors_add(p->errors, "%s line %d: %s", p->origin, line, msg);
    else
        cohort_config_errors_add(p->errors, "%s: %s", p->origin, msg);
}

static char *resolve_path(const char *base_dir, const char *path)
{
    char *out = NULL;
    if (path[0] == '/' || !base_dir || !*base_dir) {
        out = strdup(path);
    } else if (asprintf(&out, "%s/%s", base_dir, path) < 0) {
        out = NULL;
    }
    return out;
}

static cohort_service_config_t *add_service(parser_t *p, const char *name, int line)
{
    cohort_config_t *c = p->config;
    cohort_service_config_t *grown = realloc(c->services, (c->n_services + 1) * sizeof *grown);
    char *copy = strdup(name);
    bson_error_t error;
    if (grown)
        c->services = grown;
    if (!grown || !copy) {
        free(copy);
        problem(p, line, "[service:%s]: out of memory", name);
        return NULL;
    }
    cohort_service_config_t *s = &c->services[c->n_services++];
    *s = (cohort_service_config_t){.name = copy, .line = line};
    if (!cohort_settings_apply_defaults(COHORT_SECTION_SERVICE, s, &error))
        problem(p, line, "[service:%s]: %s", name, error.message);
    return s;
}

/* Section headers are handled here, when read, so that a section's problems name its own
 * line and an empty [service:NAME] is not silently dropped. */
static void section_header(parser_t *p, const char *name)
{
    if (strcmp(name, "cluster") == 0)
        return;
    if (strncmp(name, "service:", 8) != 0) {
        problem(p, p->line, "unknown section [%s] (expected [cluster] or [service:NAME])", name);
        return;
    }
    const char *service = name + 8;
    if (!cohort_config_valid_service_name(service)) {
        problem(p, p->line, "[%s]: service name '%s' is invalid (1-%d of A-Z a-z 0-9 _ -)",
                name, service, COHORT_SERVICE_NAME_MAX);
        return;
    }
    const cohort_service_config_t *first = cohort_config_find_service(p->config, service);
    if (first)
        problem(p, p->line, "duplicate section [%s] (first on line %d)", name, first->line);
    else
        add_service(p, service, p->line);
}

static int on_key(void *user, const char *section, const char *key, const char *value);
static void schedule_line(parser_t *p, const char *text);

/* A line longer than inih's fixed line buffer (a long mongodb_uri, say): parsed here with
 * inih's rules (key, '=' or ':', value, inline comment after " ;") and handed to on_key. */
static void long_line(parser_t *p, const char *text, size_t len)
{
    char *line = strndup(text, len);
    if (!line) {
        problem(p, p->line, "out of memory reading a long line");
        return;
    }
    char *s = line + strspn(line, " \t");
    if (strncmp(s, "schedule.", 9) == 0) {
        schedule_line(p, s);
        free(line);
        return;
    }
    char *sep = strpbrk(s, "=:");
    if (*s == '[' || *s == ';' || *s == '#' || !sep) {
        problem(p, p->line, "line is longer than inih's limit and is not 'key = value'");
        free(line);
        return;
    }
    char *end = sep;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *end = '\0';
    char *value = sep + 1;
    value += strspn(value, " \t");
    for (char *c = value; *c; c++) {
        if (*c == ';' && c > value && (c[-1] == ' ' || c[-1] == '\t')) {
            *c = '\0';
            break;
        }
    }
    end = value + strlen(value);
    while (end > value && (end[-1] == ' ' || end[-1] == '\t'))
        *--end = '\0';
    on_key(p, p->section, s, value);
    free(line);
}

/* A `schedule.ID = ...` line, read here: key, '=', the value up to the line's end. */
static void schedule_line(parser_t *p, const char *text)
{
    char *line = strdup(text);
    if (!line) {
        problem(p, p->line, "out of memory reading a schedule line");
        return;
    }
    line[strcspn(line, "\r\n")] = '\0';
    char *eq = strchr(line, '=');
    if (!eq) {
        problem(p, p->line, "'%s' must be schedule.ID = CRON ; key=value ...", line);
        free(line);
        return;
    }
    char *end = eq;
    while (end > line && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *end = '\0';
    char *value = eq + 1 + strspn(eq + 1, " \t");
    end = value + strlen(value);
    while (end > value && (end[-1] == ' ' || end[-1] == '\t'))
        *--end = '\0';
    on_key(p, p->section, line, value);
    free(line);
}

/* inih's reader: hands it one line at a time, counting lines, and checks each line's syntax
 * first so that every bad line is reported (inih itself reports only the first). A bad line
 * is replaced by an empty one. */
static char *read_line(char *str, int num, void *stream)
{
    parser_t *p = stream;
    if (!p->next || !*p->next)
        return NULL;
    const char *end = strchr(p->next, '\n');
    size_t len = end ? (size_t)(end - p->next) + 1 : strlen(p->next);
    const char *text = p->next;
    p->next += len;
    p->line++;

    size_t content = len;
    while (content > 0 && (text[content - 1] == '\n' || text[content - 1] == '\r'))
        content--;
    if (content > (size_t)num - 2) {
        long_line(p, text, content);
        snprintf(str, (size_t)num, "\n");
        return str;
    }
    /* The line without its line ending (a run of '\r' can be longer than inih's buffer),
     * then one '\n'. */
    memcpy(str, text, content);
    str[content] = '\n';
    str[content + 1] = '\0';

    /* Leading blanks go: to inih an indented line continues the previous value, which
     * would turn an indented "key = value" into a confusing duplicate key. */
    memmove(str, str + strspn(str, " \t"), strlen(str + strspn(str, " \t")) + 1);
    const char *s = str;
    if (*s == '\0' || *s == '\n' || *s == '\r' || *s == ';' || *s == '#')
        return str;
    if (*s == '[') {
        const char *close = strchr(s, ']');
        if (!close) {
            problem(p, p->line, "syntax error: section header without ']'");
            snprintf(str, (size_t)num, "\n");
            return str;
        }
        snprintf(p->section, sizeof p->section, "%.*s", (int)(close - s - 1), s + 1);
        section_header(p, p->section);
        return str;
    }
    if (!strpbrk(s, "=:")) {
        problem(p, p->line, "syntax error (expected 'key = value', '[section]' or a comment)");
        snprintf(str, (size_t)num, "\n");
    } else if (strncmp(s, "schedule.", 9) == 0) {
        /* `;` separates a schedule's options, where inih would cut an inline comment: the
         * line goes to on_key from here whole, and inih gets an empty one. */
        schedule_line(p, s);
        snprintf(str, (size_t)num, "\n");
    }
    return str;
}

/* Returns false (and reports) if section/key was seen before, or cannot be remembered. */
static bool first_time(parser_t *p, const char *section, const char *key, int line)
{
    for (size_t i = 0; i < p->n_seen; i++) {
        if (strcmp(p->seen[i].section, section) == 0 && strcmp(p->seen[i].key, key) == 0) {
            problem(p, line, "duplicate key '%s' in [%s] (first set on line %d)", key, section,
                    p->seen[i].line);
            return false;
        }
    }
    key_seen_t *grown = realloc(p->seen, (p->n_seen + 1) * sizeof *grown);
    key_seen_t seen = {strdup(section), strdup(key), line};
    if (grown)
        p->seen = grown;
    if (!grown || !seen.section || !seen.key) {
        free(seen.section);
        free(seen.key);
        problem(p, line, "'%s': out of memory", key);
        return false;
    }
    p->seen[p->n_seen++] = seen;
    return true;
}

/* The line `key` was set on in `section`, 0 if it was not. */
static int line_of(const parser_t *p, const char *section, const char *key)
{
    for (size_t i = 0; i < p->n_seen; i++)
        if (strcmp(p->seen[i].section, section) == 0 && strcmp(p->seen[i].key, key) == 0)
            return p->seen[i].line;
    return 0;
}

/* handler = PATH: resolved against the config file's folder, and it must be readable; or
 * handler = external. */
static void handler_key(parser_t *p, cohort_service_config_t *s, int line, const char *value)
{
    free(s->handler_path);
    s->handler_path = NULL;
    s->handler_line = line;
    s->external = false;
    if (!*value) {
        problem(p, line, "handler is empty (expected the path of a handler .so, or external)");
        return;
    }
    if (strcmp(value, COHORT_HANDLER_EXTERNAL) == 0) {
        s->external = true;
        if (!(s->handler_path = strdup(COHORT_HANDLER_EXTERNAL)))
            problem(p, line, "handler: out of memory");
        return;
    }
    s->handler_path = resolve_path(p->base_dir, value);
    if (!s->handler_path) {
        problem(p, line, "handler: out of memory");
    } else if (access(s->handler_path, R_OK) != 0) {
        problem(p, line, "handler file '%s' cannot be read: %s", s->handler_path,
                strerror(errno));
        /* No path: --check-config, which goes on with a faulty file, does not load it. */
        free(s->handler_path);
        s->handler_path = NULL;
    }
}

/* One key of a row of the table: checked by the row's type, stored in `base` (the struct
 * of the row's section). */
static void set_key(parser_t *p, const cohort_setting_t *row, void *base, int line,
                    const char *value)
{
    bson_error_t error;
    int64_t number;
    switch (row->type) {
    case COHORT_SETTING_DURATION_MS:
    case COHORT_SETTING_COUNT:
    case COHORT_SETTING_ENUM:
        if (!cohort_setting_parse_number(row, value, &number, &error))
            problem(p, line, "%s", error.message);
        else
            cohort_setting_store_number(row, base, number);
        break;
    case COHORT_SETTING_STRING: {
        /* The environment's value (already in place) wins over the file's. */
        const char *env = row->env ? getenv(row->env) : NULL;
        if (env && *env)
            break;
        bool unset = row->empty_unsets && !*value;
        if (!unset && row->check && !row->check(value, &error)) {
            cohort_setting_store_text(row, base, NULL, NULL);
            problem(p, line, "%s", error.message);
        } else if (!cohort_setting_store_text(row, base, value, &error)) {
            problem(p, line, "%s", error.message);
        }
        break;
    }
    case COHORT_SETTING_PATH:
        handler_key(p, base, line, value);
        break;
    case COHORT_SETTING_OPTION:
        break;
    }
}

static void unknown_cluster_key(parser_t *p, int line, const char *key)
{
    const char *near = cohort_settings_did_you_mean(COHORT_SECTION_CLUSTER, key);
    if (near) {
        problem(p, line, "unknown key '%s' in [cluster] (did you mean '%s'?)", key, near);
        return;
    }
    char names[512];
    cohort_settings_list_names(COHORT_SECTION_CLUSTER, false, names, sizeof names);
    problem(p, line, "unknown key '%s' in [cluster] (known: %s)", key, names);
}

bool cohort_config_valid_kind(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > COHORT_KIND_MAX)
        return false;
    for (const char *c = name; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_' || *c == '-'))
            return false;
    return true;
}

/* The kind of `name` in service `s`, added with no defaults set if new; NULL if out of
 * memory. */
static cohort_kind_config_t *kind_of(cohort_service_config_t *s, const char *name)
{
    for (size_t i = 0; i < s->n_kinds; i++)
        if (strcmp(s->kinds[i].name, name) == 0)
            return &s->kinds[i];
    cohort_kind_config_t *grown = realloc(s->kinds, (s->n_kinds + 1) * sizeof *grown);
    char *copy = strdup(name);
    if (grown)
        s->kinds = grown;
    if (!grown || !copy) {
        free(copy);
        return NULL;
    }
    cohort_kind_config_t *k = &s->kinds[s->n_kinds++];
    *k = (cohort_kind_config_t){.name = copy};
    return k;
}

/* kind.NAME.KEY = VALUE: a default for tasks of kind NAME (KEY: the kind rows of the table). */
static void kind_key(parser_t *p, cohort_service_config_t *s, int line, const char *key,
                     const char *value)
{
    char known[128] = ""; /* the KEYs of the kind rows: "priority, not_after_ms, ..." */
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
        if (strncmp(r->name, "kind.KIND.", 10) != 0)
            continue;
        size_t used = strlen(known);
        snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "", r->name + 10);
    }
    const char *name = key + 5;
    const char *dot = strrchr(name, '.');
    char kind[COHORT_KIND_MAX + 1];
    size_t len = dot ? (size_t)(dot - name) : 0;
    if (!dot || len == 0 || len > COHORT_KIND_MAX) {
        problem(p, line, "'%s' must be kind.NAME.KEY (KEY: %s)", key, known);
        return;
    }
    memcpy(kind, name, len);
    kind[len] = '\0';
    if (!cohort_config_valid_kind(kind)) {
        problem(p, line, "'%s': kind '%s' must be 1-64 of [A-Za-z0-9_-]", key, kind);
        return;
    }
    const cohort_setting_t *row = cohort_setting_find_kind(dot + 1);
    if (!row) {
        problem(p, line, "'%s': unknown kind setting '%s' (known: %s)", key, dot + 1, known);
        return;
    }
    cohort_kind_config_t *k = kind_of(s, kind);
    bson_error_t error;
    int64_t v;
    if (!k) {
        problem(p, line, "'%s': out of memory", key);
    } else if (!cohort_setting_parse_number(row, value, &v, &error)) {
        problem(p, line, "%s", error.message);
    } else {
        cohort_setting_store_number(row, k, v);
        ptrdiff_t at = row->field.offset;
        k->set_priority |= at == (ptrdiff_t)offsetof(cohort_kind_config_t, defaults.priority);
        k->set_not_after_ms |=
            at == (ptrdiff_t)offsetof(cohort_kind_config_t, defaults.not_after_ms);
        k->set_task_timeout_ms |=
            at == (ptrdiff_t)offsetof(cohort_kind_config_t, defaults.task_timeout_ms);
        k->set_weight |= at == (ptrdiff_t)offsetof(cohort_kind_config_t, defaults.weight);
    }
}

/* schedule.ID = CRON ; key=value ...: a recurring task (core/schedule.h). */
static void schedule_key(parser_t *p, cohort_service_config_t *s, int line, const char *key,
                         const char *value)
{
    cohort_schedule_config_t parsed;
    bson_error_t error;
    if (!cohort_schedule_parse(key + 9, value, line, &parsed, &error)) {
        problem(p, line, "[service:%s] %s: %s", s->name, key, error.message);
        cohort_schedule_clear(&parsed);
        return;
    }
    cohort_schedule_config_t *grown =
        realloc(s->schedules, (s->n_schedules + 1) * sizeof *grown);
    if (!grown) {
        problem(p, line, "'%s': out of memory", key);
        cohort_schedule_clear(&parsed);
        return;
    }
    s->schedules = grown;
    s->schedules[s->n_schedules++] = parsed;
}

/* Any key the table does not know goes to the handler, with its line. */
static void option_key(parser_t *p, cohort_service_config_t *s, int line, const char *key,
                       const char *value)
{
    cohort_option_t *grown = realloc(s->options, (s->n_options + 1) * sizeof *grown);
    cohort_option_t option = {strdup(key), strdup(value), line};
    if (grown)
        s->options = grown;
    if (!grown || !option.key || !option.value) {
        free((char *)option.key);
        free((char *)option.value);
        problem(p, line, "handler option '%s': out of memory", key);
        return;
    }
    s->options[s->n_options++] = option;
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
    parser_t *p = user;
    int line = p->line;
    if (section[0] == '\0') {
        problem(p, line, "key '%s' is outside any section ([cluster] or [service:NAME])", key);
    } else if (strcmp(section, "cluster") == 0) {
        const cohort_setting_t *row = cohort_setting_find(COHORT_SECTION_CLUSTER, key);
        if (!first_time(p, section, key, line))
            return 1;
        if (row)
            set_key(p, row, p->config, line, value);
        else
            unknown_cluster_key(p, line, key);
    } else if (strncmp(section, "service:", 8) == 0) {
        /* Unknown and invalid sections were reported at their header. */
        cohort_service_config_t *s =
            (cohort_service_config_t *)cohort_config_find_service(p->config, section + 8);
        if (!s || !first_time(p, section, key, line))
            return 1;
        const cohort_setting_t *row = cohort_setting_find(COHORT_SECTION_SERVICE, key);
        if (row)
            set_key(p, row, s, line, value);
        else if (strncmp(key, "kind.", 5) == 0)
            kind_key(p, s, line, key, value);
        else if (strncmp(key, "schedule.", 9) == 0)
            schedule_key(p, s, line, key, value);
        else
            option_key(p, s, line, key, value);
    }
    return 1;
}

/* One rule between live settings (settings.h), reported at the line of the key it blames
 * (in `section`, else the cluster's) or at `fallback`, with `prefix`. */
static void check_rule(parser_t *p, cohort_settings_rule_t rule, const cohort_settings_t *values,
                       const char *section, int fallback, const char *prefix)
{
    const char *key = NULL;
    bson_error_t why;
    if (cohort_settings_rule_holds(rule, values, &key, &why))
        return;
    int line = line_of(p, section, key);
    if (!line)
        line = line_of(p, "cluster", key);
    problem(p, line ? line : fallback, "%s%s", prefix, why.message);
}

static void check_whole(parser_t *p)
{
    cohort_config_t *c = p->config;
    cohort_settings_t cluster;
    cohort_settings_from_config(c, NULL, &cluster);
    check_rule(p, COHORT_RULE_TAKEOVER_OVER_TICK, &cluster, "cluster",
               line_of(p, "cluster", "tick_ms"), "");
    if (c->n_services == 0)
        problem(p, 0, "no [service:NAME] section: a node must host at least one service");
    for (size_t i = 0; i < c->n_services; i++) {
        cohort_service_config_t *s = &c->services[i];
        char section[8 + COHORT_SERVICE_NAME_MAX + 1], prefix[COHORT_SERVICE_NAME_MAX + 16];
        snprintf(section, sizeof section, "service:%s", s->name);
        snprintf(prefix, sizeof prefix, "[service:%s] ", s->name);
        s->stall_line = line_of(p, section, "stall_timeout_ms");
        if (!s->handler_path && s->handler_line == 0)
            problem(p, s->line, "[service:%s] has no 'handler' (the path of a handler .so)",
                    s->name);
        cohort_settings_t values;
        cohort_settings_from_config(c, s, &values);
        check_rule(p, COHORT_RULE_STALL_OVER_TICKS, &values, section, s->line, prefix);
    }
}

/* MONGODB_URI overrides the file's mongodb_uri, so it is checked like the file's value. */
static void check_env_uri(parser_t *p)
{
    const cohort_setting_t *row = cohort_setting_find(COHORT_SECTION_CLUSTER, "mongodb_uri");
    bson_error_t error;
    if (p->config->mongodb_uri_from_env && !row->check(p->config->mongodb_uri, &error))
        problem(p, 0, "%s (from the environment variable %s)", error.message, row->env);
}

/* Parses and checks `text`; with `keep`, returns the config even if it has problems. */
static cohort_config_t *load_text(const char *text, const char *origin, const char *base_dir,
                                  cohort_config_errors_t *errors, bool keep)
{
    size_t errors_before = errors->count, unrecorded_before = errors->unrecorded;
    cohort_config_t *c = calloc(1, sizeof *c);
    if (!c) {
        cohort_config_errors_add(errors, "%s: out of memory", origin);
        return NULL;
    }
    parser_t p = {.config = c, .errors = errors, .origin = origin, .base_dir = base_dir};
    const cohort_setting_t *uri = cohort_setting_find(COHORT_SECTION_CLUSTER, "mongodb_uri");
    const char *env_uri = getenv(uri->env);
    c->mongodb_uri_from_env = env_uri && *env_uri;
    bson_error_t error;
    if (!cohort_settings_apply_defaults(COHORT_SECTION_CLUSTER, c, &error))
        problem(&p, 0, "%s", error.message);
    check_env_uri(&p);

    /* A UTF-8 byte-order mark (Windows editors write one) is not part of the first line. */
    const unsigned char *bom = (const unsigned char *)text;
    p.next = bom[0] == 0xEF && bom[1] == 0xBB && bom[2] == 0xBF ? text + 3 : text;
    size_t errors_parsing = errors->count;
    int rc = ini_parse_stream(read_line, &p, on_key, &p);
    if (rc > 0 && errors->count == errors_parsing) {
        /* read_line passes only lines inih accepts; keep inih's word as a safety net. */
        problem(&p, rc, "syntax error (expected 'key = value', '[section]' or a comment)");
    } else if (rc < 0) {
        problem(&p, 0, "could not be parsed (out of memory)");
    }
    check_whole(&p);

    for (size_t i = 0; i < p.n_seen; i++) {
        free(p.seen[i].section);
        free(p.seen[i].key);
    }
    free(p.seen);

    if (!keep && (errors->count > errors_before || errors->unrecorded > unrecorded_before)) {
        cohort_config_destroy(c);
        return NULL;
    }
    return c;
}

cohort_config_t *cohort_config_load_string(const char *text, const char *origin,
                                           const char *base_dir, cohort_config_errors_t *errors)
{
    return load_text(text, origin, base_dir, errors, false);
}

static cohort_config_t *load_file(const char *path, cohort_config_errors_t *errors, bool keep)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        cohort_config_errors_add(errors, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[4096];
    size_t n;
    while (mem && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, mem);
    bool read_error = ferror(f);
    fclose(f);
    if (mem)
        fclose(mem);
    if (!mem || !text || read_error) {
        free(text);
        cohort_config_errors_add(errors, "%s: cannot read%s", path,
                                 read_error ? "" : " (out of memory)");
        return NULL;
    }
    if (memchr(text, '\0', len)) {
        free(text);
        cohort_config_errors_add(errors, "%s: is not a text file (contains NUL bytes)", path);
        return NULL;
    }

    /* Relative handler paths resolve against the file's folder: without a copy of the
     * path to cut it from, they would silently resolve against the current one. */
    char *copy = strdup(path);
    cohort_config_t *c = NULL;
    if (copy)
        c = load_text(text, path, dirname(copy), errors, keep);
    else
        cohort_config_errors_add(errors, "%s: out of memory", path);
    free(copy);
    free(text);
    if (c && !(c->path = strdup(path))) {
        cohort_config_errors_add(errors, "%s: out of memory", path);
        cohort_config_destroy(c);
        c = NULL;
    }
    return c;
}

cohort_config_t *cohort_config_load(const char *path, cohort_config_errors_t *errors)
{
    return load_file(path, errors, false);
}

cohort_config_t *cohort_config_check(const char *path, cohort_config_errors_t *errors)
{
    return load_file(path, errors, true);
}

void cohort_config_destroy(cohort_config_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_services; i++) {
        cohort_service_config_t *s = &c->services[i];
        for (size_t j = 0; j < s->n_options; j++) {
            free((char *)s->options[j].key);
            free((char *)s->options[j].value);
        }
        free(s->options);
        for (size_t j = 0; j < s->n_schedules; j++)
            cohort_schedule_clear(&s->schedules[j]);
        free(s->schedules);
        for (size_t j = 0; j < s->n_kinds; j++)
            free(s->kinds[j].name);
        free(s->kinds);
        free(s->name);
        free(s->handler_path);
    }
    free(c->services);
    free(c->path);
    free(c->mongodb_uri);
    free(c->database);
    free(c->node_id);
    free(c->http_listen);
    free(c);
}

cohort_task_defaults_t cohort_config_task_defaults(const cohort_service_config_t *s,
                                                   const char *kind)
{
    cohort_task_defaults_t d = s->defaults;
    for (size_t i = 0; kind && i < s->n_kinds; i++) {
        const cohort_kind_config_t *k = &s->kinds[i];
        if (strcmp(k->name, kind) != 0)
            continue;
        if (k->set_priority)
            d.priority = k->defaults.priority;
        if (k->set_not_after_ms)
            d.not_after_ms = k->defaults.not_after_ms;
        if (k->set_task_timeout_ms)
            d.task_timeout_ms = k->defaults.task_timeout_ms;
        if (k->set_weight)
            d.weight = k->defaults.weight;
    }
    if (d.weight < 1)
        d.weight = 1;
    return d;
}

bool cohort_config_same_scheduling(const cohort_service_config_t *a,
                                   const cohort_service_config_t *b)
{
    if (memcmp(&a->defaults, &b->defaults, sizeof a->defaults) != 0 ||
        a->not_after_boost != b->not_after_boost || a->claim_batch != b->claim_batch ||
        a->isolation != b->isolation || a->n_kinds != b->n_kinds)
        return false;
    for (size_t i = 0; i < a->n_kinds; i++) {
        cohort_task_defaults_t x = cohort_config_task_defaults(a, a->kinds[i].name);
        cohort_task_defaults_t y = cohort_config_task_defaults(b, a->kinds[i].name);
        if (memcmp(&x, &y, sizeof x) != 0)
            return false;
    }
    return true;
}

const cohort_service_config_t *cohort_config_find_service(const cohort_config_t *c,
                                                          const char *name)
{
    for (size_t i = 0; i < c->n_services; i++)
        if (strcmp(c->services[i].name, name) == 0)
            return &c->services[i];
    return NULL;
}

void cohort_settings_from_config(const cohort_config_t *config,
                                 const cohort_service_config_t *service,
                                 cohort_settings_t *settings)
{
    cohort_settings_defaults(settings);
    for (size_t i = 0; cohort_setting_names[i]; i++) {
        const cohort_setting_t *r = cohort_setting_find_live(cohort_setting_names[i]);
        const char *base = r->section == COHORT_SECTION_CLUSTER ? (const char *)config
                                                                : (const char *)service;
        if (base)
            memcpy(cohort_settings_field(settings, r->name), base + r->field.offset,
                   sizeof(int64_t));
    }
}
