/*
 * prefetch.h - how many tasks one claim asks for. With `claim_batch = auto` (the default) a
 * node claims as many tasks at once as its idle workers and the recent run times justify:
 * short tasks in batches that cover about PREFETCH_WINDOW_MS of work per idle worker (at most
 * COHORT_PREFETCH_CAP), long ones one per idle worker, so none waits on this node while
 * another node idles; when runs turn long, what a batch prefetched beyond one task per idle
 * worker goes back. A number (1-256) pins the size as before.
 *
 * Pure: no lock, no clock, no database. The caller (workers.c) holds the service's lock
 * around both calls and measures the run times itself.
 */
#ifndef COHORT_PREFETCH_H
#define COHORT_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COHORT_PREFETCH_CAP 64        /* tasks an auto claim takes at most */
#define COHORT_PREFETCH_WINDOW_MS 50  /* work an auto claim covers per idle worker */

/* The recent run times: an exponentially weighted mean (each new run weighs 1/4). */
typedef struct cohort_prefetch {
    int64_t mean_us; /* -1: no run measured yet */
} cohort_prefetch_t;

/* What the policy looks at when a worker is about to claim. */
typedef struct cohort_prefetch_input {
    int64_t claim_batch;   /* the setting: 1-256 pins the size; COHORT_CLAIM_BATCH_AUTO */
    size_t idle_workers;   /* workers not running a task, the claiming one included */
    size_t ready_n;        /* tasks already waiting in the ready queue */
    int64_t tick_ms;       /* the window is at most a quarter of it */
} cohort_prefetch_input_t;

/* No run measured yet: an auto claim takes 1 task, as claim_batch = 1 does. */
void cohort_prefetch_init(cohort_prefetch_t *p);

/* A worker ran a task for `run_us` microseconds (negative: ignored). */
void cohort_prefetch_note_run(cohort_prefetch_t *p, int64_t run_us);

/* How many tasks the claim about to be made should ask for, the claimer's own included:
 * pinned, the setting; auto, 1 until a run was measured or while runs take a window or
 * longer, else enough to cover a window per idle worker, less what waits already, in
 * [1, COHORT_PREFETCH_CAP]. */
size_t cohort_prefetch_want(const cohort_prefetch_t *p, const cohort_prefetch_input_t *in);

/* How many of the tasks waiting in the ready queue to give back after a run (auto only):
 * once runs take a window or longer, those beyond one per idle worker (`idle_workers`: the
 * workers not running a task), since a batch claimed while tasks were short must not keep
 * long ones from idle nodes. 0 when pinned or while runs are short. */
size_t cohort_prefetch_surplus(const cohort_prefetch_t *p, const cohort_prefetch_input_t *in);

/* The window of work a batch covers per idle worker: a quarter tick, at most
 * COHORT_PREFETCH_WINDOW_MS. A run longer than this is long. */
int64_t cohort_prefetch_window_ms(int64_t tick_ms);

/* The most tasks a claim may ask for under `claim_batch` (auto: COHORT_PREFETCH_CAP): what
 * a worker's claim and outcome arrays are sized for. */
size_t cohort_prefetch_capacity(int64_t claim_batch);

#endif
