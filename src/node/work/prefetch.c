/*
 * prefetch.c - the claim size policy (see prefetch.h). A batch claim costs three commands
 * whatever its size and its outcomes go in one bulk write, so short tasks should come in
 * batches; but a task waiting in this node's ready queue cannot run on an idle node, so a
 * batch never holds more than about one window of work per idle worker.
 */
#include "node/work/prefetch.h"

#include "core/settings.h" /* COHORT_CLAIM_BATCH_AUTO */

void cohort_prefetch_init(cohort_prefetch_t *p)
{
    p->mean_us = -1;
}

void cohort_prefetch_note_run(cohort_prefetch_t *p, int64_t run_us)
{
    if (run_us < 0)
        return;
    if (p->mean_us < 0)
        p->mean_us = run_us;
    else
        p->mean_us += (run_us - p->mean_us) / 4;
}

int64_t cohort_prefetch_window_ms(int64_t tick_ms)
{
    int64_t ms = tick_ms / 4 < COHORT_PREFETCH_WINDOW_MS ? tick_ms / 4 : COHORT_PREFETCH_WINDOW_MS;
    return ms < 1 ? 1 : ms;
}

static int64_t window_us(int64_t tick_ms)
{
    return cohort_prefetch_window_ms(tick_ms) * 1000;
}

size_t cohort_prefetch_want(const cohort_prefetch_t *p, const cohort_prefetch_input_t *in)
{
    if (in->claim_batch != COHORT_CLAIM_BATCH_AUTO)
        return in->claim_batch < 1 ? 1 : (size_t)in->claim_batch;
    int64_t window = window_us(in->tick_ms);
    if (p->mean_us < 0 || p->mean_us >= window)
        return 1; /* cold, or long tasks: each idle worker claims its own */
    int64_t per_worker = window / (p->mean_us > 0 ? p->mean_us : 1);
    size_t idle = in->idle_workers > 0 ? in->idle_workers : 1;
    size_t want = COHORT_PREFETCH_CAP;
    if (per_worker < COHORT_PREFETCH_CAP && (size_t)per_worker * idle < COHORT_PREFETCH_CAP)
        want = (size_t)per_worker * idle;
    return want > in->ready_n + 1 ? want - in->ready_n : 1;
}

size_t cohort_prefetch_surplus(const cohort_prefetch_t *p, const cohort_prefetch_input_t *in)
{
    if (in->claim_batch != COHORT_CLAIM_BATCH_AUTO || p->mean_us < window_us(in->tick_ms))
        return 0;
    return in->ready_n > in->idle_workers ? in->ready_n - in->idle_workers : 0;
}

size_t cohort_prefetch_capacity(int64_t claim_batch)
{
    if (claim_batch == COHORT_CLAIM_BATCH_AUTO)
        return COHORT_PREFETCH_CAP;
    return claim_batch < 1 ? 1 : (size_t)claim_batch;
}
