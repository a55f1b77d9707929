/*
 * cluster_tasks.c - what the cluster tests read of task documents (see cluster.h): a flat
 * view of one task and its history, so each test compares fields instead of walking BSON.
 *
 * A field that is absent or of another type reads as "" or 0; the history fields describe the
 * last entry, which is the one that decided the task's final state.
 */
#include "cluster.h"

#include <stdio.h>
#include <string.h>

void cluster_doc_utf8(const bson_t *doc, const char *key, char *out, size_t len)
{
    bson_iter_t it;
    out[0] = '\0';
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(out, len, "%s", bson_iter_utf8(&it, NULL));
}

int64_t cluster_doc_number(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_NUMBER(&it)
               ? bson_iter_as_int64(&it)
               : 0;
}

static int64_t date_or_zero(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_DATE_TIME(&it))
        return bson_iter_date_time(&it);
    return 0;
}

static void view_history_entry(const bson_t *entry, cluster_task_view_t *v)
{
    v->history++;
    cluster_doc_utf8(entry, "node", v->last_node, sizeof v->last_node);
    cluster_doc_utf8(entry, "outcome", v->last_outcome, sizeof v->last_outcome);
    v->succeeded_entries += strcmp(v->last_outcome, "succeeded") == 0;
    v->last_attempt = cluster_doc_number(entry, "attempt");
    v->last_run_ms = date_or_zero(entry, "ended_at") - date_or_zero(entry, "started_at");
}

void cluster_task_view(const bson_t *doc, cluster_task_view_t *v)
{
    memset(v, 0, sizeof *v);
    bson_iter_t it, entries;
    if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it))
        bson_oid_to_string(bson_iter_oid(&it), v->id);
    cluster_doc_utf8(doc, "status", v->status, sizeof v->status);
    cluster_doc_utf8(doc, "claimed_by", v->claimed_by, sizeof v->claimed_by);
    v->attempts = cluster_doc_number(doc, "attempts");
    v->heartbeat_at_ms = date_or_zero(doc, "heartbeat_at");
    if (!bson_iter_init_find(&it, doc, "history") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &entries))
        return;
    while (bson_iter_next(&entries)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&entries))
            continue;
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&entries, &len, &data);
        bson_t entry;
        if (bson_init_static(&entry, data, len))
            view_history_entry(&entry, v);
    }
}

size_t cluster_read_task_views(cluster_t *c, const char *service, cluster_task_view_t *out,
                               size_t max)
{
    char name[160];
    snprintf(name, sizeof name, "queue_%s", service);
    mongoc_collection_t *queue = mongoc_client_get_collection(c->client, c->db, name);
    bson_t filter = BSON_INITIALIZER;
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(queue, &filter, NULL, NULL);
    const bson_t *doc;
    size_t n = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
        cluster_assert(c, n < max, "more than %zu tasks", max);
        cluster_task_view(doc, &out[n++]);
    }
    bson_error_t error;
    bool failed = mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
    mongoc_collection_destroy(queue);
    cluster_assert(c, !failed, "cannot read the tasks: %s", error.message);
    return n;
}
