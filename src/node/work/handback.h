/*
 * handback.h - the main thread's quick look at prefetched tasks. A batch claim
 * (claim_batch = auto) sizes itself by the recent runs, so when a queue turns from short tasks
 * to long ones the first claim prefetches more than this node can start. Those tasks should
 * run on idle nodes, not wait here: the tick gives them back
 * (cohort_workers_give_back_unstartable), but a tick is long. So a worker whose batch claim
 * left tasks in the ready queue pokes this object (through the service's `prefetched` hook,
 * an eventfd: no lock, no libevent call off the loop thread), and the loop makes the same
 * check a prefetch window later, and again until the ready queue is empty or given back. An
 * idle node pays nothing: no timer runs until a batch claim prefetched something.
 */
#ifndef COHORT_HANDBACK_H
#define COHORT_HANDBACK_H

#include <mongoc/mongoc.h>
#include <stddef.h>

#include "node/runtime.h"

struct event_base;

typedef struct cohort_handback cohort_handback_t;

/* Before the services' workers start: sets each service's `prefetched` hook. NULL and
 * `error` set if the eventfd cannot be made. */
cohort_handback_t *cohort_handback_new(cohort_service_t **services, size_t n_services,
                                       bson_error_t *error);

/* Once the loop exists: listens on it; the checks run with `client` (the main thread's). */
bool cohort_handback_attach(cohort_handback_t *handback, struct event_base *base,
                            mongoc_client_t *client, bson_error_t *error);

/* After the services' workers are joined (they call the hook). NULL is a no-op. */
void cohort_handback_destroy(cohort_handback_t *handback);

#endif
