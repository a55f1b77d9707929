/*
 * liveness.c - the node-wide bounds derived from the live takeover_ms (see liveness.h).
 */
#include "node/liveness.h"

#include "node/primary/election.h"

int64_t cohort_liveness_min_takeover_ms(cohort_service_t *const *services, size_t n_services,
                                        int64_t fallback)
{
    /* The election's takeover_ms is the one in effect (live_settings.c writes both). */
    cohort_election_t *elections[n_services ? n_services : 1];
    for (size_t i = 0; i < n_services; i++)
        elections[i] = &services[i]->election;
    return cohort_election_min_takeover_ms(elections, n_services, fallback);
}

int64_t cohort_liveness_max_clock_rtt_ms(cohort_service_t *const *services, size_t n_services,
                                         int64_t fallback)
{
    return cohort_election_max_rtt_ms(
        cohort_liveness_min_takeover_ms(services, n_services, fallback));
}
