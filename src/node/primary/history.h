/*
 * history.h - the primary's per-minute record of its service (store/history.h): once the
 * cluster clock enters a new minute, the minute that ended is measured and written, and
 * minutes older than `history_retention_ms` go. The dashboard's charts read it from any node.
 */
#ifndef COHORT_NODE_HISTORY_H
#define COHORT_NODE_HISTORY_H

#include <mongoc/mongoc.h>
#include <stdint.h>

#include "node/runtime.h"

/* On the primary's tick (main thread), after its other duties: a few indexed counts once a
 * minute, nothing otherwise. A failure is logged and tried again next tick. */
void cohort_history_tick(cohort_service_t *s, mongoc_client_t *client, int64_t epoch);

#endif
