/*
 * api_workers.h - the HTTP API's endpoints for external workers (scope `work`, docs/API.md):
 *
 *   POST /api/v1/services/{svc}/claims           claim up to `max` tasks with a lease, long-
 *                                                polling up to `wait_ms` when none is due
 *   POST /api/v1/leases/{token}/heartbeat        extend the lease; says if a cancel is asked
 *   POST /api/v1/leases/{token}/succeed|fail     the outcome, fenced on the claim
 *   POST /api/v1/leases/{token}/release          back to pending, the attempt not counted
 *
 * Served for the services this node hosts (their retry rules and claim filter are its own).
 * Each fills the call's reply or returns false with its error, like api_tasks.h's.
 */
#ifndef COHORT_API_WORKERS_H
#define COHORT_API_WORKERS_H

#include <stdbool.h>

#include "node/http/api_tasks.h" /* cohort_api_call_t */
#include "store/store.h"

bool cohort_api_claim(cohort_api_call_t *call);
bool cohort_api_heartbeat(cohort_api_call_t *call);
bool cohort_api_lease_outcome(cohort_api_call_t *call); /* succeed, fail, release */

/* Gives back the tasks of a claim whose reply was never delivered (reply->claimed, set by
 * cohort_api_claim()): pending again, their attempts not counted, logged; reply->wake names
 * the service if any went back. On a database error they wait for their lease (logged). */
void cohort_api_claim_give_back(cohort_store_t *store, mongoc_client_t *client,
                                cohort_service_t *const *services, size_t n_services,
                                cohort_api_reply_t *reply);

#endif
