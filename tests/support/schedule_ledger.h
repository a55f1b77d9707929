/*
 * schedule_ledger.h - the cluster tests' view of recurring tasks (tests/cluster/schedules*.c):
 * a schedule's state in the service's config document, and the slot ledger of a per-second
 * schedule, read from the tasks' unique keys ("schedule:ID:TIME"), never from the logs.
 */
#ifndef COHORT_TEST_SCHEDULE_LEDGER_H
#define COHORT_TEST_SCHEDULE_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"

/* schedules.<ID> of a service's config document. */
typedef struct ledger_state {
    bool found;
    int64_t last_slot, created, existed, skipped;
} ledger_state_t;

/* Reads schedules.<id> of `service`; false if the document cannot be read. */
bool ledger_read_state(cluster_t *c, const char *service, const char *id, ledger_state_t *out);

/* Polls until schedules.<id>.last_slot is at least `at` (0: exists). */
bool ledger_wait_slot(cluster_t *c, const char *service, const char *id, int64_t at,
                      int64_t timeout_ms, ledger_state_t *out);

/* The ledger of a per-second schedule: tasks per slot second in (from, to]. */
typedef struct ledger {
    int64_t from, to; /* ms, whole seconds */
    int *tasks;       /* per slot: tasks whose unique key names it; owned */
    int64_t n;
    int64_t before, after; /* tasks naming a slot <= from, or > to */
    int64_t malformed;     /* keys of the schedule whose time is not a whole second */
} ledger_t;

/* Reads the ledger (fails the test on a database error); free with ledger_free(). */
void ledger_read(cluster_t *c, const char *service, const char *id, int64_t from, int64_t to,
                 ledger_t *l);
void ledger_free(ledger_t *l);

/* True if the ledger is `skipped` slots without a task, then slots with one task each;
 * otherwise describes the first departure in `why`. The first `predone` slots may have one
 * task even if skipped: a primary killed between creating a slot's task and recording it
 * leaves that task, which its successor's catch_up then counts as skipped. */
bool ledger_explained(const ledger_t *l, int64_t skipped, int64_t predone, char *why,
                      size_t len);

#endif
