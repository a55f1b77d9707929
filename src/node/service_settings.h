/*
 * service_settings.h - a service's live settings as the nodes will run them: the config
 * file's (or the table's defaults) overridden by those set in its config document, and what
 * a change (set or unset) would make of them. Shared by `cohortctl settings` and the HTTP
 * API's .../settings, so both check a change the same way before writing it.
 */
#ifndef COHORT_SERVICE_SETTINGS_H
#define COHORT_SERVICE_SETTINGS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/settings.h"
#include "store/store.h"

/* Reads the service's settings into `eff` (in effect: `config`'s section for the service, or
 * its cluster values, or the defaults when `config` is NULL; then the database's) and the
 * keys set in the database into `in_db` (initialised by the call; destroy it). Without a
 * section in `config`, the tick and lease the primary declared stand in for the file's.
 * *found is false if the service has no config document (eff then holds the file's). */
bool cohort_service_settings_read(cohort_store_t *store, mongoc_client_t *client,
                                  const cohort_config_t *config, const char *service,
                                  cohort_settings_t *eff, bson_t *in_db, bool *found,
                                  bson_error_t *error);

/* Applies one change to `next` (a copy of the settings in effect): `set` puts `value` in
 * `key`; an unset brings back `config`'s value when it has a section for the service (else
 * the value stays as it is: this process cannot know each node's file). `key` must be a live
 * setting. Check the result with cohort_settings_validate(). */
void cohort_service_settings_change(const cohort_config_t *config, const char *service,
                                    cohort_settings_t *next, const char *key, bool set,
                                    int64_t value);

#endif
