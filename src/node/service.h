/*
 * service.h - one hosted service on this node: its handler, its election, its worker pool
 * and the per-tick claim budget. The top of the node layer under node.c: it includes the
 * modules that do each part, and they never include it.
 *
 * The main thread calls cohort_service_tick() once per tick: check-ins, the election, the
 * live settings and the claim filter, then (as primary) the handler's primary_work,
 * maintenance and tracked batches, and last a new claim budget for the workers (workers.h).
 * After SIGTERM no tick runs: cohort_service_drain_round() keeps the running tasks' check-ins.
 *
 * The service's API is spread over the headers of the modules included below: the shared
 * state (runtime.h), the handler host (host.h: cohort_host_reload()), the worker pool
 * (workers.h: cohort_service_set_workers(), cohort_service_stop_claiming()) and the live
 * settings (live_settings.h: cohort_service_set_file_settings(),
 * cohort_service_reload_file_settings()).
 */
#ifndef COHORT_SERVICE_H
#define COHORT_SERVICE_H

#include <mongoc/mongoc.h>
#include <stdbool.h>

#include "core/config.h"
#include "node/handler/host.h"
#include "node/live_settings.h"
#include "node/primary/maintenance.h"
#include "node/runtime.h"
#include "node/work/workers.h"
#include "store/store.h"

/* Loads the handler and calls its init() (through the handler host, host.h), with `file`,
 * the live settings of the config file for this service (cohort_settings_from_config();
 * copied), in effect until the database's are read. `config`, `node_id` and `store` are
 * borrowed for the service's life; `client` (may be NULL) is lent to init() for the
 * duration of the call. Returns NULL with the reason in `error` (Cohort's error
 * type, see errors.h). */
cohort_service_t *cohort_service_new(const cohort_service_config_t *config, const char *node_id,
                                     const cohort_settings_t *file, cohort_store_t *store,
                                     mongoc_client_t *client, bson_error_t *error);

/* Starts the worker threads and, for isolation = thread, the timeout watchdog (timeouts.h);
 * for isolation = process, the worker process pool, which needs config_path set. False with
 * the reason in `error`. */
bool cohort_service_start(cohort_service_t *service, bson_error_t *error);

/* One tick on the main thread; `client` is the main thread's. `doc` is the service's config
 * document as the node read it this tick, empty if missing, NULL if not read (election.h). */
void cohort_service_tick(cohort_service_t *service, mongoc_client_t *client, const bson_t *doc);

/* The tick of a process standing back (another live process has its node_id, runs.h): keeps
 * the claims it holds alive, gives primacy up, and claims nothing. */
void cohort_service_stand_back(cohort_service_t *service, mongoc_client_t *client);

/* A round of the drain after SIGTERM, on the main thread (no tick runs then): keeps what the
 * running tasks depend on, their check-ins and the node's liveness, until they end. */
void cohort_service_drain_round(cohort_service_t *service, mongoc_client_t *client);

/* Joins the workers (call after cohort_service_stop_claiming and when running is 0 or the
 * grace period is over), steps down (with a client), calls the handler's destroy() and
 * frees everything. NULL is ignored. */
void cohort_service_destroy(cohort_service_t *service, mongoc_client_t *client);

#endif
