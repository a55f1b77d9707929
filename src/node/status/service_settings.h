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

/* One live node hosting the service, as its node document publishes it (each node's ping,
 * node/live_settings.h). Views into the document: valid for the callback only. */
typedef struct cohort_node_settings {
    const char *node_id;
    bool published;              /* false: a node of an older version (no `settings`) */
    cohort_settings_t file;      /* its config file's values */
    cohort_settings_t effective; /* what it runs with now */
    const char *problem;         /* why it cannot apply the database's values, or NULL */
    int64_t db_rtt_p99_ms;       /* its database round trip's p99, or -1 if not published */
} cohort_node_settings_t;

typedef void (*cohort_node_settings_fn)(void *user, const cohort_node_settings_t *node);

/* Calls `fn` for each live cohortd node hosting `service`: not expired, and pinged within
 * twice its own takeover_ms (at least 3 s) of the server's time now. False on a database
 * error. */
bool cohort_service_settings_each_node(cohort_store_t *store, mongoc_client_t *client,
                                       const char *service, cohort_node_settings_fn fn,
                                       void *user, bson_error_t *error);

/* `in_db` (the keys set in the database) after one change: `key` set to `value`, or removed
 * (`set` false), into `out` (initialised by the call; destroy it). */
void cohort_service_settings_next_db(const bson_t *in_db, const char *key, bool set,
                                     int64_t value, bson_t *out);

/* Checks the database's settings as they will be (`next_db`) against every live node's own
 * values, the way each node will apply them (its file's, overridden by the database's):
 *   - a node would refuse them (cohort_settings_validate): refused, naming the node;
 *   - unless `force`, a node's takeover_ms would change to less than
 *     COHORT_TAKEOVER_RTT_MULTIPLE x its measured p99 round trip: refused with the figures.
 * Sets `refusal` ("" if none; `len` bytes) and returns true; false on a database error.
 * Shared by `cohortctl settings set|unset` and the API's PATCH .../settings. */
bool cohort_service_settings_check_nodes(cohort_store_t *store, mongoc_client_t *client,
                                         const char *service, const bson_t *next_db, bool force,
                                         char *refusal, size_t len, bson_error_t *error);

#endif
