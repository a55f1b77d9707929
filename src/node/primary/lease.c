/*
 * lease.c - the lease thread (see lease.h): sleeps until the earliest primacy of this node is
 * due for renewal (half its lease left), renews what is due on the store's primacy client,
 * and says so when a renewal came late.
 *
 * It holds no lock during a database call; its wake (core/wake.h) only lets
 * cohort_lease_keeper_stop() cut its sleep short.
 */
#include "node/primary/lease.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/wake.h"

struct cohort_lease_keeper {
    cohort_store_t *store;
    mongoc_client_t *client; /* the store's primacy client */
    cohort_election_t **elections;
    bool *failing; /* per election: the last renewal failed (its failure was logged) */
    size_t n;
    pthread_t thread;
    cohort_wake_t wake;
};

bool cohort_lease_renewal_late(int64_t due_ms, int64_t until_ms, int64_t lease_ms,
                               int64_t sent_ms, int64_t received_ms,
                               cohort_lease_lateness_t *out)
{
    out->sent_late_ms = sent_ms > due_ms ? sent_ms - due_ms : 0;
    out->rtt_ms = received_ms - sent_ms;
    out->lapsed_ms = received_ms > until_ms ? received_ms - until_ms : 0;
    return out->sent_late_ms > lease_ms / 4 || out->lapsed_ms > 0;
}

static void log_late(const cohort_election_t *e, const cohort_renewal_t *r, int64_t due_ms)
{
    int64_t takeover = e->takeover_ms;
    int64_t lease = takeover - cohort_election_guard_ms(takeover);
    cohort_lease_lateness_t late;
    if (!cohort_lease_renewal_late(due_ms, r->lease_until_ms, lease, r->sent_ms, r->received_ms,
                                   &late))
        return;
    const char *why = late.rtt_ms > lease / 2
                          ? "the database answered slowly"
                          : "this thread ran late (a busy machine, or the previous renewal's "
                            "round trip was long)";
    cohort_logf(COHORT_LOG_WARN, e->service, "primary", r->epoch,
                "primacy renewal of epoch %lld was late: sent %lld ms after it was due (half "
                "the %lld ms lease left), round trip %lld ms; the lease %s%lld ms: %s",
                (long long)r->epoch, (long long)late.sent_late_ms, (long long)lease,
                (long long)late.rtt_ms,
                late.lapsed_ms > 0 ? "had run out for " : "had left ",
                (long long)(late.lapsed_ms > 0 ? late.lapsed_ms
                                               : r->lease_until_ms - r->received_ms),
                why);
}

/* Renews election `i`, due at `due_ms`; logs a late renewal and the first failure of a run. */
static void renew_one(cohort_lease_keeper_t *k, size_t i, int64_t due_ms)
{
    cohort_election_t *e = k->elections[i];
    cohort_renewal_t r;
    bson_error_t error;
    if (!cohort_election_renew(e, k->store, k->client, &r, &error)) {
        if (!k->failing[i])
            cohort_logf(COHORT_LOG_WARN, e->service, cohort_election_role(e), r.epoch,
                        "cannot renew primacy of epoch %lld (round trip %lld ms): %s; the "
                        "lease runs out unless a renewal succeeds",
                        (long long)r.epoch, (long long)(r.received_ms - r.sent_ms),
                        error.message);
        k->failing[i] = true;
        return;
    }
    k->failing[i] = false;
    if (r.renewed)
        log_late(e, &r, due_ms);
    /* Not renewed: the lease has ended; the main thread's next round logs the loss. */
}

/* Renews whatever is due and returns when to look again (monotonic ms). */
static int64_t renew_due(cohort_lease_keeper_t *k)
{
    int64_t now = cohort_clock_monotonic_ms();
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < k->n; i++) {
        cohort_election_t *e = k->elections[i];
        int64_t due = cohort_election_renew_due_ms(e);
        if (due > 0 && due <= now) {
            renew_one(k, i, due);
            now = cohort_clock_monotonic_ms();
            due = cohort_election_renew_due_ms(e);
        }
        /* Not primary, or a renewal that just failed: look again soon anyway (a takeover by
         * the main thread, or a live change of takeover_ms, is seen well before half of the
         * lease is gone). */
        int64_t poll = now + e->takeover_ms / 8;
        int64_t at = due > now && due < poll ? due : poll;
        if (at < next)
            next = at;
    }
    return next;
}

static void *keeper_main(void *arg)
{
    cohort_lease_keeper_t *k = arg;
    /* The primacy client connects on its first command: do that now, not on the first
     * renewal, so the renewal's round trip is not also a connection's (over a slow database
     * that cost a lease once). Failing here is fine: the first renewal connects then. */
    int64_t server_ms;
    bson_error_t error;
    cohort_store_server_time(k->store, k->client, &server_ms, &error);
    while (cohort_wake_sleep_until(&k->wake, renew_due(k)))
        ;
    return NULL;
}

static void keeper_free(cohort_lease_keeper_t *k)
{
    cohort_wake_destroy(&k->wake);
    free(k->elections);
    free(k->failing);
    free(k);
}

cohort_lease_keeper_t *cohort_lease_keeper_start(cohort_store_t *store,
                                                 cohort_election_t *const *elections, size_t n,
                                                 bson_error_t *error)
{
    cohort_lease_keeper_t *k = calloc(1, sizeof *k);
    if (!k) {
        cohort_error_nomem(error, "the lease thread");
        return NULL;
    }
    k->elections = calloc(n ? n : 1, sizeof *k->elections);
    k->failing = calloc(n ? n : 1, sizeof *k->failing);
    cohort_wake_init(&k->wake);
    if (!k->elections || !k->failing) {
        keeper_free(k);
        cohort_error_nomem(error, "the lease thread");
        return NULL;
    }
    memcpy(k->elections, elections, n * sizeof *elections);
    k->n = n;
    k->store = store;
    k->client = cohort_store_primacy_client(store);
    if (!cohort_thread_start(&k->thread, keeper_main, k, false, error, "the lease thread")) {
        keeper_free(k);
        return NULL;
    }
    return k;
}

void cohort_lease_keeper_stop(cohort_lease_keeper_t *k)
{
    if (!k)
        return;
    cohort_wake_stop(&k->wake);
    pthread_join(k->thread, NULL);
    keeper_free(k);
}
