/*
 * api_ops.c - the operators' endpoints of the HTTP API v1 (see api_ops.h): retry, cancel
 * and delete of one task or a selection, and a service's live settings.
 *
 * The work is the store's, as for cohortctl: cohort_store_change_task() re-checks the status
 * it read, cohort_store_change_tasks() walks a selection in pages of COHORT_OPERATOR_PAGE
 * ids; a request changes at most COHORT_API_BULK_MAX tasks so it holds the node's loop for a
 * bounded time. The author in a task's history is cohort_api_author's, as for pause and resume.
 * A refusal of the store (COHORT_DOMAIN_USAGE) becomes 404 or 409 with its message.
 */
#include "node/http/api_ops.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "node/status/service_settings.h"
#include "store/nodes.h"
#include "store/operator.h"
#include "store/services.h"

/* A store refusal as the API's status: 404 no such task, 409 anything else it refused. */
static bool fail_change(cohort_api_call_t *call, const bson_error_t *error)
{
    if (error->domain == COHORT_DOMAIN_USAGE && error->code == COHORT_CODE_NOT_FOUND)
        return cohort_api_fail(call->err, 404, "not_found", "%.400s", error->message);
    if (error->domain == COHORT_DOMAIN_USAGE)
        return cohort_api_fail(call->err, 409, "conflict", "%.400s", error->message);
    return cohort_api_fail_store(call->err, error, "cannot change the tasks");
}

/* The server's time, for the history and older_than_ms (as cohortctl takes it). */
static bool server_now(cohort_api_call_t *call, int64_t *now)
{
    bson_error_t error;
    return cohort_store_server_time(call->store, call->client, now, &error) ||
           cohort_api_fail_store(call->err, &error, "cannot read the server's time");
}

bool cohort_api_change_task(cohort_api_call_t *call)
{
    cohort_api_endpoint_t endpoint = call->route->endpoint;
    const char *name = endpoint == COHORT_API_TASK_RETRY    ? "retry"
                       : endpoint == COHORT_API_TASK_CANCEL ? "cancel"
                                                            : "delete";
    cohort_task_action_t action = endpoint == COHORT_API_TASK_RETRY    ? COHORT_ACTION_RETRY
                                  : endpoint == COHORT_API_TASK_CANCEL ? COHORT_ACTION_CANCEL
                                                                       : COHORT_ACTION_DELETE;
    /* No body: anything but whitespace or {} is refused, so a mistaken call changes nothing */
    bson_t body;
    bool ok = cohort_api_parse_object(call->request->body, call->request->body_len, true, &body,
                                      call->err);
    bson_iter_t it;
    if (ok && bson_iter_init(&it, &body) && bson_iter_next(&it))
        ok = cohort_api_fail(call->err, 400, "bad_request",
                             "unknown field '%.64s': %s takes no body (send none, or {})",
                             bson_iter_key(&it), name);
    bson_destroy(&body);
    int64_t now = 0;
    if (!ok || !cohort_api_service_exists(call) || !server_now(call, &now))
        return false;
    char by[100];
    cohort_api_author(call, by, sizeof by);
    cohort_task_change_t change = {.action = action, .by = by, .now_ms = now};
    bson_error_t error;
    if (!cohort_store_change_task(call->store, call->client, call->route->service, &change,
                                  call->route->task_id, &error)) {
        /* A cancel of a running task: its claimer is asked to stop (202). */
        bool requested = false;
        char claimer[129];
        bson_error_t why;
        if (action != COHORT_ACTION_CANCEL || error.code != COHORT_CODE_CONFLICT)
            return fail_change(call, &error);
        if (!cohort_store_request_cancel(call->store, call->client, call->route->service,
                                         call->route->task_id, by, now, &requested, claimer,
                                         sizeof claimer, &why))
            return fail_change(call, &why);
        if (!requested) /* not running: the refusal stands */
            return fail_change(call, &error);
        BSON_APPEND_UTF8(&call->reply->body, "id", call->route->task_id);
        BSON_APPEND_UTF8(&call->reply->body, "action", name);
        BSON_APPEND_UTF8(&call->reply->body, "status", "claimed");
        BSON_APPEND_UTF8(&call->reply->body, "claimed_by", claimer);
        BSON_APPEND_BOOL(&call->reply->body, "cancel_requested", true);
        call->reply->status = 202;
        return true;
    }
    BSON_APPEND_UTF8(&call->reply->body, "id", call->route->task_id);
    BSON_APPEND_UTF8(&call->reply->body, "action", name);
    BSON_APPEND_INT64(&call->reply->body, "changed", 1);
    call->reply->status = 200;
    return true;
}

bool cohort_api_change_tasks(cohort_api_call_t *call)
{
    bson_t body;
    cohort_api_bulk_t bulk = {0};
    bool ok = cohort_api_parse_object(call->request->body, call->request->body_len, false, &body,
                                      call->err) &&
              cohort_api_parse_bulk(&body, &bulk, call->err);
    int64_t now = 0;
    ok = ok && cohort_api_service_exists(call) && server_now(call, &now);
    int64_t changed = 0;
    if (ok) {
        char by[100];
        cohort_api_author(call, by, sizeof by);
        cohort_task_change_t change = {
            .action = bulk.action, .by = by, .now_ms = now, .dry_run = bulk.dry_run};
        cohort_task_selection_t selection = {.status = bulk.status,
                                             .kind = bulk.kind,
                                             .group = bulk.group,
                                             .limit = bulk.limit};
        if (bulk.older_than_ms > 0)
            selection.finished_before_ms = now - bulk.older_than_ms;
        bson_error_t error;
        ok = cohort_store_change_tasks(call->store, call->client, call->route->service, &change,
                                       &selection, &changed, &error) ||
             fail_change(call, &error);
    }
    if (ok) {
        BSON_APPEND_UTF8(&call->reply->body, "action", bulk.action_name);
        BSON_APPEND_INT64(&call->reply->body, bulk.dry_run ? "matched" : "changed", changed);
        BSON_APPEND_BOOL(&call->reply->body, "dry_run", bulk.dry_run);
        /* The limit reached: there may be more; the same request again takes the next. */
        BSON_APPEND_BOOL(&call->reply->body, "more", changed >= bulk.limit);
        call->reply->status = 200;
    }
    bson_destroy(&body);
    return ok;
}

/* ---- settings --------------------------------------------------------------------------- */

/* {"service", "settings": {name: value}, "source": {name: "database" | "config file" |
 * "default"}} for the settings in effect `eff` and those set in the database `in_db`. */
static void append_settings(cohort_api_call_t *call, const cohort_settings_t *eff,
                            const bson_t *in_db)
{
    cohort_settings_t copy = *eff;
    bool file = call->config != NULL;
    bson_t values, sources;
    BSON_APPEND_UTF8(&call->reply->body, "service", call->route->service);
    BSON_APPEND_DOCUMENT_BEGIN(&call->reply->body, "settings", &values);
    for (size_t i = 0; cohort_setting_names[i]; i++)
        BSON_APPEND_INT64(&values, cohort_setting_names[i],
                          *cohort_settings_field(&copy, cohort_setting_names[i]));
    bson_append_document_end(&call->reply->body, &values);
    BSON_APPEND_DOCUMENT_BEGIN(&call->reply->body, "source", &sources);
    for (size_t i = 0; cohort_setting_names[i]; i++) {
        bson_iter_t it;
        bool set = bson_iter_init_find(&it, in_db, cohort_setting_names[i]);
        BSON_APPEND_UTF8(&sources, cohort_setting_names[i],
                         set ? "database" : file ? "config file" : "default");
    }
    bson_append_document_end(&call->reply->body, &sources);
}

/* The settings in effect into `eff` and `in_db` (initialised; destroy it); 404 without the
 * service. */
static bool read_settings(cohort_api_call_t *call, cohort_settings_t *eff, bson_t *in_db)
{
    bool found = false;
    bson_error_t error;
    if (!cohort_service_settings_read(call->store, call->client, call->config,
                                      call->route->service, eff, in_db, &found, &error))
        return cohort_api_fail_store(call->err, &error, "cannot read the settings");
    if (!found)
        return cohort_api_fail_no_service(call);
    return true;
}

bool cohort_api_read_settings(cohort_api_call_t *call)
{
    cohort_settings_t eff;
    bson_t in_db;
    bool ok = read_settings(call, &eff, &in_db);
    if (ok) {
        append_settings(call, &eff, &in_db);
        call->reply->status = 200;
    }
    bson_destroy(&in_db);
    return ok;
}

bool cohort_api_write_settings(cohort_api_call_t *call)
{
    bson_t body, in_db;
    cohort_api_settings_patch_t patch = {0};
    cohort_settings_t eff = {0};
    bson_init(&in_db);
    bool ok = cohort_api_parse_object(call->request->body, call->request->body_len, false, &body,
                                      call->err) &&
              cohort_api_parse_settings(&body, &patch, call->err);
    if (ok) {
        bson_destroy(&in_db);
        ok = read_settings(call, &eff, &in_db);
    }
    /* The settings as they will be after every change, checked together before any write:
     * the rules between values (takeover_ms > tick_ms, ...) as cohortctl settings checks. */
    cohort_settings_t next = eff;
    for (size_t i = 0; ok && i < patch.n; i++)
        cohort_service_settings_change(call->config, call->route->service, &next,
                                       patch.items[i].name, patch.items[i].set,
                                       patch.items[i].value);
    bson_error_t error;
    if (ok && !cohort_settings_validate(&next, &error))
        ok = cohort_api_fail(call->err, 400, "bad_request", "refused: %.400s", error.message);
    /* ... and against every live node's own values, as cohortctl settings set (no --force
     * here: an unsafe takeover_ms is refused). */
    bson_t next_db, step;
    bson_copy_to(&in_db, &next_db);
    for (size_t i = 0; ok && i < patch.n; i++) {
        cohort_service_settings_next_db(&next_db, patch.items[i].name, patch.items[i].set,
                                        patch.items[i].value, &step);
        bson_destroy(&next_db);
        bson_steal(&next_db, &step);
    }
    char refusal[768];
    if (ok)
        ok = (cohort_service_settings_check_nodes(call->store, call->client,
                                                  call->route->service, &next_db, false,
                                                  refusal, sizeof refusal, &error) ||
              cohort_api_fail_store(call->err, &error, "cannot read the nodes")) &&
             (!refusal[0] ||
              cohort_api_fail(call->err, 400, "bad_request", "refused: %.600s", refusal));
    bson_destroy(&next_db);
    for (size_t i = 0; ok && i < patch.n; i++) {
        bool found = false;
        ok = cohort_store_set_setting(call->store, call->client, call->route->service,
                                      patch.items[i].name,
                                      patch.items[i].set ? patch.items[i].value : -1, &found,
                                      &error) ||
             cohort_api_fail_store(call->err, &error, "cannot write the setting");
        if (ok && !found)
            ok = cohort_api_fail_no_service(call);
    }
    if (ok) {
        bson_destroy(&in_db);
        ok = read_settings(call, &eff, &in_db);
    }
    if (ok) {
        append_settings(call, &eff, &in_db);
        call->reply->status = 200;
    }
    bson_destroy(&in_db);
    bson_destroy(&body);
    return ok;
}
