/*
 * cron.h - cron expressions and their fire times in a time zone: the schedule of a recurring
 * task (`schedule.ID = CRON ; ...`, core/schedule.h).
 *
 * Syntax: five fields (minute hour day-of-month month day-of-week) or six with a leading
 * seconds field; each field a comma-separated list of `*`, `N`, `N-M`, each optionally
 * `/STEP` (`N/STEP` runs from N to the field's end). Months take JAN-DEC, days of the week
 * SUN-SAT (0 and 7 are Sunday), in any case. Aliases: @yearly (@annually), @monthly,
 * @weekly, @daily (@midnight), @hourly.
 *
 * Day-of-month and day-of-week follow Vixie cron: if both are restricted (neither field
 * starts with `*`), a day matches when either matches; otherwise the restricted one alone
 * decides. So `0 0 13 * FRI` fires on every 13th and on every Friday.
 *
 * Fire times are computed on local wall-clock time and converted with the zone (core/tz.h):
 * a local time that does not exist that day (spring forward) is skipped, and one that
 * happens twice (fall back) fires once, at its first occurrence.
 */
#ifndef COHORT_CRON_H
#define COHORT_CRON_H

#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "core/tz.h"

typedef struct cohort_cron {
    uint64_t seconds; /* bit s: second s (0-59); only bit 0 without a seconds field */
    uint64_t minutes; /* 0-59 */
    uint32_t hours;   /* 0-23 */
    uint32_t mdays;   /* 1-31 */
    uint16_t months;  /* 1-12 */
    uint8_t wdays;    /* 0-6, Sunday 0 */
    bool mday_star, wday_star; /* the field started with '*' */
    bool has_seconds;
} cohort_cron_t;

/* Parses `text`; false with `error` (COHORT_DOMAIN_CONFIG) naming the field and the fault,
 * e.g. "cron field 2 (hour): 24 is out of range 0-23". An expression that can never fire
 * (`0 0 30 2 *`) is refused too. */
bool cohort_cron_parse(const char *text, cohort_cron_t *cron, bson_error_t *error);

/* The first fire time strictly after `after_ms` (UTC ms; results are whole seconds) in `tz`,
 * into *next_ms. False if there is none within 30 years (cannot happen for an expression
 * cohort_cron_parse() accepted, short of a zone that skips every matching time). */
bool cohort_cron_next(const cohort_cron_t *cron, const cohort_tz_t *tz, int64_t after_ms,
                      int64_t *next_ms);

/* The last fire time at or before `at_ms`, not earlier than `floor_ms` (exclusive), into
 * *prev_ms; false if there is none in (floor_ms, at_ms]. Walks forward from floor_ms, so
 * keep the window small (the scheduler bounds it). */
bool cohort_cron_prev(const cohort_cron_t *cron, const cohort_tz_t *tz, int64_t floor_ms,
                      int64_t at_ms, int64_t *prev_ms);

#endif
