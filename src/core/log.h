/*
 * log.h - one line per event on stderr: time (UTC, from the node's clock), level, node id,
 * service, role and epoch when known, then the message.
 *
 *   2026-11-21T13:45:01.123Z INFO  node=web-1 service=noop role=primary epoch=3 | message
 *
 * Lines are formatted into one buffer and written with a single write(2), so lines from
 * concurrent threads (and processes sharing a file) never interleave.
 */
#ifndef COHORT_LOG_H
#define COHORT_LOG_H

#include <stdarg.h>
#include <stdint.h>

#include "cohort/handler.h"

void cohort_log_set_level(cohort_log_level_t level);
cohort_log_level_t cohort_log_get_level(void);
void cohort_log_set_node(const char *node_id);

/* With `json`, each line is one JSON object instead (log_format = json):
 *   {"time":"2026-11-21T13:45:01.123Z","level":"info","node":"web-1","service":"noop",
 *    "role":"primary","epoch":3,"msg":"message"}
 * service, role and epoch are left out when unknown, as in the text format. */
void cohort_log_set_json(bool json);

/* Parses "debug", "info", "warn"/"warning", "error". */
bool cohort_log_parse_level(const char *text, cohort_log_level_t *level);
const char *cohort_log_level_name(cohort_log_level_t level);

/* `service` and `role` may be NULL; `epoch` <= 0 is omitted. */
void cohort_logf(cohort_log_level_t level, const char *service, const char *role, int64_t epoch,
                 const char *fmt, ...) COHORT_PRINTF(5, 6);
void cohort_logv(cohort_log_level_t level, const char *service, const char *role, int64_t epoch,
                 const char *fmt, va_list ap) COHORT_PRINTF(5, 0);

/* Sends libmongoc's own log messages through this log (warnings and errors only; its debug
 * chatter would otherwise reach stdout and break scripts that read it). */
void cohort_log_route_mongoc(void);

#define cohort_log_node(level, ...) cohort_logf(level, NULL, NULL, 0, __VA_ARGS__)

#endif
