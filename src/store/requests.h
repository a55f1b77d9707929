/*
 * requests.h - what the HTTP API asks of a service's queue beyond the CLI's reads: creating
 * a task under an Idempotency-Key, undoing a batch that failed part way, and one keyset page
 * of tasks.
 *
 * Both stay bounded: the idempotent create is one insert (and one indexed read on a retry),
 * the page one find on _id order with a limit, never a skip.
 */
#ifndef COHORT_STORE_REQUESTS_H
#define COHORT_STORE_REQUESTS_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/taskopts.h"
#include "store/store.h"
#include "store/listing.h"

/* cohort_store_insert_task() for a task with task->idempotency_key set: if a task of the
 * service already holds the key (a retried request), `oid` receives that task's id and
 * *replayed is true; nothing is inserted. *exists is true if the task's unique_key exists
 * (then false is returned). *coalesced (may be NULL) as cohort_store_insert_task() says. */
bool cohort_store_insert_task_once(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, const cohort_new_task_t *task,
                                   bson_oid_t *oid, bool *replayed, bool *exists,
                                   bool *coalesced, bson_error_t *error);

/* Undoes part of a request that failed part way: deletes those of the `n` tasks `ids` that
 * are still pending (a node may have claimed one meanwhile: it stays). *deleted counts them. */
bool cohort_store_delete_pending_tasks(cohort_store_t *store, mongoc_client_t *client,
                                       const char *service, const bson_oid_t *ids, size_t n,
                                       int64_t *deleted, bson_error_t *error);

/* A view narrowing a listing to pending tasks of one sort, without a clock: RETRYING holds
 * those that ran before (attempts >= 1) and wait for another attempt at run_at; SCHEDULED
 * those never run that were created with a delay (not_before set, attempts 0). */
typedef enum cohort_task_view {
    COHORT_TASK_VIEW_ALL = 0,
    COHORT_TASK_VIEW_RETRYING,
    COHORT_TASK_VIEW_SCHEDULED,
} cohort_task_view_t;

/* Which tasks a page holds: equality filters (NULL: any), a view, and the id to start after
 * (the last one of the previous page, in the page's order). */
typedef struct cohort_task_page {
    const char *status, *kind, *group;
    cohort_task_view_t view;
    const bson_oid_t *after; /* NULL: from the first */
    bool newest_first;       /* _id descending (newest first) instead of ascending */
    int64_t limit;           /* documents handed to `fn`, at most */
    /* A search by task data (NULL: none): data.<data_path> equal to data_value (as a string,
     * or as a number if it reads as an integer). No index serves it, so the page looks at
     * most COHORT_TASK_SEARCH_SCAN tasks past `after` that match the other filters. */
    const char *data_path, *data_value;
} cohort_task_page_t;
#define COHORT_TASK_SEARCH_SCAN 10000

/* The service's tasks matching `page` in _id order (ascending, or descending if
 * newest_first), each handed to `fn`, without their history (the single-task read has it). */
bool cohort_store_each_task_page(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const cohort_task_page_t *page,
                                 cohort_store_doc_fn fn, void *user, bson_error_t *error);

/* How many of the service's tasks match `page`'s filters and view (its cursor and limit
 * aside) into *total: one countDocuments, served by the status/kind/group indexes. */
bool cohort_store_count_task_page(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const cohort_task_page_t *page,
                                  int64_t *total, bson_error_t *error);

#endif
