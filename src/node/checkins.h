/*
 * checkins.h - keeping this node's claims alive, and ending the ones that ran too long.
 *
 * Check-ins extend the leases of the tasks this node runs (and of those its batch claims
 * hold for later), every stall_timeout_ms / 3, so only a node that stopped checking in has
 * its claims reset. Timeouts under thread isolation: a run past its deadline is recorded
 * timed_out (if the claim is still this node's) and its slot marked wedged until the handler
 * returns; process isolation kills the child instead (isolate.c).
 */
#ifndef COHORT_CHECKINS_H
#define COHORT_CHECKINS_H

#include <mongoc/mongoc.h>

#include "node/runtime.h"

/* Main thread, every tick: checks in the running and held tasks that are due. */
void cohort_checkins_run(cohort_service_t *service, mongoc_client_t *client);

/* Main thread, every tick (isolation = thread): records the runs past their deadline. */
void cohort_checkins_watch_timeouts(cohort_service_t *service, mongoc_client_t *client);

#endif
