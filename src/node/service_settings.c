/*
 * service_settings.c - a service's live settings as the nodes will run them, and the effect
 * of a change on them (see service_settings.h): one reading for `cohortctl settings` and the
 * HTTP API, so a change refused by one is refused by the other.
 */
#include "node/service_settings.h"

bool cohort_service_settings_read(cohort_store_t *store, mongoc_client_t *client,
                                  const cohort_config_t *config, const char *service,
                                  cohort_settings_t *eff, bson_t *in_db, bool *found,
                                  bson_error_t *error)
{
    /* The file's values where it has the service (or the cluster), else the table's
     * defaults. */
    const cohort_service_config_t *sc = config ? cohort_config_find_service(config, service)
                                               : NULL;
    cohort_settings_from_config(config, sc, eff);
    bson_init(in_db);
    bson_t doc;
    if (!cohort_store_read_service(store, client, service, &doc, found, error)) {
        bson_destroy(&doc);
        return false;
    }
    bson_iter_t it, child;
    /* Without the file, the values the primary declared are the best defaults. */
    if (*found && !sc) {
        if (bson_iter_init_find(&it, &doc, "tick_ms") && BSON_ITER_HOLDS_NUMBER(&it))
            eff->tick_ms = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, &doc, "lease_ms") && BSON_ITER_HOLDS_NUMBER(&it))
            eff->takeover_ms = bson_iter_as_int64(&it);
    }
    if (*found && bson_iter_init_find(&it, &doc, "settings") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &child)) {
        while (bson_iter_next(&child)) {
            int64_t *field = cohort_settings_field(eff, bson_iter_key(&child));
            if (field && BSON_ITER_HOLDS_NUMBER(&child)) {
                *field = bson_iter_as_int64(&child);
                BSON_APPEND_INT64(in_db, bson_iter_key(&child), *field);
            }
        }
    }
    bson_destroy(&doc);
    return true;
}

void cohort_service_settings_change(const cohort_config_t *config, const char *service,
                                    cohort_settings_t *next, const char *key, bool set,
                                    int64_t value)
{
    const cohort_service_config_t *sc = config ? cohort_config_find_service(config, service)
                                               : NULL;
    int64_t *field = cohort_settings_field(next, key);
    if (!field)
        return;
    if (set) {
        *field = value;
    } else if (sc) {
        /* Unset: the file's value comes back. */
        cohort_settings_t file;
        cohort_settings_from_config(config, sc, &file);
        *field = *cohort_settings_field(&file, key);
    }
}
