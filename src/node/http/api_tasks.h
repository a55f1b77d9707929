/*
 * api_tasks.h - the endpoints of the HTTP API v1 behind authentication and routing (api.c):
 * services, tasks (create, batch, list, read), counts, pause and resume.
 *
 * Each takes one call: what was asked and by whom, and where the answer goes. It fills
 * `reply->body` and `reply->status` and returns true, or returns false with `err` set.
 * Every database access goes through the store.
 */
#ifndef COHORT_API_TASKS_H
#define COHORT_API_TASKS_H

#include <stdbool.h>

#include "core/config.h"
#include "node/http/api_auth.h"
#include "node/http/api_parse.h"
#include "node/runtime.h"
#include "store/store.h"

typedef struct cohort_api_call {
    cohort_store_t *store;
    mongoc_client_t *client;
    const cohort_config_t *config; /* may be NULL */
    cohort_service_t *const *services; /* hosted here (external workers' calls) */
    size_t n_services;
    int64_t max_wait_ms;
    const cohort_api_request_t *request;
    const cohort_api_route_t *route;
    const cohort_api_caller_t *caller;
    cohort_api_reply_t *reply;
    cohort_api_error_t *err;
} cohort_api_call_t;

/* The status and code for a database failure: 503 if the database did not answer, else 500. */
bool cohort_api_fail_store(cohort_api_error_t *err, const bson_error_t *error, const char *what);

/* 404 not_found: the call's service has no config document (no node has run it). */
bool cohort_api_fail_no_service(cohort_api_call_t *call);

/* The call added due tasks to its service: claims held for it run again (api_pool.h). */
void cohort_api_wake(cohort_api_call_t *call);
/* The author recorded in a task's history and the switches, into `by` (`len` bytes): "api
 * token NAME" for a token, "USER@HOST via dashboard" for a dashboard session of cohortctl
 * ui-link ("token NAME via dashboard" for one signed in with a token). */
void cohort_api_author(const cohort_api_call_t *call, char *by, size_t len);
/* True if the route's service has its config document; else 404 (or 503/500) in call->err. */
bool cohort_api_service_exists(cohort_api_call_t *call);

bool cohort_api_list_services(cohort_api_call_t *call);
bool cohort_api_create_task(cohort_api_call_t *call);
bool cohort_api_create_tasks(cohort_api_call_t *call); /* tasks:batch */
bool cohort_api_list_tasks(cohort_api_call_t *call);
bool cohort_api_read_task(cohort_api_call_t *call);
bool cohort_api_count_tasks(cohort_api_call_t *call);
bool cohort_api_switch(cohort_api_call_t *call); /* pause, resume, block, unblock */
bool cohort_api_list_schedules(cohort_api_call_t *call); /* api_schedules.c */
bool cohort_api_pause_schedule(cohort_api_call_t *call); /* .../schedules/{id}/pause|resume */

#endif
