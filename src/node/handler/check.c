/*
 * check.c - the handler half of `cohortd --check-config` (see check.h).
 *
 * A key of a [service:NAME] section that is not a setting is handed to the handler as an
 * option (config.c): only the handler's init() knows its options. That contract stays, so:
 *   - a handler without init() takes no options: each one is an unknown key, reported at
 *     its line, with "did you mean" when it is a near miss of a setting name;
 *   - when init() refuses the options, each near miss ("wokers") that init() also refuses
 *     on its own is reported as an unknown key with "did you mean", and init() judges the
 *     rest again without them. If it still refuses, its message is reported once, at the
 *     line it names ("line N: ...", the convention of cohort_option_t.line) or else at the
 *     handler's line. A near miss the handler accepts is its option, and no typo.
 *   - without a handler to run (missing, unreadable, not loadable), the near misses are
 *     reported all the same, so that one run of --check-config lists every problem.
 * init() runs here as the handler ABI says it may: without a database, followed by
 * destroy(), as often as a check needs.
 */
#include "node/handler/check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "node/node.h"
#include "node/handler/plugin.h"
#include "node/service.h"

typedef struct check {
    const cohort_config_t *config;
    const cohort_service_config_t *service;
    const char *node_id;
    cohort_config_errors_t *errors;
} check_t;

static void report(const check_t *c, int line, const char *fmt, ...) COHORT_PRINTF(3, 4);
static void report(const check_t *c, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *origin = c->config->path ? c->config->path : "-";
    if (line > 0)
        cohort_config_errors_add(c->errors, "%s line %d: %s", origin, line, msg);
    else
        cohort_config_errors_add(c->errors, "%s: %s", origin, msg);
}

/* Runs the handler's init() on `options` in a service like the section, then destroy():
 * true if it accepted them, else false with its reason in `why`. */
static bool init_accepts(const check_t *c, const cohort_option_t *options, size_t n,
                         bson_error_t *why)
{
    cohort_service_config_t trial = *c->service;
    trial.options = (cohort_option_t *)options;
    trial.n_options = n;
    cohort_settings_t file;
    cohort_settings_from_config(c->config, c->service, &file);
    cohort_service_t *s = cohort_service_new(&trial, c->node_id, &file, NULL, NULL, why);
    bool accepted = s != NULL;
    cohort_service_destroy(s, NULL);
    return accepted;
}

/* Reports init()'s refusal at the line its message names ("... line N: reason"), without
 * that prefix, or at the handler's line. */
static void report_refusal(const check_t *c, const char *message)
{
    const char *at = strstr(message, "line ");
    char *end = NULL;
    long line = at ? strtol(at + 5, &end, 10) : 0;
    if (at && end != at + 5 && line > 0 && line <= INT32_MAX && strncmp(end, ": ", 2) == 0)
        report(c, (int)line, "%.*s%s", (int)(at - message), message, end + 2);
    else
        report(c, c->service->handler_line, "%s", message);
}

static void unknown_key(const check_t *c, const cohort_option_t *o, const char *why)
{
    const char *near = cohort_settings_did_you_mean(COHORT_SECTION_SERVICE, o->key);
    if (near)
        report(c, o->line, "[service:%s] unknown key '%s' (did you mean '%s'?)",
               c->service->name, o->key, near);
    else
        report(c, o->line, "[service:%s] unknown key '%s' (%s)", c->service->name, o->key, why);
}

/* A handler with init(): see the top of the file. */
static void judge_options(const check_t *c)
{
    const cohort_service_config_t *s = c->service;
    bson_error_t why;
    if (init_accepts(c, s->options, s->n_options, &why))
        return;
    cohort_option_t *rest = calloc(s->n_options ? s->n_options : 1, sizeof *rest);
    if (!rest) {
        report_refusal(c, why.message);
        return;
    }
    size_t n_rest = 0;
    for (size_t i = 0; i < s->n_options; i++) {
        const cohort_option_t *o = &s->options[i];
        bson_error_t ignored;
        if (cohort_settings_did_you_mean(COHORT_SECTION_SERVICE, o->key) &&
            !init_accepts(c, o, 1, &ignored))
            unknown_key(c, o, "");
        else
            rest[n_rest++] = *o;
    }
    if (n_rest == s->n_options || !init_accepts(c, rest, n_rest, &why))
        report_refusal(c, why.message);
    free(rest);
}

/* No handler to judge the options (missing, unreadable or not loadable; or external): the
 * near misses of a setting name ("wokers") are reported now rather than on the run after the
 * handler is fixed; the other keys wait for a handler to judge them. */
static void report_near_misses(const check_t *c)
{
    for (size_t i = 0; i < c->service->n_options; i++)
        if (cohort_settings_did_you_mean(COHORT_SECTION_SERVICE, c->service->options[i].key))
            unknown_key(c, &c->service->options[i], "");
}

static void check_service(const check_t *c)
{
    const cohort_service_config_t *s = c->service;
    if (!s->handler_path) {
        report_near_misses(c); /* the handler: the configuration's check said what is wrong */
        return;
    }
    bson_error_t error;
    cohort_plugin_t *plugin = cohort_plugin_load(s->handler_path, &error);
    if (!plugin) {
        report(c, s->handler_line, "[service:%s] %s", s->name, error.message);
        report_near_misses(c);
        return;
    }
    bool has_init = plugin->handler->init != NULL;
    char takes_none[160];
    snprintf(takes_none, sizeof takes_none, "handler '%s' takes no options",
             plugin->handler->name ? plugin->handler->name : plugin->path);
    cohort_plugin_unload(plugin);
    if (has_init) {
        judge_options(c);
        return;
    }
    for (size_t i = 0; i < s->n_options; i++)
        unknown_key(c, &s->options[i], takes_none);
}

void cohort_check_handlers(const cohort_config_t *config, cohort_config_errors_t *errors)
{
    char node_id[COHORT_NODE_ID_MAX + 1];
    cohort_node_default_id(node_id, sizeof node_id);
    for (size_t i = 0; i < config->n_services; i++) {
        check_t c = {.config = config,
                     .service = &config->services[i],
                     .node_id = config->node_id ? config->node_id : node_id,
                     .errors = errors};
        check_service(&c);
    }
}
