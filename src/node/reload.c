/*
 * reload.c - SIGHUP: the configuration file read again and what may change live applied to
 * the running services (see reload.h). A file that fails to load, or that changes anything
 * a running node cannot change, is refused as a whole: nothing is half-applied.
 */
#include "node/reload.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"

/* What SIGHUP cannot change in a running node; *why names the first difference. */
static bool same_structure(const cohort_config_t *a, const cohort_config_t *b, char *why,
                           size_t whylen)
{
#define DIFFERS(cond, ...)                                                                     \
    do {                                                                                       \
        if (cond) {                                                                            \
            snprintf(why, whylen, __VA_ARGS__);                                                \
            return false;                                                                      \
        }                                                                                      \
    } while (0)
    DIFFERS(strcmp(a->mongodb_uri, b->mongodb_uri) != 0, "mongodb_uri changed");
    DIFFERS(strcmp(a->database, b->database) != 0, "database changed");
    DIFFERS(!a->node_id != !b->node_id || (a->node_id && strcmp(a->node_id, b->node_id) != 0),
            "node_id changed");
    DIFFERS(!a->http_listen != !b->http_listen ||
                (a->http_listen && strcmp(a->http_listen, b->http_listen) != 0),
            "http_listen changed");
    DIFFERS(a->shutdown_grace_ms != b->shutdown_grace_ms, "shutdown_grace_ms changed");
    DIFFERS(a->n_services != b->n_services, "services were added or removed");
    for (size_t i = 0; i < a->n_services; i++) {
        const cohort_service_config_t *x = &a->services[i];
        const cohort_service_config_t *y = cohort_config_find_service(b, x->name);
        DIFFERS(!y, "[service:%s] was removed", x->name);
        DIFFERS(strcmp(x->handler_path, y->handler_path) != 0, "[service:%s] handler changed",
                x->name);
        DIFFERS(x->max_attempts != y->max_attempts, "[service:%s] max_attempts changed",
                x->name);
        DIFFERS(x->retry_base_ms != y->retry_base_ms, "[service:%s] retry_base_ms changed",
                x->name);
        DIFFERS(!cohort_config_same_scheduling(x, y),
                "[service:%s] scheduling keys changed (priority, not_after_ms, not_after_boost, "
                "task_timeout_ms, claim_batch, isolation or kind.*)",
                x->name);
    }
#undef DIFFERS
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
    char why[512] = "";
    if (!next) {
        for (size_t i = 0; i < errors.count; i++)
            cohort_log_node(COHORT_LOG_WARN, "reload: %s", errors.messages[i]);
        cohort_log_node(COHORT_LOG_WARN,
                        "reload refused: %zu problem(s) in %s; running configuration unchanged",
                        errors.count, old->path);
        cohort_config_errors_clear(&errors);
        return NULL;
    }
    if (!same_structure(old, next, why, sizeof why)) {
        cohort_log_node(COHORT_LOG_WARN,
                        "reload refused: %s (restart the node to change it); running "
                        "configuration unchanged",
                        why);
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
        if (now->workers != was->workers) {
            bson_error_t err;
            if (cohort_service_set_workers(s, (size_t)now->workers, &err))
                cohort_logf(COHORT_LOG_INFO, s->config->name, NULL, 0, "workers = %lld (was %lld)",
                            (long long)now->workers, (long long)was->workers);
            else
                cohort_logf(COHORT_LOG_WARN, s->config->name, NULL, 0, "reload: %s", err.message);
        }
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
    cohort_log_node(COHORT_LOG_INFO, "configuration reloaded from %s (log_level %s)", next->path,
                    cohort_log_level_name(next->log_level));
    return next;
}
