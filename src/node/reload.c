/*
 * reload.c - SIGHUP: the configuration file read again and what may change live applied to
 * the running services (see reload.h). A file that fails to load, or that changes anything
 * a running node cannot change, is refused as a whole: nothing is half-applied.
 */
#include "node/reload.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "node/work/capacity.h"
#include "node/primary/schedules.h"

/* What SIGHUP cannot change in a running node (the settings table's rows that do not
 * reload, the set of services and their kinds); `error` names the first difference. */
static bool same_structure(const cohort_config_t *a, const cohort_config_t *b,
                           bson_error_t *error)
{
    const cohort_setting_t *row = cohort_settings_restart_change(COHORT_SECTION_CLUSTER, a, b);
    if (row) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_CONFLICT, "%s changed",
                       row->name);
        return false;
    }
    if (a->n_services != b->n_services) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_CONFLICT,
                       "services were added or removed");
        return false;
    }
    for (size_t i = 0; i < a->n_services; i++) {
        const cohort_service_config_t *x = &a->services[i];
        const cohort_service_config_t *y = cohort_config_find_service(b, x->name);
        if (!y) {
            bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_CONFLICT,
                           "[service:%s] was removed", x->name);
            return false;
        }
        row = cohort_settings_restart_change(COHORT_SECTION_SERVICE, x, y);
        if (row || !cohort_config_same_scheduling(x, y)) {
            bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_CONFLICT,
                           "[service:%s] %s changed", x->name, row ? row->name : "kind.* keys");
            return false;
        }
    }
    return true;
}

static bool same_options(const cohort_service_config_t *a, const cohort_service_config_t *b)
{
    if (a->n_options != b->n_options)
        return false;
    for (size_t i = 0; i < a->n_options; i++)
        if (strcmp(a->options[i].key, b->options[i].key) != 0 ||
            strcmp(a->options[i].value, b->options[i].value) != 0)
            return false;
    return true;
}

cohort_config_t *cohort_reload(const cohort_config_t *old, cohort_service_t *const *services,
                               size_t n_services, mongoc_client_t *client)
{
    cohort_config_errors_t errors = {0};
    cohort_config_t *next = cohort_config_load(old->path, &errors);
    bson_error_t why;
    if (!next) {
        for (size_t i = 0; i < errors.count; i++)
            cohort_log_node(COHORT_LOG_WARN, "reload: %s", errors.messages[i]);
        cohort_log_node(COHORT_LOG_WARN,
                        "reload refused: %zu problem(s) in %s; running configuration unchanged",
                        errors.count, old->path);
        cohort_config_errors_clear(&errors);
        return NULL;
    }
    if (!same_structure(old, next, &why)) {
        cohort_log_node(COHORT_LOG_WARN,
                        "reload refused: %s (restart the node to change it); running "
                        "configuration unchanged",
                        why.message);
        cohort_config_destroy(next);
        return NULL;
    }
    for (size_t i = 0; i < n_services; i++) {
        cohort_service_t *s = services[i];
        const cohort_service_config_t *was = cohort_config_find_service(old, s->config->name);
        const cohort_service_config_t *now = cohort_config_find_service(next, s->config->name);
        if (!same_options(was, now) && !s->plugin->handler->reload) {
            cohort_log_node(COHORT_LOG_WARN,
                            "reload refused: [service:%s] handler options changed, but handler "
                            "'%s' cannot reload them (restart the node to change them); running "
                            "configuration unchanged",
                            s->config->name, s->plugin->handler->name);
            cohort_config_destroy(next);
            return NULL;
        }
    }

    cohort_log_set_level(next->log_level);
    cohort_log_set_json(next->log_json);
    for (size_t i = 0; i < n_services; i++) {
        cohort_service_t *s = services[i];
        const cohort_service_config_t *was = cohort_config_find_service(old, s->config->name);
        const cohort_service_config_t *now = cohort_config_find_service(next, s->config->name);
        cohort_settings_t file;
        cohort_settings_from_config(next, now, &file);
        cohort_service_reload_file_settings(s, &file);
        if (now->workers != was->workers && !s->config->external) {
            bson_error_t err;
            if (cohort_service_set_workers(s, (size_t)now->workers, &err))
                cohort_logf(COHORT_LOG_INFO, s->config->name, NULL, 0, "workers = %lld (was %lld)",
                            (long long)now->workers, (long long)was->workers);
            else
                cohort_logf(COHORT_LOG_WARN, s->config->name, NULL, 0, "reload: %s", err.message);
        }
        if (now->capacity != was->capacity) {
            cohort_capacity_set(s, now->capacity);
            cohort_logf(COHORT_LOG_INFO, s->config->name, NULL, 0,
                        "capacity = %lld (was %lld; 0: the worker count)",
                        (long long)now->capacity, (long long)was->capacity);
        }
        cohort_schedules_reload(s, now);
        if (!same_options(was, now)) {
            bson_error_t err;
            if (cohort_host_reload(s, client, now, &err))
                cohort_logf(COHORT_LOG_INFO, s->config->name, NULL, 0,
                            "handler options reloaded");
            else
                cohort_logf(COHORT_LOG_WARN, s->config->name, NULL, 0,
                            "handler refused its new options (keeping the old ones): %s",
                            err.message);
        }
    }
    /* The summary shows whatever the new log_level: at INFO, or at that level if higher (a
     * reload to log_level = warn still says it happened). */
    cohort_log_node(next->log_level > COHORT_LOG_INFO ? next->log_level : COHORT_LOG_INFO,
                    "configuration reloaded from %s (log_level %s)", next->path,
                    cohort_log_level_name(next->log_level));
    return next;
}
