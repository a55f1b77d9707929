/*
 * timeouts.h - the timeout watchdog of a service under isolation = thread.
 *
 * A thread cannot be killed, so a run past its task_timeout_ms is ended in the database: the
 * watchdog records it timed_out (if the claim is still this node's) and marks its slot wedged
 * until the handler returns, whose late outcome is then dropped (workers.c). One thread per
 * service sleeps until the earliest deadline of its worker slots, so a timeout is recorded
 * within a millisecond or two of its deadline, not at the next tick; and it keeps doing so
 * while the node drains after SIGTERM, when no tick runs. Process isolation needs none: the
 * worker kills its child at the deadline itself (isolate.c).
 */
#ifndef COHORT_TIMEOUTS_H
#define COHORT_TIMEOUTS_H

#include <bson/bson.h>

#include "node/runtime.h"

typedef struct cohort_timeouts cohort_timeouts_t;

/* Starts the watchdog of `service` (borrowed: it must outlive the watchdog, and its slots
 * must stay allocated until cohort_timeouts_stop()). Returns NULL with `error` set if the
 * thread cannot start. Its database writes use a client popped from the service's store for
 * each one. */
cohort_timeouts_t *cohort_timeouts_start(cohort_service_t *service, bson_error_t *error);

/* Any thread, after setting a slot's deadline_ms: the watchdog looks at the slots again.
 * NULL: nothing. */
void cohort_timeouts_poke(cohort_timeouts_t *timeouts);

/* Stops and joins the thread and frees the watchdog. NULL: nothing. */
void cohort_timeouts_stop(cohort_timeouts_t *timeouts);

/* A worker slot of `service` is wedged (delta 1: its task timed out and its handler has not
 * returned) or no longer (-1): counted in the service's wedged_slots and in the process's. */
void cohort_timeouts_note_wedged(cohort_service_t *service, int delta);

/* Wedged slots of every service of this process (workers.c: they do not keep a suspect from
 * running alone, since they may never end). */
size_t cohort_timeouts_wedged_in_process(void);

#endif
