/*
 * audit.h - the `audit` collection: one document per operator action taken through the HTTP
 * API (every request to an endpoint that needs the `operate` scope, refused or not): who,
 * what, when, and how it ended (docs/SCHEMA.md). The dashboard's audit page reads it newest
 * first, a page at a time; entries older than COHORT_AUDIT_RETENTION_MS are deleted as new
 * ones arrive.
 */
#ifndef COHORT_STORE_AUDIT_H
#define COHORT_STORE_AUDIT_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/listing.h"
#include "store/store.h"

#define COHORT_AUDIT_RETENTION_MS (90 * 86400000LL)

/* Inserts `entry` ({who, via, method, path, service, body, status, ...}: the caller's) with
 * `at` = `now_ms` and a new ObjectId, after deleting entries older than the retention. */
bool cohort_store_audit(cohort_store_t *store, mongoc_client_t *client, const bson_t *entry,
                        int64_t now_ms, bson_error_t *error);

/* Calls `fn` on up to `limit` entries, newest first, each older than `before` (NULL: from
 * the newest). */
bool cohort_store_each_audit(cohort_store_t *store, mongoc_client_t *client,
                             const bson_oid_t *before, int64_t limit, cohort_store_doc_fn fn,
                             void *user, bson_error_t *error);

#endif
