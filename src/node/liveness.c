/*
 * liveness.c - the node-wide bounds derived from the live takeover_ms (see liveness.h).
 */
#include "node/liveness.h"

#include "node/primary/election.h"

int64_t cohort_liveness_min_takeover_ms(cohort_service_t *const *services, size_t n_services,
                                        int64_t fallback)
{
    int64_t smallest = fallback;
    for (size_t i = 0; i < n_services; i++)
        if (i == 0 || services[i]->eff.takeover_ms < smallest)
            smallest = services[i]->eff.takeover_ms;
    return smallest;
}

int64_t cohort_liveness_max_clock_rtt_ms(cohort_service_t *const *services, size_t n_services,
                                         int64_t fallback)
{
    return cohort_election_max_rtt_ms(
        cohort_liveness_min_takeover_ms(services, n_services, fallback));
}
