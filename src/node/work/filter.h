/*
 * filter.h - the claim filter: what a worker's claims skip. Kinds paused or blocked (the
 * config document's switches, as the election last read them), the whole service when it
 * is paused or blocked, and the groups whose lock is held somewhere (so a claim does not
 * take a task it would only have to give back).
 *
 * The shared filter lives in the service (runtime.h, guarded by the lock); each worker claims
 * with its own copy, refreshed when filter_version moved, so a claim never holds the lock.
 */
#ifndef COHORT_FILTER_H
#define COHORT_FILTER_H

#include <mongoc/mongoc.h>
#include <stdint.h>

#include "node/runtime.h"

/* A worker's own copy of the claim filter (the shared one changes under it); owns its
 * strings. Zero-initialised means empty. */
typedef struct cohort_worker_filter {
    uint64_t version;
    char **kinds;
    size_t n_kinds;
    char **groups;
    size_t n_groups;
} cohort_worker_filter_t;

/* Copies the shared filter into `f` if it changed since the last copy. */
void cohort_filter_refresh(cohort_service_t *service, cohort_worker_filter_t *f);

/* Frees a worker's copy. */
void cohort_filter_release(cohort_worker_filter_t *f);

/* A worker found `group` locked elsewhere: claims skip it until the next tick refreshes the
 * busy groups (at most COHORT_MAX_BUSY_GROUPS are kept). */
void cohort_filter_note_busy_group(cohort_service_t *service, const char *group);

/* This node released `group`'s lock: its claims need not skip the group any more. */
void cohort_filter_forget_busy_group(cohort_service_t *service, const char *group);

/* Main thread, each tick: reads the pause and block switches the election last saw into
 * what claims skip; logs each change once. */
void cohort_filter_apply_switches(cohort_service_t *service);

/* Main thread, each tick: the groups whose lock is held somewhere (one query, only for
 * services that have used groups). On a database error the workers' list stays. */
void cohort_filter_refresh_busy_groups(cohort_service_t *service, mongoc_client_t *client);

/* Frees the shared filter (the service is being destroyed; no worker runs). */
void cohort_filter_clear(cohort_service_t *service);

#endif
