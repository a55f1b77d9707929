/*
 * service_status.h - a service's state as people and tools see it: its primary, its task
 * counts by status and its switches (pause, block). One builder for `cohortctl status
 * --json` and the API's GET /api/v1/services, so both show the same objects.
 *
 * It reads through the store (the config document and one aggregation of counts); it keeps
 * nothing of the running node, so the CLI uses it as well.
 */
#ifndef COHORT_SERVICE_STATUS_H
#define COHORT_SERVICE_STATUS_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "store/queries.h"

/* One switch of a service's config document: `which` ("pause"/"block") for `kind` ("*": the
 * whole service). Strings point into the document. */
typedef struct cohort_switch {
    const char *which, *kind;
    const char *reason, *by; /* NULL if unset */
    int64_t at_ms;           /* 0 if unset */
} cohort_switch_t;

/* Calls `fn` (may be NULL) for every switch set in the config document `doc`; returns how
 * many there are. */
size_t cohort_each_switch(const bson_t *doc, void (*fn)(const cohort_switch_t *sw, void *user),
                          void *user);

/* "paused (all kinds)" / "blocked kind render: disk full" */
void cohort_describe_switch(const cohort_switch_t *sw, char *buf, size_t len);

/* What the table of `cohortctl status` shows beside the JSON object. */
typedef struct cohort_service_summary {
    bool found;         /* the service has a config document */
    char primary[129];  /* "" if none */
    int64_t epoch;
    int64_t ago_ms;     /* since the primary's last renewal; -1 if never */
    cohort_status_counts_t counts;
    const char *state;  /* "running", "paused", "blocked", "paused,blocked", "kinds-stopped",
                         * or "(no service document)" */
    char details[2048]; /* one indented line per switch */
} cohort_service_summary_t;

/* Appends to `svc` (a document the caller began) the fields of service `name`: name,
 * service_document, primary {node_id, epoch, last_active_ms_ago} or null, counts {status: n},
 * paused [...], blocked [...], settings_problems [{node_id, problem}] (live nodes that cannot
 * apply the database's settings; also lines of the summary's details); `server_now_ms` is the
 * server's time. `summary` (may be NULL) receives the same for a table. `service_document`
 * says whether the service has its config document (a queue can have tasks without one:
 * cohortctl status lists those too). False on a database error. */
bool cohort_service_status(cohort_store_t *store, mongoc_client_t *client, const char *name,
                           int64_t server_now_ms, bson_t *svc, cohort_service_summary_t *summary,
                           bson_error_t *error);

#endif
