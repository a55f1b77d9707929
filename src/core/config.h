/*
 * config.h - the node's configuration: the INI file of the [cluster] and [service:NAME]
 * sections, parsed with inih and validated in full.
 *
 * Parsing never stops at the first problem: every problem is collected with its line
 * number, so `cohortd --check-config` can list them all at once. Which keys exist, their
 * types, defaults and ranges come from the settings table (settings.h); this header holds
 * the structs the parsed values land in.
 */
#ifndef COHORT_CONFIG_H
#define COHORT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cohort/handler.h"
#include "core/log.h"
#include "core/schedule.h"
#include "core/settings.h"

/* The limits (COHORT_SERVICE_NAME_MAX, COHORT_TAKEOVER_MS_MAX, ...) are in settings.h. */

/* Where process_task() runs: on the node's worker threads, or in child worker processes
 * the node supervises (a crash or a timeout then costs only that child). */
typedef enum cohort_isolation {
    COHORT_ISOLATION_THREAD = 0,
    COHORT_ISOLATION_PROCESS = 1,
} cohort_isolation_t;

/* How an idle node learns of a new task: a change stream on each hosted queue wakes a worker
 * at once (node/work/watch.h), or only the next tick's claim finds it. */
typedef enum cohort_wake_mode {
    COHORT_WAKE_CHANGE_STREAM = 0,
    COHORT_WAKE_POLL = 1,
} cohort_wake_mode_t;

/* Defaults for the scheduling options of tasks created without them: per service, and per
 * kind (`kind.NAME.KEY = VALUE` in the service's section), the kind's winning where set. */
typedef struct cohort_task_defaults {
    int64_t priority;        /* higher runs first */
    int64_t not_after_ms;    /* > 0: a task still pending this long after it is due is promoted */
    int64_t task_timeout_ms; /* > 0: a run longer than this is timed_out (final) */
    int64_t weight;          /* 1..COHORT_WEIGHT_MAX: the load a task puts on a node */
} cohort_task_defaults_t;

/* `handler = external`: a service whose tasks only external workers run (docs/API.md). */
#define COHORT_HANDLER_EXTERNAL "external"

typedef struct cohort_kind_config {
    char *name;
    cohort_task_defaults_t defaults; /* fields the section did not set are the service's */
    bool set_priority, set_not_after_ms, set_task_timeout_ms, set_weight;
} cohort_kind_config_t;

typedef struct cohort_service_config {
    char *name;
    char *handler_path; /* resolved against the config file's directory; "external" for
                           COHORT_HANDLER_EXTERNAL */
    int handler_line;
    bool external; /* handler = external: no plugin, no workers; external workers claim its
                      tasks over the HTTP API */
    int64_t primary_task_count;
    int64_t secondary_task_count; /* 0: no limit */
    int64_t workers;
    int64_t max_attempts;
    int64_t retry_base_ms;
    int64_t stall_timeout_ms;       /* a claimed task not checked in this long is reset */
    int64_t succeeded_retention_ms; /* 0: keep */
    int64_t failed_retention_ms;    /* 0: keep */
    int64_t history_retention_ms;   /* the per-minute history (store/history.h) */
    cohort_task_defaults_t defaults;   /* priority, not_after_ms, task_timeout_ms */
    int64_t not_after_boost;           /* added to a task's priority when its not_after passes */
    int64_t claim_batch;               /* tasks per claim; COHORT_CLAIM_BATCH_AUTO: adaptive */
    int64_t capacity; /* weight this node runs at once (node/work/capacity.h); 0: `workers` */
    cohort_isolation_t isolation;
    cohort_kind_config_t *kinds; /* per-kind defaults; owned */
    size_t n_kinds;
    cohort_option_t *options; /* keys handed to the handler; owned */
    size_t n_options;
    cohort_schedule_config_t *schedules; /* `schedule.ID` lines, in file order; owned */
    size_t n_schedules;
    int line;       /* line of the section header */
    int stall_line; /* line of stall_timeout_ms, 0 if defaulted */
} cohort_service_config_t;

typedef struct cohort_config {
    char *path;
    char *mongodb_uri; /* after the MONGODB_URI override */
    bool mongodb_uri_from_env;
    char *database;
    int64_t tick_ms;
    int64_t takeover_ms;
    int64_t shutdown_grace_ms;
    char *node_id; /* NULL: generate one */
    cohort_log_level_t log_level;
    bool log_json;     /* log_format = json: one JSON object per line */
    char *http_listen; /* HOST:PORT of the HTTP listener (health, metrics); NULL: off */
    int64_t api_max_body; /* bytes: the HTTP API's largest request body */
    int64_t api_threads;     /* threads answering the HTTP API */
    int64_t api_max_wait_ms; /* the longest an external worker's claim is held */
    int64_t http_max_connections; /* HTTP connections open at once; the oldest goes past it */
    cohort_wake_mode_t wake; /* change streams wake idle workers, or the tick alone */
    int64_t wake_await_ms;   /* a change stream's getMore waits this long (maxAwaitTimeMS) */
    cohort_service_config_t *services;
    size_t n_services;
} cohort_config_t;

/* The file's values of a service's live settings (the table's live rows; see settings.h).
 * Either may be NULL: the table's defaults then stand for the missing part (cohortctl
 * without -c, or with a file that does not host the service). */
void cohort_settings_from_config(const cohort_config_t *config,
                                 const cohort_service_config_t *service,
                                 cohort_settings_t *settings);

/* Problems found while loading; each message already carries "line N: ". A problem whose
 * message could not be stored (out of memory) is counted in `unrecorded`, so it still
 * refuses the file; a message that could not be formatted is stored as "out of memory". */
typedef struct cohort_config_errors {
    char **messages; /* owned; free with cohort_config_errors_clear */
    size_t count;
    size_t unrecorded;
} cohort_config_errors_t;

/* Parses and validates `path`. Returns a config (caller frees with cohort_config_destroy) if
 * there was no problem; otherwise NULL, with every problem appended to `errors`. The
 * environment variable MONGODB_URI, when set and non-empty, overrides mongodb_uri. */
cohort_config_t *cohort_config_load(const char *path, cohort_config_errors_t *errors);

/* Same, from a string; `origin` names it in messages and relative handler paths resolve
 * against `base_dir` (may be NULL for the current directory). */
cohort_config_t *cohort_config_load_string(const char *text, const char *origin,
                                           const char *base_dir, cohort_config_errors_t *errors);

/* For `cohortd --check-config`: parses and validates `path` like cohort_config_load, but
 * returns the config even when it found problems (NULL only if the file cannot be read), so
 * that the handlers of its sections can be checked in the same pass. Where the file has a
 * problem, the config holds the default (or nothing: a handler file that cannot be read
 * leaves handler_path NULL); never run a node on it. */
cohort_config_t *cohort_config_check(const char *path, cohort_config_errors_t *errors);

void cohort_config_destroy(cohort_config_t *config);

const cohort_service_config_t *cohort_config_find_service(const cohort_config_t *config,
                                                          const char *name);

/* True if `name` is a valid service name: 1-64 of [A-Za-z0-9_-]. */
bool cohort_config_valid_service_name(const char *name);

/* True if `name` is a valid task kind: 1-64 of [A-Za-z0-9_-]. */
bool cohort_config_valid_kind(const char *name);

/* The defaults a task of `kind` (NULL: none) gets in this service (weight at least 1). */
cohort_task_defaults_t cohort_config_task_defaults(const cohort_service_config_t *service,
                                                   const char *kind);

/* True if the scheduling keys (defaults, kinds, claim_batch, isolation) are the same. */
bool cohort_config_same_scheduling(const cohort_service_config_t *a,
                                   const cohort_service_config_t *b);

void cohort_config_errors_add(cohort_config_errors_t *errors, const char *fmt, ...)
    COHORT_PRINTF(2, 3);
void cohort_config_errors_clear(cohort_config_errors_t *errors);

#endif
