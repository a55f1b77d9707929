/*
 * log.c - the node's log lines (see log.h for the format).
 *
 * The level and node id are set once at start-up (and the level again on reload), so they
 * are plain atomics; formatting happens on the caller's stack. JSON lines (log_format =
 * json) are built in a heap buffer, each string escaped by libbson, and written the same way.
 */
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/timefmt.h"

#include <mongoc/mongoc.h>

static _Atomic int log_level = COHORT_LOG_INFO;
static char log_node[128] = "-";
static _Atomic bool log_json = false;

void cohort_log_set_level(cohort_log_level_t level)
{
    atomic_store(&log_level, (int)level);
}

cohort_log_level_t cohort_log_get_level(void)
{
    return (cohort_log_level_t)atomic_load(&log_level);
}

void cohort_log_set_node(const char *node_id)
{
    snprintf(log_node, sizeof log_node, "%s", node_id ? node_id : "-");
}

void cohort_log_set_json(bool json)
{
    atomic_store(&log_json, json);
}

/* Each level's names: in JSON lines and log_level (lower case), in text lines (upper). */
static const struct level_names {
    const char *lower, *upper;
} level_names[] = {
    [COHORT_LOG_DEBUG] = {"debug", "DEBUG"},
    [COHORT_LOG_INFO] = {"info", "INFO"},
    [COHORT_LOG_WARN] = {"warn", "WARN"},
    [COHORT_LOG_ERROR] = {"error", "ERROR"},
};
#define N_LEVELS (sizeof level_names / sizeof level_names[0])

bool cohort_log_parse_level(const char *text, cohort_log_level_t *level)
{
    if (strcasecmp(text, "warning") == 0)
        text = "warn";
    for (size_t i = 0; i < N_LEVELS; i++) {
        if (strcasecmp(text, level_names[i].lower) == 0) {
            *level = (cohort_log_level_t)i;
            return true;
        }
    }
    return false;
}

const char *cohort_log_level_name(cohort_log_level_t level)
{
    return (size_t)level < N_LEVELS ? level_names[level].upper : "?";
}

/* "2026-11-21T13:45:01.123Z" from the node's clock. */
static void format_time(char *out, size_t len)
{
    cohort_time_format(cohort_clock_realtime_ms(), out, len);
}

/* `text` as the inside of a JSON string (caller frees with bson_free). Bytes that are not
 * UTF-8 (a message quoting binary data) become '?': the line stays valid JSON. */
static char *json_escape(const char *text)
{
    size_t len = strlen(text);
    if (bson_utf8_validate(text, len, false))
        return bson_utf8_escape_for_json(text, (ssize_t)len);
    char *ascii = bson_strdup(text);
    for (char *p = ascii; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    char *escaped = bson_utf8_escape_for_json(ascii, (ssize_t)len);
    bson_free(ascii);
    return escaped;
}

static const char *json_level(cohort_log_level_t level)
{
    return (size_t)level < N_LEVELS ? level_names[level].lower : "?";
}

/* After vsnprintf cut a message at the end of `text`, drops a UTF-8 sequence left
 * incomplete, so the message stays valid UTF-8. */
static void trim_partial_utf8(char *text)
{
    size_t len = strlen(text), lead = len;
    while (lead > 0 && ((unsigned char)text[lead - 1] & 0xC0) == 0x80)
        lead--;
    if (lead == 0)
        return;
    unsigned char c = (unsigned char)text[lead - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len - (lead - 1) < need)
        text[lead - 1] = '\0';
}

/* Appends ,"key":"value" with the value escaped. */
static void json_field(FILE *out, const char *key, const char *value)
{
    char *escaped = json_escape(value);
    fprintf(out, ",\"%s\":\"%s\"", key, escaped ? escaped : "?");
    bson_free(escaped);
}

/* One JSON object per line, written with one write(2) like the text lines. */
static void write_json_line(cohort_log_level_t level, const char *service, const char *role,
                            int64_t epoch, const char *message)
{
    char stamp[COHORT_TIME_TEXT_MAX];
    format_time(stamp, sizeof stamp);
    char *line = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&line, &len);
    if (!out)
        return;
    fprintf(out, "{\"time\":\"%s\",\"level\":\"%s\"", stamp, json_level(level));
    json_field(out, "node", log_node);
    if (service)
        json_field(out, "service", service);
    if (role)
        json_field(out, "role", role);
    if (epoch > 0)
        fprintf(out, ",\"epoch\":%lld", (long long)epoch);
    json_field(out, "msg", message);
    fputs("}\n", out);
    bool complete = !ferror(out);
    if (fclose(out) == 0 && complete) {
        ssize_t ignored = write(STDERR_FILENO, line, len);
        (void)ignored;
    }
    free(line);
}

void cohort_logv(cohort_log_level_t level, const char *service, const char *role, int64_t epoch,
                 const char *fmt, va_list ap)
{
    if ((int)level < atomic_load(&log_level))
        return;

    char line[2048];
    if (atomic_load(&log_json)) {
        if (vsnprintf(line, sizeof line, fmt, ap) >= (int)sizeof line)
            trim_partial_utf8(line);
        write_json_line(level, service, role, epoch, line);
        return;
    }
    format_time(line, sizeof line);
    size_t n = strlen(line);
    n += (size_t)snprintf(line + n, sizeof line - n, " %-5s node=%s", cohort_log_level_name(level),
                          log_node);
    if (service && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, " service=%s", service);
    if (role && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, " role=%s", role);
    if (epoch > 0 && n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, " epoch=%lld", (long long)epoch);
    if (n < sizeof line)
        n += (size_t)snprintf(line + n, sizeof line - n, " | ");
    if (n < sizeof line)
        n += (size_t)vsnprintf(line + n, sizeof line - n, fmt, ap);
    if (n >= sizeof line - 1)
        n = sizeof line - 2; /* truncated: keep the newline */
    line[n++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, n);
    (void)ignored;
}

void cohort_logf(cohort_log_level_t level, const char *service, const char *role, int64_t epoch,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cohort_logv(level, service, role, epoch, fmt, ap);
    va_end(ap);
}

static void on_mongoc_log(mongoc_log_level_t level, const char *domain, const char *message,
                          void *data)
{
    (void)data;
    cohort_log_level_t ours;
    switch (level) {
    case MONGOC_LOG_LEVEL_ERROR:
    case MONGOC_LOG_LEVEL_CRITICAL:
        ours = COHORT_LOG_ERROR;
        break;
    case MONGOC_LOG_LEVEL_WARNING:
        ours = COHORT_LOG_WARN;
        break;
    default:
        return; /* message, info, debug, trace */
    }
    cohort_logf(ours, NULL, NULL, 0, "mongoc %s: %s", domain, message);
}

void cohort_log_route_mongoc(void)
{
    mongoc_log_set_handler(on_mongoc_log, NULL);
}
