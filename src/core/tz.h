/*
 * tz.h - time zones from the system's tz database, read by Cohort itself: a TZif file
 * (RFC 8536, versions 1-4) from /usr/share/zoneinfo (or $TZDIR), and the POSIX TZ rule in
 * its footer for times after its last transition.
 *
 * Why not localtime_r(): glibc has one process-wide zone (TZ + tzset), which a node with
 * schedules in several zones and worker threads cannot share safely. A cohort_tz_t is
 * immutable once loaded, so any thread may use it without a lock.
 *
 * Times here are whole seconds: UTC seconds since 1970, and "wall" seconds, the local
 * date and time counted as if it were UTC (wall = utc + offset).
 */
#ifndef COHORT_TZ_H
#define COHORT_TZ_H

#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

typedef struct cohort_tz cohort_tz_t;

/* Loads zone `name` ("Europe/Berlin"; "UTC" needs no file). The name must be 1-64 of
 * A-Z a-z 0-9 / _ + - with no "." component; files come from $TZDIR if set, else
 * /usr/share/zoneinfo. NULL with `error` (COHORT_DOMAIN_CONFIG) naming the zone and why.
 * Free with cohort_tz_destroy(). */
cohort_tz_t *cohort_tz_load(const char *name, bson_error_t *error);

/* Parses the TZif bytes `data` (tests feed doctored files here). */
cohort_tz_t *cohort_tz_parse(const char *name, const uint8_t *data, size_t len,
                             bson_error_t *error);

void cohort_tz_destroy(cohort_tz_t *tz);

/* The name it was loaded by. Owned by `tz`. */
const char *cohort_tz_name(const cohort_tz_t *tz);

/* The offset from UTC, in seconds east, in effect at `utc`. */
int32_t cohort_tz_offset(const cohort_tz_t *tz, int64_t utc);

/* The instants whose local time is `wall`: 0 in a gap (spring forward: the time does not
 * exist that day), 1 normally, 2 in an overlap (fall back: it happens twice). *first gets
 * the earliest when there is one. Assumes at most one offset change within 36 hours of
 * `wall`, which holds for every zone of the database in use. */
int cohort_tz_from_wall(const cohort_tz_t *tz, int64_t wall, int64_t *first);

#endif
