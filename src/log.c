/*
 * log.c - the node's log lines (see log.h for the format).
 *
 * The level and node id are set once at start-up (and the level again on reload), so they
 * are plain atomics; formatting happens on the caller's stack.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#include <mongoc/mongoc.h>

static _Atomic int log_level = COHORT_LOG_INFO;
static char log_node[128] = "-";

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

bool cohort_log_parse_level(const char *text, cohort_log_level_t *level)
{
    static const struct {
        const char *name;
        cohort_log_level_t level;
    } names[] = {{"debug", COHORT_LOG_DEBUG}, {"info", COHORT_LOG_INFO},
                 {"warn", COHORT_LOG_WARN},   {"warning", COHORT_LOG_WARN},
                 {"error", COHORT_LOG_ERROR}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(text, names[i].name) == 0) {
            *level = names[i].level;
            return true;
        }
    }
    return false;
}

const char *cohort_log_level_name(cohort_log_level_t level)
{
    switch (level) {
    case COHORT_LOG_DEBUG:
        return "DEBUG";
    case COHORT_LOG_INFO:
        return "INFO";
    case COHORT_LOG_WARN:
        return "WARN";
    case COHORT_LOG_ERROR:
        return "ERROR";
    }
    return "?";
}

void cohort_logv(cohort_log_level_t level, const char *service, const char *role, int64_t epoch,
                 const char *fmt, va_list ap)
{
    if ((int)level < atomic_load(&log_level))
        return;

    char line[2048];
    size_t n = 0;
    int64_t now_ms = cohort_clock_realtime_ms();
    time_t secs = (time_t)(now_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    n += strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n, ".%03dZ %-5s node=%s", (int)(now_ms % 1000),
                          cohort_log_level_name(level), log_node);
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
