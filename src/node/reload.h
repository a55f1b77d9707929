/*
 * reload.h - SIGHUP for a running node: re-read the configuration file and apply what can
 * change live (log level and format, worker counts, the live settings' file values, handler
 * options the handler can reload). Anything else, or a file with problems, is refused and
 * logged, and the node runs on unchanged.
 */
#ifndef COHORT_RELOAD_H
#define COHORT_RELOAD_H

#include <mongoc/mongoc.h>
#include <stddef.h>

#include "core/config.h"
#include "node/service.h"

/* Reloads `old->path` and compares it with `old` (the configuration in force);
 * applies it to `services` (borrowed) on the main thread, whose `client` reloaded handlers
 * are lent. Returns the new configuration once applied (the caller owns it and compares the
 * next reload with it; the services keep pointing into the configuration they started with,
 * which workers read without locks), or NULL if it was refused (the reasons are logged). */
cohort_config_t *cohort_reload(const cohort_config_t *old, cohort_service_t *const *services,
                               size_t n_services, mongoc_client_t *client);

#endif
