/*
 * plugin.c - dlopen()-based handler loading with an ABI version check (see plugin.h).
 *
 * Objects are opened RTLD_NOW so a handler that calls a cohort_* function this node does
 * not export fails here, at start-up, not in the middle of a task.
 */
#include "node/handler/plugin.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"

/* Every name in an ABI 3+ handler's `kinds` must be a kind a task can have: a name that
 * breaks the rule would never match a task, and the handler would silently serve less. */
static bool check_kinds(const char *path, const cohort_handler_t *handler, bson_error_t *error)
{
    if (handler->abi_version < 3 || !handler->kinds)
        return true;
    for (size_t i = 0; handler->kinds[i]; i++) {
        const char *kind = handler->kinds[i];
        if (!cohort_config_valid_kind(kind)) {
            bson_set_error(error, COHORT_DOMAIN_HANDLER, COHORT_CODE_INVALID,
                           "handler '%s' declares kind '%.80s' (kinds[%zu]), which is not "
                           "1-%d of [A-Za-z0-9_-]",
                           path, kind, i, COHORT_KIND_MAX);
            return false;
        }
    }
    return true;
}

/* handler = external: the node runs none of the service's tasks (it starts no workers), so
 * this is never called; were it, the task fails with a reason rather than run nowhere. */
static cohort_outcome_t external_process_task(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)ctx;
    (void)state;
    cohort_task_set_error(task, "handler = external: only external workers run this service's "
                                "tasks");
    return COHORT_TASK_FAILED;
}

/* The built-in handler of `handler = external`: no callbacks but the required one. */
static cohort_plugin_t *load_external(bson_error_t *error)
{
    cohort_plugin_t *plugin = calloc(1, sizeof *plugin);
    if (!plugin || !(plugin->path = strdup(COHORT_HANDLER_EXTERNAL))) {
        free(plugin);
        cohort_error_nomem(error, "the external handler");
        return NULL;
    }
    plugin->copy = (cohort_handler_t){.abi_version = COHORT_HANDLER_ABI_VERSION,
                                      .name = COHORT_HANDLER_EXTERNAL,
                                      .process_task = external_process_task};
    plugin->handler = &plugin->copy;
    return plugin;
}

/* dlopen()'s failure in one line. A symbol it could not resolve is most often a function of
 * the daemon that is not part of the handler ABI (cohortd exports only handler.h's). */
static void report_load_error(const char *path, const char *why, bson_error_t *error)
{
    static const char undefined[] = "undefined symbol: ";
    const char *symbol = strstr(why, undefined);
    if (symbol) {
        symbol += sizeof undefined - 1;
        int len = (int)strcspn(symbol, " ,(");
        bson_set_error(error, COHORT_DOMAIN_HANDLER, COHORT_CODE_INVALID,
                       "cannot load handler '%s': it calls '%.*s', which is not part of the "
                       "handler ABI (a handler may call only the functions of "
                       "cohort/handler.h, ABI version %d, and the libraries it links)",
                       path, len, symbol, COHORT_HANDLER_ABI_VERSION);
        return;
    }
    bson_set_error(error, COHORT_DOMAIN_HANDLER, COHORT_CODE_INVALID,
                   "cannot load handler '%s': %s", path, why);
}

cohort_plugin_t *cohort_plugin_load(const char *path, bson_error_t *error)
{
    if (strcmp(path, COHORT_HANDLER_EXTERNAL) == 0)
        return load_external(error);
    dlerror();
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        report_load_error(path, why ? why : "unknown error", error);
        return NULL;
    }
    const cohort_handler_t *handler = dlsym(dl, COHORT_HANDLER_SYMBOL);
    if (!handler) {
        bson_set_error(error, COHORT_DOMAIN_HANDLER, COHORT_CODE_INVALID,
                       "'%s' is not a Cohort handler: it does not export the symbol '%s' "
                       "(declare `COHORT_HANDLER_EXPORT const cohort_handler_t %s = {...}`)",
                       path, COHORT_HANDLER_SYMBOL, COHORT_HANDLER_SYMBOL);
        dlclose(dl);
        return NULL;
    }
    if (handler->abi_version < 1 || handler->abi_version > COHORT_HANDLER_ABI_VERSION) {
        bson_set_error(error, COHORT_DOMAIN_HANDLER, COHORT_CODE_INVALID,
                       "handler '%s' was built for handler ABI version %u, but this cohortd "
                       "supports versions 1 to %d: rebuild it against this release's "
                       "cohort/handler.h",
                       path, handler->abi_version, COHORT_HANDLER_ABI_VERSION);
        dlclose(dl);
        return NULL;
    }
    const int *bson_major = dlsym(dl, COHORT_HANDLER_BSON_SYMBOL);
    if (bson_major && *bson_major != BSON_MAJOR_VERSION) {
        bson_set_error(error, COHORT_DOMAIN_HANDLER, COHORT_CODE_INVALID,
                       "handler '%s' was built against libbson %d, but this cohortd uses "
                       "libbson %d (bson_t crosses the handler ABI): rebuild it against "
                       "libbson %d",
                       path, *bson_major, BSON_MAJOR_VERSION, BSON_MAJOR_VERSION);
        dlclose(dl);
        return NULL;
    }
    if (!handler->process_task) {
        bson_set_error(error, COHORT_DOMAIN_HANDLER, COHORT_CODE_INVALID,
                       "handler '%s' has no process_task callback (it is required)", path);
        dlclose(dl);
        return NULL;
    }
    if (!check_kinds(path, handler, error)) {
        dlclose(dl);
        return NULL;
    }
    cohort_plugin_t *plugin = calloc(1, sizeof *plugin);
    if (!plugin || !(plugin->path = strdup(path))) {
        free(plugin);
        dlclose(dl);
        bson_set_error(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_NO_MEMORY,
                       "out of memory loading '%s'", path);
        return NULL;
    }
    plugin->dl = dl;
    size_t size = handler->abi_version >= 3   ? sizeof *handler
                  : handler->abi_version == 2 ? offsetof(cohort_handler_t, kinds)
                                              : offsetof(cohort_handler_t, on_tasks_completed);
    memcpy(&plugin->copy, handler, size);
    plugin->handler = &plugin->copy;
    return plugin;
}

void cohort_plugin_unload(cohort_plugin_t *plugin)
{
    if (!plugin)
        return;
    if (plugin->dl)
        dlclose(plugin->dl);
    free(plugin->path);
    free(plugin);
}
