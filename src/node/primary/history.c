/*
 * history.c - the primary's per-minute record (see history.h). The minute is the cluster
 * clock's, so two primaries around a failover name the same minute and write one document.
 * With it go the minute's runs by kind (store/kinds.h) and, at an hour's end, the hour's rollup.
 */
#include "node/primary/history.h"

#include <stdio.h>

#include "core/clock.h"
#include "core/log.h"
#include "store/history.h"
#include "store/kinds.h"

void cohort_history_tick(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    int64_t now = cohort_clock_cluster_ms();
    int64_t minute = now - now % COHORT_MINUTE_MS; /* the minute under way */
    if (s->history_minute_ms >= minute)
        return;
    cohort_minute_t m;
    bson_error_t error;
    const char *name = s->config->name;
    bool ok = cohort_store_measure_minute(s->store, client, name, minute - COHORT_MINUTE_MS,
                                          now, &m, &error);
    cohort_kinds_t kinds;
    int64_t from = minute - COHORT_MINUTE_MS;
    ok = ok && cohort_store_measure_kinds(s->store, client, name, from, minute, &kinds, &error);
    if (ok) {
        m.kinds = &kinds;
        m.epoch = epoch;
        snprintf(m.primary, sizeof m.primary, "%s", s->node_id);
        ok = cohort_store_record_minute(s->store, client, name, &m,
                                        s->config->history_retention_ms, &error);
    }
    if (!ok) {
        cohort_logf(COHORT_LOG_WARN, name, "primary", epoch, "cannot record the minute: %s",
                    error.message);
        return;
    }
    s->history_minute_ms = minute;
    /* The minute that ended an hour: the hour's rollup, for the week view (8 days). */
    if (minute % COHORT_HOUR_MS == 0 &&
        !cohort_store_record_hour(s->store, client, name, minute - COHORT_HOUR_MS, &error))
        cohort_logf(COHORT_LOG_WARN, name, "primary", epoch, "cannot record the hour: %s",
                    error.message);
}
