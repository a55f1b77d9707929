/*
 * insert.h - creating tasks in a service's queue (insert.c): one, or many copies in bounded bulk
 * writes, and the partition a new task is placed in.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_INSERT_H
#define COHORT_STORE_INSERT_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/taskopts.h"
#include "store/store.h"

/* cohort_new_task_t (core/taskopts.h): the task to create, its options applied. */

/* How many partitions a queue's tasks are spread over: 1, so every task is in partition 0 and
 * nothing claims by partition. A sharded queue (docs/SCALING.md) would shard on
 * {partition, _id} and let each node claim in its own partition first. */
#define COHORT_TASK_PARTITIONS 1

/* The partition of a new task among `partitions` (>= 1): the tasks that share a key whose
 * uniqueness the server enforces (unique_key, idempotency_key, coalesce_key, group lock) share
 * a partition, chosen by a hash of that key, since a unique index of a sharded collection
 * holds only within one shard key prefix; a task without one is placed by its id. The first
 * of unique_key, idempotency_key, coalesce_key and group decides (docs/SCALING.md: a task
 * with two of them keeps only the first one's guarantee across partitions). Written into
 * every task document as `partition` (int32). Pure. */
int32_t cohort_store_task_partition(const cohort_new_task_t *task, const bson_oid_t *oid,
                                    int32_t partitions);

/* Inserts one task; `oid` (may be NULL) receives its id. With a unique_key that exists
 * already, returns false with *exists true (and nothing inserted). With a coalesce_key that
 * a pending task holds, that task takes the new data instead (*coalesced true, `oid` its id). */
bool cohort_store_insert_task(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const cohort_new_task_t *task, bson_oid_t *oid,
                              bool *exists, bool *coalesced, bson_error_t *error);

/* Inserts `count` copies of `task` with unordered bulk writes of at most 10,000 documents
 * each, so memory stays bounded. *inserted counts what the server acknowledged. */
bool cohort_store_insert_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const cohort_new_task_t *task, int64_t count,
                               int64_t *inserted, bson_error_t *error);

/* Inserts `n` different tasks (none with a coalesce key: those go one by one through
 * cohort_store_insert_task) in one unordered bulk write; *inserted counts what the server
 * acknowledged. The caller bounds `n` and the tasks' size. */
bool cohort_store_insert_task_list(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, const cohort_new_task_t *tasks, size_t n,
                                   int64_t *inserted, bson_error_t *error);

#endif
