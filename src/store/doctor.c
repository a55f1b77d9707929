/*
 * doctor.c - the questions `cohortctl doctor` asks the database (see doctor.h): the server's
 * version, topology and concerns, whether change streams open and hold an empty getMore, the
 * queue's indexes against the list services.c creates, the plans of the claim and count
 * queries, and the claims nobody released.
 *
 * A server that lacks a command (the embedded server has no explain and no
 * getDefaultRWConcern) is a finding, not an error: the call says so in its out-structure.
 */
#include "store/doctor.h"

#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/jsondoc.h"
#include "store/indexes.h"
#include "store/internal.h"

/* Copies the string field `key` of `doc` into buf ("" if absent). */
static void copy_utf8(const bson_t *doc, const char *key, char *buf, size_t len)
{
    bson_iter_t it;
    buf[0] = '\0';
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(buf, len, "%s", bson_iter_utf8(&it, NULL));
}

/* A concern document as compact JSON, or "server default" for none. */
static void concern_text(const bson_t *concern, char *buf, size_t len)
{
    if (!concern || bson_empty(concern)) {
        snprintf(buf, len, "server default");
        return;
    }
    char *json = bson_as_relaxed_extended_json(concern, NULL);
    snprintf(buf, len, "%s", json);
    bson_free(json);
}

static void describe_concerns(mongoc_client_t *client, const bson_t *defaults,
                              cohort_doctor_server_t *out)
{
    const mongoc_write_concern_t *wc = mongoc_client_get_write_concern(client);
    const mongoc_read_concern_t *rc = mongoc_client_get_read_concern(client);
    char client_wc[64], client_rc[64], server_wc[64] = "", server_rc[64] = "";
    const char *wtag = mongoc_write_concern_get_wtag(wc);
    int32_t w = mongoc_write_concern_get_w(wc);
    out->unacknowledged = w == MONGOC_WRITE_CONCERN_W_UNACKNOWLEDGED;
    if (wtag)
        snprintf(client_wc, sizeof client_wc, "w: %s", wtag);
    else if (w == MONGOC_WRITE_CONCERN_W_MAJORITY)
        snprintf(client_wc, sizeof client_wc, "w: majority");
    else if (w == MONGOC_WRITE_CONCERN_W_DEFAULT)
        snprintf(client_wc, sizeof client_wc, "unset");
    else
        snprintf(client_wc, sizeof client_wc, "w: %d", w);
    const char *level = mongoc_read_concern_get_level(rc);
    snprintf(client_rc, sizeof client_rc, "%s", level ? level : "unset");
    bson_iter_t it;
    bson_t doc;
    if (defaults && bson_iter_init_find(&it, defaults, "defaultWriteConcern") &&
        cohort_iter_doc(&it, &doc))
        concern_text(&doc, server_wc, sizeof server_wc);
    if (defaults && bson_iter_init_find(&it, defaults, "defaultReadConcern") &&
        cohort_iter_doc(&it, &doc))
        concern_text(&doc, server_rc, sizeof server_rc);
    out->majority_writes =
        w == MONGOC_WRITE_CONCERN_W_MAJORITY ||
        (w == MONGOC_WRITE_CONCERN_W_DEFAULT && !wtag && strstr(server_wc, "majority") != NULL);
    const char *unknown = defaults ? "none set" : "not reported";
    snprintf(out->write_concern, sizeof out->write_concern, "%s (URI), %s (server default)",
             client_wc, server_wc[0] ? server_wc : unknown);
    snprintf(out->read_concern, sizeof out->read_concern, "%s (URI), %s (server default)",
             client_rc, server_rc[0] ? server_rc : unknown);
}

bool cohort_doctor_server(cohort_store_t *store, mongoc_client_t *client,
                          cohort_doctor_server_t *out, bson_error_t *error)
{
    (void)store;
    memset(out, 0, sizeof *out);
    bson_t reply;
    bson_t *cmd = BCON_NEW("buildInfo", BCON_INT32(1));
    bool ok = mongoc_client_command_simple(client, "admin", cmd, NULL, &reply, error);
    bson_destroy(cmd);
    if (!ok) {
        bson_destroy(&reply);
        return false;
    }
    copy_utf8(&reply, "version", out->version, sizeof out->version);
    bson_iter_t it;
    /* Every MongoDB build names its commit; mongo-java-server answers version and
     * versionArray only. */
    out->embedded = !bson_iter_init_find(&it, &reply, "gitVersion");
    bson_destroy(&reply);

    cmd = BCON_NEW("hello", BCON_INT32(1));
    ok = mongoc_client_command_simple(client, "admin", cmd, NULL, &reply, NULL);
    bson_destroy(cmd);
    if (!ok) {
        bson_destroy(&reply);
        cmd = BCON_NEW("isMaster", BCON_INT32(1));
        ok = mongoc_client_command_simple(client, "admin", cmd, NULL, &reply, error);
        bson_destroy(cmd);
        if (!ok) {
            bson_destroy(&reply);
            return false;
        }
    }
    char set_name[128], msg[32];
    copy_utf8(&reply, "setName", set_name, sizeof set_name);
    copy_utf8(&reply, "msg", msg, sizeof msg);
    uint32_t members = 0;
    bson_iter_t hosts;
    if (bson_iter_init_find(&it, &reply, "hosts") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &hosts))
        while (bson_iter_next(&hosts))
            members++;
    bson_destroy(&reply);
    out->sharded = strcmp(msg, "isdbgrid") == 0;
    out->replica_set = set_name[0] != '\0';
    if (out->sharded)
        snprintf(out->topology, sizeof out->topology, "sharded cluster (mongos)");
    else if (out->replica_set)
        snprintf(out->topology, sizeof out->topology, "replica set %s (%u members)", set_name,
                 members);
    else if (out->embedded)
        snprintf(out->topology, sizeof out->topology,
                 "the embedded server (mongo-java-server), one process");
    else
        snprintf(out->topology, sizeof out->topology, "standalone");

    cmd = BCON_NEW("getDefaultRWConcern", BCON_INT32(1));
    bool defaults = mongoc_client_command_simple(client, "admin", cmd, NULL, &reply, NULL);
    bson_destroy(cmd);
    describe_concerns(client, defaults ? &reply : NULL, out);
    bson_destroy(&reply);
    return true;
}

bool cohort_doctor_change_stream(cohort_store_t *store, mongoc_client_t *client,
                                 int64_t max_await_ms, cohort_doctor_stream_t *out,
                                 bson_error_t *error)
{
    (void)error;
    memset(out, 0, sizeof *out);
    mongoc_collection_t *services = store_collection(store, client, "services");
    bson_t pipeline = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("maxAwaitTimeMS", BCON_INT64(max_await_ms));
    mongoc_change_stream_t *stream = mongoc_collection_watch(services, &pipeline, opts);
    bson_error_t why;
    const bson_t *doc;
    if (mongoc_change_stream_error_document(stream, &why, NULL)) {
        snprintf(out->why, sizeof out->why, "%s", why.message);
    } else {
        out->opened = true;
        /* The aggregate's first batch is empty: next() sends one getMore and returns. */
        int64_t start = cohort_clock_monotonic_ms();
        while (mongoc_change_stream_next(stream, &doc))
            start = cohort_clock_monotonic_ms(); /* an event arrived: time the next wait */
        out->waited_ms = cohort_clock_monotonic_ms() - start;
        if (mongoc_change_stream_error_document(stream, &why, NULL)) {
            out->opened = false;
            snprintf(out->why, sizeof out->why, "%s", why.message);
        }
    }
    mongoc_change_stream_destroy(stream);
    bson_destroy(opts);
    bson_destroy(&pipeline);
    mongoc_collection_destroy(services);
    return true;
}

/* Whether two index keys name the same fields in the same order and directions. */
static bool same_key(const bson_t *a, const bson_t *b)
{
    bson_iter_t x, y;
    if (!bson_iter_init(&x, a) || !bson_iter_init(&y, b))
        return false;
    for (;;) {
        bool more_x = bson_iter_next(&x), more_y = bson_iter_next(&y);
        if (!more_x || !more_y)
            return more_x == more_y;
        if (strcmp(bson_iter_key(&x), bson_iter_key(&y)) != 0 ||
            bson_iter_as_int64(&x) != bson_iter_as_int64(&y))
            return false;
    }
}

/* The sub-document `key` of `doc` as a static bson_t (false if absent). */
static bool sub_document(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    uint32_t n;
    const uint8_t *data;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &n, &data);
    return bson_init_static(out, data, n);
}

/* Whether `existing` (listIndexes' documents) holds an index named like `spec` with its key. */
static bool has_index(const bson_t *existing, const bson_t *spec)
{
    bson_t want_key, have_key, one;
    const char *name = NULL;
    bson_iter_t it, all;
    if (!sub_document(spec, "key", &want_key) || !bson_iter_init_find(&it, spec, "name"))
        return false;
    name = bson_iter_utf8(&it, NULL);
    bson_iter_init(&all, existing);
    while (bson_iter_next(&all)) {
        uint32_t n;
        const uint8_t *data;
        bson_iter_document(&all, &n, &data);
        bson_init_static(&one, data, n);
        if (bson_iter_init_find(&it, &one, "name") && BSON_ITER_HOLDS_UTF8(&it) &&
            strcmp(bson_iter_utf8(&it, NULL), name) == 0)
            return sub_document(&one, "key", &have_key) && same_key(&want_key, &have_key);
    }
    return false;
}

bool cohort_doctor_missing_indexes(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, char *missing, size_t len,
                                   bson_error_t *error)
{
    missing[0] = '\0';
    mongoc_collection_t *tasks = store_queue(store, client, service);
    mongoc_cursor_t *cursor = mongoc_collection_find_indexes_with_opts(tasks, NULL);
    bson_t existing = BSON_INITIALIZER;
    uint32_t n = 0;
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        char key[16];
        const char *k;
        bson_uint32_to_string(n++, &k, key, sizeof key);
        BSON_APPEND_DOCUMENT(&existing, k, doc);
    }
    bool ok = store_cursor_done(cursor, error);
    mongoc_collection_destroy(tasks);
    bson_t specs;
    cohort_store_queue_indexes(&specs);
    bson_iter_t it, name;
    bson_iter_init(&it, &specs);
    while (ok && bson_iter_next(&it)) {
        bson_t spec;
        uint32_t size;
        const uint8_t *data;
        bson_iter_document(&it, &size, &data);
        bson_init_static(&spec, data, size);
        if (!has_index(&existing, &spec) && bson_iter_init_find(&name, &spec, "name"))
            snprintf(missing + strlen(missing), len - strlen(missing), "%s%s",
                     missing[0] ? ", " : "", bson_iter_utf8(&name, NULL));
    }
    bson_destroy(&specs);
    bson_destroy(&existing);
    return ok;
}

/* Walks a plan tree: every "stage" value, with its indexName, into out (depth first). */
static void walk_plan(bson_iter_t *it, cohort_doctor_plan_t *out)
{
    while (bson_iter_next(it)) {
        const char *key = bson_iter_key(it);
        if (strcmp(key, "rejectedPlans") == 0 || strcmp(key, "executionStats") == 0)
            continue;
        if (strcmp(key, "stage") == 0 && BSON_ITER_HOLDS_UTF8(it)) {
            const char *stage = bson_iter_utf8(it, NULL);
            size_t used = strlen(out->stages);
            snprintf(out->stages + used, sizeof out->stages - used, "%s%s", used ? " < " : "",
                     stage);
            out->index_scan |= strcmp(stage, "IXSCAN") == 0 || strcmp(stage, "COUNT_SCAN") == 0 ||
                               strcmp(stage, "DISTINCT_SCAN") == 0;
            out->collection_scan |= strcmp(stage, "COLLSCAN") == 0;
            out->in_memory_sort |= strcmp(stage, "SORT") == 0;
        } else if (BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) {
            bson_iter_t child;
            if (bson_iter_recurse(it, &child))
                walk_plan(&child, out);
        }
    }
}

/* Runs {explain: cmd} on the database and reads the winning plan's stages. */
static bool explain(cohort_store_t *store, mongoc_client_t *client, bson_t *cmd,
                    cohort_doctor_plan_t *out, bson_error_t *error)
{
    (void)error;
    memset(out, 0, sizeof *out);
    bson_t *wrapped =
        BCON_NEW("explain", BCON_DOCUMENT(cmd), "verbosity", BCON_UTF8("queryPlanner"));
    bson_t reply;
    bson_error_t why;
    mongoc_database_t *db = mongoc_client_get_database(client, store->database);
    bool asked = mongoc_database_command_simple(db, wrapped, NULL, &reply, &why);
    mongoc_database_destroy(db);
    bson_destroy(wrapped);
    if (!asked) {
        snprintf(out->why, sizeof out->why, "%s", why.message);
    } else {
        out->explained = true;
        bson_iter_t it;
        if (bson_iter_init(&it, &reply))
            walk_plan(&it, out);
    }
    bson_destroy(&reply);
    return true;
}

bool cohort_doctor_explain_claim(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, int64_t now_ms, cohort_doctor_plan_t *out,
                                 bson_error_t *error)
{
    char queue[256];
    snprintf(queue, sizeof queue, "queue_%s", service);
    bson_t *cmd = BCON_NEW("find", BCON_UTF8(queue), "filter", "{", "status", BCON_UTF8("pending"),
                           "run_at", "{", "$lte", BCON_DATE_TIME(now_ms), "}", "}", "sort", "{",
                           "priority", BCON_INT32(-1), "run_at", BCON_INT32(1), "_id",
                           BCON_INT32(1), "}", "limit", BCON_INT32(1));
    bool ok = explain(store, client, cmd, out, error);
    bson_destroy(cmd);
    return ok;
}

bool cohort_doctor_explain_count(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, cohort_doctor_plan_t *out,
                                 bson_error_t *error)
{
    char queue[256];
    snprintf(queue, sizeof queue, "queue_%s", service);
    bson_t *cmd =
        BCON_NEW("aggregate", BCON_UTF8(queue), "pipeline", "[", "{", "$sort", "{", "status",
                 BCON_INT32(1), "}", "}", "{", "$group", "{", "_id", BCON_UTF8("$status"), "n", "{",
                 "$sum", BCON_INT32(1), "}", "}", "}", "]", "cursor", "{", "}");
    bool ok = explain(store, client, cmd, out, error);
    bson_destroy(cmd);
    return ok;
}

static bool count_queue(cohort_store_t *store, mongoc_client_t *client, const char *service,
                        const bson_t *filter, int64_t *count, bson_error_t *error)
{
    mongoc_collection_t *tasks = store_queue(store, client, service);
    *count = mongoc_collection_count_documents(tasks, filter, NULL, NULL, NULL, error);
    mongoc_collection_destroy(tasks);
    return *count >= 0;
}

bool cohort_doctor_stale_claims(cohort_store_t *store, mongoc_client_t *client, const char *service,
                                int64_t cutoff_ms, int64_t *count, bson_error_t *error)
{
    bson_t *filter = store_stalled_filter(cutoff_ms);
    bool ok = count_queue(store, client, service, filter, count, error);
    bson_destroy(filter);
    return ok;
}

bool cohort_doctor_expired_leases(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, int64_t now_ms, int64_t *count,
                                  bson_error_t *error)
{
    bson_t *filter = BCON_NEW("lease_expires_at", "{", "$lt", BCON_DATE_TIME(now_ms), "}", "status",
                              BCON_UTF8("claimed"));
    bool ok = count_queue(store, client, service, filter, count, error);
    bson_destroy(filter);
    return ok;
}
