/*
 * services.h - the service's config document in `services` (services.c): creating it with the
 * queue's indexes, reading it, the operator's writes to it (live settings, pause and block
 * switches) and the primary's clean step-down. The lease is primacy.h's, batch numbers
 * batches.h's, generic data data.h's, schedules' state schedules.h's.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_SERVICES_H
#define COHORT_STORE_SERVICES_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* Creates the service's config document (if missing) and the queue's indexes. Idempotent.
 * The one path that creates it (a node's start-up, its re-creation after a dropped
 * collection or database, `cohortctl enqueue --create`): a created document starts at epoch
 * max(the database server's clock in ms, `seen_epoch`: the largest epoch the caller saw),
 * above every epoch handed out before (services.c says why), so that no epoch is handed out
 * twice even by a process with no memory. *epoch_floor (may be NULL) receives that epoch
 * (used only if the document was missing). */
bool cohort_store_ensure_service_after(cohort_store_t *store, mongoc_client_t *client,
                                       const char *service, int64_t seen_epoch,
                                       int64_t *epoch_floor, bson_error_t *error);

/* The same with no epoch seen (cohortctl enqueue --create, tests). */
bool cohort_store_ensure_service(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, bson_error_t *error);

/* Reads the service's config document into `doc` (initialised by this call; destroy it).
 * *found is false if the service has no document yet. */
bool cohort_store_read_service(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, bson_t *doc, bool *found,
                               bson_error_t *error);

/* Reads the config documents of `n` services in one find: the node's one read of a tick for
 * all the services it does not lead. docs[i] is initialised by this call (destroy each) and
 * found[i] says whether names[i] has a document. Generic data and schedules are left out. */
bool cohort_store_read_services(cohort_store_t *store, mongoc_client_t *client,
                                const char *const *names, size_t n, bson_t *docs, bool *found,
                                bson_error_t *error);

/* Sets (value >= 0) or removes (value < 0) settings.<key> in the service's config document.
 * *found is false if the service has no document. */
bool cohort_store_set_setting(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              const char *key, int64_t value, bool *found, bson_error_t *error);

/* The service's switches: `which` is "pause" (the owner's) or "block" (the operator's), for
 * `kind` ("*": the whole service). With `on`, sets pause.<kind> / block.<kind> to {at: server
 * time, reason (may be NULL), by}; otherwise removes it. *found is false if the service has
 * no config document. */
/* Whether the service's switch `which` ("pause" or "block") for `kind` ("*": the whole
 * service) is set, into *set (false too when the service has no config document). */
bool cohort_store_switch_is_set(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, const char *which, const char *kind,
                                bool *set, bson_error_t *error);

bool cohort_store_set_switch(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *which, const char *kind, bool on, const char *reason,
                             const char *by, bool *found, bson_error_t *error);

/* Clears primacy if still held under `epoch` (a clean step-down), and any step-down request.
 * `asked_by` (may be NULL: a shutdown) is who requested it (`cohortctl step-down`): it is
 * recorded as stepped_down {node_id, epoch, by, at: server time}, which keeps this node from
 * taking the primacy back at once (node/primary/election.c). */
bool cohort_store_step_down(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *node_id, int64_t epoch, const char *asked_by,
                            bson_error_t *error);

/* Asks the primary `node_id` of `service` to step down on its next tick: sets step_down
 * {epoch, by, at: server time} if the document still names that primary under `epoch`
 * (*applied: it did). `withdraw` removes such a request instead (fenced the same way). */
bool cohort_store_request_step_down(cohort_store_t *store, mongoc_client_t *client,
                                    const char *service, const char *node_id, int64_t epoch,
                                    const char *by, bool withdraw, bool *applied,
                                    bson_error_t *error);

#endif
