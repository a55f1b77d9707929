/*
 * store.c - Cohort's MongoDB I/O (see store.h).
 *
 * Only standard commands and operators that MongoDB 6.0+ documents are used: findAndModify,
 * update, insert, aggregate with $match/$group, createIndexes, hello. Every write that
 * depends on ownership (renewing primacy, finishing a task) carries the owner in its filter,
 * so a node that lost primacy or a claim writes nothing.
 */
#include "store/store.h"

#include "core/config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define INSERT_CHUNK 10000
/* How many completed batches back a late tracked task is looked for. A writer reads the open
 * batch and inserts a moment later; it cannot fall further behind than this without pausing
 * through several whole batches. The bound keeps the query on a short range of the
 * batch_status index instead of every retained task. */
#define STRAGGLER_BATCHES 8

struct cohort_store {
    mongoc_client_pool_t *pool;
    mongoc_uri_t *uri;
    char *database;
    _Atomic uint64_t commands;
    _Atomic uint64_t command_errors;
};

static void on_command_started(const mongoc_apm_command_started_t *event)
{
    cohort_store_t *store = mongoc_apm_command_started_get_context(event);
    atomic_fetch_add_explicit(&store->commands, 1, memory_order_relaxed);
}

static void on_command_failed(const mongoc_apm_command_failed_t *event)
{
    cohort_store_t *store = mongoc_apm_command_failed_get_context(event);
    atomic_fetch_add_explicit(&store->command_errors, 1, memory_order_relaxed);
}

static void default_option(mongoc_uri_t *uri, const char *option, int32_t value)
{
    if (!mongoc_uri_has_option(uri, option))
        mongoc_uri_set_option_as_int32(uri, option, value);
}

cohort_store_t *cohort_store_new(const char *uri_string, const char *database, const char *appname,
                                 bson_error_t *error)
{
    mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_string, error);
    if (!uri)
        return NULL;
    /* Fail fast when the database is away: a node retries on its next tick anyway. */
    default_option(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 2000);
    default_option(uri, MONGOC_URI_CONNECTTIMEOUTMS, 2000);
    default_option(uri, MONGOC_URI_SOCKETTIMEOUTMS, 15000);
    if (appname && !mongoc_uri_get_appname(uri))
        mongoc_uri_set_appname(uri, appname);

    cohort_store_t *store = calloc(1, sizeof *store);
    if (!store) {
        mongoc_uri_destroy(uri);
        bson_set_error(error, MONGOC_ERROR_CLIENT, 0, "out of memory");
        return NULL;
    }
    store->uri = uri;
    store->database = strdup(database);
    store->pool = mongoc_client_pool_new_with_error(uri, error);
    if (!store->pool) {
        cohort_store_destroy(store);
        return NULL;
    }
    mongoc_client_pool_set_error_api(store->pool, MONGOC_ERROR_API_VERSION_2);
    mongoc_apm_callbacks_t *callbacks = mongoc_apm_callbacks_new();
    mongoc_apm_set_command_started_cb(callbacks, on_command_started);
    mongoc_apm_set_command_failed_cb(callbacks, on_command_failed);
    mongoc_client_pool_set_apm_callbacks(store->pool, callbacks, store);
    mongoc_apm_callbacks_destroy(callbacks);
    return store;
}

void cohort_store_destroy(cohort_store_t *store)
{
    if (!store)
        return;
    if (store->pool)
        mongoc_client_pool_destroy(store->pool);
    mongoc_uri_destroy(store->uri);
    free(store->database);
    free(store);
}

mongoc_client_t *cohort_store_pop(cohort_store_t *store)
{
    return mongoc_client_pool_pop(store->pool);
}

void cohort_store_push(cohort_store_t *store, mongoc_client_t *client)
{
    if (client)
        mongoc_client_pool_push(store->pool, client);
}

const char *cohort_store_database(const cohort_store_t *store)
{
    return store->database;
}

cohort_store_stats_t cohort_store_stats(const cohort_store_t *store)
{
    return (cohort_store_stats_t){
        .commands = atomic_load(&((cohort_store_t *)store)->commands),
        .command_errors = atomic_load(&((cohort_store_t *)store)->command_errors),
    };
}

/* ---- helpers --------------------------------------------------------------------------- */

static void read_batch_state(const bson_t *doc, cohort_batch_state_t *state);
static int64_t int64_field(const bson_t *doc, const char *dotted, int64_t fallback);
static bool fenced_update(cohort_store_t *store, mongoc_client_t *client, const char *service,
                          const char *node_id, int64_t epoch, const bson_t *extra_filter,
                          const bson_t *update, bool *applied, bson_error_t *error);

static mongoc_collection_t *collection(cohort_store_t *store, mongoc_client_t *client,
                                       const char *name)
{
    return mongoc_client_get_collection(client, store->database, name);
}

static mongoc_collection_t *queue(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service)
{
    char name[96];
    snprintf(name, sizeof name, "queue_%s", service);
    return collection(store, client, name);
}

/* updateMany on the service's queue; *modified (may be NULL) receives the count. */
static bool update_queue(cohort_store_t *store, mongoc_client_t *client, const char *service,
                         const bson_t *filter, const bson_t *update, int64_t *modified,
                         bson_error_t *error)
{
    mongoc_collection_t *tasks = queue(store, client, service);
    bson_t reply;
    bool ok = mongoc_collection_update_many(tasks, filter, update, NULL, &reply, error);
    if (modified)
        *modified = ok ? int64_field(&reply, "modifiedCount", 0) : 0;
    bson_destroy(&reply);
    mongoc_collection_destroy(tasks);
    return ok;
}

/* findAndModify; `out` receives a copy of the returned document if there is one. */
static bool find_and_modify(mongoc_collection_t *coll, const bson_t *query, const bson_t *sort,
                            const bson_t *update, const bson_t *fields, bool return_new,
                            bool upsert, bson_t *out, bool *found, bson_error_t *error)
{
    mongoc_find_and_modify_opts_t *opts = mongoc_find_and_modify_opts_new();
    mongoc_find_and_modify_opts_set_update(opts, update);
    if (sort)
        mongoc_find_and_modify_opts_set_sort(opts, sort);
    if (fields)
        mongoc_find_and_modify_opts_set_fields(opts, fields);
    int flags = MONGOC_FIND_AND_MODIFY_NONE;
    if (return_new)
        flags |= MONGOC_FIND_AND_MODIFY_RETURN_NEW;
    if (upsert)
        flags |= MONGOC_FIND_AND_MODIFY_UPSERT;
    mongoc_find_and_modify_opts_set_flags(opts, (mongoc_find_and_modify_flags_t)flags);

    bson_t reply;
    bool ok = mongoc_collection_find_and_modify_with_opts(coll, query, opts, &reply, error);
    *found = false;
    if (ok) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, &reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            uint32_t len;
            const uint8_t *data;
            bson_iter_document(&it, &len, &data);
            bson_t value;
            if (bson_init_static(&value, data, len)) {
                bson_copy_to(&value, out);
                *found = true;
            }
        }
    }
    bson_destroy(&reply);
    mongoc_find_and_modify_opts_destroy(opts);
    return ok;
}


/* Runs a find and collects the _id of every document into the array `ids` (*n of them). */
static bool find_ids(mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
                     bson_t *ids, uint32_t *n, bson_error_t *error)
{
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "_id")) {
            char key[16];
            const char *k;
            bson_uint32_to_string((*n)++, &k, key, sizeof key);
            bson_append_value(ids, k, -1, bson_iter_value(&it));
        }
    }
    bool ok = !mongoc_cursor_error(cursor, error);
    mongoc_cursor_destroy(cursor);
    return ok;
}

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

/* ---- services -------------------------------------------------------------------------- */

bool cohort_store_ensure_service(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, bson_error_t *error)
{
    mongoc_collection_t *services = collection(store, client, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service));
    bson_t *update = BCON_NEW("$setOnInsert", "{", "primary", BCON_NULL, "epoch", BCON_INT64(0),
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

    mongoc_collection_t *tasks = queue(store, client, service);
    bson_t *indexes = BCON_NEW(
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
        BCON_UTF8("kind_status"), "}",
        "10", "{", "key", "{", "group", BCON_INT32(1), "status", BCON_INT32(1), "}", "name",
        BCON_UTF8("group_status"), "}");
    ok = create_indexes(tasks, indexes, error);
    bson_destroy(indexes);
    mongoc_collection_destroy(tasks);
    return ok;
}

bool cohort_store_read_service(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, bson_t *doc, bool *found,
                               bson_error_t *error)
{
    bson_init(doc);
    *found = false;
    mongoc_collection_t *services = collection(store, client, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service));
    bson_t *opts = BCON_NEW("limit", BCON_INT64(1));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(services, filter, opts, NULL);
    const bson_t *next;
    if (mongoc_cursor_next(cursor, &next)) {
        bson_destroy(doc);
        bson_copy_to(next, doc);
        *found = true;
    }
    bool ok = !mongoc_cursor_error(cursor, error);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    return ok;
}

/* ---- nodes and time -------------------------------------------------------------------- */

static bool date_field(const bson_t *doc, const char *key, int64_t *ms)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_DATE_TIME(&it)) {
        *ms = bson_iter_date_time(&it);
        return true;
    }
    return false;
}

bool cohort_store_ping_node(cohort_store_t *store, mongoc_client_t *client,
                            const cohort_node_info_t *node, const bson_t *stats,
                            int64_t *server_ms, bool *expired, bson_error_t *error)
{
    if (expired)
        *expired = false;
    mongoc_collection_t *nodes = collection(store, client, "nodes");
    bson_t *query = BCON_NEW("_id", BCON_UTF8(node->node_id));
    bson_t update = BSON_INITIALIZER, set, current;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    BSON_APPEND_UTF8(&set, "host", node->host);
    BSON_APPEND_INT64(&set, "pid", node->pid);
    BSON_APPEND_UTF8(&set, "version", node->version);
    BSON_APPEND_DATE_TIME(&set, "started_at", node->started_at_ms);
    if (stats)
        BSON_APPEND_DOCUMENT(&set, "stats", stats);
    if (node->services) {
        bson_t list, workers;
        BSON_APPEND_ARRAY_BEGIN(&set, "services", &list);
        for (size_t i = 0; i < node->n_services; i++) {
            char key[16];
            const char *k;
            bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
            BSON_APPEND_UTF8(&list, k, node->services[i]);
        }
        bson_append_array_end(&set, &list);
        BSON_APPEND_DOCUMENT_BEGIN(&set, "workers", &workers);
        for (size_t i = 0; i < node->n_services; i++)
            BSON_APPEND_INT64(&workers, node->services[i], node->workers[i]);
        bson_append_document_end(&set, &workers);
    }
    bson_append_document_end(&update, &set);
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$currentDate", &current);
    BSON_APPEND_BOOL(&current, "seen_at", true);
    bson_append_document_end(&update, &current);
    bson_t *fields = BCON_NEW("seen_at", BCON_INT32(1), "expired", BCON_INT32(1));

    bson_t doc;
    bool found = false;
    bson_init(&doc);
    bool ok = find_and_modify(nodes, query, NULL, &update, fields, true, true, &doc, &found,
                              error);
    if (ok && !(found && date_field(&doc, "seen_at", server_ms))) {
        bson_set_error(error, MONGOC_ERROR_SERVER, 0,
                       "node ping returned no seen_at date (server does not support "
                       "$currentDate?)");
        ok = false;
    }
    bson_iter_t it;
    if (ok && expired && bson_iter_init_find(&it, &doc, "expired") && BSON_ITER_HOLDS_BOOL(&it))
        *expired = bson_iter_bool(&it);
    bson_destroy(&doc);
    bson_destroy(fields);
    bson_destroy(&update);
    bson_destroy(query);
    mongoc_collection_destroy(nodes);
    return ok;
}

bool cohort_store_touch_node(cohort_store_t *store, mongoc_client_t *client, const char *node_id,
                             bson_error_t *error)
{
    mongoc_collection_t *nodes = collection(store, client, "nodes");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(node_id));
    bson_t *update = BCON_NEW("$currentDate", "{", "seen_at", BCON_BOOL(true), "}");
    bool ok = mongoc_collection_update_one(nodes, filter, update, NULL, NULL, error);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(nodes);
    return ok;
}

bool cohort_store_reregister_node(cohort_store_t *store, mongoc_client_t *client,
                                  const char *node_id, bson_error_t *error)
{
    mongoc_collection_t *nodes = collection(store, client, "nodes");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(node_id));
    bson_t *update = BCON_NEW("$unset", "{", "expired", BCON_UTF8(""), "}", "$currentDate", "{",
                              "registered_at", BCON_BOOL(true), "}");
    bool ok = mongoc_collection_update_one(nodes, filter, update, NULL, NULL, error);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(nodes);
    return ok;
}

bool cohort_store_expire_nodes(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, int64_t cutoff_ms, int64_t *nodes_expired,
                               int64_t *released, bson_error_t *error)
{
    *nodes_expired = *released = 0;
    mongoc_collection_t *nodes = collection(store, client, "nodes");
    bson_t *filter = BCON_NEW("seen_at", "{", "$lt", BCON_DATE_TIME(cutoff_ms), "$gte",
                              BCON_DATE_TIME(cutoff_ms - 86400000), "}");
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "limit",
                            BCON_INT64(1000));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(nodes, filter, opts, NULL);
    bson_t ids = BSON_INITIALIZER;
    uint32_t n = 0;
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it)) {
            char key[16];
            const char *k;
            bson_uint32_to_string(n++, &k, key, sizeof key);
            BSON_APPEND_UTF8(&ids, k, bson_iter_utf8(&it, NULL));
        }
    }
    bool ok = !mongoc_cursor_error(cursor, error);
    mongoc_cursor_destroy(cursor);
    if (ok && n > 0) {
        bson_t release = BSON_INITIALIZER, in;
        BSON_APPEND_UTF8(&release, "status", "claimed");
        BSON_APPEND_DOCUMENT_BEGIN(&release, "claimed_by", &in);
        BSON_APPEND_ARRAY(&in, "$in", &ids);
        bson_append_document_end(&release, &in);
        bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("pending"), "claimed_by",
                                  BCON_NULL, "last_error",
                                  BCON_UTF8("released: its node expired (no ping)"), "}",
                                  "$unset", "{", "group_lock", BCON_UTF8(""), "}");
        ok = update_queue(store, client, service, &release, update, released, error);
        bson_destroy(update);
        bson_destroy(&release);

        if (ok) {
            bson_t mark = BSON_INITIALIZER;
            BSON_APPEND_DOCUMENT_BEGIN(&mark, "_id", &in);
            BSON_APPEND_ARRAY(&in, "$in", &ids);
            bson_append_document_end(&mark, &in);
            BSON_APPEND_DOCUMENT_BEGIN(&mark, "expired", &in);
            BSON_APPEND_BOOL(&in, "$ne", true);
            bson_append_document_end(&mark, &in);
            bson_t *set = BCON_NEW("$set", "{", "expired", BCON_BOOL(true), "}", "$currentDate",
                                   "{", "expired_at", BCON_BOOL(true), "}");
            bson_t reply;
            ok = mongoc_collection_update_many(nodes, &mark, set, NULL, &reply, error);
            if (ok)
                *nodes_expired = int64_field(&reply, "modifiedCount", 0);
            bson_destroy(&reply);
            bson_destroy(set);
            bson_destroy(&mark);
        }
    }
    bson_destroy(&ids);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(nodes);
    return ok;
}

bool cohort_store_server_time(cohort_store_t *store, mongoc_client_t *client, int64_t *server_ms,
                              bson_error_t *error)
{
    (void)store;
    /* hello is the current name; servers that predate it (or emulate an older one) answer
     * the legacy isMaster, whose reply carries the same localTime. */
    static const char *const commands[] = {"hello", "isMaster"};
    bool ok = false;
    for (size_t i = 0; i < 2 && !ok; i++) {
        bson_t cmd = BSON_INITIALIZER;
        BSON_APPEND_INT32(&cmd, commands[i], 1);
        bson_t reply;
        ok = mongoc_client_command_simple(client, "admin", &cmd, NULL, &reply, error);
        if (ok && !date_field(&reply, "localTime", server_ms)) {
            bson_set_error(error, MONGOC_ERROR_SERVER, 0,
                           "the server's %s reply has no localTime", commands[i]);
            ok = false;
        }
        bson_destroy(&reply);
        bson_destroy(&cmd);
    }
    return ok;
}

/* ---- election -------------------------------------------------------------------------- */


bool cohort_store_renew_primacy(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, const char *node_id, int64_t epoch,
                                bool *renewed, cohort_batch_state_t *batches,
                                bson_error_t *error)
{
    mongoc_collection_t *services = collection(store, client, "services");
    bson_t *query = BCON_NEW("_id", BCON_UTF8(service), "primary", BCON_UTF8(node_id), "epoch",
                             BCON_INT64(epoch));
    bson_t *update = BCON_NEW("$currentDate", "{", "last_active", BCON_BOOL(true), "}");
    bson_t *fields = BCON_NEW("batch_seq", BCON_INT32(1), "draining", BCON_INT32(1));
    bson_t doc;
    bson_init(&doc);
    bool ok = find_and_modify(services, query, NULL, update, fields, true, false, &doc, renewed,
                              error);
    if (ok && *renewed && batches)
        read_batch_state(&doc, batches);
    bson_destroy(&doc);
    bson_destroy(fields);
    bson_destroy(update);
    bson_destroy(query);
    mongoc_collection_destroy(services);
    return ok;
}

bool cohort_store_take_primacy(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const char *node_id, int64_t cutoff_ms,
                               cohort_takeover_t *result, bson_error_t *error)
{
    return cohort_store_take_lease(store, client, service, node_id, cutoff_ms, -1, 0, result,
                                   error);
}

bool cohort_store_renew_lease(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const char *node_id, int64_t epoch,
                              int64_t lease_ms, int64_t tick_ms, bool *renewed, bson_t *doc,
                              bson_error_t *error)
{
    mongoc_collection_t *services = collection(store, client, "services");
    bson_t *query = BCON_NEW("_id", BCON_UTF8(service), "primary", BCON_UTF8(node_id), "epoch",
                             BCON_INT64(epoch));
    bson_t *update = BCON_NEW("$set", "{", "lease_ms", BCON_INT64(lease_ms), "tick_ms",
                              BCON_INT64(tick_ms), "}", "$currentDate", "{", "last_active",
                              BCON_BOOL(true), "}");
    bson_t *fields = BCON_NEW("batch_seq", BCON_INT32(1), "draining", BCON_INT32(1), "settings",
                              BCON_INT32(1), "lease_ms", BCON_INT32(1), "pause", BCON_INT32(1),
                              "block", BCON_INT32(1));
    bson_init(doc);
    bool ok = find_and_modify(services, query, NULL, update, fields, true, false, doc, renewed,
                              error);
    bson_destroy(fields);
    bson_destroy(update);
    bson_destroy(query);
    mongoc_collection_destroy(services);
    return ok;
}

bool cohort_store_take_lease(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *node_id, int64_t cutoff_ms, int64_t seen_lease_ms,
                             int64_t lease_ms, cohort_takeover_t *result, bson_error_t *error)
{
    memset(result, 0, sizeof *result);
    mongoc_collection_t *services = collection(store, client, "services");
    /* A primary whose last_active is not a date (edited by hand) never renews in a way a
     * takeover could wait for: it is vacant too (a live primary always has a date there). */
    bson_t *query = BCON_NEW("_id", BCON_UTF8(service), "$or", "[", "{", "primary", BCON_NULL,
                             "}", "{", "primary", BCON_UTF8(node_id), "}", "{", "last_active",
                             "{", "$lt", BCON_DATE_TIME(cutoff_ms), "}", "}", "{", "last_active",
                             "{", "$not", "{", "$type", BCON_UTF8("date"), "}", "}", "}", "]");
    if (seen_lease_ms > 0) {
        BSON_APPEND_INT64(query, "lease_ms", seen_lease_ms);
    } else if (seen_lease_ms == 0) {
        bson_t exists;
        BSON_APPEND_DOCUMENT_BEGIN(query, "lease_ms", &exists);
        BSON_APPEND_BOOL(&exists, "$exists", false);
        bson_append_document_end(query, &exists);
    }
    bson_t *update = bson_new(), set;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
    BSON_APPEND_UTF8(&set, "primary", node_id);
    if (lease_ms > 0)
        BSON_APPEND_INT64(&set, "lease_ms", lease_ms);
    bson_append_document_end(update, &set);
    bson_t *rest = BCON_NEW("$inc", "{", "epoch", BCON_INT64(1), "}", "$currentDate", "{",
                            "last_active", BCON_BOOL(true), "elected_at", BCON_BOOL(true), "}");
    bson_concat(update, rest);
    bson_destroy(rest);
    bson_t *fields = BCON_NEW("primary", BCON_INT32(1), "epoch", BCON_INT32(1), "batch_seq",
                              BCON_INT32(1), "draining", BCON_INT32(1));
    bson_t doc;
    bool found = false;
    bson_init(&doc);
    /* The document as it was before: the previous primary, and the epoch we replace. */
    bool ok = find_and_modify(services, query, NULL, update, fields, false, false, &doc, &found,
                              error);
    if (ok && found) {
        bson_iter_t it;
        result->taken = true;
        result->epoch = 1;
        if (bson_iter_init_find(&it, &doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it))
            result->epoch = bson_iter_as_int64(&it) + 1;
        if (bson_iter_init_find(&it, &doc, "primary") && BSON_ITER_HOLDS_UTF8(&it))
            snprintf(result->previous, sizeof result->previous, "%s",
                     bson_iter_utf8(&it, NULL));
        read_batch_state(&doc, &result->batches);
    }
    bson_destroy(&doc);
    bson_destroy(fields);
    bson_destroy(update);
    bson_destroy(query);
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
    bool ok = fenced_update(store, client, service, NULL, 0, NULL, &update, found, error);
    bson_destroy(&update);
    return ok;
}

bool cohort_store_set_switch(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *which, const char *kind, bool on, const char *reason,
                             const char *by, bool *found, bson_error_t *error)
{
    char path[96];
    snprintf(path, sizeof path, "%s.%s", which, kind);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service));
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
    mongoc_collection_t *services = collection(store, client, "services");
    bson_t reply;
    bool ok = mongoc_collection_update_one(services, filter, &update, NULL, &reply, error);
    *found = ok && int64_field(&reply, "matchedCount", 0) == 1;
    bson_destroy(&reply);
    mongoc_collection_destroy(services);
    bson_destroy(&update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_step_down(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *node_id, int64_t epoch, bson_error_t *error)
{
    mongoc_collection_t *services = collection(store, client, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service), "primary", BCON_UTF8(node_id), "epoch",
                              BCON_INT64(epoch));
    bson_t *update = BCON_NEW("$set", "{", "primary", BCON_NULL, "}");
    bool ok = mongoc_collection_update_one(services, filter, update, NULL, NULL, error);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    return ok;
}

/* ---- tasks ----------------------------------------------------------------------------- */

static void build_task(bson_t *doc, const cohort_new_task_t *task, const bson_oid_t *oid)
{
    BSON_APPEND_OID(doc, "_id", oid);
    BSON_APPEND_UTF8(doc, "status", "pending");
    if (task->data) {
        BSON_APPEND_DOCUMENT(doc, "data", task->data);
    } else {
        bson_t empty = BSON_INITIALIZER;
        BSON_APPEND_DOCUMENT(doc, "data", &empty);
    }
    BSON_APPEND_BOOL(doc, "tracked", task->tracked);
    if (task->tracked)
        BSON_APPEND_INT64(doc, "batch", task->batch);
    if (task->unique_key)
        BSON_APPEND_UTF8(doc, "unique_key", task->unique_key);
    BSON_APPEND_DATE_TIME(doc, "created_at", task->now_ms);
    BSON_APPEND_UTF8(doc, "created_by", task->created_by);
    if (task->epoch > 0)
        BSON_APPEND_INT64(doc, "epoch", task->epoch);
    int64_t due = task->not_before_ms > task->now_ms ? task->not_before_ms : task->now_ms;
    BSON_APPEND_DATE_TIME(doc, "run_at", due);
    BSON_APPEND_INT32(doc, "attempts", 0);
    BSON_APPEND_INT32(doc, "priority", (int32_t)task->priority);
    BSON_APPEND_INT32(doc, "base_priority", (int32_t)task->priority);
    if (task->not_before_ms > 0)
        BSON_APPEND_DATE_TIME(doc, "not_before", task->not_before_ms);
    if (task->not_after_ms > 0)
        BSON_APPEND_DATE_TIME(doc, "not_after", task->not_after_ms);
    if (task->timeout_ms > 0 || task->timeout_set)
        BSON_APPEND_INT64(doc, "task_timeout_ms", task->timeout_ms);
    if (task->kind)
        BSON_APPEND_UTF8(doc, "kind", task->kind);
    if (task->group)
        BSON_APPEND_UTF8(doc, "group", task->group);
    if (task->coalesce_key) {
        BSON_APPEND_UTF8(doc, "coalesce_key", task->coalesce_key);
        BSON_APPEND_UTF8(doc, "coalesce_pending", task->coalesce_key);
    }
}

static bool is_duplicate_key(const bson_error_t *error)
{
    return error->code == 11000 || error->code == 11001;
}

/* A task with a coalesce key: the pending task holding the key takes the new data, or, if
 * there is none, the new task is inserted holding it (an upsert; a unique index settles a
 * race between two creators, and the loser retries as an update). */
static bool coalesce_task(mongoc_collection_t *tasks, const cohort_new_task_t *task,
                          bson_oid_t *oid, bool *coalesced, bson_error_t *error)
{
    bool ok = false;
    for (int round = 0; round < 3; round++) {
        bson_oid_t id;
        bson_oid_init(&id, NULL);
        bson_t doc = BSON_INITIALIZER;
        build_task(&doc, task, &id);
        bson_t insert = BSON_INITIALIZER;
        bson_iter_t it;
        bson_iter_init(&it, &doc);
        while (bson_iter_next(&it)) /* everything but data, which $set writes either way */
            if (strcmp(bson_iter_key(&it), "data") != 0)
                bson_append_iter(&insert, NULL, 0, &it);
        bson_t *filter = BCON_NEW("coalesce_pending", BCON_UTF8(task->coalesce_key));
        bson_t update = BSON_INITIALIZER, set;
        BSON_APPEND_DOCUMENT(&update, "$setOnInsert", &insert);
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
        if (task->data) {
            BSON_APPEND_DOCUMENT(&set, "data", task->data);
        } else {
            bson_t empty = BSON_INITIALIZER;
            BSON_APPEND_DOCUMENT(&set, "data", &empty);
        }
        bson_append_document_end(&update, &set);
        bson_t inc;
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
        BSON_APPEND_INT32(&inc, "creations", 1); /* the creations this task stands for */
        bson_append_document_end(&update, &inc);
        bson_t out;
        bool found = false;
        /* The document before the update: none means it was inserted. */
        bson_t *fields = BCON_NEW("_id", BCON_INT32(1));
        ok = find_and_modify(tasks, filter, NULL, &update, fields, false, true, &out, &found,
                             error);
        if (ok && found) {
            bson_iter_t oid_it;
            if (bson_iter_init_find(&oid_it, &out, "_id") && BSON_ITER_HOLDS_OID(&oid_it))
                bson_oid_copy(bson_iter_oid(&oid_it), &id);
            bson_destroy(&out);
        }
        *coalesced = found;
        if (ok && oid)
            bson_oid_copy(&id, oid);
        bson_destroy(fields);
        bson_destroy(&update);
        bson_destroy(filter);
        bson_destroy(&insert);
        bson_destroy(&doc);
        if (ok || !is_duplicate_key(error))
            break;
        /* Another creator inserted the key just now (or the task has a unique_key that
         * exists): try again as an update. */
    }
    return ok;
}

bool cohort_store_insert_task(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const cohort_new_task_t *task, bson_oid_t *oid,
                              bool *exists, bool *coalesced, bson_error_t *error)
{
    if (exists)
        *exists = false;
    bool merged = false;
    mongoc_collection_t *tasks = queue(store, client, service);
    bool ok;
    if (task->coalesce_key) {
        ok = coalesce_task(tasks, task, oid, &merged, error);
    } else {
        bson_oid_t id;
        bson_oid_init(&id, NULL);
        bson_t doc = BSON_INITIALIZER;
        build_task(&doc, task, &id);
        ok = mongoc_collection_insert_one(tasks, &doc, NULL, NULL, error);
        bson_destroy(&doc);
        if (ok && oid)
            bson_oid_copy(&id, oid);
    }
    mongoc_collection_destroy(tasks);
    if (coalesced)
        *coalesced = merged;
    if (!ok && exists && task->unique_key && is_duplicate_key(error))
        *exists = true;
    return ok;
}

bool cohort_store_insert_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const cohort_new_task_t *task, int64_t count,
                               int64_t *inserted, bson_error_t *error)
{
    *inserted = 0;
    mongoc_collection_t *tasks = queue(store, client, service);
    bool ok = true;
    while (ok && *inserted < count) {
        int64_t chunk = count - *inserted < INSERT_CHUNK ? count - *inserted : INSERT_CHUNK;
        bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
        mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(tasks,
                                                                                         opts);
        for (int64_t i = 0; ok && i < chunk; i++) {
            bson_oid_t id;
            bson_oid_init(&id, NULL);
            bson_t doc = BSON_INITIALIZER;
            build_task(&doc, task, &id);
            ok = mongoc_bulk_operation_insert_with_opts(bulk, &doc, NULL, error);
            bson_destroy(&doc);
        }
        bson_t reply;
        if (ok) {
            ok = mongoc_bulk_operation_execute(bulk, &reply, error) != 0;
            *inserted += int64_field(&reply, "nInserted", 0);
            bson_destroy(&reply);
        }
        mongoc_bulk_operation_destroy(bulk);
        bson_destroy(opts);
    }
    mongoc_collection_destroy(tasks);
    return ok;
}

static void append_strings(bson_t *doc, const char *key, const char *const *values, size_t n,
                           bool with_null)
{
    bson_t array;
    BSON_APPEND_ARRAY_BEGIN(doc, key, &array);
    uint32_t i = 0;
    char buf[16];
    const char *k;
    if (with_null) {
        bson_uint32_to_string(i++, &k, buf, sizeof buf);
        BSON_APPEND_NULL(&array, k);
    }
    for (size_t j = 0; j < n; j++) {
        bson_uint32_to_string(i++, &k, buf, sizeof buf);
        BSON_APPEND_UTF8(&array, k, values[j]);
    }
    bson_append_array_end(doc, &array);
}

/* {status: pending, run_at <= now} and the filter's kinds and groups. */
static void claim_query(bson_t *query, int64_t now_ms, const cohort_claim_filter_t *filter)
{
    bson_t range, kind, group;
    BSON_APPEND_UTF8(query, "status", "pending");
    BSON_APPEND_DOCUMENT_BEGIN(query, "run_at", &range);
    BSON_APPEND_DATE_TIME(&range, "$lte", now_ms);
    bson_append_document_end(query, &range);
    if (!filter)
        return;
    if (filter->served_kinds || filter->n_stopped_kinds > 0) {
        BSON_APPEND_DOCUMENT_BEGIN(query, "kind", &kind);
        if (filter->served_kinds) /* null: tasks without a kind */
            append_strings(&kind, "$in", filter->served_kinds, filter->n_served_kinds, true);
        if (filter->n_stopped_kinds > 0)
            append_strings(&kind, "$nin", filter->stopped_kinds, filter->n_stopped_kinds, false);
        bson_append_document_end(query, &kind);
    }
    if (filter->n_busy_groups > 0) {
        BSON_APPEND_DOCUMENT_BEGIN(query, "group", &group);
        append_strings(&group, "$nin", filter->busy_groups, filter->n_busy_groups, false);
        bson_append_document_end(query, &group);
    }
}

static bson_t *claim_sort(void)
{
    return BCON_NEW("priority", BCON_INT32(-1), "run_at", BCON_INT32(1), "_id", BCON_INT32(1));
}

/* The claim itself; `token` (may be NULL) marks the claims of one batch claim. */
static bson_t *claim_update(const char *node_id, const char *token)
{
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("claimed"), "claimed_by",
                              BCON_UTF8(node_id), "claim_token", BCON_UTF8(token ? token : ""),
                              "}", "$inc", "{", "attempts", BCON_INT32(1), "}", "$currentDate",
                              "{", "claimed_at", BCON_BOOL(true), "heartbeat_at", BCON_BOOL(true),
                              "}", "$unset", "{", "coalesce_pending", BCON_UTF8(""), "}");
    return update;
}

bool cohort_store_claim_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *node_id, int64_t now_ms,
                             const cohort_claim_filter_t *filter, bson_t *claimed, bool *found,
                             bson_error_t *error)
{
    bson_init(claimed);
    mongoc_collection_t *tasks = queue(store, client, service);
    bson_t query = BSON_INITIALIZER;
    claim_query(&query, now_ms, filter);
    bson_t *sort = claim_sort();
    bson_t *update = claim_update(node_id, NULL);
    bson_t *fields = BCON_NEW("history", BCON_INT32(0));
    bool ok = find_and_modify(tasks, &query, sort, update, fields, true, false, claimed, found,
                              error);
    bson_destroy(fields);
    bson_destroy(update);
    bson_destroy(sort);
    bson_destroy(&query);
    mongoc_collection_destroy(tasks);
    return ok;
}

/* One round of a batch claim; *candidates receives how many tasks the find returned. */
static bool claim_tasks_once(cohort_store_t *store, mongoc_client_t *client,
                             const char *service, const char *node_id, int64_t now_ms,
                             const cohort_claim_filter_t *filter, size_t max, bson_t *claimed,
                             size_t *n, uint32_t *candidates, bson_error_t *error)
{
    mongoc_collection_t *tasks = queue(store, client, service);
    bson_t query = BSON_INITIALIZER;
    claim_query(&query, now_ms, filter);
    bson_t *sort = claim_sort();

    /* 1. The candidates, in claim order. */
    bson_t opts = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(&opts, "sort", sort);
    BSON_APPEND_INT64(&opts, "limit", (int64_t)max);
    bson_t *projection = BCON_NEW("_id", BCON_INT32(1));
    BSON_APPEND_DOCUMENT(&opts, "projection", projection);
    bson_t ids = BSON_INITIALIZER;
    uint32_t found = 0;
    bool ok = find_ids(tasks, &query, &opts, &ids, &found, error);

    /* 2. Claim those still pending and due, under a token of this call. */
    char token[25];
    bson_oid_t token_oid;
    bson_oid_init(&token_oid, NULL);
    bson_oid_to_string(&token_oid, token);
    if (ok && found > 0) {
        bson_t in;
        BSON_APPEND_DOCUMENT_BEGIN(&query, "_id", &in);
        BSON_APPEND_ARRAY(&in, "$in", &ids);
        bson_append_document_end(&query, &in);
        bson_t *update = claim_update(node_id, token);
        bson_t reply;
        ok = mongoc_collection_update_many(tasks, &query, update, NULL, &reply, error);
        int64_t modified = ok ? int64_field(&reply, "modifiedCount", 0) : 0;
        bson_destroy(&reply);
        bson_destroy(update);

        /* 3. Read back what this token won. */
        if (ok && modified > 0) {
            bson_t *mine = BCON_NEW("claim_token", BCON_UTF8(token), "claimed_by",
                                    BCON_UTF8(node_id));
            bson_t in2;
            BSON_APPEND_DOCUMENT_BEGIN(mine, "_id", &in2);
            BSON_APPEND_ARRAY(&in2, "$in", &ids);
            bson_append_document_end(mine, &in2);
            bson_t read = BSON_INITIALIZER;
            BSON_APPEND_DOCUMENT(&read, "sort", sort);
            bson_t *no_history = BCON_NEW("history", BCON_INT32(0));
            BSON_APPEND_DOCUMENT(&read, "projection", no_history);
            mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, mine, &read, NULL);
            const bson_t *doc;
            while (*n < max && mongoc_cursor_next(cursor, &doc))
                bson_copy_to(doc, &claimed[(*n)++]);
            ok = !mongoc_cursor_error(cursor, error);
            mongoc_cursor_destroy(cursor);
            if (!ok) {
                /* The claims landed but could not be read: give them back by token rather
                 * than leave them to the stall timeout (best effort: the database may be
                 * away, and then they are reset as stalled). */
                for (size_t i = 0; i < *n; i++)
                    bson_destroy(&claimed[i]);
                *n = 0;
                bson_t *back = BCON_NEW("$set", "{", "status", BCON_UTF8("pending"),
                                        "claimed_by", BCON_NULL, "}", "$inc", "{", "attempts",
                                        BCON_INT32(-1), "}", "$unset", "{", "claim_token",
                                        BCON_UTF8(""), "}");
                bson_t *held = BCON_NEW("claim_token", BCON_UTF8(token), "claimed_by",
                                        BCON_UTF8(node_id), "status", BCON_UTF8("claimed"));
                bson_error_t ignored;
                mongoc_collection_update_many(tasks, held, back, NULL, NULL, &ignored);
                bson_destroy(held);
                bson_destroy(back);
            }
            bson_destroy(no_history);
            bson_destroy(&read);
            bson_destroy(mine);
        }
    }
    *candidates = found;
    bson_destroy(&ids);
    bson_destroy(projection);
    bson_destroy(&opts);
    bson_destroy(sort);
    bson_destroy(&query);
    mongoc_collection_destroy(tasks);
    return ok;
}

/* Claimers at the same time see the same first candidates: a round that found some but won
 * none lost them to another claimer, not to an empty queue, so it looks again (at most
 * CLAIM_ROUNDS times) rather than report "nothing to claim" and park the workers. */
#define CLAIM_ROUNDS 4

bool cohort_store_claim_tasks(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const char *node_id, int64_t now_ms,
                              const cohort_claim_filter_t *filter, size_t max, bson_t *claimed,
                              size_t *n, bson_error_t *error)
{
    *n = 0;
    if (max > COHORT_CLAIM_BATCH_MAX)
        max = COHORT_CLAIM_BATCH_MAX;
    if (max == 0)
        return true;
    bool ok = true;
    uint32_t candidates = 1;
    for (int round = 0; ok && *n == 0 && candidates > 0 && round < CLAIM_ROUNDS; round++)
        ok = claim_tasks_once(store, client, service, node_id, now_ms, filter, max, claimed, n,
                              &candidates, error);
    return ok;
}

/* {_id, status: claimed, claimed_by: node, attempts: attempt}: the claim still held. */
static bson_t *held_claim(const bson_value_t *id, const char *node_id, int32_t attempt)
{
    bson_t *filter = bson_new();
    BSON_APPEND_VALUE(filter, "_id", id);
    BSON_APPEND_UTF8(filter, "status", "claimed");
    BSON_APPEND_UTF8(filter, "claimed_by", node_id);
    BSON_APPEND_INT32(filter, "attempts", attempt);
    return filter;
}

bool cohort_store_lock_group(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const bson_value_t *id, const char *node_id, int32_t attempt,
                             const char *group, bool *locked, bson_error_t *error)
{
    *locked = false;
    bson_t *filter = held_claim(id, node_id, attempt);
    bson_t *update = BCON_NEW("$set", "{", "group_lock", BCON_UTF8(group), "}");
    mongoc_collection_t *tasks = queue(store, client, service);
    bson_t reply;
    bool ok = mongoc_collection_update_one(tasks, filter, update, NULL, &reply, error);
    if (ok)
        *locked = int64_field(&reply, "matchedCount", 0) == 1;
    else if (is_duplicate_key(error))
        ok = true; /* the group is busy */
    bson_destroy(&reply);
    mongoc_collection_destroy(tasks);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

/* The update that gives a claim back: pending, the attempt not counted, no lock or token;
 * with `coalesce_key`, the task holds that key for coalescing again. */
static bson_t *unclaim_update(const char *coalesce_key)
{
    bson_t *update = bson_new(), set;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
    BSON_APPEND_UTF8(&set, "status", "pending");
    BSON_APPEND_NULL(&set, "claimed_by");
    if (coalesce_key)
        BSON_APPEND_UTF8(&set, "coalesce_pending", coalesce_key);
    bson_append_document_end(update, &set);
    bson_t *rest = BCON_NEW("$inc", "{", "attempts", BCON_INT32(-1), "}", "$unset", "{",
                            "group_lock", BCON_UTF8(""), "claim_token", BCON_UTF8(""), "}");
    bson_concat(update, rest);
    bson_destroy(rest);
    return update;
}

bool cohort_store_unclaim(cohort_store_t *store, mongoc_client_t *client, const char *service,
                          const bson_value_t *id, const char *node_id, int32_t attempt,
                          const char *coalesce_key, bson_error_t *error)
{
    bson_t *filter = held_claim(id, node_id, attempt);
    mongoc_collection_t *tasks = queue(store, client, service);
    bson_t *update = unclaim_update(coalesce_key);
    bool ok = mongoc_collection_update_one(tasks, filter, update, NULL, NULL, error);
    bson_destroy(update);
    if (!ok && coalesce_key && is_duplicate_key(error)) {
        /* A newer pending task holds the key by now: give it back without. */
        update = unclaim_update(NULL);
        ok = mongoc_collection_update_one(tasks, filter, update, NULL, NULL, error);
        bson_destroy(update);
    }
    mongoc_collection_destroy(tasks);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_busy_groups(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              char **groups, size_t max, size_t *n, bson_error_t *error)
{
    *n = 0;
    mongoc_collection_t *tasks = queue(store, client, service);
    bson_t *filter = BCON_NEW("group_lock", "{", "$exists", BCON_BOOL(true), "}");
    bson_t *opts = BCON_NEW("projection", "{", "group_lock", BCON_INT32(1), "_id", BCON_INT32(0),
                            "}", "limit", BCON_INT64((int64_t)max));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, filter, opts, NULL);
    const bson_t *doc;
    while (*n < max && mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "group_lock") && BSON_ITER_HOLDS_UTF8(&it)) {
            char *name = strdup(bson_iter_utf8(&it, NULL));
            if (name)
                groups[(*n)++] = name;
        }
    }
    bool ok = !mongoc_cursor_error(cursor, error);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(tasks);
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
    bool ok = update_queue(store, client, service, filter, update, promoted, error);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

static const char *finish_name(cohort_finish_t finish)
{
    switch (finish) {
    case COHORT_FINISH_SUCCEEDED:
        return "succeeded";
    case COHORT_FINISH_RETRY:
        return "retry";
    case COHORT_FINISH_FAILED:
        return "failed";
    case COHORT_FINISH_TIMED_OUT:
        return "timed_out";
    }
    return "failed";
}

bool cohort_store_finish_task(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const bson_oid_t *id, const char *node_id,
                              int32_t attempt, const cohort_task_result_t *result, bool *applied,
                              bson_error_t *error)
{
    bson_value_t value = {.value_type = BSON_TYPE_OID};
    bson_oid_copy(id, &value.value.v_oid);
    return cohort_store_finish_task_value(store, client, service, &value, node_id, attempt, result,
                                          applied, error);
}

/* The update that records one outcome (see cohort_store_finish_task_value). */
static void finish_update(bson_t *update, const char *node_id, int32_t attempt,
                          const cohort_task_result_t *result)
{
    bson_t set, push, history, each, entry, current, unset;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
    switch (result->finish) {
    case COHORT_FINISH_SUCCEEDED:
        BSON_APPEND_UTF8(&set, "status", "succeeded");
        break;
    case COHORT_FINISH_RETRY:
        BSON_APPEND_UTF8(&set, "status", "pending");
        BSON_APPEND_DATE_TIME(&set, "run_at", result->retry_at_ms);
        break;
    case COHORT_FINISH_FAILED:
        BSON_APPEND_UTF8(&set, "status", "failed");
        break;
    case COHORT_FINISH_TIMED_OUT:
        BSON_APPEND_UTF8(&set, "status", "timed_out");
        break;
    }
    if (result->error)
        BSON_APPEND_UTF8(&set, "last_error", result->error);
    bson_append_document_end(update, &set);

    BSON_APPEND_DOCUMENT_BEGIN(update, "$unset", &unset);
    BSON_APPEND_UTF8(&unset, "group_lock", "");
    bson_append_document_end(update, &unset);

    if (result->finish != COHORT_FINISH_RETRY) {
        BSON_APPEND_DOCUMENT_BEGIN(update, "$currentDate", &current);
        BSON_APPEND_BOOL(&current, "finished_at", true);
        bson_append_document_end(update, &current);
    }

    BSON_APPEND_DOCUMENT_BEGIN(update, "$push", &push);
    BSON_APPEND_DOCUMENT_BEGIN(&push, "history", &history);
    BSON_APPEND_ARRAY_BEGIN(&history, "$each", &each);
    BSON_APPEND_DOCUMENT_BEGIN(&each, "0", &entry);
    BSON_APPEND_UTF8(&entry, "node", node_id);
    BSON_APPEND_INT32(&entry, "attempt", attempt);
    BSON_APPEND_DATE_TIME(&entry, "started_at", result->started_at_ms);
    BSON_APPEND_DATE_TIME(&entry, "ended_at", result->ended_at_ms);
    BSON_APPEND_UTF8(&entry, "outcome", finish_name(result->finish));
    if (result->error)
        BSON_APPEND_UTF8(&entry, "error", result->error);
    bson_append_document_end(&each, &entry);
    bson_append_array_end(&history, &each);
    BSON_APPEND_INT32(&history, "$slice", -COHORT_HISTORY_MAX);
    bson_append_document_end(&push, &history);
    bson_append_document_end(update, &push);
}

/* One conditional outcome write; `attempts` is the claim's count as stored, `attempt` the
 * number the history records. */
static bool finish_one(cohort_store_t *store, mongoc_client_t *client, const char *service,
                       const bson_value_t *id, const char *node_id, const bson_value_t *attempts,
                       int32_t attempt, const cohort_task_result_t *result, bool *applied,
                       bson_error_t *error)
{
    bson_t *filter = bson_new();
    BSON_APPEND_VALUE(filter, "_id", id);
    BSON_APPEND_UTF8(filter, "status", "claimed");
    BSON_APPEND_UTF8(filter, "claimed_by", node_id);
    BSON_APPEND_VALUE(filter, "attempts", attempts);
    bson_t update = BSON_INITIALIZER;
    finish_update(&update, node_id, attempt, result);
    mongoc_collection_t *tasks = queue(store, client, service);
    bson_t reply;
    bool ok = mongoc_collection_update_one(tasks, filter, &update, NULL, &reply, error);
    *applied = ok && int64_field(&reply, "matchedCount", 0) == 1;
    bson_destroy(&reply);
    mongoc_collection_destroy(tasks);
    bson_destroy(&update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_finish_task_value(cohort_store_t *store, mongoc_client_t *client,
                                    const char *service, const bson_value_t *id,
                                    const char *node_id, int32_t attempt,
                                    const cohort_task_result_t *result, bool *applied,
                                    bson_error_t *error)
{
    bson_value_t attempts = {.value_type = BSON_TYPE_INT32, .value.v_int32 = attempt};
    return finish_one(store, client, service, id, node_id, &attempts, attempt, result, applied,
                      error);
}

bool cohort_store_finish_task_raw(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const bson_value_t *id,
                                  const char *node_id, const bson_value_t *attempts,
                                  const cohort_task_result_t *result, bool *applied,
                                  bson_error_t *error)
{
    return finish_one(store, client, service, id, node_id, attempts, 0, result, applied, error);
}

bool cohort_store_finish_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const char *node_id,
                               const cohort_task_outcome_t *outcomes, size_t n, size_t *applied,
                               bson_error_t *error)
{
    *applied = 0;
    if (n == 0)
        return true;
    mongoc_collection_t *tasks = queue(store, client, service);
    bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
    mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(tasks, opts);
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        const cohort_task_outcome_t *o = &outcomes[i];
        bson_t *filter = held_claim(&o->id, node_id, o->attempt);
        bson_t update = BSON_INITIALIZER;
        finish_update(&update, node_id, o->attempt, &o->result);
        ok = mongoc_bulk_operation_update_one_with_opts(bulk, filter, &update, NULL, error);
        bson_destroy(&update);
        bson_destroy(filter);
    }
    if (ok) {
        bson_t reply;
        ok = mongoc_bulk_operation_execute(bulk, &reply, error) != 0;
        *applied = (size_t)int64_field(&reply, "nMatched", 0);
        bson_destroy(&reply);
    }
    mongoc_bulk_operation_destroy(bulk);
    bson_destroy(opts);
    mongoc_collection_destroy(tasks);
    return ok;
}

bool cohort_store_repair_tasks(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, bool check_types, int64_t *made_due,
                               int64_t *quarantined, bson_error_t *error)
{
    *made_due = *quarantined = 0;
    bson_t *missing = BCON_NEW("status", BCON_UTF8("pending"), "run_at", "{", "$exists",
                               BCON_BOOL(false), "}");
    bson_t *due = BCON_NEW("$currentDate", "{", "run_at", BCON_BOOL(true), "}");
    bson_t *malformed = BCON_NEW(
        "status", BCON_UTF8("pending"), "$or", "[", "{", "attempts", "{", "$exists",
        BCON_BOOL(true), "$not", "{", "$type", BCON_UTF8("number"), "}", "}", "}", "{", "run_at",
        "{", "$exists", BCON_BOOL(true), "$not", "{", "$type", BCON_UTF8("date"), "}", "}", "}",
        "]");
    bson_t *fail = BCON_NEW("$set", "{", "status", BCON_UTF8("failed"), "last_error",
                            BCON_UTF8("malformed task: 'attempts' must be a number and 'run_at' "
                                      "a date"),
                            "}", "$currentDate", "{", "finished_at", BCON_BOOL(true), "}");
    bool ok = update_queue(store, client, service, missing, due, made_due, error);
    if (ok) {
        /* Claims sort on priority: a task without one (written by hand) gets 0. */
        bson_t *unranked = BCON_NEW("status", BCON_UTF8("pending"), "priority", BCON_NULL);
        bson_t *rank = BCON_NEW("$set", "{", "priority", BCON_INT32(0), "}");
        int64_t ranked = 0;
        ok = update_queue(store, client, service, unranked, rank, &ranked, error);
        *made_due += ranked;
        bson_destroy(rank);
        bson_destroy(unranked);
    }
    if (ok && check_types)
        ok = update_queue(store, client, service, malformed, fail, quarantined, error);
    bson_destroy(fail);
    bson_destroy(malformed);
    bson_destroy(due);
    bson_destroy(missing);
    return ok;
}

/* Counts tasks by status with one aggregation: all of them, or those matching `match`. */
static bool count_by_status(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const bson_t *match, cohort_status_counts_t *counts,
                            bson_error_t *error)
{
    memset(counts, 0, sizeof *counts);
    bson_t pipeline = BSON_INITIALIZER, stages, stage;
    BSON_APPEND_ARRAY_BEGIN(&pipeline, "pipeline", &stages);
    uint32_t i = 0;
    if (match) {
        BSON_APPEND_DOCUMENT_BEGIN(&stages, "0", &stage);
        BSON_APPEND_DOCUMENT(&stage, "$match", match);
        bson_append_document_end(&stages, &stage);
        i++;
    }
    bson_t *group = BCON_NEW("$group", "{", "_id", BCON_UTF8("$status"), "n", "{", "$sum",
                             BCON_INT32(1), "}", "}");
    BSON_APPEND_DOCUMENT(&stages, i ? "1" : "0", group);
    bson_destroy(group);
    bson_append_array_end(&pipeline, &stages);

    mongoc_collection_t *tasks = queue(store, client, service);
    mongoc_cursor_t *cursor =
        mongoc_collection_aggregate(tasks, MONGOC_QUERY_NONE, &pipeline, NULL, NULL);
    const bson_t *row;
    while (mongoc_cursor_next(cursor, &row)) {
        bson_iter_t id, n;
        if (!bson_iter_init_find(&n, row, "n") || !BSON_ITER_HOLDS_NUMBER(&n))
            continue;
        const char *status = bson_iter_init_find(&id, row, "_id") && BSON_ITER_HOLDS_UTF8(&id)
                                 ? bson_iter_utf8(&id, NULL)
                                 : "";
        int64_t value = bson_iter_as_int64(&n);
        if (strcmp(status, "pending") == 0)
            counts->pending += value;
        else if (strcmp(status, "claimed") == 0)
            counts->claimed += value;
        else if (strcmp(status, "succeeded") == 0)
            counts->succeeded += value;
        else if (strcmp(status, "failed") == 0)
            counts->failed += value;
        else if (strcmp(status, "timed_out") == 0)
            counts->timed_out += value;
        else
            counts->other += value;
    }
    bool ok = !mongoc_cursor_error(cursor, error);
    mongoc_cursor_destroy(cursor);
    bson_destroy(&pipeline);
    mongoc_collection_destroy(tasks);
    return ok;
}

bool cohort_store_count_by(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *field, cohort_count_row_fn row, void *user,
                           bson_error_t *error)
{
    char path[32];
    snprintf(path, sizeof path, "$%s", field);
    /* $sort and $project on exactly the keys of the {field: 1, status: 1} index let real
     * MongoDB answer from the index alone (a covered, in-order scan; no document fetched). */
    bson_t *pipeline = BCON_NEW(
        "pipeline", "[", "{", "$sort", "{", field, BCON_INT32(1), "status", BCON_INT32(1), "}",
        "}", "{", "$project", "{", "_id", BCON_INT32(0), field, BCON_INT32(1), "status",
        BCON_INT32(1), "}", "}", "{", "$group", "{", "_id", "{", "v", BCON_UTF8(path), "s",
        BCON_UTF8("$status"), "}", "n", "{", "$sum", BCON_INT32(1), "}", "}", "}", "{", "$sort",
        "{", "_id.v", BCON_INT32(1), "_id.s", BCON_INT32(1), "}", "}", "]");
    bson_t *opts = BCON_NEW("allowDiskUse", BCON_BOOL(true));
    mongoc_collection_t *tasks = queue(store, client, service);
    mongoc_cursor_t *cursor =
        mongoc_collection_aggregate(tasks, MONGOC_QUERY_NONE, pipeline, opts, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        const char *value = NULL, *status = "";
        int64_t n = 0;
        if (bson_iter_init_find(&it, doc, "n") && BSON_ITER_HOLDS_NUMBER(&it))
            n = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_t id;
            bson_iter_recurse(&it, &id);
            while (bson_iter_next(&id)) {
                if (strcmp(bson_iter_key(&id), "v") == 0 && BSON_ITER_HOLDS_UTF8(&id))
                    value = bson_iter_utf8(&id, NULL);
                else if (strcmp(bson_iter_key(&id), "s") == 0 && BSON_ITER_HOLDS_UTF8(&id))
                    status = bson_iter_utf8(&id, NULL);
            }
        }
        row(user, value, status, n);
    }
    bool ok = !mongoc_cursor_error(cursor, error);
    mongoc_cursor_destroy(cursor);
    mongoc_collection_destroy(tasks);
    bson_destroy(opts);
    bson_destroy(pipeline);
    return ok;
}

bool cohort_store_count_statuses(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *const *statuses, size_t n,
                                 int64_t *counts, bson_error_t *error)
{
    mongoc_collection_t *tasks = queue(store, client, service);
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        bson_t *filter = BCON_NEW("status", BCON_UTF8(statuses[i]));
        counts[i] = mongoc_collection_count_documents(tasks, filter, NULL, NULL, NULL, error);
        ok = counts[i] >= 0;
        bson_destroy(filter);
    }
    mongoc_collection_destroy(tasks);
    return ok;
}

bool cohort_store_read_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *id, bson_t *doc, bool *found, bson_error_t *error)
{
    bson_init(doc);
    *found = false;
    if (!bson_oid_is_valid(id, strlen(id))) {
        bson_set_error(error, MONGOC_ERROR_COMMAND, MONGOC_ERROR_COMMAND_INVALID_ARG,
                       "'%s' is not a task id (24 hex digits)", id);
        return false;
    }
    bson_oid_t oid;
    bson_oid_init_from_string(&oid, id);
    bson_t *filter = BCON_NEW("_id", BCON_OID(&oid));
    mongoc_collection_t *tasks = queue(store, client, service);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, filter, NULL, NULL);
    const bson_t *row;
    if (mongoc_cursor_next(cursor, &row)) {
        bson_copy_to(row, doc);
        *found = true;
    }
    bool ok = !mongoc_cursor_error(cursor, error);
    mongoc_cursor_destroy(cursor);
    mongoc_collection_destroy(tasks);
    bson_destroy(filter);
    return ok;
}

mongoc_cursor_t *cohort_store_list_tasks(cohort_store_t *store, mongoc_client_t *client,
                                         const char *service, const char *status, int64_t limit)
{
    bson_t filter = BSON_INITIALIZER;
    if (status)
        BSON_APPEND_UTF8(&filter, "status", status);
    bson_t *sort = claim_sort();
    bson_t opts = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(&opts, "sort", sort);
    BSON_APPEND_INT64(&opts, "limit", limit);
    bson_t *projection = BCON_NEW("history", BCON_INT32(0), "data", BCON_INT32(0));
    BSON_APPEND_DOCUMENT(&opts, "projection", projection);
    mongoc_collection_t *tasks = queue(store, client, service);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, &filter, &opts, NULL);
    mongoc_collection_destroy(tasks);
    bson_destroy(projection);
    bson_destroy(&opts);
    bson_destroy(sort);
    bson_destroy(&filter);
    return cursor;
}

bool cohort_store_count_tasks(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              cohort_status_counts_t *counts, bson_error_t *error)
{
    return count_by_status(store, client, service, NULL, counts, error);
}

/* ---- leases, stalled tasks, purging ------------------------------------------------------ */

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
    bool ok = update_queue(store, client, service, &filter, update, NULL, error);
    bson_destroy(update);
    bson_destroy(&filter);
    return ok;
}

bool cohort_store_release_claims(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *node_id, int64_t *released,
                                 bson_error_t *error)
{
    bson_t *filter = BCON_NEW("status", BCON_UTF8("claimed"), "claimed_by", BCON_UTF8(node_id));
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("pending"), "claimed_by",
                              BCON_NULL, "last_error",
                              BCON_UTF8("released: its node restarted while running it"), "}",
                              "$unset", "{", "group_lock", BCON_UTF8(""), "}");
    bool ok = update_queue(store, client, service, filter, update, released, error);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_reset_stalled(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, int64_t cutoff_ms, int64_t *reset,
                                bson_error_t *error)
{
    *reset = 0;
    /* Claims made before check-ins existed have only claimed_at. */
    bson_t *filter = BCON_NEW("status", BCON_UTF8("claimed"), "$or", "[", "{", "heartbeat_at", "{",
                              "$lt", BCON_DATE_TIME(cutoff_ms), "}", "}", "{", "heartbeat_at", "{",
                              "$exists", BCON_BOOL(false), "}", "claimed_at", "{", "$lt",
                              BCON_DATE_TIME(cutoff_ms), "}", "}", "]");
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("pending"), "claimed_by",
                              BCON_NULL, "last_error",
                              BCON_UTF8("stalled: its node stopped checking in; reset to pending"),
                              "}", "$unset", "{", "group_lock", BCON_UTF8(""), "}");
    bool ok = update_queue(store, client, service, filter, update, reset, error);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_purge(cohort_store_t *store, mongoc_client_t *client, const char *service,
                        const char *status, int64_t cutoff_ms, int64_t keep_batch_from,
                        int64_t limit, int64_t *deleted, bson_error_t *error)
{
    *deleted = 0;
    bson_t *filter = BCON_NEW("status", BCON_UTF8(status), "finished_at", "{", "$lt",
                              BCON_DATE_TIME(cutoff_ms), "}", "$or", "[", "{", "tracked", "{",
                              "$ne", BCON_BOOL(true), "}", "}", "{", "batch", "{", "$lt",
                              BCON_INT64(keep_batch_from), "}", "}", "{", "batch", "{",
                              "$exists", BCON_BOOL(false), "}", "}", "]");
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "limit",
                            BCON_INT64(limit));
    mongoc_collection_t *tasks = queue(store, client, service);
    bson_t ids = BSON_INITIALIZER;
    uint32_t n = 0;
    bool ok = find_ids(tasks, filter, opts, &ids, &n, error);
    if (ok && n > 0) {
        /* The status and cutoff again: a task retried meanwhile is not deleted. */
        bson_t del = BSON_INITIALIZER, in;
        BSON_APPEND_DOCUMENT_BEGIN(&del, "_id", &in);
        BSON_APPEND_ARRAY(&in, "$in", &ids);
        bson_append_document_end(&del, &in);
        BSON_APPEND_UTF8(&del, "status", status);
        bson_t reply;
        ok = mongoc_collection_delete_many(tasks, &del, NULL, &reply, error);
        if (ok)
            *deleted = int64_field(&reply, "deletedCount", 0);
        bson_destroy(&reply);
        bson_destroy(&del);
    }
    bson_destroy(&ids);
    mongoc_collection_destroy(tasks);
    bson_destroy(opts);
    bson_destroy(filter);
    return ok;
}

/* ---- batches ----------------------------------------------------------------------------- */

static int64_t int64_field(const bson_t *doc, const char *dotted, int64_t fallback)
{
    bson_iter_t it, child;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, dotted, &child) &&
        BSON_ITER_HOLDS_NUMBER(&child))
        return bson_iter_as_int64(&child);
    return fallback;
}

static void read_batch_state(const bson_t *doc, cohort_batch_state_t *state)
{
    state->open = int64_field(doc, "batch_seq", 1);
    state->draining = int64_field(doc, "draining.seq", 0);
}

void cohort_store_parse_batch_state(const bson_t *doc, cohort_batch_state_t *state)
{
    read_batch_state(doc, state);
}

bool cohort_store_batch_state(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, cohort_batch_state_t *state,
                              bson_error_t *error)
{
    bson_t doc;
    bool found = false;
    bool ok = cohort_store_read_service(store, client, service, &doc, &found, error);
    state->open = 1;
    state->draining = 0;
    if (ok && found)
        read_batch_state(&doc, state);
    bson_destroy(&doc);
    return ok;
}

bool cohort_store_count_batch(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              int64_t batch, cohort_batch_counts_t *counts, bson_error_t *error)
{
    bson_t *match = BCON_NEW("batch", BCON_INT64(batch), "tracked", BCON_BOOL(true));
    cohort_status_counts_t by_status;
    bool ok = count_by_status(store, client, service, match, &by_status, error);
    bson_destroy(match);
    /* Anything not finished (including statuses written by hand) keeps the batch open. */
    counts->unfinished = by_status.pending + by_status.claimed + by_status.other;
    counts->succeeded = by_status.succeeded;
    counts->failed = by_status.failed + by_status.timed_out; /* timed_out: failed, finally */
    return ok;
}

/* An update of the service's config document, fenced on primacy under `epoch`. */
static bool fenced_update(cohort_store_t *store, mongoc_client_t *client, const char *service,
                          const char *node_id, int64_t epoch, const bson_t *extra_filter,
                          const bson_t *update, bool *applied, bson_error_t *error)
{
    mongoc_collection_t *services = collection(store, client, "services");
    bson_t filter = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&filter, "_id", service);
    if (node_id) {
        BSON_APPEND_UTF8(&filter, "primary", node_id);
        BSON_APPEND_INT64(&filter, "epoch", epoch);
    }
    if (extra_filter)
        bson_concat(&filter, extra_filter);
    bson_t reply;
    bool ok = mongoc_collection_update_one(services, &filter, update, NULL, &reply, error);
    *applied = ok && int64_field(&reply, "matchedCount", 0) == 1;
    bson_destroy(&reply);
    bson_destroy(&filter);
    mongoc_collection_destroy(services);
    return ok;
}

bool cohort_store_close_batch(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              const char *node_id, int64_t epoch, int64_t batch, bool *closed,
                              bson_error_t *error)
{
    bson_t *filter = BCON_NEW("batch_seq", BCON_INT64(batch), "draining", BCON_NULL);
    bson_t *update = BCON_NEW("$set", "{", "draining", "{", "seq", BCON_INT64(batch), "epoch",
                              BCON_INT64(epoch), "}", "}", "$inc", "{", "batch_seq",
                              BCON_INT64(1), "}");
    bool ok = fenced_update(store, client, service, node_id, epoch, filter, update, closed, error);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_acknowledge_batch(cohort_store_t *store, mongoc_client_t *client,
                                    const char *service, int64_t batch, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("batch", BCON_INT64(batch), "tracked", BCON_BOOL(true), "status",
                              BCON_UTF8("succeeded"), "acknowledged", "{", "$ne", BCON_BOOL(true),
                              "}");
    bson_t *update = BCON_NEW("$set", "{", "acknowledged", BCON_BOOL(true), "}");
    bool ok = update_queue(store, client, service, filter, update, NULL, error);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

mongoc_cursor_t *cohort_store_batch_cursor(cohort_store_t *store, mongoc_client_t *client,
                                           const char *service, int64_t batch)
{
    bson_t *filter = BCON_NEW("batch", BCON_INT64(batch), "tracked", BCON_BOOL(true), "status",
                              BCON_UTF8("succeeded"));
    bson_t *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}", "projection", "{", "data",
                            BCON_INT32(1), "attempts", BCON_INT32(1), "}", "batchSize",
                            BCON_INT32(500));
    mongoc_collection_t *tasks = queue(store, client, service);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, filter, opts, NULL);
    mongoc_collection_destroy(tasks); /* the cursor keeps what it needs */
    bson_destroy(opts);
    bson_destroy(filter);
    return cursor;
}

bool cohort_store_complete_batch(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, const char *node_id, int64_t epoch,
                                 int64_t batch, const cohort_batch_counts_t *counts,
                                 const bson_t *data_sets, bool *completed, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("draining.seq", BCON_INT64(batch));
    bson_t update = BSON_INITIALIZER, set, unset, current;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    BSON_APPEND_NULL(&set, "draining");
    /* Dotted paths, so $currentDate can fill last_batch.completed_at beside them. */
    BSON_APPEND_INT64(&set, "last_batch.seq", batch);
    BSON_APPEND_INT64(&set, "last_batch.succeeded", counts->succeeded);
    BSON_APPEND_INT64(&set, "last_batch.failed", counts->failed);
    BSON_APPEND_UTF8(&set, "last_batch.completed_by", node_id);
    BSON_APPEND_INT64(&set, "last_batch.epoch", epoch);
    bool any_unset = false;
    bson_iter_t it;
    if (data_sets && bson_iter_init(&it, data_sets)) {
        while (bson_iter_next(&it)) {
            if (BSON_ITER_HOLDS_NULL(&it)) {
                any_unset = true;
                continue;
            }
            char key[128];
            snprintf(key, sizeof key, "data.%s", bson_iter_key(&it));
            bson_append_value(&set, key, -1, bson_iter_value(&it));
        }
    }
    bson_append_document_end(&update, &set);
    if (any_unset) {
        BSON_APPEND_DOCUMENT_BEGIN(&update, "$unset", &unset);
        bson_iter_init(&it, data_sets);
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_NULL(&it))
                continue;
            char key[128];
            snprintf(key, sizeof key, "data.%s", bson_iter_key(&it));
            BSON_APPEND_UTF8(&unset, key, "");
        }
        bson_append_document_end(&update, &unset);
    }
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$currentDate", &current);
    BSON_APPEND_BOOL(&current, "last_batch.completed_at", true);
    bson_append_document_end(&update, &current);
    bson_t inc;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$inc", &inc);
    BSON_APPEND_INT64(&inc, "batches_completed", 1);
    bson_append_document_end(&update, &inc);

    bool ok = fenced_update(store, client, service, node_id, epoch, filter, &update, completed,
                            error);
    bson_destroy(&update);
    bson_destroy(filter);
    return ok;
}

/* ---- generic data ------------------------------------------------------------------------ */

bool cohort_store_get_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, bson_value_t *value, bool *found,
                           bson_error_t *error)
{
    *found = false;
    bson_t doc;
    bool exists = false;
    if (!cohort_store_read_service(store, client, service, &doc, &exists, error)) {
        bson_destroy(&doc);
        return false;
    }
    char path[128];
    snprintf(path, sizeof path, "data.%s", key);
    bson_iter_t it, child;
    if (exists && bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, path, &child)) {
        bson_value_copy(bson_iter_value(&child), value);
        *found = true;
    }
    bson_destroy(&doc);
    return true;
}

bool cohort_store_set_data(cohort_store_t *store, mongoc_client_t *client, const char *service,
                           const char *key, const bson_value_t *value, const char *node_id,
                           int64_t epoch, bool *applied, bson_error_t *error)
{
    char path[128];
    snprintf(path, sizeof path, "data.%s", key);
    bson_t update = BSON_INITIALIZER, op;
    BSON_APPEND_DOCUMENT_BEGIN(&update, value ? "$set" : "$unset", &op);
    if (value)
        bson_append_value(&op, path, -1, value);
    else
        BSON_APPEND_UTF8(&op, path, "");
    bson_append_document_end(&update, &op);
    bool ok = fenced_update(store, client, service, node_id, epoch, NULL, &update, applied, error);
    bson_destroy(&update);
    return ok;
}

bool cohort_store_adopt_stragglers(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, int64_t completed_before, int64_t open,
                                   int64_t *moved, bson_error_t *error)
{
    *moved = 0;
    bson_t *filter = BCON_NEW(
        "tracked", BCON_BOOL(true), "$and", "[", "{", "$or", "[", "{", "batch", "{", "$lt",
        BCON_INT64(completed_before), "$gte", BCON_INT64(completed_before - STRAGGLER_BATCHES),
        "}", "}", "{", "batch", "{", "$exists", BCON_BOOL(false), "}", "}", "]", "}", "{", "$or", "[", "{", "status", "{", "$in", "[", BCON_UTF8("pending"),
        BCON_UTF8("claimed"), "]", "}", "}", "{", "status", BCON_UTF8("succeeded"),
        "acknowledged", "{", "$ne", BCON_BOOL(true), "}", "}", "]", "}", "]");
    bson_t *update = BCON_NEW("$set", "{", "batch", BCON_INT64(open), "}");
    bool ok = update_queue(store, client, service, filter, update, moved, error);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}
