/*
 * cohort/handler.h - the handler ABI of Cohort.
 *
 * A handler is a shared object that exports one symbol, `cohort_handler`, of type
 * cohort_handler_t. cohortd loads it with dlopen(), checks abi_version, calls init() once
 * per service that names it, then calls primary_work() on the service's primary every tick
 * and process_task() on the service's worker threads for every task this node claims.
 *
 * The handler calls back into the node only through the cohort_* functions declared here
 * (they are exported by the cohortd executable; a handler links with nothing but libbson).
 *
 * Stability: this header is versioned by COHORT_HANDLER_ABI_VERSION. A release that adds to
 * the ABI raises the version and appends fields to cohort_handler_t; cohortd keeps loading
 * handlers built against any older version it knows (from 1 up to its own), and refuses
 * handlers built for a newer one with a message naming both versions.
 *
 * Threads: process_task() runs concurrently on up to `workers` threads of a service; it must
 * be thread-safe with respect to the handler's state. init(), primary_work() and destroy()
 * run on the node's main thread, never concurrently with each other.
 *
 * Ownership: every pointer the node passes to a callback is owned by the node and valid only
 * for the duration of that call, unless stated otherwise. Pointers returned by cohort_*
 * accessors follow the same rule.
 */
#ifndef COHORT_HANDLER_H
#define COHORT_HANDLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COHORT_HANDLER_ABI_VERSION 1
#define COHORT_HANDLER_SYMBOL "cohort_handler"

#if defined(__GNUC__)
#define COHORT_HANDLER_EXPORT __attribute__((visibility("default")))
#define COHORT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define COHORT_HANDLER_EXPORT
#define COHORT_PRINTF(f, a)
#endif

/* Opaque: the call context (service, node, role) and the task being processed. */
typedef struct cohort_ctx cohort_ctx_t;
typedef struct cohort_task cohort_task_t;

/* What process_task() reports. Any other value is a handler bug: the task is failed with
 * the message "handler returned invalid outcome N". */
typedef enum cohort_outcome {
    COHORT_TASK_SUCCEEDED = 0, /* done; the task is marked succeeded */
    COHORT_TASK_RETRY = 1,     /* transient failure; retried with backoff up to max_attempts */
    COHORT_TASK_FAILED = 2,    /* permanent failure; failed at once, never retried */
} cohort_outcome_t;

typedef enum cohort_log_level {
    COHORT_LOG_DEBUG = 0,
    COHORT_LOG_INFO = 1,
    COHORT_LOG_WARN = 2,
    COHORT_LOG_ERROR = 3,
} cohort_log_level_t;

/* A key of the service's config section that cohortd does not know itself. */
typedef struct cohort_option {
    const char *key;
    const char *value;
    int line; /* line number in the config file, for error messages */
} cohort_option_t;

/* An error from a cohort_* call: a stable code and a message a person can act on. */
typedef enum cohort_error_code {
    COHORT_OK = 0,
    COHORT_ERROR_INVALID = 1,     /* bad argument (e.g. task data that is not a document) */
    COHORT_ERROR_NOT_PRIMARY = 2, /* primary-only call made without a valid primary lease */
    COHORT_ERROR_DATABASE = 3,    /* MongoDB failed or is unreachable; nothing was written */
} cohort_error_code_t;

typedef struct cohort_error {
    cohort_error_code_t code;
    char message[256];
} cohort_error_t;

typedef struct cohort_handler {
    uint32_t abi_version; /* always COHORT_HANDLER_ABI_VERSION */
    const char *name;     /* short name, for logs */

    /* Optional. Called once per service that uses this handler, before any other callback.
     * `options` are the service section's keys cohortd does not know; reject a bad or unknown
     * one by returning false after cohort_ctx_set_error(). *state is handed to every other
     * callback and to destroy(). */
    bool (*init)(cohort_ctx_t *ctx, const cohort_option_t *options, size_t n_options,
                 void **state);

    /* Optional. Called once at shutdown, after the last task finished. */
    void (*destroy)(void *state);

    /* Optional. Called on the service's primary once per tick, while its primary lease is
     * valid. Create tasks here with cohort_task_create(); keep it short (heavy work belongs in
     * tasks). Return false (with cohort_ctx_set_error()) to have an error logged. */
    bool (*primary_work)(cohort_ctx_t *ctx, void *state);

    /* Required. Processes one claimed task. Runs on a worker thread. Execution is
     * at-least-once: a task may run again if a node dies mid-run, so make it idempotent. */
    cohort_outcome_t (*process_task)(cohort_ctx_t *ctx, void *state, cohort_task_t *task);
} cohort_handler_t;

/* ---- context --------------------------------------------------------------------------- */

const char *cohort_ctx_service(const cohort_ctx_t *ctx);
const char *cohort_ctx_node_id(const cohort_ctx_t *ctx);
/* True while this node holds a valid primary lease for the service. */
bool cohort_ctx_is_primary(const cohort_ctx_t *ctx);
/* The epoch of this node's current primacy, or 0 if it is not primary. */
int64_t cohort_ctx_epoch(const cohort_ctx_t *ctx);
/* Sets the message reported when init() or primary_work() returns false. */
void cohort_ctx_set_error(cohort_ctx_t *ctx, const char *fmt, ...) COHORT_PRINTF(2, 3);
/* One log line, tagged with the node, service and role. */
void cohort_log(cohort_ctx_t *ctx, cohort_log_level_t level, const char *fmt, ...)
    COHORT_PRINTF(3, 4);

/* ---- tasks ----------------------------------------------------------------------------- */

/* Creates one task of the context's service with `data` (copied; may be NULL for {}).
 * `opts` may be NULL or a document of options:
 *   tracked (bool, default true): the task belongs to the service's tracked batch.
 * From primary_work() the call is fenced: it fails with COHORT_ERROR_NOT_PRIMARY once the
 * primary lease has run out, and the task records the creating epoch. On success, if `id`
 * is not NULL it receives the new task's id (25 bytes: 24 hex digits and a NUL).
 * Returns false and fills `error` (may be NULL) on failure; nothing is created then. */
bool cohort_task_create(cohort_ctx_t *ctx, const bson_t *data, const bson_t *opts, char id[25],
                        cohort_error_t *error);

/* The task's id as 24 hex digits. */
const char *cohort_task_id(const cohort_task_t *task);
/* The task's data document (never NULL; may be empty). */
const bson_t *cohort_task_data(const cohort_task_t *task);
/* 1 for the first run, 2 for the first retry, and so on. */
int cohort_task_attempt(const cohort_task_t *task);
/* Records why the task failed; stored in the task's history and last_error. */
void cohort_task_set_error(cohort_task_t *task, const char *fmt, ...) COHORT_PRINTF(2, 3);

#ifdef __cplusplus
}
#endif

#endif /* COHORT_HANDLER_H */
