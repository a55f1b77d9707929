/*
 * probe.h - what the probe test handler (probe.c) records, and how a test steers it.
 *
 * The handler is loaded into the test process by the service runtime; the test opens the
 * same object with dlopen() and reaches these functions with dlsym() (see probe.c), so the
 * record below is shared between the two. Every on_tasks_completed call is recorded in
 * order, with the ids it iterated, so a test can compare them with the database.
 */
#ifndef COHORT_TEST_PROBE_H
#define COHORT_TEST_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include <cohort/handler.h>

#define PROBE_MAX_CALLS 32 /* on_tasks_completed calls recorded; later ones only counted */
#define PROBE_MAX_IDS 256  /* task ids recorded per call */
#define PROBE_MAX_UNSUCCESSFUL 16 /* unsuccessful tasks recorded per call */

/* A task cohort_batch_next_unsuccessful() returned. */
typedef struct probe_unsuccessful {
    char id[25];
    char status[16];     /* cohort_task_status() */
    char last_error[96]; /* cohort_task_last_error(), "(null)" if NULL */
} probe_unsuccessful_t;

typedef struct probe_call {
    int64_t batch_id;
    int64_t succeeded, failed; /* what cohort_batch_succeeded/failed said */
    int64_t iterated;          /* tasks cohort_batch_next() returned */
    bool iteration_error;      /* cohort_batch_error() said iteration stopped on an error */
    int64_t epoch;             /* cohort_ctx_epoch() at the start of the call */
    char node[64];             /* cohort_ctx_node_id() */
    bool returned;             /* what the call returned */
    bool read_own_set;         /* with set_key: cohort_get() saw this call's pending value */
    char ids[PROBE_MAX_IDS][25];
    int64_t unsuccessful;      /* tasks cohort_batch_next_unsuccessful() returned */
    probe_unsuccessful_t bad[PROBE_MAX_UNSUCCESSFUL];
} probe_call_t;

typedef struct probe_record {
    int calls; /* on_tasks_completed calls so far */
    probe_call_t call[PROBE_MAX_CALLS];
} probe_record_t;

/* A test's code run inside a callback: return false to make the callback fail. */
typedef bool (*probe_completed_hook_t)(cohort_ctx_t *ctx, cohort_batch_t *batch, void *arg);
typedef bool (*probe_primary_hook_t)(cohort_ctx_t *ctx, void *arg);

/* The exported functions, with the types a test casts dlsym()'s result to. */
typedef probe_record_t *(*probe_record_fn)(void); /* "probe_record" */
typedef void (*probe_reset_fn)(void);             /* "probe_reset": forget calls and hooks */
typedef long long (*probe_processed_fn)(void);    /* "probe_processed": process_task calls */
typedef void (*probe_set_completed_hook_fn)(probe_completed_hook_t hook, void *arg);
typedef void (*probe_set_primary_hook_fn)(probe_primary_hook_t hook, void *arg);

#endif
