/*
 * primacy.h - the lease on a service's primacy (primacy.c): renewal and takeover, one
 * findAndModify each on the config document.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_PRIMACY_H
#define COHORT_STORE_PRIMACY_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/batches.h"
#include "store/store.h"

/* Renews primacy held under `epoch`: sets last_active to server time if the document still
 * names this node and epoch (one findAndModify), and declares `lease_ms`, the takeover time
 * the node holds itself to, in the same write (and its tick_ms, for tools). *renewed tells
 * whether it did; `doc` (initialised by the call; destroy it) receives the renewed document
 * (settings, switches, batch state), which saves the primary a read every tick. `doc` may be
 * NULL when only the lease matters (the lease thread's renewals). `queue_due` (0 or 1; -1
 * leaves it) writes the hint `queue_due`: whether the primary's last claim found due work,
 * which tells the secondaries whether to look at the queue at all (workers.h). */
bool cohort_store_renew_lease(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const char *node_id, int64_t epoch,
                              int64_t lease_ms, int64_t tick_ms, int queue_due, bool *renewed,
                              bson_t *doc, bson_error_t *error);

typedef struct cohort_takeover {
    bool taken;
    int64_t epoch;                /* the new epoch, if taken */
    char previous[129];           /* the previous primary's id, "" if none or unknown */
    bool stepped_down;            /* the previous primary stepped down (`previous` if known) */
    cohort_batch_state_t batches; /* if taken */
} cohort_takeover_t;

/* Claims primacy if the primary is null, this node, or last active before `cutoff_ms`
 * (cluster clock, computed from the lease the current primary declared), and only if that
 * declaration is still `seen_lease_ms` (0: none declared; < 0: whatever it is), so a renewal
 * that changed it in the meantime makes the takeover match nothing. Increments the epoch and
 * declares `lease_ms` (if > 0) for the new primacy. One atomic findAndModify. */
bool cohort_store_take_lease(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *node_id, int64_t cutoff_ms, int64_t seen_lease_ms,
                             int64_t lease_ms, cohort_takeover_t *result, bson_error_t *error);

#endif
