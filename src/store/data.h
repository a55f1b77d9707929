/*
 * data.h - generic data: data.<key> in the service's config document (data.c), read, set,
 * incremented and compared-and-set, fenced on primacy when a node_id is given.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_DATA_H
#define COHORT_STORE_DATA_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* Reads data.<key> of the service's config document. *found is false if unset. */
bool cohort_store_get_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, bson_value_t *value, bool *found,
                           bson_error_t *error);

/* Sets (value != NULL) or unsets data.<key>. With `node_id` non-NULL the write is fenced:
 * it applies only while the document names that node as primary under `epoch`; *applied
 * says whether it did. */
bool cohort_store_set_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, const bson_value_t *value, const char *node_id,
                           int64_t epoch, bool *applied, bson_error_t *error);

/* Adds `delta` to the integer data.<key> (an absent key counts from 0) in one findAndModify
 * and puts the new value in *result. Fenced like cohort_store_set_data. *applied is false,
 * and nothing changed, if the document did not match: no such service, not primary under
 * `epoch`, a value that is not an int32/int64, or a sum that would overflow an int64. */
bool cohort_store_inc_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, int64_t delta, const char *node_id, int64_t epoch,
                           int64_t *result, bool *applied, bson_error_t *error);

/* Sets data.<key> to `value` (NULL: unsets it) in one findAndModify, only if it holds
 * `expected` now (NULL: only if it is absent), compared as the aggregation $eq does (whole
 * values; numbers by value whatever their type). Fenced like cohort_store_set_data.
 * *applied says whether it did. */
bool cohort_store_cas_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, const bson_value_t *expected,
                           const bson_value_t *value, const char *node_id, int64_t epoch,
                           bool *applied, bson_error_t *error);

#endif
