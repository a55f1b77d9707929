/*
 * schedules.h - the state of recurring tasks (schedules.c): schedules.<ID> in the config document,
 * the primary's fenced record of settled slots, the operator's pause, and finding the task a
 * slot's unique key names.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_SCHEDULES_H
#define COHORT_STORE_SCHEDULES_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* One schedule's state as the config document keeps it. */
typedef struct cohort_schedule_state {
    bool found;            /* the document has schedules.<ID> */
    bool damaged;          /* ... but its last_slot is not a date (edited by hand) */
    char series[320];      /* the cron expression and zone its last slot belongs to */
    int64_t last_slot_ms;  /* every slot up to this one is settled (created or skipped) */
    int64_t last_epoch;    /* the epoch that recorded it */
    bool has_last_task;
    bson_oid_t last_task;  /* the task of the latest slot created (or found existing) */
    int64_t last_task_slot_ms;
    bool paused;           /* cohortctl schedules pause: slots are skipped, not created */
    int64_t created, existed, skipped; /* counts since the schedule was first seen */
} cohort_schedule_state_t;

/* Reads schedules.<id> out of a config document (no I/O). */
void cohort_store_schedule_state(const bson_t *service_doc, const char *id,
                                 cohort_schedule_state_t *state);

/* A primary's record of slots settled: the last slot moves from `from` (as read: the write
 * is a compare-and-set on it) to `to_slot_ms`, with counts added. */
typedef struct cohort_schedule_record {
    const char *id;
    const char *series;
    bool from_found;       /* the state existed, with a date as last_slot, when read ... */
    int64_t from_slot_ms;  /* ... with this last slot */
    int64_t to_slot_ms;
    const bson_oid_t *last_task; /* NULL: unchanged */
    int64_t last_task_slot_ms;
    int64_t created, existed, skipped;
} cohort_schedule_record_t;

/* Writes `record` fenced on the primacy of `node_id` under `epoch` and on the last slot
 * read. *applied is false if either moved on (the write changed nothing). */
bool cohort_store_record_schedule(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const char *node_id, int64_t epoch,
                                  const cohort_schedule_record_t *record, bool *applied,
                                  bson_error_t *error);

/* Sets schedules.<id>.paused (an operator's switch, not fenced). *found is false if the
 * service's document has no state for `id` (no primary has run that schedule yet). */
bool cohort_store_pause_schedule(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *id, bool paused, bool *found,
                                 bson_error_t *error);

/* The _id of the task holding `unique_key` into *oid; *found false if none does. */
bool cohort_store_find_unique_task(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, const char *unique_key, bson_oid_t *oid,
                                   bool *found, bson_error_t *error);

#endif
