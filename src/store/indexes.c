/*
 * indexes.c - the queue's index specs (see indexes.h): what services.c creates and doctor
 * checks. Each comment names the query the index serves.
 */
#include "store/indexes.h"

void cohort_store_queue_indexes(bson_t *indexes)
{
    bson_t *specs = BCON_NEW(
        /* claims: {status: pending, run_at <= now} sorted by run_at */
        "0", "{", "key", "{", "status", BCON_INT32(1), "run_at", BCON_INT32(1), "}", "name",
        BCON_UTF8("status_run_at"), "}",
        /* purge: {status, finished_at < cutoff} */
        "1", "{", "key", "{", "status", BCON_INT32(1), "finished_at", BCON_INT32(1), "}", "name",
        BCON_UTF8("status_finished_at"), "}",
        /* stalled-task reset: {status: claimed, heartbeat_at < cutoff} */
        "2", "{", "key", "{", "status", BCON_INT32(1), "heartbeat_at", BCON_INT32(1), "}", "name",
        BCON_UTF8("status_heartbeat_at"), "}",
        /* batch counts and the callback's cursor: {batch, status} */
        "3", "{", "key", "{", "batch", BCON_INT32(1), "status", BCON_INT32(1), "}", "name",
        BCON_UTF8("batch_status"), "}",
        /* idempotent creation: at most one task per unique_key (sparse: tasks without one
         * are not indexed) */
        "4", "{", "key", "{", "unique_key", BCON_INT32(1), "}", "name", BCON_UTF8("unique_key"),
        "unique", BCON_BOOL(true), "sparse", BCON_BOOL(true), "}",
        /* claims: {status: pending, run_at <= now} in claim order (equality, sort, range) */
        "5", "{", "key", "{", "status", BCON_INT32(1), "priority", BCON_INT32(-1), "run_at",
        BCON_INT32(1), "_id", BCON_INT32(1), "}", "name", BCON_UTF8("claim_order"), "}",
        /* groups: at most one claimed task holds a group's lock */
        "6", "{", "key", "{", "group_lock", BCON_INT32(1), "}", "name", BCON_UTF8("group_lock"),
        "unique", BCON_BOOL(true), "sparse", BCON_BOOL(true), "}",
        /* coalescing: at most one pending task per coalesce key */
        "7", "{", "key", "{", "coalesce_pending", BCON_INT32(1), "}", "name",
        BCON_UTF8("coalesce_pending"), "unique", BCON_BOOL(true), "sparse", BCON_BOOL(true), "}",
        /* not_after promotion: the few tasks that have a deadline */
        "8", "{", "key", "{", "not_after", BCON_INT32(1), "}", "name", BCON_UTF8("not_after"),
        "sparse", BCON_BOOL(true), "}",
        /* counts by kind and by group */
        "9", "{", "key", "{", "kind", BCON_INT32(1), "status", BCON_INT32(1), "}", "name",
        BCON_UTF8("kind_status"), "}", "10", "{", "key", "{", "group", BCON_INT32(1), "status",
        BCON_INT32(1), "}", "name", BCON_UTF8("group_status"), "}",
        /* the HTTP API's Idempotency-Key: a retried POST finds the task it created */
        "11", "{", "key", "{", "idempotency_key", BCON_INT32(1), "}", "name",
        BCON_UTF8("idempotency_key"), "unique", BCON_BOOL(true), "sparse", BCON_BOOL(true), "}",
        /* external workers' leases: the primary's sweep of the expired ones (leases.c) */
        "12", "{", "key", "{", "lease_expires_at", BCON_INT32(1), "}", "name",
        BCON_UTF8("lease_expires_at"), "sparse", BCON_BOOL(true), "}");
    bson_copy_to(specs, indexes);
    bson_destroy(specs);
}
