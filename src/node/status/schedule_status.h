/*
 * schedule_status.h - a service's recurring tasks as people and tools see them: per schedule
 * its times, state, last and next slot, the task created last with its status, and its
 * counts. One builder for `cohortctl schedules --json` (and its table) and the API's
 * GET /api/v1/services/{svc}/schedules, so both show the same objects.
 *
 * It reads through the store (the config document, and each schedule's last task); it keeps
 * nothing of the running node, so the CLI uses it as well.
 */
#ifndef COHORT_SCHEDULE_STATUS_H
#define COHORT_SCHEDULE_STATUS_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "store/store.h"

/* Appends to `out` (a document the caller began) "service", "now" and "schedules": one
 * object per schedule with id, state ("active", "paused", or "not started": in `file` but
 * never run by a primary), series, spec (the file's line, or null), in_file (only with a
 * `file`), catch_up (the file's, or null), last_slot, next_slot (ISO-8601 UTC or null), due
 * (the next slot is already past `now_ms`, the server's time), last_task {id, slot, status}
 * or null, created, existed, skipped, last_epoch. `file` (may be NULL) is the service's
 * section of a config file. *found is false (and nothing appended) if the service has no
 * config document. False on a database error. */
bool cohort_schedule_status(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const cohort_service_config_t *file, int64_t now_ms, bson_t *out,
                            bool *found, bson_error_t *error);

#endif
