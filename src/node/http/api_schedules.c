/*
 * api_schedules.c - GET /api/v1/services/{svc}/schedules (scope read): the service's
 * recurring tasks, the same objects as `cohortctl schedules --json`
 * (node/status/schedule_status.h), with the node's own config section for the file's side
 * (spec, catch_up, not started); and POST .../schedules/{id}/pause|resume (scope operate):
 * the same switch as `cohortctl schedules pause|resume` (cohort_store_pause_schedule).
 */
#include "node/http/api_tasks.h"

#include "core/clock.h"
#include "node/status/schedule_status.h"
#include "store/schedules.h"
#include "store/services.h"

bool cohort_api_list_schedules(cohort_api_call_t *call)
{
    if (call->request->query && *call->request->query)
        return cohort_api_fail(call->err, 400, "bad_request",
                               "GET .../schedules takes no query parameters");
    int64_t now = cohort_clock_cluster_ms();
    bson_error_t error;
    const cohort_service_config_t *file =
        call->config ? cohort_config_find_service(call->config, call->route->service) : NULL;
    bool found = false;
    if (!cohort_schedule_status(call->store, call->client, call->route->service, file, now,
                                &call->reply->body, &found, &error))
        return cohort_api_fail_store(call->err, &error, "cannot read the schedules");
    if (!found)
        return cohort_api_fail_no_service(call);
    call->reply->status = 200;
    return true;
}

/* The schedule's state before the switch into *st; 404 for an unknown service or schedule. */
static bool read_schedule(cohort_api_call_t *call, cohort_schedule_state_t *st)
{
    bson_t doc;
    bool found = false;
    bson_error_t error;
    bool ok = cohort_store_read_service(call->store, call->client, call->route->service, &doc,
                                        &found, &error) ||
              cohort_api_fail_store(call->err, &error, "cannot read the service");
    if (ok && found)
        cohort_store_schedule_state(&doc, call->route->schedule_id, st);
    bson_destroy(&doc);
    if (ok && !found)
        return cohort_api_fail_no_service(call);
    if (ok && !st->found)
        return cohort_api_fail(call->err, 404, "not_found",
                               "service '%s' has no schedule '%s' (not in its config, or no "
                               "primary has run it yet: GET .../schedules lists them)",
                               call->route->service, call->route->schedule_id);
    return ok;
}

bool cohort_api_pause_schedule(cohort_api_call_t *call)
{
    bool pause = call->route->endpoint == COHORT_API_SCHEDULE_PAUSE;
    bson_t body; /* none, or {}: anything else is refused, so a mistaken call changes nothing */
    bson_iter_t it;
    bool ok = cohort_api_parse_object(call->request->body, call->request->body_len, true, &body,
                                      call->err);
    if (ok && bson_iter_init(&it, &body) && bson_iter_next(&it))
        ok = cohort_api_fail(call->err, 400, "bad_request",
                             "unknown field '%.64s': a schedule's %s takes no body (send none, "
                             "or {})",
                             bson_iter_key(&it), pause ? "pause" : "resume");
    bson_destroy(&body);
    cohort_schedule_state_t st = {0};
    if (!ok || !read_schedule(call, &st))
        return false;
    bool changed = st.paused != pause, found = true;
    bson_error_t error;
    if (changed && !cohort_store_pause_schedule(call->store, call->client, call->route->service,
                                                call->route->schedule_id, pause, &found, &error))
        return cohort_api_fail_store(call->err, &error, "cannot switch the schedule");
    if (!found) /* removed between the read and the write */
        return cohort_api_fail(call->err, 404, "not_found", "service '%s' has no schedule '%s'",
                               call->route->service, call->route->schedule_id);
    BSON_APPEND_UTF8(&call->reply->body, "service", call->route->service);
    BSON_APPEND_UTF8(&call->reply->body, "schedule", call->route->schedule_id);
    BSON_APPEND_BOOL(&call->reply->body, "paused", pause);
    /* false: it was already so (the audit records no change) */
    BSON_APPEND_BOOL(&call->reply->body, "changed", changed);
    call->reply->status = 200;
    return true;
}
