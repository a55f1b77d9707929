/*
 * plugin.h - loading handler shared objects.
 *
 * A handler is found by dlopen() of the configured path and dlsym() of COHORT_HANDLER_SYMBOL.
 * Every way this can go wrong (not a shared object, not a handler, built for another ABI,
 * missing process_task) gives a message naming the file and what to do.
 */
#ifndef COHORT_PLUGIN_H
#define COHORT_PLUGIN_H

#include <stddef.h>

#include "cohort/handler.h"

typedef struct cohort_plugin {
    void *dl; /* NULL: the built-in handler of `handler = external` */
    /* A copy of the exported struct, as long as its ABI version defines it; callbacks an
     * older ABI lacks are NULL, so the node never reads past an old handler's struct. */
    const cohort_handler_t *handler;
    cohort_handler_t copy;
    char *path;
} cohort_plugin_t;

/* Loads and checks the handler at `path` (COHORT_HANDLER_EXTERNAL: the built-in one of a
 * service that only external workers serve). Returns NULL with the reason in `error`
 * (Cohort's error type, see errors.h; domain HANDLER, or SYSTEM when memory ran out). The plugin
 * stays loaded until cohort_plugin_unload(). */
cohort_plugin_t *cohort_plugin_load(const char *path, bson_error_t *error);
void cohort_plugin_unload(cohort_plugin_t *plugin);

#endif
