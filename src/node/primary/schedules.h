/*
 * schedules.h - recurring tasks on the primary's tick: each due slot of each `schedule.ID`
 * becomes one task, exactly once, across failovers, split brains of an instant and restarts.
 *
 * How (docs/ARCHITECTURE.md, "Recurring tasks", has the argument): the task of a slot
 * carries the unique key schedule:ID:SLOT, so any second creation of it is a duplicate-key
 * no-op; and the last settled slot is recorded in the config document only after the
 * slot's task exists, fenced on the primary's epoch and compare-and-set on the value read.
 * A new primary resumes from the recorded slot: what its predecessor created but did not
 * record is found existing, and nothing before the record is looked at again.
 *
 * Main thread only, from cohort_service_tick() while this node holds the lease.
 */
#ifndef COHORT_SCHEDULES_H
#define COHORT_SCHEDULES_H

#include <stdint.h>

#include "node/runtime.h"

/* Settles every due slot of the service's schedules under `epoch`: creates their tasks (at
 * most COHORT_SCHEDULE_SLOTS_PER_TICK per schedule; the rest on the next tick), skips what
 * catch_up or a pause says, and records the last slot. Failures are logged; the next tick
 * retries from the recorded slot. */
void cohort_schedules_tick(cohort_service_t *service, mongoc_client_t *client, int64_t epoch);

/* Puts the schedules of `config` (a reloaded file's, which must outlive their use) in force
 * from the next tick, logging what was added, changed or removed. */
void cohort_schedules_reload(cohort_service_t *service, const cohort_service_config_t *config);

#define COHORT_SCHEDULE_SLOTS_PER_TICK 1000

#endif
