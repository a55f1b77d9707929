/*
 * checkins.h - keeping this node's claims alive.
 *
 * Check-ins extend the leases of the tasks this node runs (and of those its batch claims
 * hold for later, and of those whose outcome waits for a bulk write), every
 * stall_timeout_ms / 3, so only a node that stopped checking in has its claims reset. The
 * main thread checks in on every tick, and while the node drains after SIGTERM on every
 * round of the drain (node.c), so a task longer than stall_timeout_ms is never reset under a
 * node that is finishing it. (Runs past their timeout are ended by timeouts.h.)
 */
#ifndef COHORT_CHECKINS_H
#define COHORT_CHECKINS_H

#include <mongoc/mongoc.h>

#include "node/runtime.h"

/* Main thread, every tick and every drain round: checks in the running and held tasks that
 * are due. */
void cohort_checkins_run(cohort_service_t *service, mongoc_client_t *client);

#endif
