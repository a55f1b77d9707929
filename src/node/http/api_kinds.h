/*
 * api_kinds.h - GET /api/v1/services/{svc}/kinds?minutes=60|1440|10080 (read): per task kind,
 * the runs that finished in the window by final status, the error rate and the p50 and p95
 * durations as histogram buckets (store/kinds.h, docs/API.md "Kinds"). The last hour and day
 * sum the per-minute history (kept `history_retention_ms`, default a day) and the minute
 * under way; the week sums the hourly rollups (kept 8 days) and the hour under way.
 * And GET /api/v1/services/{svc}/history/hours?hours=168 (read): those rollups themselves,
 * oldest first, for the week's chart.
 */
#ifndef COHORT_API_KINDS_H
#define COHORT_API_KINDS_H

#include <stdbool.h>

#include "node/http/api_tasks.h"

/* Answers the call (route COHORT_API_KINDS); false with call->err on bad input or a store
 * error. */
bool cohort_api_kinds(cohort_api_call_t *call);

/* Answers the call (route COHORT_API_HISTORY_HOURS): the service's last `hours` (1-192,
 * default 168) hourly rollups. */
bool cohort_api_history_hours(cohort_api_call_t *call);

#endif
