/*
 * maintenance.h - what the primary does for its service's queue besides electing itself:
 * repair tasks written by other programs, expire silent nodes and reset stalled claims,
 * purge finished tasks past their retention, promote overdue tasks, count the queue for the
 * metrics. Main thread only, as primary under `epoch`.
 */
#ifndef COHORT_MAINTENANCE_H
#define COHORT_MAINTENANCE_H

#include <mongoc/mongoc.h>
#include <stdint.h>

#include "core/config.h"
#include "node/runtime.h"

#define COHORT_PURGE_PER_TICK 1000 /* finished tasks deleted per status per run, at most */
/* Maintenance (reset, purge, repair) runs every stall_timeout_ms/3, at most this far apart,
 * and on the next tick again while a purge backlog remains. */
#define COHORT_MAINTENANCE_INTERVAL_MS 5000
/* The retention purge: at most this far apart (a quarter of the shorter retention if that is
 * less; retentions are hours or days), and on the next maintenance again while a backlog
 * remains. */
#define COHORT_PURGE_INTERVAL_MS 60000
/* The scan for malformed pending tasks: this often, or when a claim failed on the server. */
#define COHORT_TYPE_CHECK_INTERVAL_MS 300000

/* How often the primary's maintenance runs for these settings (it runs on a tick, so never
 * more often than the tick). */
int64_t cohort_maintenance_interval_ms(const cohort_settings_t *settings);

/* Repair (see cohort_store_repair_tasks()), node expiry, stalled claims and retention, when
 * due (every cohort_maintenance_interval_ms(), sooner while a purge backlog remains). */
void cohort_maintenance_run(cohort_service_t *service, mongoc_client_t *client, int64_t epoch);

/* External workers' leases that ran out: their claims go back to pending (the attempt
 * counted), and external workers silent past their alive_until are marked expired. Every
 * tick for a service with `handler = external`, else with the rest of the maintenance. */
void cohort_maintenance_expire_leases(cohort_service_t *service, mongoc_client_t *client,
                                      int64_t epoch);

/* The upkeep that does not wait for the maintenance but need not run every tick either, so
 * that an idle primary sends only its renewal and its claim: the not_after promotion and the
 * queue count for the metrics (with http_listen), at most this often. */
#define COHORT_UPKEEP_INTERVAL_MS 5000

/* The queue measure's pace: the next waits COHORT_UPKEEP_INTERVAL_MS or this many times the
 * last one's time, whichever is longer (a measure of 3 s on a big queue scanned by the local
 * test server: one every 12 s), so that the scans take at most a quarter of the server. */
#define COHORT_COUNTS_COST_FACTOR 4

/* The not_after promotion and the metrics' queue count, when due (see above). */
void cohort_maintenance_upkeep(cohort_service_t *service, mongoc_client_t *client,
                               int64_t epoch);

/* Pending tasks past their not_after are promoted, in one write. */
void cohort_maintenance_promote_overdue(cohort_service_t *service, mongoc_client_t *client,
                                        int64_t epoch);

/* Queue depth for the metrics, kept with the epoch it was counted under so that a count from
 * an earlier primacy is never shown as current; the same measure (counts by status, kind and
 * group, the minute under way, the oldest due task) is published in `counts` with its
 * pace (`every_ms`) for the dashboard's calls (store/queue_counts.h), so its scans are paid
 * once per interval. */
void cohort_maintenance_count_queue(cohort_service_t *service, mongoc_client_t *client,
                                    int64_t epoch);

#endif
