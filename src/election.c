/*
 * election.c - claiming and renewing primacy (see election.h for the lease argument).
 *
 * A primary renews with a filter on {primary: me, epoch: E}; failing that it is no longer
 * primary, whatever it believed. Anyone may then try the takeover findAndModify, whose
 * filter is the seed's three conditions (primary null, primary me, last_active older than
 * takeover_ms) and which always starts a new epoch.
 */
#include "election.h"

#include "clock.h"
#include "log.h"

void cohort_election_init(cohort_election_t *e, const char *service, const char *node_id,
                          int64_t takeover_ms)
{
    e->service = service;
    e->node_id = node_id;
    e->takeover_ms = takeover_ms;
    e->primary = false;
    atomic_store(&e->epoch, 0);
    atomic_store(&e->lease_until_ms, 0);
}

int64_t cohort_election_guard_ms(int64_t takeover_ms)
{
    return takeover_ms / 4;
}

int64_t cohort_election_max_rtt_ms(int64_t takeover_ms)
{
    /* A sample's error is at most rtt/2 + 1 ms; two nodes' errors add up. Keep their sum
     * at half the guard. */
    int64_t max_rtt = cohort_election_guard_ms(takeover_ms) / 2;
    return max_rtt < 2 ? 2 : max_rtt;
}

static void lose(cohort_election_t *e, const char *why)
{
    int64_t epoch = atomic_load(&e->epoch);
    atomic_store(&e->lease_until_ms, 0);
    atomic_store(&e->epoch, 0);
    e->primary = false;
    cohort_logf(COHORT_LOG_WARN, e->service, "secondary", epoch,
                "lost primacy of epoch %lld: %s", (long long)epoch, why);
}

bool cohort_election_tick(cohort_election_t *e, cohort_store_t *store, mongoc_client_t *client,
                          bson_error_t *error)
{
    int64_t sent = cohort_clock_monotonic_ms();
    int64_t lease = e->takeover_ms - cohort_election_guard_ms(e->takeover_ms);

    if (e->primary) {
        bool renewed = false;
        if (!cohort_store_renew_primacy(store, client, e->service, e->node_id,
                                        atomic_load(&e->epoch), &renewed, &e->batches, error))
            return false;
        if (renewed) {
            atomic_store(&e->lease_until_ms, sent + lease);
            return true;
        }
        lose(e, "another node took over or an operator cleared it");
    }

    if (!cohort_clock_synced())
        return true; /* no trustworthy cluster time yet: no takeover */

    cohort_takeover_t result;
    int64_t cutoff = cohort_clock_cluster_ms() - e->takeover_ms;
    if (!cohort_store_take_primacy(store, client, e->service, e->node_id, cutoff, &result,
                                   error))
        return false;
    if (!result.taken)
        return true;
    /* Publish the epoch before the lease so a reader never sees a lease without it. */
    atomic_store(&e->epoch, result.epoch);
    atomic_store(&e->lease_until_ms, sent + lease);
    e->primary = true;
    e->batches = result.batches;
    cohort_logf(COHORT_LOG_INFO, e->service, "primary", result.epoch,
                "became primary (epoch %lld, previous primary: %s)", (long long)result.epoch,
                result.previous[0] ? result.previous : "none");
    return true;
}

bool cohort_election_has_lease(const cohort_election_t *e)
{
    return cohort_election_epoch(e) > 0;
}

int64_t cohort_election_epoch(const cohort_election_t *e)
{
    int64_t epoch = atomic_load(&((cohort_election_t *)e)->epoch);
    int64_t until = atomic_load(&((cohort_election_t *)e)->lease_until_ms);
    if (epoch <= 0 || until <= 0 || cohort_clock_monotonic_ms() >= until)
        return 0;
    return epoch;
}

void cohort_election_step_down(cohort_election_t *e, cohort_store_t *store,
                               mongoc_client_t *client)
{
    if (!e->primary)
        return;
    int64_t epoch = atomic_load(&e->epoch);
    atomic_store(&e->lease_until_ms, 0);
    atomic_store(&e->epoch, 0);
    e->primary = false;
    bson_error_t error;
    if (cohort_store_step_down(store, client, e->service, e->node_id, epoch, &error))
        cohort_logf(COHORT_LOG_INFO, e->service, "secondary", epoch,
                    "stepped down from epoch %lld", (long long)epoch);
    else
        cohort_logf(COHORT_LOG_WARN, e->service, "secondary", epoch,
                    "could not step down (primacy will time out instead): %s", error.message);
}
