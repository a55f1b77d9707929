/*
 * runs.c - the runs of a node_id in its `nodes` document: one process per node_id.
 *
 * Each process that runs a node registers a random run id, and every ping refreshes its
 * entry runs.<run id> = {host, pid, since, seen_at} (server times). Two live processes with
 * one node_id would otherwise share one document, one claim owner and one primacy, and swap
 * primacy every tick; with the entries each sees the other (see node/runs.h for what it does
 * then). An entry is removed by a clean shutdown and all of them by a run that starts once it
 * found none of them alive, so the document holds no more entries than live runs plus those
 * that died recently.
 */
#include "store/internal.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

void store_append_run(bson_t *set, const cohort_node_info_t *node)
{
    char key[64 + COHORT_RUN_ID_LEN];
    snprintf(key, sizeof key, "runs.%s.host", node->run_id);
    BSON_APPEND_UTF8(set, key, node->host);
    snprintf(key, sizeof key, "runs.%s.pid", node->run_id);
    BSON_APPEND_INT64(set, key, node->pid);
    snprintf(key, sizeof key, "runs.%s.since", node->run_id);
    BSON_APPEND_DATE_TIME(set, key, node->run_since_ms);
}

void store_append_run_seen(bson_t *current_date, const char *run_id)
{
    char key[64 + COHORT_RUN_ID_LEN];
    snprintf(key, sizeof key, "runs.%s.seen_at", run_id);
    BSON_APPEND_BOOL(current_date, key, true);
}

bool store_run_seen_at(const bson_t *doc, const char *run_id, int64_t *ms)
{
    char path[64 + COHORT_RUN_ID_LEN];
    snprintf(path, sizeof path, "runs.%s.seen_at", run_id);
    bson_iter_t it, found;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &found) ||
        !BSON_ITER_HOLDS_DATE_TIME(&found))
        return false;
    *ms = bson_iter_date_time(&found);
    return true;
}

/* One entry of `runs` into *run. */
static void read_run(const char *run_id, const bson_t *entry, cohort_node_run_t *run)
{
    memset(run, 0, sizeof *run);
    snprintf(run->run_id, sizeof run->run_id, "%s", run_id);
    bson_iter_t it;
    if (bson_iter_init_find(&it, entry, "host") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(run->host, sizeof run->host, "%s", bson_iter_utf8(&it, NULL));
    run->pid = store_int64_field(entry, "pid", 0);
    store_date_field(entry, "since", &run->since_ms);
    store_date_field(entry, "seen_at", &run->seen_at_ms);
}

void store_other_run(const bson_t *doc, const char *run_id, cohort_node_run_t *other)
{
    memset(other, 0, sizeof *other);
    /* Every ping and every heartbeat touch (node/heartbeat.c) refreshes the run's own
     * seen_at: the entries alone say which runs are alive. */
    bson_iter_t it, runs;
    if (!bson_iter_init_find(&it, doc, "runs") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &runs))
        return;
    while (bson_iter_next(&runs)) {
        const char *key = bson_iter_key(&runs);
        if (!BSON_ITER_HOLDS_DOCUMENT(&runs) || strcmp(key, run_id ? run_id : "") == 0)
            continue;
        uint32_t len;
        const uint8_t *data;
        bson_t entry;
        bson_iter_document(&runs, &len, &data);
        if (!bson_init_static(&entry, data, len))
            continue;
        cohort_node_run_t run;
        read_run(key, &entry, &run);
        if (!other->run_id[0] || run.seen_at_ms > other->seen_at_ms)
            *other = run;
    }
}

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
    bool ok = store_update_node(store, client, node_id, update, error);
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
    bool ok = store_update_node(store, client, node_id, &update, error);
    bson_destroy(&update);
    return ok;
}
