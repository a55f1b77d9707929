/*
 * listing.h - the store's read-only listings for operators: services, nodes, tasks.
 *
 * cohortctl shows whole collections (every service, every node seen in the last day, a
 * service's tasks in claim order). Each listing walks a cursor and hands one document at a
 * time to a callback, so memory stays constant whatever the collection's size, and the
 * caller never touches libmongoc's collection or cursor API itself.
 *
 * Every listing returns false on a database error (filled into `error`), or when the
 * callback returns false: then the callback has filled `error` itself and the walk stopped.
 */
#ifndef COHORT_STORE_LISTING_H
#define COHORT_STORE_LISTING_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* Called with each name; `name` is valid for the call only. False stops the walk. */
typedef bool (*cohort_store_name_fn)(void *user, const char *name, bson_error_t *error);

/* Called with each document; `doc` is valid for the call only. False stops the walk. */
typedef bool (*cohort_store_doc_fn)(void *user, const bson_t *doc, bson_error_t *error);

/* Every service that has a config document, by name. */
bool cohort_store_each_service(cohort_store_t *store, mongoc_client_t *client,
                               cohort_store_name_fn fn, void *user, bson_error_t *error);

/* Every queue collection (queue_<service>), by service name, whether or not the service has
 * a config document: tasks enqueued by other programs can make one before any node runs. */
bool cohort_store_each_queue(cohort_store_t *store, mongoc_client_t *client,
                             cohort_store_name_fn fn, void *user, bson_error_t *error);

/* The longest lease_ms any service's primary declared into *longest_ms (0: none). */
bool cohort_store_longest_lease(cohort_store_t *store, mongoc_client_t *client,
                                int64_t *longest_ms, bson_error_t *error);

/* Every node document with seen_at >= `since_ms` (server time), by node id, without its
 * stats. */
bool cohort_store_each_node(cohort_store_t *store, mongoc_client_t *client, int64_t since_ms,
                            cohort_store_doc_fn fn, void *user, bson_error_t *error);

/* The service's tasks (status NULL: any) in claim order, at most `limit`, without their
 * data and history (cohort_store_list_tasks()'s cursor, walked). */
bool cohort_store_each_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *status, int64_t limit, cohort_store_doc_fn fn,
                            void *user, bson_error_t *error);

#endif
