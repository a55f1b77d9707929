/*
 * api_ops.h - the operators' endpoints of the HTTP API v1 (docs/API.md): retry, cancel and
 * delete of one task or of a selection (tasks:bulk), and a service's live settings. They are
 * `cohortctl retry|cancel|delete` and `cohortctl settings` over HTTP: the same store calls
 * (store/operator.c, cohort_store_set_setting) and the same checks (node/status/service_settings.h,
 * core/settings.h), so both refuse the same things.
 *
 * The body parsers are pure (the fuzz target tests/fuzz/fuzz_api.c drives them); the
 * endpoints take a cohort_api_call_t (api_tasks.h) and fill its reply or its error.
 */
#ifndef COHORT_API_OPS_H
#define COHORT_API_OPS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "node/http/api_parse.h"
#include "node/http/api_tasks.h"
#include "store/operator.h"

/* The most tasks one tasks:bulk request changes (or counts): ten of the store's pages, so a
 * request holds the node's loop for a bounded time. `more` in the answer says to call again. */
#define COHORT_API_BULK_MAX (10 * COHORT_OPERATOR_PAGE)

/* POST .../tasks:bulk: {"action", "filter": {"status", "kind", "group", "older_than_ms"},
 * "limit", "dry_run"}. The strings are views into the body. */
typedef struct cohort_api_bulk {
    cohort_task_action_t action;
    const char *action_name;
    cohort_task_status_t status; /* given, or the action's default (cancel: pending) */
    const char *kind, *group;    /* NULL: any */
    int64_t older_than_ms;       /* 0: none */
    int64_t limit;               /* 1..COHORT_API_BULK_MAX */
    bool dry_run;
} cohort_api_bulk_t;

/* Reads and checks a bulk body with cohortctl's rules: 400 for a malformed one (naming the
 * field); 409 for a status the action does not apply to (naming it). */
bool cohort_api_parse_bulk(const bson_t *body, cohort_api_bulk_t *bulk, cohort_api_error_t *err);

/* PATCH .../settings: {"name": whole number | null, ...}, each a live setting at most once
 * (null: unset). Each value is checked alone here (cohort_settings_validate_value); the
 * whole set against the others by the endpoint. Names are views into the body. */
#define COHORT_API_SETTINGS_MAX 16
typedef struct cohort_api_settings_patch {
    size_t n;
    struct {
        const char *name;
        bool set; /* false: unset */
        int64_t value;
    } items[COHORT_API_SETTINGS_MAX];
} cohort_api_settings_patch_t;

bool cohort_api_parse_settings(const bson_t *body, cohort_api_settings_patch_t *patch,
                               cohort_api_error_t *err);

/* POST .../tasks/{id}/retry, .../cancel, DELETE .../tasks/{id} */
bool cohort_api_change_task(cohort_api_call_t *call);

/* POST .../tasks:bulk */
bool cohort_api_change_tasks(cohort_api_call_t *call);
/* GET .../settings */
bool cohort_api_read_settings(cohort_api_call_t *call);
/* PATCH or POST .../settings */
bool cohort_api_write_settings(cohort_api_call_t *call);

#endif
