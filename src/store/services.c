/*
 * services.c - the `services` collection: one config document per service (see
 * docs/SCHEMA.md). Creating it with the queue's indexes, reading it, the operator's writes
 * to it (live settings, pause and block switches, step-down requests) and the primary's clean
 * step-down. The lease itself is primacy.c's, batches batches.c's, generic data data.c's.
 *
 * Creation is idempotent and fills in fields that older documents lack, so a node may run
 * it at every start.
 */
#include "store/indexes.h"
#include "store/nodes.h"
#include "store/services.h"

#include "store/internal.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>

static bool create_indexes(mongoc_collection_t *coll, const bson_t *indexes,
                           bson_error_t *error)
{
    bson_t cmd = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&cmd, "createIndexes", mongoc_collection_get_name(coll));
    BSON_APPEND_ARRAY(&cmd, "indexes", indexes);
    bool ok = mongoc_collection_write_command_with_opts(coll, &cmd, NULL, NULL, error);
    bson_destroy(&cmd);
    return ok;
}

/* The epoch a config document is created with: the database server's clock in ms (hello's
 * localTime), or `seen_epoch` if larger. Every path that creates the document (a node's
 * start-up, a running node's re-creation after a drop, `cohortctl enqueue --create`) comes
 * here, so even a process with no memory of earlier epochs never hands one out twice:
 * - a document created at server time T0 starts at epoch T0 (an older one at 0), and each
 *   election adds 1 and needs a takeover (more than a tick, at least 10 ms), so its epochs
 *   stay below the server's clock (T0 + (T - T0) / 10 < T), however many nodes took over;
 * - the time is the server's own, not the creating host's: a node or cohortctl whose clock is
 *   behind cannot pull the floor down. Only the server's clock going back by more than nine
 *   tenths of the document's age (a restore onto another server, a clock stepped back) could,
 *   and `seen_epoch` (the largest epoch a running node saw) still covers what it saw. */
static bool creation_epoch(cohort_store_t *store, mongoc_client_t *client, int64_t seen_epoch,
                           int64_t *epoch, bson_error_t *error)
{
    int64_t server_ms = 0;
    if (!cohort_store_server_time(store, client, &server_ms, error))
        return false;
    *epoch = server_ms > seen_epoch ? server_ms : seen_epoch;
    return true;
}

bool cohort_store_ensure_service(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, bson_error_t *error)
{
    return cohort_store_ensure_service_after(store, client, service, 0, NULL, error);
}

bool cohort_store_ensure_service_after(cohort_store_t *store, mongoc_client_t *client,
                                       const char *service, int64_t seen_epoch,
                                       int64_t *epoch_floor, bson_error_t *error)
{
    int64_t epoch = 0;
    if (!creation_epoch(store, client, seen_epoch, &epoch, error))
        return false;
    if (epoch_floor)
        *epoch_floor = epoch;
    mongoc_collection_t *services = store_collection(store, client, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service));
    bson_t *update = BCON_NEW("$setOnInsert", "{", "primary", BCON_NULL, "epoch", BCON_INT64(epoch),
                              "last_active", BCON_NULL, "batch_seq", BCON_INT64(1), "draining",
                              BCON_NULL, "batches_completed", BCON_INT64(0), "data", "{", "}",
                              "}", "$currentDate", "{", "seen_at", BCON_BOOL(true), "}");
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bool ok = mongoc_collection_update_one(services, filter, update, opts, NULL, error);
    if (ok) {
        /* Documents created before batches existed lack their fields, and closing a batch
         * is fenced on batch_seq: fill them in. */
        bson_t *old = BCON_NEW("_id", BCON_UTF8(service), "batch_seq", "{", "$exists",
                               BCON_BOOL(false), "}");
        bson_t *fill = BCON_NEW("$set", "{", "batch_seq", BCON_INT64(1), "draining", BCON_NULL,
                                "batches_completed", BCON_INT64(0), "}");
        ok = mongoc_collection_update_one(services, old, fill, NULL, NULL, error);
        bson_destroy(fill);
        bson_destroy(old);
    }
    bson_destroy(opts);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    if (!ok)
        return false;

    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t indexes;
    cohort_store_queue_indexes(&indexes);
    ok = create_indexes(tasks, &indexes, error);
    bson_destroy(&indexes);
    mongoc_collection_destroy(tasks);
    return ok;
}

bool cohort_store_read_service(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, bson_t *doc, bool *found,
                               bson_error_t *error)
{
    mongoc_collection_t *services = store_collection(store, client, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service));
    bool ok = store_find_one(services, filter, doc, found, error);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    return ok;
}

bool cohort_store_read_services(cohort_store_t *store, mongoc_client_t *client,
                                const char *const *names, size_t n, bson_t *docs, bool *found,
                                bson_error_t *error)
{
    for (size_t i = 0; i < n; i++) {
        bson_init(&docs[i]);
        found[i] = false;
    }
    if (n == 0)
        return true;
    mongoc_collection_t *services = store_collection(store, client, "services");
    bson_t filter = BSON_INITIALIZER, id;
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &id);
    store_append_strings(&id, "$in", names, n, false);
    bson_append_document_end(&filter, &id);
    /* Generic data and the schedules' state may be large, and no election needs them. */
    bson_t *opts = BCON_NEW("projection", "{", "data", BCON_INT32(0), "schedules",
                            BCON_INT32(0), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(services, &filter, opts, NULL);
    const bson_t *next;
    while (mongoc_cursor_next(cursor, &next)) {
        bson_iter_t it;
        if (!bson_iter_init_find(&it, next, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
            continue;
        const char *name = bson_iter_utf8(&it, NULL);
        for (size_t i = 0; i < n; i++)
            if (!found[i] && strcmp(names[i], name) == 0) {
                bson_destroy(&docs[i]);
                bson_copy_to(next, &docs[i]);
                found[i] = true;
                break;
            }
    }
    bool ok = store_cursor_done(cursor, error);
    bson_destroy(opts);
    bson_destroy(&filter);
    mongoc_collection_destroy(services);
    return ok;
}

bool cohort_store_set_setting(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              const char *key, int64_t value, bool *found, bson_error_t *error)
{
    char path[96];
    snprintf(path, sizeof path, "settings.%s", key);
    bson_t update = BSON_INITIALIZER, op;
    BSON_APPEND_DOCUMENT_BEGIN(&update, value >= 0 ? "$set" : "$unset", &op);
    if (value >= 0)
        BSON_APPEND_INT64(&op, path, value);
    else
        BSON_APPEND_UTF8(&op, path, "");
    bson_append_document_end(&update, &op);
    bool ok = store_fenced_update(store, client, service, NULL, 0, NULL, &update, found, error);
    bson_destroy(&update);
    return ok;
}

bool cohort_store_switch_is_set(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, const char *which, const char *kind,
                                bool *set, bson_error_t *error)
{
    char path[96];
    snprintf(path, sizeof path, "%s.%s", which, kind);
    mongoc_collection_t *services = store_collection(store, client, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service), path, "{", "$exists", BCON_BOOL(true),
                              "}");
    int64_t n = mongoc_collection_count_documents(services, filter, NULL, NULL, NULL, error);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    *set = n > 0;
    return n >= 0;
}

bool cohort_store_set_switch(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *which, const char *kind, bool on, const char *reason,
                             const char *by, bool *found, bson_error_t *error)
{
    char path[96];
    snprintf(path, sizeof path, "%s.%s", which, kind);
    bson_t update = BSON_INITIALIZER, op;
    if (on) {
        /* Field by field: $set of the whole sub-document would clash with $currentDate. */
        char key[112];
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &op);
        snprintf(key, sizeof key, "%s.reason", path);
        if (reason)
            BSON_APPEND_UTF8(&op, key, reason);
        else
            BSON_APPEND_NULL(&op, key);
        snprintf(key, sizeof key, "%s.by", path);
        BSON_APPEND_UTF8(&op, key, by ? by : "");
        bson_append_document_end(&update, &op);
        snprintf(key, sizeof key, "%s.at", path);
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$currentDate", &op);
        BSON_APPEND_BOOL(&op, key, true);
        bson_append_document_end(&update, &op);
    } else {
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$unset", &op);
        BSON_APPEND_UTF8(&op, path, "");
        bson_append_document_end(&update, &op);
    }
    bool ok = store_fenced_update(store, client, service, NULL, 0, NULL, &update, found, error);
    bson_destroy(&update);
    return ok;
}

/* Appends {$set: {PATH.epoch, PATH.by}, $currentDate: {PATH.at}}: a step-down asked for by
 * `by`. With `node_id` (else NULL) it is the step-down itself: primary null and
 * PATH.node_id too. */
static void append_step_down_record(bson_t *update, const char *path, const char *node_id,
                                    int64_t epoch, const char *by)
{
    char key[64];
    bson_t op;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &op);
    if (node_id) {
        snprintf(key, sizeof key, "%s.node_id", path);
        BSON_APPEND_UTF8(&op, key, node_id);
        BSON_APPEND_NULL(&op, "primary");
    }
    snprintf(key, sizeof key, "%s.epoch", path);
    BSON_APPEND_INT64(&op, key, epoch);
    snprintf(key, sizeof key, "%s.by", path);
    BSON_APPEND_UTF8(&op, key, by);
    bson_append_document_end(update, &op);
    BSON_APPEND_DOCUMENT_BEGIN(update, "$currentDate", &op);
    snprintf(key, sizeof key, "%s.at", path);
    BSON_APPEND_BOOL(&op, key, true);
    bson_append_document_end(update, &op);
}

bool cohort_store_step_down(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *node_id, int64_t epoch, const char *asked_by,
                            bson_error_t *error)
{
    bson_t *update;
    if (asked_by) {
        update = BCON_NEW("$unset", "{", "step_down", BCON_UTF8(""), "}");
        append_step_down_record(update, "stepped_down", node_id, epoch, asked_by);
    } else {
        update = BCON_NEW("$set", "{", "primary", BCON_NULL, "}", "$unset", "{", "step_down",
                          BCON_UTF8(""), "}");
    }
    bool stepped_down; /* false: primacy had moved on already, which is as good */
    bool ok = store_fenced_update(store, client, service, node_id, epoch, NULL, update,
                                  &stepped_down, error);
    bson_destroy(update);
    return ok;
}

bool cohort_store_request_step_down(cohort_store_t *store, mongoc_client_t *client,
                                    const char *service, const char *node_id, int64_t epoch,
                                    const char *by, bool withdraw, bool *applied,
                                    bson_error_t *error)
{
    bson_t *update;
    if (withdraw) {
        update = BCON_NEW("$unset", "{", "step_down", BCON_UTF8(""), "}");
    } else {
        update = bson_new();
        append_step_down_record(update, "step_down", NULL, epoch, by);
    }
    bool ok = store_fenced_update(store, client, service, node_id, epoch, NULL, update, applied,
                                  error);
    bson_destroy(update);
    return ok;
}
