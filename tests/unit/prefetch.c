/*
 * prefetch.c - the claim size policy, cohort_prefetch_want(): a pinned claim_batch is used
 * as is; auto claims 1 before any run was measured and while runs take a window (50 ms, at
 * most a quarter tick) or longer, else enough tasks to cover a window per idle worker, less
 * what already waits, never more than COHORT_PREFETCH_CAP; and cohort_prefetch_surplus():
 * once runs are long, the ready tasks beyond one per idle worker go back.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "core/settings.h"
#include "node/work/prefetch.h"

static cohort_prefetch_input_t auto_input(size_t idle, size_t ready)
{
    return (cohort_prefetch_input_t){.claim_batch = COHORT_CLAIM_BATCH_AUTO,
                                     .idle_workers = idle,
                                     .ready_n = ready,
                                     .tick_ms = 1000};
}

static cohort_prefetch_t measured(int64_t run_us)
{
    cohort_prefetch_t p;
    cohort_prefetch_init(&p);
    cohort_prefetch_note_run(&p, run_us);
    return p;
}

Test(prefetch, a_pinned_claim_batch_is_used_as_is)
{
    cohort_prefetch_t p = measured(10);
    for (int64_t k = 1; k <= COHORT_CLAIM_BATCH_MAX; k *= 2) {
        cohort_prefetch_input_t in = auto_input(4, 0);
        in.claim_batch = k;
        cr_assert_eq(cohort_prefetch_want(&p, &in), (size_t)k);
        cr_assert_eq(cohort_prefetch_capacity(k), (size_t)k);
    }
    cr_assert_eq(cohort_prefetch_capacity(COHORT_CLAIM_BATCH_AUTO), COHORT_PREFETCH_CAP);
}

Test(prefetch, cold_start_claims_one)
{
    cohort_prefetch_t p;
    cohort_prefetch_init(&p);
    cohort_prefetch_input_t in = auto_input(8, 0);
    cr_assert_eq(cohort_prefetch_want(&p, &in), 1);
}

Test(prefetch, short_tasks_go_in_capped_batches)
{
    cohort_prefetch_t p = measured(100); /* 0.1 ms: 500 per 50 ms window */
    cohort_prefetch_input_t in = auto_input(1, 0);
    cr_assert_eq(cohort_prefetch_want(&p, &in), COHORT_PREFETCH_CAP);
    p = measured(0); /* too short to measure */
    cr_assert_eq(cohort_prefetch_want(&p, &in), COHORT_PREFETCH_CAP);
}

Test(prefetch, a_batch_covers_one_window_per_idle_worker)
{
    cohort_prefetch_t p = measured(10000); /* 10 ms: 5 per window */
    cohort_prefetch_input_t one = auto_input(1, 0), three = auto_input(3, 0);
    cr_assert_eq(cohort_prefetch_want(&p, &one), 5);
    cr_assert_eq(cohort_prefetch_want(&p, &three), 15);
    cohort_prefetch_input_t waiting = auto_input(3, 4);
    cr_assert_eq(cohort_prefetch_want(&p, &waiting), 11, "what waits already counts");
    cohort_prefetch_input_t full = auto_input(1, 40);
    cr_assert_eq(cohort_prefetch_want(&p, &full), 1, "a claim takes at least its own task");
}

Test(prefetch, long_tasks_are_never_hoarded)
{
    cohort_prefetch_input_t in = auto_input(6, 0);
    cohort_prefetch_t p = measured(50000); /* exactly a window */
    cr_assert_eq(cohort_prefetch_want(&p, &in), 1);
    p = measured(1000000);
    cr_assert_eq(cohort_prefetch_want(&p, &in), 1);
}

Test(prefetch, the_window_is_at_most_a_quarter_tick)
{
    cohort_prefetch_t p = measured(10000); /* 10 ms */
    cohort_prefetch_input_t in = auto_input(1, 0);
    in.tick_ms = 100; /* window 25 ms: 2 per worker */
    cr_assert_eq(cohort_prefetch_want(&p, &in), 2);
    in.tick_ms = 40; /* window 10 ms: a 10 ms task is long */
    cr_assert_eq(cohort_prefetch_want(&p, &in), 1);
}

Test(prefetch, the_mean_follows_recent_runs)
{
    cohort_prefetch_t p = measured(100);
    cohort_prefetch_input_t in = auto_input(2, 0);
    cohort_prefetch_note_run(&p, 1000000); /* one 1 s run among short ones */
    cr_assert_eq(cohort_prefetch_want(&p, &in), 1, "a long run stops the batching at once");
    for (int i = 0; i < 40; i++)
        cohort_prefetch_note_run(&p, 100);
    cr_assert_eq(cohort_prefetch_want(&p, &in), COHORT_PREFETCH_CAP, "short runs bring it back");
    cohort_prefetch_note_run(&p, -5); /* ignored */
    cr_assert_eq(cohort_prefetch_want(&p, &in), COHORT_PREFETCH_CAP);
}

Test(prefetch, long_runs_give_back_what_idle_workers_cannot_start)
{
    cohort_prefetch_t p = measured(1000000);
    cohort_prefetch_input_t in = auto_input(1, 29);
    cr_assert_eq(cohort_prefetch_surplus(&p, &in), 28);
    in = auto_input(2, 2);
    cr_assert_eq(cohort_prefetch_surplus(&p, &in), 0);
    in = auto_input(0, 3);
    cr_assert_eq(cohort_prefetch_surplus(&p, &in), 3);
}

Test(prefetch, short_runs_or_a_pinned_size_keep_the_ready_queue)
{
    cohort_prefetch_t p = measured(100);
    cohort_prefetch_input_t in = auto_input(1, 60);
    cr_assert_eq(cohort_prefetch_surplus(&p, &in), 0);
    p = measured(1000000);
    in.claim_batch = 32;
    cr_assert_eq(cohort_prefetch_surplus(&p, &in), 0, "a pinned claim_batch is the operator's");
    cohort_prefetch_init(&p);
    in.claim_batch = COHORT_CLAIM_BATCH_AUTO;
    cr_assert_eq(cohort_prefetch_surplus(&p, &in), 0, "nothing measured yet");
}
