/*
 * election.c - primacy between two nodes of one service (src/node/primary/election.h), driven tick
 * by tick from the test thread against the local database: one primary per epoch, renewal
 * keeps it, a silent primary is replaced only after takeover_ms with a new epoch, its lease
 * runs out before that (so it never acts beside the new primary), a deposed primary notices
 * on its next renewal, and a clean step-down lets the other node in at once.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "core/clock.h"
#include "node/primary/election.h"
#include "store/store.h"
#include "store/primacy.h"
#include "store/services.h"

#define SERVICE "elect"
#define TAKEOVER_MS 400

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;
static cohort_election_t a, b;

static void setup(void)
{
    db = test_db_name("election");
    store = test_store_new(db);
    client = cohort_store_pop(store);
    test_sync_clock(store, client, cohort_election_max_rtt_ms(TAKEOVER_MS));
    bson_error_t error;
    cr_assert(test_ensure_service(store, client, SERVICE, &error), "%s", error.message);
    cohort_election_init(&a, SERVICE, "node-a", TAKEOVER_MS);
    cohort_election_init(&b, SERVICE, "node-b", TAKEOVER_MS);
}

static void teardown(void)
{
    if (store) {
        cohort_store_push(store, client);
        cohort_store_destroy(store);
        test_drop_db(db);
    }
    free(db);
}

TestSuite(election, .init = setup, .fini = teardown, .timeout = 30);

static void tick(cohort_election_t *e)
{
    bson_error_t error;
    cr_assert(test_election_tick(e, store, client, &error), "election tick of %s failed: %s",
              e->node_id, error.message);
}

/* The service document's primary ("" if null) and epoch. */
static void read_primacy(const char *service, char primary[64], int64_t *epoch)
{
    bson_t doc;
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_read_service(store, client, service, &doc, &found, &error), "%s",
              error.message);
    cr_assert(found, "service %s has no document", service);
    bson_iter_t it;
    primary[0] = '\0';
    if (bson_iter_init_find(&it, &doc, "primary") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(primary, 64, "%s", bson_iter_utf8(&it, NULL));
    *epoch = 0;
    if (bson_iter_init_find(&it, &doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it))
        *epoch = bson_iter_as_int64(&it);
    bson_destroy(&doc);
}

static void assert_db_primary(const char *node, int64_t epoch)
{
    char primary[64];
    int64_t got;
    read_primacy(SERVICE, primary, &got);
    cr_assert_str_eq(primary, node, "database names primary '%s', want '%s'", primary, node);
    cr_assert_eq(got, epoch, "database epoch %lld, want %lld", (long long)got, (long long)epoch);
}

/* Keeps the clock offset fresh, as a node's every-tick ping does. */
static void resync(void)
{
    test_sync_clock(store, client, cohort_election_max_rtt_ms(TAKEOVER_MS));
}

Test(election, the_first_node_becomes_primary_with_epoch_1)
{
    cr_assert_not(cohort_election_has_lease(&a));
    tick(&a);
    cr_assert(cohort_election_has_lease(&a));
    cr_assert_eq(cohort_election_epoch(&a), 1);
    assert_db_primary("node-a", 1);

    tick(&b);
    cr_assert_not(cohort_election_has_lease(&b), "a second primary while the first is fresh");
    cr_assert_eq(cohort_election_epoch(&b), 0);
    assert_db_primary("node-a", 1);
}

Test(election, no_takeover_before_the_clock_is_synced)
{
    cohort_clock_reset();
    tick(&a);
    cr_assert_not(cohort_election_has_lease(&a), "took primacy without a trusted clock");
    assert_db_primary("", 0);
    resync();
    tick(&a);
    cr_assert_eq(cohort_election_epoch(&a), 1);
}

Test(election, renewal_keeps_primacy_and_epoch)
{
    tick(&a);
    int64_t until = test_now_ms() + 3 * TAKEOVER_MS;
    while (test_now_ms() < until) {
        resync();
        tick(&a);
        tick(&b);
        cr_assert(cohort_election_has_lease(&a), "the renewing primary lost its lease");
        cr_assert_eq(cohort_election_epoch(&a), 1);
        cr_assert_not(cohort_election_has_lease(&b), "node-b took over a renewing primary");
        test_sleep_ms(TAKEOVER_MS / 8);
    }
    assert_db_primary("node-a", 1);
}

Test(election, a_silent_primary_is_replaced_after_takeover_ms)
{
    /* measured from before the renewal, so a slow reply cannot make the wait look short */
    int64_t last_renewal = test_now_ms();
    tick(&a);
    cr_assert_eq(cohort_election_epoch(&a), 1);

    /* node-a goes silent; node-b keeps trying */
    int64_t deadline = last_renewal + 10 * TAKEOVER_MS;
    while (!cohort_election_has_lease(&b) && test_now_ms() < deadline) {
        resync();
        tick(&b);
        if (!cohort_election_has_lease(&b))
            test_sleep_ms(20);
    }
    int64_t waited = test_now_ms() - last_renewal;
    cr_assert(cohort_election_has_lease(&b), "node-b never took over");
    int64_t slack = 2 * cohort_clock_uncertainty_ms() + 2;
    cr_assert_geq(waited + slack, TAKEOVER_MS, "node-b took over after %lld ms (< %d)",
                  (long long)waited, TAKEOVER_MS);
    cr_assert_eq(cohort_election_epoch(&b), 2);
    assert_db_primary("node-b", 2);
    /* the fencing argument: the old primary's lease ran out before anyone could take over */
    cr_assert_not(cohort_election_has_lease(&a), "two primaries at once: node-a still has a "
                                                 "lease while node-b holds epoch 2");
    cr_assert_eq(cohort_election_epoch(&a), 0);

    /* node-a wakes up: its renewal fails, it logs the loss and cannot take primacy back */
    test_stderr_begin();
    tick(&a);
    char *log = test_stderr_end();
    cr_assert_not_null(strstr(log, "lost primacy of epoch 1"), "no log line: %s", log);
    cr_assert_not(a.primary);
    cr_assert_not(cohort_election_has_lease(&a));
    cr_assert_eq(cohort_election_epoch(&a), 0);
    cr_assert(cohort_election_has_lease(&b));
    assert_db_primary("node-b", 2);
    free(log);
}

Test(election, the_lease_runs_out_without_renewal)
{
    int64_t lease = TAKEOVER_MS - cohort_election_guard_ms(TAKEOVER_MS);
    cr_assert_lt(lease, TAKEOVER_MS, "no guard between the lease and a takeover");
    int64_t before = cohort_clock_monotonic_ms();
    tick(&a);
    int64_t after = cohort_clock_monotonic_ms();
    cr_assert(cohort_election_has_lease(&a));
    /* the lease is measured from when the winning command was sent, not when it returned */
    int64_t until = atomic_load(&a.lease_until_ms);
    cr_assert(until >= before + lease && until <= after + lease,
              "lease ends %lld ms after the tick started, want %lld", (long long)(until - before),
              (long long)lease);

    while (cohort_clock_monotonic_ms() < until - 20) {
        cr_assert(cohort_election_has_lease(&a), "the lease ended early");
        test_sleep_ms(10);
    }
    while (cohort_clock_monotonic_ms() < until)
        test_sleep_ms(2);
    cr_assert_not(cohort_election_has_lease(&a), "the lease outlived its end");
    cr_assert_eq(cohort_election_epoch(&a), 0);
    /* nobody took over: the database still names node-a */
    assert_db_primary("node-a", 1);

    /* a late renewal under the same epoch succeeds and restores the lease */
    tick(&a);
    cr_assert_eq(cohort_election_epoch(&a), 1);
    assert_db_primary("node-a", 1);
}

Test(election, step_down_clears_primacy)
{
    tick(&a);
    cr_assert_eq(cohort_election_epoch(&a), 1);
    test_stderr_begin();
    cohort_election_step_down(&a, store, client);
    char *log = test_stderr_end();
    cr_assert_not_null(strstr(log, "stepped down from epoch 1"), "%s", log);
    cr_assert_not(cohort_election_has_lease(&a));
    assert_db_primary("", 1);

    /* node-b need not wait takeover_ms */
    tick(&b);
    cr_assert_eq(cohort_election_epoch(&b), 2);
    assert_db_primary("node-b", 2);
    free(log);
}

Test(election, step_down_after_losing_primacy_changes_nothing)
{
    tick(&a);
    /* an operator (or a takeover) replaced node-a under its feet */
    bson_error_t error;
    cohort_takeover_t t;
    cr_assert(cohort_store_take_lease(store, client, SERVICE, "node-c",
                                      cohort_clock_cluster_ms() + 60000, -1, 0, &t, &error));
    cr_assert(t.taken);
    cr_assert_eq(t.epoch, 2);
    cr_assert_str_eq(t.previous, "node-a");
    cohort_election_step_down(&a, store, client);
    assert_db_primary("node-c", 2);
}

/* ---- a race for primacy ---------------------------------------------------------------- */

typedef struct racer {
    cohort_election_t election;
    pthread_barrier_t *start;
    bool ok;
    char error[600];
} racer_t;

static void *race_tick(void *arg)
{
    racer_t *r = arg;
    mongoc_client_t *own = cohort_store_pop(store);
    bson_error_t error;
    pthread_barrier_wait(r->start);
    r->ok = test_election_tick(&r->election, store, own, &error);
    if (!r->ok)
        snprintf(r->error, sizeof r->error, "%s", error.message);
    cohort_store_push(store, own);
    return NULL;
}

Test(election, simultaneous_claims_make_exactly_one_primary)
{
    for (int round = 0; round < 10; round++) {
        char service[32];
        snprintf(service, sizeof service, "race%d", round);
        bson_error_t error;
        cr_assert(test_ensure_service(store, client, service, &error), "%s", error.message);
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 2);
        racer_t racers[2];
        pthread_t threads[2];
        static const char *const ids[] = {"racer-1", "racer-2"};
        for (int i = 0; i < 2; i++) {
            racers[i] = (racer_t){.start = &start};
            cohort_election_init(&racers[i].election, service, ids[i], TAKEOVER_MS);
            cr_assert_eq(pthread_create(&threads[i], NULL, race_tick, &racers[i]), 0);
        }
        for (int i = 0; i < 2; i++)
            pthread_join(threads[i], NULL);
        pthread_barrier_destroy(&start);
        cr_assert(racers[0].ok && racers[1].ok, "a tick failed: %s%s", racers[0].error,
                  racers[1].error);
        int primaries = cohort_election_has_lease(&racers[0].election) +
                        cohort_election_has_lease(&racers[1].election);
        cr_assert_eq(primaries, 1, "round %d: %d primaries", round, primaries);
        const racer_t *winner =
            cohort_election_has_lease(&racers[0].election) ? &racers[0] : &racers[1];
        cr_assert_eq(cohort_election_epoch(&winner->election), 1);
        char primary[64];
        int64_t epoch;
        read_primacy(service, primary, &epoch);
        cr_assert_str_eq(primary, winner->election.node_id);
        cr_assert_eq(epoch, 1);
    }
}
