/*
 * upkeep.c - the primary's housekeeping of a queue and the workers' check-ins: repairing
 * tasks written by hand, promoting overdue ones, check-ins, releasing and resetting claims,
 * purging finished tasks, adopting tracked tasks that missed their batch.
 *
 * Each is one or two bulk commands whose filters re-check the state they change, so running
 * one twice, or on two nodes during a takeover, never undoes or doubles the other's work.
 */
#include "store/upkeep.h"

#include "store/claims.h"
#include "store/internal.h"
#include "store/operator.h"
#include "store/store.h"

#include "core/clock.h"

#include <stdio.h>

/* How many completed batches back a late tracked task is looked for. A writer reads the open
 * batch and inserts a moment later; it cannot fall further behind than this without pausing
 * through several whole batches. The bound keeps the query on a short range of the
 * batch_status index instead of every retained task. */
#define STRAGGLER_BATCHES 8

bool cohort_store_repair_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, bool check_types, int64_t *made_due,
                               int64_t *quarantined, bson_error_t *error)
{
    *made_due = *quarantined = 0;
    bson_t *missing = BCON_NEW("status", BCON_UTF8("pending"), "run_at", "{", "$exists",
                               BCON_BOOL(false), "}");
    bson_t *due = BCON_NEW("$currentDate", "{", "run_at", BCON_BOOL(true), "}");
    bool ok = store_update_queue(store, client, service, missing, due, made_due, error);
    bson_destroy(due);
    bson_destroy(missing);
    if (ok) {
        /* Claims sort on priority: a task without one (written by hand) gets 0. */
        bson_t *unranked = BCON_NEW("status", BCON_UTF8("pending"), "priority", BCON_NULL);
        bson_t *rank = BCON_NEW("$set", "{", "priority", BCON_INT32(0), "}");
        int64_t ranked = 0;
        ok = store_update_queue(store, client, service, unranked, rank, &ranked, error);
        *made_due += ranked;
        bson_destroy(rank);
        bson_destroy(unranked);
    }
    if (ok && check_types) {
        bson_t *malformed = BCON_NEW(
            "status", BCON_UTF8("pending"), "$or", "[", "{", "attempts", "{", "$exists",
            BCON_BOOL(true), "$not", "{", "$type", BCON_UTF8("number"), "}", "}", "}", "{",
            "run_at", "{", "$exists", BCON_BOOL(true), "$not", "{", "$type", BCON_UTF8("date"),
            "}", "}", "}", "]");
        bson_t *fail = BCON_NEW("$set", "{", "status", BCON_UTF8("failed"), "last_error",
                                BCON_UTF8("malformed task: 'attempts' must be a number and "
                                          "'run_at' a date"),
                                "}", "$currentDate", "{", "finished_at", BCON_BOOL(true), "}");
        ok = store_update_queue(store, client, service, malformed, fail, quarantined, error);
        bson_destroy(fail);
        bson_destroy(malformed);
    }
    return ok;
}

bool cohort_store_promote_overdue(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, int64_t now_ms, int64_t boost,
                                  int64_t *promoted, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("not_after", "{", "$lte", BCON_DATE_TIME(now_ms), "}", "status",
                              BCON_UTF8("pending"), "promoted_at", "{", "$exists",
                              BCON_BOOL(false), "}");
    bson_t *update = BCON_NEW("$inc", "{", "priority", BCON_INT32((int32_t)boost), "}",
                              "$currentDate", "{", "promoted_at", BCON_BOOL(true), "}");
    bool ok = store_update_queue(store, client, service, filter, update, promoted, error);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_checkin_tasks(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, const char *node_id, const bson_oid_t *ids,
                                size_t n_ids, bson_error_t *error)
{
    if (n_ids == 0)
        return true;
    bson_t filter = BSON_INITIALIZER, id, in;
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &id);
    BSON_APPEND_ARRAY_BEGIN(&id, "$in", &in);
    for (size_t i = 0; i < n_ids; i++) {
        char key[16];
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
        BSON_APPEND_OID(&in, k, &ids[i]);
    }
    bson_append_array_end(&id, &in);
    bson_append_document_end(&filter, &id);
    BSON_APPEND_UTF8(&filter, "status", "claimed");
    BSON_APPEND_UTF8(&filter, "claimed_by", node_id);
    bson_t *update = BCON_NEW("$currentDate", "{", "heartbeat_at", BCON_BOOL(true), "}");
    bool ok = store_update_queue(store, client, service, &filter, update, NULL, error);
    bson_destroy(update);
    bson_destroy(&filter);
    return ok;
}

/* Why a released attempt was not counted (queue_release). */
#define NOT_COUNTED                                                                                \
    "; attempt not counted: its node may have died of another task it held, so this task "        \
    "runs alone next (suspect)"

/* Queues in `bulk` the release of one claimed task `doc` (its _id, claimed_by, attempts,
 * suspect), conditional on that claim still being held, with a "crashed" entry in its
 * history. Under the suspect rule (`suspects`, the claims of a node), an attempt is counted
 * only if the task was a suspect, which a node runs alone: any other becomes a suspect and
 * its attempt is added to `uncounted`, which max_attempts does not see. `attempts` itself
 * never goes down: with the node it names the claim, so an outcome of the lost claim can
 * never match a later one, even the same node's. A lease that ran out (an external worker's)
 * is counted. */
static bool queue_release(mongoc_bulk_operation_t *bulk, const bson_t *doc, const char *reason,
                          bool suspects, int64_t now_ms, bson_error_t *error)
{
    bson_iter_t id, node, attempts;
    if (!bson_iter_init_find(&id, doc, "_id") || !bson_iter_init_find(&node, doc, "claimed_by") ||
        !bson_iter_init_find(&attempts, doc, "attempts"))
        return true; /* not a claim as Cohort writes it: the next page's filter skips it */
    bool counted = !suspects || cohort_store_task_suspect(doc);
    char why[256];
    snprintf(why, sizeof why, "%s%s", reason, counted ? "" : NOT_COUNTED);
    bson_t filter = BSON_INITIALIZER, update = BSON_INITIALIZER, entry = BSON_INITIALIZER;
    BSON_APPEND_VALUE(&filter, "_id", bson_iter_value(&id));
    BSON_APPEND_UTF8(&filter, "status", "claimed");
    BSON_APPEND_VALUE(&filter, "claimed_by", bson_iter_value(&node));
    BSON_APPEND_VALUE(&filter, "attempts", bson_iter_value(&attempts));
    bson_t set, unset;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    BSON_APPEND_UTF8(&set, "status", "pending");
    BSON_APPEND_NULL(&set, "claimed_by");
    BSON_APPEND_UTF8(&set, "last_error", why);
    if (!counted)
        BSON_APPEND_BOOL(&set, "suspect", true);
    bson_append_document_end(&update, &set);
    if (!counted) {
        bson_t *back = BCON_NEW("$inc", "{", "uncounted", BCON_INT32(1), "}");
        bson_concat(&update, back);
        bson_destroy(back);
    }
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$unset", &unset);
    BSON_APPEND_UTF8(&unset, "group_lock", "");
    BSON_APPEND_UTF8(&unset, "claim_token", "");
    BSON_APPEND_UTF8(&unset, "lease_expires_at", "");
    bson_append_document_end(&update, &unset);
    BSON_APPEND_UTF8(&entry, "event", "crashed");
    BSON_APPEND_VALUE(&entry, "node", bson_iter_value(&node));
    BSON_APPEND_INT32(&entry, "attempt",
                      BSON_ITER_HOLDS_INT32(&attempts) ? bson_iter_int32(&attempts) : 0);
    BSON_APPEND_DATE_TIME(&entry, "at", now_ms);
    BSON_APPEND_UTF8(&entry, "error", why);
    if (!counted)
        BSON_APPEND_BOOL(&entry, "counted", false);
    store_append_history_push(&update, &entry);
    bool ok = mongoc_bulk_operation_update_one_with_opts(bulk, &filter, &update, NULL, error);
    bson_destroy(&entry);
    bson_destroy(&update);
    bson_destroy(&filter);
    return ok;
}

/* A lost claim is the story of an attempt that never reported: each task gets its own
 * history entry (its node and attempt), so the release goes task by task in bulk writes of
 * one page, found in _id order after the last page (each page's memory, whatever the count). */
bool store_release_claims(cohort_store_t *store, mongoc_client_t *client, const char *service,
                          const bson_t *filter, const char *reason, bool suspects,
                          int64_t *released, bson_error_t *error)
{
    if (released)
        *released = 0;
    int64_t now_ms = cohort_clock_cluster_ms();
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t *opts = BCON_NEW("projection", "{", "claimed_by", BCON_INT32(1), "attempts",
                            BCON_INT32(1), "suspect", BCON_INT32(1), "}", "sort", "{", "_id",
                            BCON_INT32(1), "}", "limit", BCON_INT64(COHORT_OPERATOR_PAGE));
    bson_value_t last = {.value_type = BSON_TYPE_EOD};
    bool ok = true, more = true;
    while (ok && more) {
        bson_t page = BSON_INITIALIZER;
        bson_concat(&page, filter);
        if (last.value_type != BSON_TYPE_EOD) {
            bson_t and, after, gt;
            BSON_APPEND_ARRAY_BEGIN(&page, "$and", &and);
            BSON_APPEND_DOCUMENT_BEGIN(&and, "0", &after);
            BSON_APPEND_DOCUMENT_BEGIN(&after, "_id", &gt);
            BSON_APPEND_VALUE(&gt, "$gt", &last);
            bson_append_document_end(&after, &gt);
            bson_append_document_end(&and, &after);
            bson_append_array_end(&page, &and);
        }
        bson_t *bulk_opts = BCON_NEW("ordered", BCON_BOOL(false));
        mongoc_bulk_operation_t *bulk =
            mongoc_collection_create_bulk_operation_with_opts(tasks, bulk_opts);
        mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, &page, opts, NULL);
        const bson_t *doc;
        int64_t n = 0;
        while (ok && mongoc_cursor_next(cursor, &doc)) {
            bson_iter_t id;
            if (bson_iter_init_find(&id, doc, "_id")) {
                bson_value_destroy(&last);
                bson_value_copy(bson_iter_value(&id), &last);
            }
            ok = queue_release(bulk, doc, reason, suspects, now_ms, error);
            n++;
        }
        if (ok)
            ok = !mongoc_cursor_error(cursor, error);
        mongoc_cursor_destroy(cursor);
        int64_t matched = 0;
        if (ok && n > 0)
            ok = store_bulk_execute(bulk, "nModified", &matched, error);
        if (released)
            *released += matched;
        more = n == COHORT_OPERATOR_PAGE;
        mongoc_bulk_operation_destroy(bulk);
        bson_destroy(bulk_opts);
        bson_destroy(&page);
    }
    bson_value_destroy(&last);
    bson_destroy(opts);
    mongoc_collection_destroy(tasks);
    return ok;
}

bool cohort_store_release_claims(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *node_id, int64_t *released,
                                 bson_error_t *error)
{
    bson_t *filter = BCON_NEW("status", BCON_UTF8("claimed"), "claimed_by", BCON_UTF8(node_id));
    bool ok = store_release_claims(store, client, service, filter,
                                   "released: its node restarted while running it", true,
                                   released, error);
    bson_destroy(filter);
    return ok;
}

/* Claims made before check-ins existed have only claimed_at. An external worker's claim
 * ends with its lease instead (cohort_store_expire_leases). */
bson_t *store_stalled_filter(int64_t cutoff_ms)
{
    return BCON_NEW("status", BCON_UTF8("claimed"), "$or", "[", "{", "heartbeat_at", "{", "$lt",
                    BCON_DATE_TIME(cutoff_ms), "}", "}", "{", "heartbeat_at", "{", "$exists",
                    BCON_BOOL(false), "}", "claimed_at", "{", "$lt", BCON_DATE_TIME(cutoff_ms), "}",
                    "}", "]", "lease_expires_at", "{", "$exists", BCON_BOOL(false), "}");
}

bool cohort_store_reset_stalled(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, int64_t cutoff_ms, int64_t *reset,
                                bson_error_t *error)
{
    *reset = 0;
    bson_t *filter = store_stalled_filter(cutoff_ms);
    bool ok = store_release_claims(store, client, service, filter,
                                   "stalled: its node stopped checking in; reset to pending",
                                   true, reset, error);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_purge(cohort_store_t *store, mongoc_client_t *client, const char *service,
                        const char *status, int64_t cutoff_ms, int64_t keep_batch_from,
                        int64_t limit, int64_t *deleted, bson_error_t *error)
{
    *deleted = 0;
    bson_t *filter = BCON_NEW("status", BCON_UTF8(status), "finished_at", "{", "$lt",
                              BCON_DATE_TIME(cutoff_ms), "}");
    store_append_outside_open_batches(filter, keep_batch_from);
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "limit",
                            BCON_INT64(limit));
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t ids = BSON_INITIALIZER;
    uint32_t n = 0;
    bool ok = store_find_ids(tasks, filter, opts, &ids, &n, error);
    if (ok && n > 0) {
        /* The status and cutoff again: a task retried meanwhile is not deleted. */
        bson_t del = BSON_INITIALIZER;
        store_append_id_in(&del, &ids);
        BSON_APPEND_UTF8(&del, "status", status);
        ok = store_write(tasks, STORE_DELETE_MANY, &del, NULL, NULL, "deletedCount", deleted,
                         error);
        bson_destroy(&del);
    }
    bson_destroy(&ids);
    mongoc_collection_destroy(tasks);
    bson_destroy(opts);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_adopt_stragglers(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, int64_t completed_before, int64_t open,
                                   int64_t *moved, bson_error_t *error)
{
    *moved = 0;
    /* {tracked, $and: [{$or: [batch in the window, no batch]},
     *                  {$or: [unfinished, succeeded but not acknowledged]}]} */
    bson_t *filter = BCON_NEW(
        "tracked", BCON_BOOL(true), "$and", "[",
        "{", "$or", "[",
        "{", "batch", "{", "$lt", BCON_INT64(completed_before), "$gte",
        BCON_INT64(completed_before - STRAGGLER_BATCHES), "}", "}",
        "{", "batch", "{", "$exists", BCON_BOOL(false), "}", "}",
        "]", "}",
        "{", "$or", "[",
        "{", "status", "{", "$in", "[", BCON_UTF8("pending"), BCON_UTF8("claimed"), "]", "}", "}",
        "{", "status", BCON_UTF8("succeeded"), "acknowledged", "{", "$ne", BCON_BOOL(true), "}",
        "}",
        "]", "}",
        "]");
    bson_t *update = BCON_NEW("$set", "{", "batch", BCON_INT64(open), "}");
    bool ok = store_update_queue(store, client, service, filter, update, moved, error);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}
