/*
 * api_schedules.c - GET /api/v1/services/{svc}/schedules (scope read): the service's
 * recurring tasks, the same objects as `cohortctl schedules --json`
 * (node/status/schedule_status.h), with the node's own config section for the file's side
 * (spec, catch_up, not started).
 */
#include "node/http/api_tasks.h"

#include "core/clock.h"
#include "node/status/schedule_status.h"

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
