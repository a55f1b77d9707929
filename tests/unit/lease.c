/*
 * lease.c - when a renewal of primacy counts as late (node/primary/lease.h): the warning's rule.
 *
 * A lease of 1125 ms (takeover_ms 1500) ending at 10000 is due for renewal at 9438 (half of it
 * left). Late: sent more than a quarter of the lease (281 ms) after that, or answered after
 * the lease ended.
 */
#include <criterion/criterion.h>

#include "node/primary/lease.h"

#define LEASE 1125
#define UNTIL 10000
#define DUE (UNTIL - LEASE / 2)

Test(lease_late, a_prompt_renewal_with_a_third_of_takeover_round_trip_is_not_late)
{
    cohort_lease_lateness_t late;
    cr_assert_not(cohort_lease_renewal_late(DUE, UNTIL, LEASE, DUE + 5, DUE + 505, &late));
    cr_assert_eq(late.sent_late_ms, 5);
    cr_assert_eq(late.rtt_ms, 500);
    cr_assert_eq(late.lapsed_ms, 0);
}

Test(lease_late, a_reply_after_the_lease_ended_is_late)
{
    cohort_lease_lateness_t late;
    cr_assert(cohort_lease_renewal_late(DUE, UNTIL, LEASE, DUE, UNTIL + 440, &late));
    cr_assert_eq(late.lapsed_ms, 440);
    cr_assert_eq(late.sent_late_ms, 0);
}

Test(lease_late, a_renewal_sent_long_after_it_was_due_is_late)
{
    cohort_lease_lateness_t late;
    cr_assert(cohort_lease_renewal_late(DUE, UNTIL, LEASE, DUE + 300, DUE + 310, &late));
    cr_assert_eq(late.sent_late_ms, 300);
    cr_assert_eq(late.lapsed_ms, 0);
    cr_assert_not(cohort_lease_renewal_late(DUE, UNTIL, LEASE, DUE + 280, DUE + 290, &late));
}

Test(lease_late, a_renewal_sent_early_is_never_late_by_its_sending)
{
    cohort_lease_lateness_t late;
    cr_assert_not(cohort_lease_renewal_late(DUE, UNTIL, LEASE, DUE - 400, DUE - 300, &late));
    cr_assert_eq(late.sent_late_ms, 0);
}
