/*
 * schedule.h - a recurring task's definition: one `schedule.ID = CRON ; key=value ...` line
 * of a [service:NAME] section, parsed and checked without a database.
 *
 * The options after the cron expression are `;`-separated `key=value` pairs: the task
 * options of `cohortctl enqueue` (kind, priority, weight, data, timeout, deadline, group,
 * tracked),
 * the zone (`tz`, default UTC) and what to do with slots missed while no primary ran
 * (`catch_up = none | latest | all`, `catch_up_max`). The task's unique key is the
 * schedule's own (cohort_schedule_slot_key()): it is what makes a slot run once, so
 * `unique_key` and `coalesce_key` are refused here.
 *
 * The node's side (node/primary/schedules.c) turns slots into tasks; the store's
 * (store/schedules.c) keeps each schedule's state in the service's config document.
 */
#ifndef COHORT_SCHEDULE_H
#define COHORT_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "core/cron.h"
#include "core/tz.h"

#define COHORT_SCHEDULE_ID_MAX 64 /* 1-64 of [A-Za-z0-9_-] */
#define COHORT_CATCH_UP_MAX_LIMIT 1000
#define COHORT_CATCH_UP_MAX_DEFAULT 10
/* Room for cohort_schedule_slot_key(): "schedule:" + ID + ":" + an ISO time. */
#define COHORT_SCHEDULE_KEY_MAX (16 + COHORT_SCHEDULE_ID_MAX + 40)

typedef enum cohort_catch_up {
    COHORT_CATCH_UP_NONE,   /* slots missed while no primary ran are skipped */
    COHORT_CATCH_UP_LATEST, /* the most recent missed slot runs, older ones are skipped */
    COHORT_CATCH_UP_ALL,    /* each missed slot runs, the latest catch_up_max of them */
} cohort_catch_up_t;

typedef struct cohort_schedule_config {
    char *id;         /* owned */
    char *spec;       /* owned: the line's value as written (shown by cohortctl) */
    char *cron_text;  /* owned: the cron expression alone */
    cohort_cron_t cron;
    cohort_tz_t *tz; /* owned */
    cohort_catch_up_t catch_up;
    int64_t catch_up_max;
    bson_t *options; /* owned: task options for cohort_task_options_parse() */
    bson_t *data;    /* owned: the task's data; NULL: {} */
    int line;
} cohort_schedule_config_t;

/* True if `id` is a valid schedule id: 1-64 of [A-Za-z0-9_-]. */
bool cohort_schedule_valid_id(const char *id);

/* Parses `value` (the text after `schedule.ID =`) into `out`, which the caller clears with
 * cohort_schedule_clear() whatever the result. False with `error` (COHORT_DOMAIN_CONFIG)
 * naming the part at fault: "cron field 2 (hour): 24 is out of range 0-23", "option
 * 'catch_up' must be none, latest or all". */
bool cohort_schedule_parse(const char *id, const char *value, int line,
                           cohort_schedule_config_t *out, bson_error_t *error);

void cohort_schedule_clear(cohort_schedule_config_t *schedule);

/* The name of a catch_up mode ("none", "latest", "all"). Static. */
const char *cohort_catch_up_name(cohort_catch_up_t mode);

/* The unique key of the task of slot `slot_ms`: "schedule:ID:2026-11-24T03:00:00.000Z" into
 * `buf` (COHORT_SCHEDULE_KEY_MAX bytes). Every creator of that slot derives the same key. */
void cohort_schedule_slot_key(const char *id, int64_t slot_ms, char *buf, size_t len);

/* What identifies a schedule's slots: the cron expression and the zone ("0 3 * * * @
 * Europe/Berlin"). When it changes, the recorded last slot belongs to another series of
 * slots and the node starts the schedule afresh. */
void cohort_schedule_series(const cohort_schedule_config_t *schedule, char *buf, size_t len);

#endif
