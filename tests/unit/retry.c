/*
 * retry.c - the retry schedule, cohort_task_retry_delay_ms(): retry n (n = 0 for the retry
 * after the first failed attempt) waits base * 2^n, saturating at COHORT_RETRY_DELAY_MAX_MS
 * without ever overflowing.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "node/work/task.h"

Test(retry, first_retry_waits_the_base_delay)
{
    cr_assert_eq(cohort_task_retry_delay_ms(20000, 1), 20000);
    cr_assert_eq(cohort_task_retry_delay_ms(1, 1), 1);
    cr_assert_eq(cohort_task_retry_delay_ms(250, 1), 250);
}

Test(retry, each_retry_doubles_the_delay)
{
    static const int64_t expected[] = {20000, 40000, 80000, 160000, 320000, 640000, 1280000};
    for (int64_t attempt = 1; attempt <= 7; attempt++)
        cr_assert_eq(cohort_task_retry_delay_ms(20000, attempt), expected[attempt - 1],
                     "attempt %lld: got %lld, want %lld", (long long)attempt,
                     (long long)cohort_task_retry_delay_ms(20000, attempt),
                     (long long)expected[attempt - 1]);
    cr_assert_eq(cohort_task_retry_delay_ms(3, 11), 3 * 1024);
}

Test(retry, attempt_below_one_is_treated_as_the_first)
{
    cr_assert_eq(cohort_task_retry_delay_ms(500, 0), 500);
    cr_assert_eq(cohort_task_retry_delay_ms(500, -7), 500);
}

Test(retry, the_smallest_attempt_does_not_overflow)
{
    /* attempt - 1 overflows for INT64_MIN: undefined behaviour that UBSan reports and that an
     * optimiser may turn into anything (the header promises saturation, never overflow) */
    cr_assert_eq(cohort_task_retry_delay_ms(500, INT64_MIN), 500);
    cr_assert_eq(cohort_task_retry_delay_ms(500, INT64_MIN + 1), 500);
}

Test(retry, base_zero_or_negative_retries_at_once)
{
    for (int64_t attempt = 1; attempt <= 100; attempt++) {
        cr_assert_eq(cohort_task_retry_delay_ms(0, attempt), 0);
        cr_assert_eq(cohort_task_retry_delay_ms(-5, attempt), 0);
    }
    cr_assert_eq(cohort_task_retry_delay_ms(INT64_MIN, INT64_MAX), 0);
}

Test(retry, saturates_at_the_maximum)
{
    /* 1000 * 2^19 = 524,288,000 is still below the 7-day cap of 604,800,000; 2^20 is not. */
    cr_assert_eq(cohort_task_retry_delay_ms(1000, 20), 524288000LL);
    cr_assert_eq(cohort_task_retry_delay_ms(1000, 21), COHORT_RETRY_DELAY_MAX_MS);
    cr_assert_eq(cohort_task_retry_delay_ms(1000, 22), COHORT_RETRY_DELAY_MAX_MS);
    /* a base above the cap is capped even on the first retry */
    cr_assert_eq(cohort_task_retry_delay_ms(COHORT_RETRY_DELAY_MAX_MS + 1, 1),
                 COHORT_RETRY_DELAY_MAX_MS);
    cr_assert_eq(cohort_task_retry_delay_ms(COHORT_RETRY_DELAY_MAX_MS, 1),
                 COHORT_RETRY_DELAY_MAX_MS);
}

Test(retry, huge_attempts_never_overflow)
{
    /* Doubling 1 ms 63 times or INT64_MAX once would overflow int64; the schedule must
     * saturate instead of wrapping to a negative or small delay. */
    static const int64_t bases[] = {1, 7, 1000, 20000, INT64_MAX / 2, INT64_MAX};
    static const int64_t attempts[] = {62, 63, 64, 65, 1000, 1000000, INT32_MAX, INT64_MAX};
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
        for (size_t a = 0; a < sizeof attempts / sizeof attempts[0]; a++)
            cr_assert_eq(cohort_task_retry_delay_ms(bases[b], attempts[a]),
                         COHORT_RETRY_DELAY_MAX_MS, "base %lld attempt %lld: got %lld",
                         (long long)bases[b], (long long)attempts[a],
                         (long long)cohort_task_retry_delay_ms(bases[b], attempts[a]));
    cr_assert_eq(cohort_task_retry_delay_ms(INT64_MAX, 1), COHORT_RETRY_DELAY_MAX_MS);
}

Test(retry, schedule_is_monotonic_and_bounded)
{
    static const int64_t bases[] = {1, 3, 50, 1000, 20000, 86400000};
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        int64_t previous = 0;
        for (int64_t attempt = 1; attempt <= 200; attempt++) {
            int64_t d = cohort_task_retry_delay_ms(bases[b], attempt);
            cr_assert_geq(d, previous, "base %lld: attempt %lld waits %lld < %lld",
                          (long long)bases[b], (long long)attempt, (long long)d,
                          (long long)previous);
            cr_assert_leq(d, COHORT_RETRY_DELAY_MAX_MS);
            cr_assert_geq(d, bases[b] < COHORT_RETRY_DELAY_MAX_MS ? bases[b] : 0);
            previous = d;
        }
        cr_assert_eq(previous, COHORT_RETRY_DELAY_MAX_MS, "base %lld never reaches the cap",
                     (long long)bases[b]);
    }
}
