/*
 * live_settings.h - the values of a service that an operator may change while it runs
 * (cohort_settings_t: tick, takeover, task counts, stall timeout, retentions): the config
 * file's (`file`, replaced on SIGHUP) merged with the database's (the config document's
 * `settings`, which win where set) into what is in effect (`eff`).
 *
 * This module is the one writer of `eff` and of the election's takeover_ms and tick_ms: so
 * the lease a node declares is always the takeover in effect, never a stale copy.
 */
#ifndef COHORT_LIVE_SETTINGS_H
#define COHORT_LIVE_SETTINGS_H

#include "core/config.h"
#include "node/runtime.h"

/* Sets the file's values (from cohort_settings_from_config()) and puts them in effect at
 * once: a new service uses them until its first tick reads the database's. */
void cohort_service_set_file_settings(cohort_service_t *service, const cohort_settings_t *file);

/* New file values for the live settings (SIGHUP); the next tick applies them (the database's
 * values still win where set) and logs what changed. */
void cohort_service_reload_file_settings(cohort_service_t *service, const cohort_settings_t *file);

/* Main thread, after each election round: applies the settings the election just read from
 * the config document (each key set there overrides the file; a key unset returns to the
 * file) and logs every change. Invalid combinations (edited by hand) are reported once and
 * ignored. */
void cohort_live_settings_apply(cohort_service_t *service);

/* Main thread: appends to `doc` the service's entry of its node document's `settings`:
 * {file: {...}, effective: {...}, problem: "..." while the database's values cannot be
 * applied} (docs/SCHEMA.md, `nodes`), so that cohortctl settings and status see each node's
 * own values. */
void cohort_live_settings_publish(const cohort_service_t *s, bson_t *doc);

#endif
