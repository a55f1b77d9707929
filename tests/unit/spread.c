/*
 * spread.c - how long a vacant primacy waits for a node that leads fewer services
 * (src/node/primary/spread.h): a node leading none takes it at once, one leading k waits k ticks
 * from the round it first saw the vacancy, a lone node still gets every service, and an election
 * used alone (no node count) never waits.
 */
#include <criterion/criterion.h>

#include "node/primary/spread.h"

#define TICK 500

Test(spread, a_node_leading_nothing_takes_a_vacancy_at_once)
{
    int64_t held = 0, since = 0;
    cr_assert_not(cohort_spread_defer(&held, true, &since, 10000, TICK));
    cr_assert_eq(since, 10000, "the vacancy was first seen at 10000, not %lld", (long long)since);
}

Test(spread, a_node_leading_k_waits_k_ticks_from_the_first_vacant_round)
{
    int64_t held = 2, since = 0;
    cr_assert(cohort_spread_defer(&held, true, &since, 10000, TICK));
    cr_assert(cohort_spread_defer(&held, true, &since, 10000 + 2 * TICK - 1, TICK));
    cr_assert_not(cohort_spread_defer(&held, true, &since, 10000 + 2 * TICK, TICK));
    cr_assert_eq(cohort_spread_wait_ms(3, TICK), 3 * TICK);
    cr_assert_eq(cohort_spread_wait_ms(0, TICK), 0);
}

Test(spread, a_round_that_finds_it_taken_forgets_the_vacancy)
{
    int64_t held = 1, since = 0;
    cr_assert(cohort_spread_defer(&held, true, &since, 10000, TICK));
    cr_assert(cohort_spread_defer(&held, false, &since, 10100, TICK), "not vacant: no takeover");
    cr_assert_eq(since, 0);
    /* Vacant again later: the wait starts again from this round. */
    cr_assert(cohort_spread_defer(&held, true, &since, 20000, TICK));
    cr_assert_not(cohort_spread_defer(&held, true, &since, 20000 + TICK, TICK));
}

/* A lone node sees its five services vacant on its first round and takes them within four
 * ticks, one more on each round. */
Test(spread, a_lone_node_takes_every_service_within_held_ticks)
{
    int64_t held = 0, since[5] = {0};
    int64_t now = 5000;
    for (int round = 0; round < 5; round++, now += TICK)
        for (int s = 0; s < 5; s++)
            if (since[s] >= 0 && !cohort_spread_defer(&held, true, &since[s], now, TICK)) {
                cohort_spread_count(&held, 1);
                since[s] = -1; /* taken: no longer asked */
            }
    cr_assert_eq(held, 5, "the lone node leads %lld of 5 services after 5 rounds",
                 (long long)held);
}

Test(spread, an_election_without_a_node_count_never_waits)
{
    int64_t since = 0;
    cr_assert_not(cohort_spread_defer(NULL, true, &since, 10000, TICK));
    cr_assert(cohort_spread_defer(NULL, false, &since, 10000, TICK));
    cohort_spread_count(NULL, 1); /* counts nothing, does not crash */
}
