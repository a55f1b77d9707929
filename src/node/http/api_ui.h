/*
 * api_ui.h - the API endpoints the dashboard needed that the first slice lacked; ordinary
 * API endpoints (tokens, scopes, errors as everywhere in docs/API.md), no private routes.
 * api.c asks cohort_api_ui_owns() before its own router, so these paths are routed here:
 *
 *   GET /api/v1/whoami  (any scope) the caller's name, scopes and how it signed in
 *   GET /api/v1/nodes   (read)      the nodes seen in the last day, each the object of
 *                                   `cohortctl nodes --json` (node/status/node_status.h)
 *   GET /api/v1/services/{svc}/history?minutes=60  (read) the per-minute history of the
 *                                   last `minutes` (1-1440) and the minute under way
 *   GET /api/v1/audit?limit=&before=  (read) the operator actions, newest first
 *   GET /api/v1/services/{svc}/batches (read) the tracked batches: open, draining, completed,
 *                                   the last completion; and when the current epoch began
 *   GET /api/v1/services/{svc}/due (read) the due pending tasks by kind, each kind's count and
 *                                   oldest run_at (at most 100 kinds, the most due first)
 * (The routes of POST /api/v1/services/{svc}/block|unblock are here too; they are answered
 * by cohort_api_switch(), node/http/api_tasks.h, with pause and resume.)
 */
#ifndef COHORT_API_UI_H
#define COHORT_API_UI_H

#include <stdbool.h>

#include "node/http/api_parse.h"
#include "node/http/api_tasks.h"
#include "store/store.h"

/* Whether `path` is one of these endpoints' (routed by cohort_api_ui_route()). */
bool cohort_api_ui_owns(const char *path);

/* The route of `method` `path` (a cohort_api_ui_owns() path); a 405 for another method. */
bool cohort_api_ui_route(const char *method, const char *path, cohort_api_route_t *route,
                         cohort_api_error_t *err);

/* Runs one of these endpoints. */
bool cohort_api_ui_dispatch(cohort_api_call_t *call);

/* Records an operator's request (an endpoint of scope operate) and how it ended (`status`;
 * `code`: the error's, NULL if it succeeded) in the `audit` collection (store/audit.h).
 * `unrecorded` > 0: as many refusals like it were left out of the audit before it (api.c
 * bounds those of unknown callers). `reply_body` (may be NULL; borrowed): a success's answer;
 * its `"changed": false` (a resume or unblock with nothing to undo) is recorded as `changed:
 * false`. A failure to record is logged; the request's answer stands. */
void cohort_api_ui_audit(cohort_store_t *store, mongoc_client_t *client,
                         const cohort_api_request_t *request, const cohort_api_caller_t *caller,
                         const cohort_api_route_t *route, int status, const char *code,
                         int64_t unrecorded, const bson_t *reply_body);

#endif
