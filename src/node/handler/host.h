/*
 * host.h - the handler host: what both kinds of worker do with a handler, written once.
 * In-process workers (isolation = thread) and the child worker processes of isolation =
 * process (isolate_child.c) both create a service's state here, load its handler and call
 * its init() with the service's options, run each task through process_task() and turn the
 * outcome into a result with the retry schedule, and finally call destroy().
 *
 * Outcomes: success -> succeeded; retryable failure -> pending again after
 * cohort_task_retry_delay_ms(), or failed once max_attempts is used up; permanent failure,
 * an invalid outcome or an exhausted attempt count -> failed. The attempt count is raised at
 * claim time, so a task that kills its node on every run still ends failed.
 */
#ifndef COHORT_HOST_H
#define COHORT_HOST_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdint.h>

#include "core/config.h"
#include "node/handler/context.h"
#include "node/runtime.h"
#include "store/store.h"
#include "store/outcomes.h"

/* Delay before the retry that follows failed attempt `attempt` (1-based): retry n (n = 0 for
 * the first retry) waits base_ms * 2^n. Saturates instead of overflowing; never more than
 * COHORT_RETRY_DELAY_MAX_MS. */
#define COHORT_RETRY_DELAY_MAX_MS (7LL * 24 * 3600 * 1000)
int64_t cohort_task_retry_delay_ms(int64_t base_ms, int64_t attempt);

/* A retryable failure of attempt `attempt`: `result` becomes a retry after the service's
 * backoff while attempts remain (max_attempts), and is left as it is (failed) otherwise. */
void cohort_host_retry(const cohort_service_config_t *config, int64_t attempt,
                       cohort_task_result_t *result);

/* What one run of a claimed task came to, before it is written. */
typedef struct cohort_task_run {
    cohort_task_t task;          /* parsed from the claimed document (views into it) */
    cohort_task_result_t result; /* result.error points into `why` or task.error */
    char why[512];
    bool valid; /* false: the document had no _id at all; nothing to record */
} cohort_task_run_t;

/* The timeout that applies to a claimed task: its own task_timeout_ms, else the service's
 * default for its kind; 0 means none. */
int64_t cohort_task_timeout_ms(const cohort_service_config_t *config, const cohort_task_t *task);

/* A service's state for `config` (borrowed, like node_id and store; store and client may be
 * NULL, as for --check-config) with the file's live settings `file` (copied; from
 * cohort_settings_from_config()) in effect: loads the handler and calls its init() with the
 * service's options, lending it `client` for the call. No worker runs yet. Returns the
 * service (free it with cohort_host_destroy(), or cohort_service_destroy() once started), or
 * NULL with the reason in `error`
 * (Cohort's error type, see errors.h). */
cohort_service_t *cohort_host_new(const cohort_service_config_t *config, const char *node_id,
                                  const cohort_settings_t *file, cohort_store_t *store,
                                  mongoc_client_t *client, bson_error_t *error);

/* Hands the options of `config` (a reloaded section for this service) to the handler's
 * reload callback (which must exist). False with the handler's reason in `error`. */
bool cohort_host_reload(cohort_service_t *service, mongoc_client_t *client,
                        const cohort_service_config_t *config, bson_error_t *error);

/* The handler call itself, on the calling thread: process_task() on the parsed task
 * run->task, its duration observed, run->result filled from the outcome. */
void cohort_host_run_task(cohort_ctx_t *ctx, cohort_task_run_t *run);

/* Calls the handler's destroy() (if its init() succeeded), unloads it and frees the service.
 * Its workers, if any were started, must be gone (cohort_service_destroy() sees to that). */
void cohort_host_destroy(cohort_service_t *service);

#endif
