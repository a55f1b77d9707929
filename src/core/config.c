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

#include "core/address.h"

#define DEFAULT_URI "mongodb://127.0.0.1:27017"
/* 1: a batch claim prefetches, which docs/BENCHMARKS.md shows pays off for short tasks only
 * (a batch holds its tasks while the first ones run, and a few tasks stop spreading over
 * the nodes); services of short tasks raise it. */
#define COHORT_DEFAULT_CLAIM_BATCH 1

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
    int takeover_line, tick_line;
    key_seen_t *seen;
    size_t n_seen;
} parser_t;

void cohort_config_errors_add(cohort_config_errors_t *errors, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    if (!msg)
        return;
    char **grown = realloc(errors->messages, (errors->count + 1) * sizeof *grown);
    if (!grown) {
        free(msg);
        return;
    }
    errors->messages = grown;
    errors->messages[errors->count++] = msg;
}

void cohort_config_errors_clear(cohort_config_errors_t *errors)
{
    for (size_t i = 0; i < errors->count; i++)
        free(errors->messages[i]);
    free(errors->messages);
    errors->messages = NULL;
    errors->count = 0;
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

static bool valid_node_id(const char *id)
{
    size_t len = strlen(id);
    if (len == 0 || len > COHORT_NODE_ID_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)id[i];
        if (c <= ' ' || c >= 0x7f)
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

/* Parses a whole non-negative decimal integer within [min, max]. */
static bool parse_int(parser_t *p, int line, const char *key, const char *value, int64_t min,
                      int64_t max, int64_t *out)
{
    if (!*value) {
        problem(p, line, "%s is empty (expected a number)", key);
        return false;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno == ERANGE || *end != '\0' || end == value) {
        problem(p, line, "%s = '%s' is not a number", key, value);
        return false;
    }
    if (v < min || v > max) {
        problem(p, line, "%s = %lld is out of range [%lld, %lld]", key, v, (long long)min,
                (long long)max);
        return false;
    }
    *out = v;
    return true;
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
    if (!grown)
        return NULL;
    c->services = grown;
    cohort_service_config_t *s = &c->services[c->n_services++];
    *s = (cohort_service_config_t){
        .name = strdup(name),
        .primary_task_count = 10,
        .secondary_task_count = 0,
        .workers = 2,
        .max_attempts = 5,
        .retry_base_ms = 20000,
        .stall_timeout_ms = 1800000,
        .succeeded_retention_ms = 7LL * 24 * 3600 * 1000,
        .failed_retention_ms = 7LL * 24 * 3600 * 1000,
        .not_after_boost = 10,
        .claim_batch = COHORT_DEFAULT_CLAIM_BATCH,
        .isolation = COHORT_ISOLATION_THREAD,
        .line = line,
    };
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

/* A line longer than inih's fixed line buffer (a long mongodb_uri, say): parsed here with
 * inih's rules (key, '=' or ':', value, inline comment after " ;") and handed to on_key. */
static void long_line(parser_t *p, const char *text, size_t len)
{
    char *line = strndup(text, len);
    if (!line)
        return;
    char *s = line + strspn(line, " \t");
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
    memcpy(str, text, len);
    str[len] = '\0';

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
    }
    return str;
}

/* Returns false (and reports) if section/key was seen before. */
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
    if (!grown)
        return false;
    p->seen = grown;
    p->seen[p->n_seen++] = (key_seen_t){strdup(section), strdup(key), line};
    return true;
}

static void cluster_key(parser_t *p, int line, const char *key, const char *value)
{
    cohort_config_t *c = p->config;
    if (strcmp(key, "mongodb_uri") == 0) {
        if (!c->mongodb_uri_from_env) {
            free(c->mongodb_uri);
            c->mongodb_uri = strdup(value);
            if (!*value)
                problem(p, line, "mongodb_uri is empty");
        }
    } else if (strcmp(key, "database") == 0) {
        free(c->database);
        c->database = strdup(value);
        if (!*value || strpbrk(value, "/\\. \"$") || strlen(value) > 63)
            problem(p, line, "database = '%s' is not a valid MongoDB database name", value);
    } else if (strcmp(key, "tick_ms") == 0) {
        parse_int(p, line, key, value, 10, 3600000, &c->tick_ms);
        p->tick_line = line;
    } else if (strcmp(key, "takeover_ms") == 0) {
        parse_int(p, line, key, value, 20, COHORT_TAKEOVER_MS_MAX, &c->takeover_ms);
        p->takeover_line = line;
    } else if (strcmp(key, "shutdown_grace_ms") == 0) {
        parse_int(p, line, key, value, 0, 3600000, &c->shutdown_grace_ms);
    } else if (strcmp(key, "node_id") == 0) {
        free(c->node_id);
        c->node_id = NULL;
        if (*value) {
            if (valid_node_id(value))
                c->node_id = strdup(value);
            else
                problem(p, line,
                        "node_id = '%s' is invalid (1-%d printable characters, no spaces)",
                        value, COHORT_NODE_ID_MAX);
        }
    } else if (strcmp(key, "log_level") == 0) {
        if (!cohort_log_parse_level(value, &c->log_level))
            problem(p, line, "log_level = '%s' is not one of debug, info, warn, error", value);
    } else if (strcmp(key, "log_format") == 0) {
        if (strcmp(value, "text") == 0 || strcmp(value, "json") == 0)
            c->log_json = strcmp(value, "json") == 0;
        else
            problem(p, line, "log_format = '%s' is not one of text, json", value);
    } else if (strcmp(key, "http_listen") == 0) {
        free(c->http_listen);
        c->http_listen = NULL;
        cohort_address_t address;
        bson_error_t error;
        if (*value) {
            if (!cohort_address_parse(value, &address, &error))
                problem(p, line, "http_listen = %s", error.message);
            else
                c->http_listen = strdup(value);
        }
    } else {
        problem(p, line,
                "unknown key '%s' in [cluster] (known: mongodb_uri, database, tick_ms, "
                "takeover_ms, shutdown_grace_ms, node_id, log_level, log_format, http_listen)",
                key);
    }
}

/* The task-default keys, shared by a service's section and its `kind.NAME.` keys. True if
 * `key` is one of them (checked and stored, with `set` recording which). */
static bool task_default_key(parser_t *p, int line, const char *key, const char *value,
                             cohort_task_defaults_t *d, cohort_kind_config_t *set)
{
    if (strcmp(key, "priority") == 0) {
        if (parse_int(p, line, key, value, -COHORT_PRIORITY_LIMIT, COHORT_PRIORITY_LIMIT,
                      &d->priority) && set)
            set->set_priority = true;
    } else if (strcmp(key, "not_after_ms") == 0) {
        if (parse_int(p, line, key, value, 0, 3650LL * 86400000, &d->not_after_ms) && set)
            set->set_not_after_ms = true;
    } else if (strcmp(key, "task_timeout_ms") == 0) {
        if (parse_int(p, line, key, value, 0, 7LL * 86400000, &d->task_timeout_ms) && set)
            set->set_task_timeout_ms = true;
    } else {
        return false;
    }
    return true;
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

/* kind.NAME.KEY = VALUE: a default for tasks of kind NAME. */
static void kind_key(parser_t *p, cohort_service_config_t *s, int line, const char *key,
                     const char *value)
{
    const char *name = key + 5;
    const char *dot = strrchr(name, '.');
    char kind[COHORT_KIND_MAX + 1];
    size_t len = dot ? (size_t)(dot - name) : 0;
    if (!dot || len == 0 || len > COHORT_KIND_MAX) {
        problem(p, line, "'%s' must be kind.NAME.KEY (KEY: priority, not_after_ms, "
                         "task_timeout_ms)", key);
        return;
    }
    memcpy(kind, name, len);
    kind[len] = '\0';
    if (!cohort_config_valid_kind(kind)) {
        problem(p, line, "'%s': kind '%s' must be 1-64 of [A-Za-z0-9_-]", key, kind);
        return;
    }
    cohort_kind_config_t *k = NULL;
    for (size_t i = 0; i < s->n_kinds; i++)
        if (strcmp(s->kinds[i].name, kind) == 0)
            k = &s->kinds[i];
    if (!k) {
        cohort_kind_config_t *grown = realloc(s->kinds, (s->n_kinds + 1) * sizeof *grown);
        if (!grown)
            return;
        s->kinds = grown;
        k = &s->kinds[s->n_kinds++];
        *k = (cohort_kind_config_t){.name = strdup(kind)};
    }
    if (!task_default_key(p, line, dot + 1, value, &k->defaults, k))
        problem(p, line, "'%s': unknown kind setting '%s' (known: priority, not_after_ms, "
                         "task_timeout_ms)", key, dot + 1);
}

static void service_key(parser_t *p, cohort_service_config_t *s, int line, const char *key,
                        const char *value)
{
    if (strcmp(key, "handler") == 0) {
        free(s->handler_path);
        s->handler_path = NULL;
        s->handler_line = line;
        if (!*value) {
            problem(p, line, "handler is empty (expected the path of a handler .so)");
            return;
        }
        s->handler_path = resolve_path(p->base_dir, value);
        if (s->handler_path && access(s->handler_path, R_OK) != 0)
            problem(p, line, "handler file '%s' cannot be read: %s", s->handler_path,
                    strerror(errno));
    } else if (strcmp(key, "primary_task_count") == 0) {
        parse_int(p, line, key, value, 1, 1000000, &s->primary_task_count);
    } else if (strcmp(key, "secondary_task_count") == 0) {
        parse_int(p, line, key, value, 0, 1000000, &s->secondary_task_count);
    } else if (strcmp(key, "workers") == 0) {
        parse_int(p, line, key, value, 1, 1024, &s->workers);
    } else if (strcmp(key, "max_attempts") == 0) {
        parse_int(p, line, key, value, 1, 1000, &s->max_attempts);
    } else if (strcmp(key, "retry_base_ms") == 0) {
        parse_int(p, line, key, value, 0, 86400000, &s->retry_base_ms);
    } else if (strcmp(key, "stall_timeout_ms") == 0) {
        if (parse_int(p, line, key, value, 100, 7LL * 86400000, &s->stall_timeout_ms))
            s->stall_line = line;
    } else if (strcmp(key, "succeeded_retention_ms") == 0) {
        parse_int(p, line, key, value, 0, 3650LL * 86400000, &s->succeeded_retention_ms);
    } else if (strcmp(key, "failed_retention_ms") == 0) {
        parse_int(p, line, key, value, 0, 3650LL * 86400000, &s->failed_retention_ms);
    } else if (task_default_key(p, line, key, value, &s->defaults, NULL)) {
        /* priority, not_after_ms, task_timeout_ms */
    } else if (strcmp(key, "not_after_boost") == 0) {
        parse_int(p, line, key, value, 0, COHORT_PRIORITY_LIMIT, &s->not_after_boost);
    } else if (strcmp(key, "claim_batch") == 0) {
        parse_int(p, line, key, value, 1, COHORT_CLAIM_BATCH_MAX, &s->claim_batch);
    } else if (strcmp(key, "isolation") == 0) {
        if (strcmp(value, "thread") == 0)
            s->isolation = COHORT_ISOLATION_THREAD;
        else if (strcmp(value, "process") == 0)
            s->isolation = COHORT_ISOLATION_PROCESS;
        else
            problem(p, line, "isolation = '%s' must be 'thread' or 'process'", value);
    } else if (strncmp(key, "kind.", 5) == 0) {
        kind_key(p, s, line, key, value);
    } else {
        cohort_option_t *grown = realloc(s->options, (s->n_options + 1) * sizeof *grown);
        if (!grown)
            return;
        s->options = grown;
        s->options[s->n_options++] = (cohort_option_t){strdup(key), strdup(value), line};
    }
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
    parser_t *p = user;
    int line = p->line;
    if (section[0] == '\0') {
        problem(p, line, "key '%s' is outside any section ([cluster] or [service:NAME])", key);
    } else if (strcmp(section, "cluster") == 0) {
        if (first_time(p, section, key, line))
            cluster_key(p, line, key, value);
    } else if (strncmp(section, "service:", 8) == 0) {
        /* Unknown and invalid sections were reported at their header. */
        cohort_service_config_t *s =
            (cohort_service_config_t *)cohort_config_find_service(p->config, section + 8);
        if (s && first_time(p, section, key, line))
            service_key(p, s, line, key, value);
    }
    return 1;
}

static void check_whole(parser_t *p)
{
    cohort_config_t *c = p->config;
    if (c->takeover_ms <= c->tick_ms) {
        int line = p->takeover_line ? p->takeover_line : p->tick_line;
        problem(p, line, "takeover_ms (%lld) must be greater than tick_ms (%lld)",
                (long long)c->takeover_ms, (long long)c->tick_ms);
    }
    if (c->n_services == 0)
        problem(p, 0, "no [service:NAME] section: a node must host at least one service");
    for (size_t i = 0; i < c->n_services; i++) {
        cohort_service_config_t *s = &c->services[i];
        if (!s->handler_path && s->handler_line == 0)
            problem(p, s->line, "[service:%s] has no 'handler' (the path of a handler .so)",
                    s->name);
        /* Check-ins happen on the tick, every stall_timeout_ms/3: keep several per timeout. */
        if (s->stall_timeout_ms < 3 * c->tick_ms)
            problem(p, s->stall_line ? s->stall_line : s->line,
                    "[service:%s] stall_timeout_ms (%lld) must be at least 3 * tick_ms (%lld)",
                    s->name, (long long)s->stall_timeout_ms, (long long)(3 * c->tick_ms));
    }
}

cohort_config_t *cohort_config_load_string(const char *text, const char *origin,
                                           const char *base_dir, cohort_config_errors_t *errors)
{
    size_t errors_before = errors->count;
    cohort_config_t *c = calloc(1, sizeof *c);
    if (!c) {
        cohort_config_errors_add(errors, "%s: out of memory", origin);
        return NULL;
    }
    const char *env_uri = getenv("MONGODB_URI");
    c->mongodb_uri_from_env = env_uri && *env_uri;
    c->mongodb_uri = strdup(c->mongodb_uri_from_env ? env_uri : DEFAULT_URI);
    c->database = strdup("cohort");
    c->tick_ms = 1000;
    c->takeover_ms = 10000;
    c->shutdown_grace_ms = 30000;
    c->log_level = COHORT_LOG_INFO;

    parser_t p = {.config = c, .errors = errors, .origin = origin, .base_dir = base_dir};
    p.next = text;
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

    if (errors->count > errors_before) {
        cohort_config_destroy(c);
        return NULL;
    }
    return c;
}

cohort_config_t *cohort_config_load(const char *path, cohort_config_errors_t *errors)
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
        cohort_config_errors_add(errors, "%s: cannot read", path);
        return NULL;
    }
    if (memchr(text, '\0', len)) {
        free(text);
        cohort_config_errors_add(errors, "%s: is not a text file (contains NUL bytes)", path);
        return NULL;
    }

    char *copy = strdup(path);
    char *dir = copy ? dirname(copy) : NULL;
    cohort_config_t *c = cohort_config_load_string(text, path, dir, errors);
    free(copy);
    free(text);
    if (c)
        c->path = strdup(path);
    return c;
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
    }
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

/* ---- live settings ------------------------------------------------------------------------ */

const char *const cohort_setting_names[] = {
    "tick_ms",          "takeover_ms",           "primary_task_count", "secondary_task_count",
    "stall_timeout_ms", "succeeded_retention_ms", "failed_retention_ms", NULL,
};

/* Ranges, the same as the file's. */
static const struct {
    int64_t min, max;
} setting_ranges[] = {
    {10, 3600000},           {20, 86400000}, {1, 1000000}, {0, 1000000}, {100, 7LL * 86400000},
    {0, 3650LL * 86400000}, {0, 3650LL * 86400000},
};

void cohort_settings_from_config(const cohort_config_t *config,
                                 const cohort_service_config_t *service,
                                 cohort_settings_t *settings)
{
    *settings = (cohort_settings_t){
        .tick_ms = config->tick_ms,
        .takeover_ms = config->takeover_ms,
        .primary_task_count = service->primary_task_count,
        .secondary_task_count = service->secondary_task_count,
        .stall_timeout_ms = service->stall_timeout_ms,
        .succeeded_retention_ms = service->succeeded_retention_ms,
        .failed_retention_ms = service->failed_retention_ms,
    };
}

int64_t *cohort_settings_field(cohort_settings_t *settings, const char *key)
{
    int64_t *fields[] = {&settings->tick_ms,          &settings->takeover_ms,
                         &settings->primary_task_count, &settings->secondary_task_count,
                         &settings->stall_timeout_ms, &settings->succeeded_retention_ms,
                         &settings->failed_retention_ms};
    for (size_t i = 0; cohort_setting_names[i]; i++)
        if (strcmp(cohort_setting_names[i], key) == 0)
            return fields[i];
    return NULL;
}

bool cohort_settings_check_value(const char *key, int64_t value, char *why, size_t whylen)
{
    for (size_t i = 0; cohort_setting_names[i]; i++) {
        if (strcmp(cohort_setting_names[i], key) != 0)
            continue;
        if (value >= setting_ranges[i].min && value <= setting_ranges[i].max)
            return true;
        snprintf(why, whylen, "%s = %lld is out of range [%lld, %lld]", key, (long long)value,
                 (long long)setting_ranges[i].min, (long long)setting_ranges[i].max);
        return false;
    }
    snprintf(why, whylen,
             "'%s' is not a live setting (known: tick_ms, takeover_ms, primary_task_count, "
             "secondary_task_count, stall_timeout_ms, succeeded_retention_ms, "
             "failed_retention_ms)",
             key);
    return false;
}

bool cohort_settings_check(const cohort_settings_t *settings, char *why, size_t whylen)
{
    cohort_settings_t copy = *settings;
    for (size_t i = 0; cohort_setting_names[i]; i++)
        if (!cohort_settings_check_value(cohort_setting_names[i],
                                         *cohort_settings_field(&copy, cohort_setting_names[i]),
                                         why, whylen))
            return false;
    if (settings->takeover_ms <= settings->tick_ms) {
        snprintf(why, whylen, "takeover_ms (%lld) must be greater than tick_ms (%lld)",
                 (long long)settings->takeover_ms, (long long)settings->tick_ms);
        return false;
    }
    if (settings->stall_timeout_ms < 3 * settings->tick_ms) {
        snprintf(why, whylen, "stall_timeout_ms (%lld) must be at least 3 * tick_ms (%lld)",
                 (long long)settings->stall_timeout_ms, (long long)(3 * settings->tick_ms));
        return false;
    }
    return true;
}
