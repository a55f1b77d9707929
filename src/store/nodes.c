/*
 * nodes.c - the `nodes` collection and the cluster clock.
 *
 * A node's liveness is the server's time of its last ping ($currentDate), never its own
 * clock, so nodes with skewed clocks agree on who is late. Expiring a node releases its
 * claims in the same pass, before it is marked, so a node that learns it expired finds
 * nothing of its own left to finish.
 */
#include "store/nodes.h"

#include "store/internal.h"
#include "store/runs.h"
#include "store/store.h"

#include "core/error.h"

#include <string.h>

/* updateOne of node_id's document. */
static bool update_node(cohort_store_t *store, mongoc_client_t *client, const char *node_id,
                        const bson_t *update, bson_error_t *error)
{
    mongoc_collection_t *nodes = store_collection(store, client, "nodes");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(node_id));
    bool ok = store_write(nodes, STORE_UPDATE_ONE, filter, update, NULL, NULL, NULL, error);
    bson_destroy(filter);
    mongoc_collection_destroy(nodes);
    return ok;
}

/* The top-level fields of a node's document: what `cohortctl nodes` shows of it. */
static void append_identity(bson_t *set, const cohort_node_info_t *node, const bson_t *stats)
{
    BSON_APPEND_UTF8(set, "host", node->host);
    BSON_APPEND_INT64(set, "pid", node->pid);
    BSON_APPEND_UTF8(set, "version", node->version);
    BSON_APPEND_UTF8(set, "release", node->version);
    if (node->schema > 0)
        BSON_APPEND_INT64(set, "schema", node->schema);
    if (node->feature_level > 0)
        BSON_APPEND_INT64(set, "feature_level", node->feature_level);
    if (node->level_in_use > 0)
        BSON_APPEND_INT64(set, "level_in_use", node->level_in_use);
    if (node->started_at_ms > 0) /* 0: not known on the cluster clock yet */
        BSON_APPEND_DATE_TIME(set, "started_at", node->started_at_ms);
    if (node->run_id)
        BSON_APPEND_UTF8(set, "run_id", node->run_id);
    if (stats)
        BSON_APPEND_DOCUMENT(set, "stats", stats);
    if (node->settings)
        BSON_APPEND_DOCUMENT(set, "settings", node->settings);
    if (node->db_rtt_p99_ms >= 0)
        BSON_APPEND_INT64(set, "db_rtt_p99_ms", node->db_rtt_p99_ms);
    if (node->db_rtt_p50_ms >= 0)
        BSON_APPEND_INT64(set, "db_rtt_p50_ms", node->db_rtt_p50_ms);
    if (node->clock_synced)
        BSON_APPEND_INT64(set, "clock_skew_ms", node->clock_skew_ms);
    if (!node->services)
        return;
    bson_t list, workers;
    BSON_APPEND_ARRAY_BEGIN(set, "services", &list);
    for (size_t i = 0; i < node->n_services; i++) {
        char key[16];
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
        BSON_APPEND_UTF8(&list, k, node->services[i]);
    }
    bson_append_array_end(set, &list);
    BSON_APPEND_DOCUMENT_BEGIN(set, "workers", &workers);
    for (size_t i = 0; i < node->n_services; i++)
        BSON_APPEND_INT64(&workers, node->services[i], node->workers[i]);
    bson_append_document_end(set, &workers);
    /* Always the whole document: a reload to a handler without kinds clears the service's. */
    bson_t kinds, one;
    BSON_APPEND_DOCUMENT_BEGIN(set, "kinds", &kinds);
    for (size_t i = 0; node->kinds && i < node->n_services; i++) {
        if (!node->kinds[i])
            continue;
        BSON_APPEND_ARRAY_BEGIN(&kinds, node->services[i], &one);
        for (size_t k = 0; node->kinds[i][k]; k++) {
            char key[16];
            const char *at;
            bson_uint32_to_string((uint32_t)k, &at, key, sizeof key);
            BSON_APPEND_UTF8(&one, at, node->kinds[i][k]);
        }
        bson_append_array_end(&kinds, &one);
    }
    bson_append_document_end(set, &kinds);
}

bool cohort_store_ping_node(cohort_store_t *store, mongoc_client_t *client,
                            const cohort_node_info_t *node, const bson_t *stats,
                            int64_t *server_ms, bool *expired, cohort_node_run_t *other,
                            bson_error_t *error)
{
    if (expired)
        *expired = false;
    mongoc_collection_t *nodes = store_collection(store, client, "nodes");
    bson_t *query = BCON_NEW("_id", BCON_UTF8(node->node_id));
    bson_t update = BSON_INITIALIZER, set, current;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    if (!node->standing_back)
        append_identity(&set, node, stats);
    if (node->run_id)
        store_append_run(&set, node->run_id, node->host, node->pid, node->run_since_ms);
    bson_append_document_end(&update, &set);
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$currentDate", &current);
    if (!node->standing_back)
        BSON_APPEND_BOOL(&current, "seen_at", true);
    if (node->run_id)
        store_append_run_seen(&current, node->run_id);
    bson_append_document_end(&update, &current);
    bson_t *fields = BCON_NEW("seen_at", BCON_INT32(1), "expired", BCON_INT32(1), "run_id",
                              BCON_INT32(1), "runs", BCON_INT32(1));

    bson_t doc;
    bool found = false;
    bson_init(&doc);
    bool ok = store_find_and_modify(nodes, query, NULL, &update, fields, true, true, &doc, &found,
                                    error);
    bool dated = found && (node->standing_back
                               ? store_run_seen_at(&doc, node->run_id, server_ms)
                               : store_date_field(&doc, "seen_at", server_ms));
    if (ok && !dated) {
        bson_set_error(error, COHORT_DOMAIN_STORE, COHORT_CODE_INVALID,
                       "node ping returned no seen_at date (server does not support "
                       "$currentDate?)");
        ok = false;
    }
    bson_iter_t it;
    if (ok && expired && bson_iter_init_find(&it, &doc, "expired") && BSON_ITER_HOLDS_BOOL(&it))
        *expired = bson_iter_bool(&it);
    if (other) {
        memset(other, 0, sizeof *other);
        if (ok)
            store_other_run(&doc, node->run_id, other);
    }
    bson_destroy(&doc);
    bson_destroy(fields);
    bson_destroy(&update);
    bson_destroy(query);
    mongoc_collection_destroy(nodes);
    return ok;
}

bool cohort_store_touch_node(cohort_store_t *store, mongoc_client_t *client, const char *node_id,
                             const char *run_id, bson_error_t *error)
{
    bson_t update = BSON_INITIALIZER, current;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$currentDate", &current);
    BSON_APPEND_BOOL(&current, "seen_at", true);
    if (run_id)
        store_append_run_seen(&current, run_id);
    bson_append_document_end(&update, &current);
    bool ok = update_node(store, client, node_id, &update, error);
    bson_destroy(&update);
    return ok;
}

bool cohort_store_reregister_node(cohort_store_t *store, mongoc_client_t *client,
                                  const char *node_id, bson_error_t *error)
{
    bson_t *update = BCON_NEW("$unset", "{", "expired", BCON_UTF8(""), "}", "$currentDate", "{",
                              "registered_at", BCON_BOOL(true), "}");
    bool ok = update_node(store, client, node_id, update, error);
    bson_destroy(update);
    return ok;
}

bool cohort_store_expire_nodes(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, int64_t cutoff_ms, int64_t *nodes_expired,
                               int64_t *released, bson_error_t *error)
{
    *nodes_expired = *released = 0;
    mongoc_collection_t *nodes = store_collection(store, client, "nodes");
    /* External workers have no ping cadence of their own: their claims end with their leases
     * and their entries with alive_until (cohort_store_expire_workers). */
    bson_t *filter = BCON_NEW("seen_at", "{", "$lt", BCON_DATE_TIME(cutoff_ms), "$gte",
                              BCON_DATE_TIME(cutoff_ms - 86400000), "}", "kind", "{", "$ne",
                              BCON_UTF8("external"), "}");
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
    bool ok = store_cursor_done(cursor, error);
    if (ok && n > 0) {
        bson_t release = BSON_INITIALIZER, in;
        BSON_APPEND_UTF8(&release, "status", "claimed");
        BSON_APPEND_DOCUMENT_BEGIN(&release, "claimed_by", &in);
        BSON_APPEND_ARRAY(&in, "$in", &ids);
        bson_append_document_end(&release, &in);
        ok = store_release_claims(store, client, service, &release,
                                  "released: its node expired (no ping)", true, released,
                                  error);
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
            ok = store_write(nodes, STORE_UPDATE_MANY, &mark, set, NULL, "modifiedCount",
                             nodes_expired, error);
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
        if (ok && !store_date_field(&reply, "localTime", server_ms)) {
            bson_set_error(error, COHORT_DOMAIN_STORE, COHORT_CODE_INVALID,
                           "the server's %s reply has no localTime", commands[i]);
            ok = false;
        }
        bson_destroy(&reply);
        bson_destroy(&cmd);
    }
    return ok;
}

bool cohort_store_count_peers(cohort_store_t *store, mongoc_client_t *client, const char *service,
                              const char *node_id, int64_t since_ms, int64_t *peers,
                              bson_error_t *error)
{
    bson_t *filter = BCON_NEW("services", BCON_UTF8(service), "_id", "{", "$ne",
                              BCON_UTF8(node_id), "}", "seen_at", "{", "$gte",
                              BCON_DATE_TIME(since_ms), "}", "kind", "{", "$ne",
                              BCON_UTF8("external"), "}", "expired", "{", "$ne", BCON_BOOL(true),
                              "}");
    mongoc_collection_t *nodes = store_collection(store, client, "nodes");
    int64_t n = mongoc_collection_count_documents(nodes, filter, NULL, NULL, NULL, error);
    mongoc_collection_destroy(nodes);
    bson_destroy(filter);
    *peers = n > 0 ? n : 0;
    return n >= 0;
}

bool cohort_store_expire_workers(cohort_store_t *store, mongoc_client_t *client, int64_t now_ms,
                                 int64_t *expired, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("kind", BCON_UTF8("external"), "alive_until", "{", "$lt",
                              BCON_DATE_TIME(now_ms), "}", "expired", "{", "$ne", BCON_BOOL(true),
                              "}");
    bson_t *set = BCON_NEW("$set", "{", "expired", BCON_BOOL(true), "}", "$currentDate", "{",
                           "expired_at", BCON_BOOL(true), "}");
    mongoc_collection_t *nodes = store_collection(store, client, "nodes");
    bool ok = store_write(nodes, STORE_UPDATE_MANY, filter, set, NULL, "modifiedCount", expired,
                          error);
    mongoc_collection_destroy(nodes);
    bson_destroy(set);
    bson_destroy(filter);
    return ok;
}

/* ---- the runs of a node_id (their entries' shape: runs.c) ---------------------------------- */

bool cohort_store_other_run(cohort_store_t *store, mongoc_client_t *client, const char *node_id,
                            const char *run_id, int64_t *server_ms, cohort_node_run_t *other,
                            bson_error_t *error)
{
    memset(other, 0, sizeof *other);
    if (!cohort_store_server_time(store, client, server_ms, error))
        return false;
    mongoc_collection_t *nodes = store_collection(store, client, "nodes");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(node_id));
    bson_t doc;
    bool found = false;
    bool ok = store_find_one(nodes, filter, &doc, &found, error);
    if (ok && found)
        store_other_run(&doc, run_id, other);
    bson_destroy(&doc);
    bson_destroy(filter);
    mongoc_collection_destroy(nodes);
    return ok;
}

bool cohort_store_forget_runs(cohort_store_t *store, mongoc_client_t *client,
                              const char *node_id, bson_error_t *error)
{
    bson_t *update = BCON_NEW("$unset", "{", "runs", BCON_UTF8(""), "}");
    bool ok = update_node(store, client, node_id, update, error);
    bson_destroy(update);
    return ok;
}

bool cohort_store_end_run(cohort_store_t *store, mongoc_client_t *client, const char *node_id,
                          const char *run_id, bson_error_t *error)
{
    char key[16 + COHORT_RUN_ID_LEN];
    snprintf(key, sizeof key, "runs.%s", run_id);
    bson_t update = BSON_INITIALIZER, unset;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$unset", &unset);
    BSON_APPEND_UTF8(&unset, key, "");
    bson_append_document_end(&update, &unset);
    bool ok = update_node(store, client, node_id, &update, error);
    bson_destroy(&update);
    return ok;
}
