/*
 * timefmt.h - the one way Cohort writes and reads times: ISO-8601 UTC with milliseconds
 * ("2026-11-21T10:00:00.000Z"), and the durations people type ("250ms", "30s", "5m").
 *
 * The log lines, cohortctl's tables and its JSON all print times with
 * cohort_time_format(); cohortctl's --not-before/--not-after and --delay/--deadline/--timeout
 * read them with cohort_time_parse() and cohort_duration_parse(). Pure functions of their
 * arguments: no clock, no locale, no allocation.
 */
#ifndef COHORT_TIMEFMT_H
#define COHORT_TIMEFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room for cohort_time_format()'s text and its NUL. */
#define COHORT_TIME_TEXT_MAX 40

/* Writes `ms` since the epoch as "2026-11-21T10:00:00.000Z" into `buf` (of `len` bytes,
 * COHORT_TIME_TEXT_MAX is enough); a negative or unrepresentable time as "-". */
void cohort_time_format(int64_t ms, char *buf, size_t len);

/* Reads ms since the epoch (digits only) or YYYY-MM-DDTHH:MM:SS[.fff]Z (UTC, from 1970).
 * False if `text` is neither. */
bool cohort_time_parse(const char *text, int64_t *ms);

/* Reads "250ms", "30s", "5m", "2h", "1d" or a bare number of ms (no sign, no spaces). False
 * if `text` is none of these or too large. */
bool cohort_duration_parse(const char *text, int64_t *ms);

/* Proleptic Gregorian calendar arithmetic, exact for any year (core/tz.c and core/cron.c
 * count in it): days from 1970-01-01 to y-m-d, the date of a day number, and the days of a
 * month (1-12). */
int64_t cohort_days_from_civil(int64_t y, int m, int d);
void cohort_civil_from_days(int64_t days, int64_t *year, int *month, int *day);
int cohort_days_in_month(int64_t y, int m);

#endif
