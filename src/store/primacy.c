/*
 * primacy.c - the lease on a service's primacy, in its config document.
 *
 * Both writes are one findAndModify each, conditional on what the node saw: a renewal matches
 * only while the document still names this node and epoch, a takeover only while the lease
 * is vacant or expired (and, if the node read one, the declared lease is unchanged). Two
 * nodes can therefore never both believe they renewed or took the same epoch.
 */
#include "store/primacy.h"

#include "store/batches.h"
#include "store/internal.h"
#include "store/store.h"

#include <stdio.h>
#include <string.h>

bool cohort_store_renew_lease(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const char *node_id, int64_t epoch,
                              int64_t lease_ms, int64_t tick_ms, int queue_due, bool *renewed,
                              bson_t *doc, bson_error_t *error)
{
    mongoc_collection_t *services = store_collection(store, client, "services");
    bson_t *query = BCON_NEW("_id", BCON_UTF8(service), "primary", BCON_UTF8(node_id), "epoch",
                             BCON_INT64(epoch));
    bson_t *update = bson_new(), set;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
    BSON_APPEND_INT64(&set, "lease_ms", lease_ms);
    BSON_APPEND_INT64(&set, "tick_ms", tick_ms);
    if (queue_due >= 0)
        BSON_APPEND_BOOL(&set, "queue_due", queue_due > 0);
    bson_append_document_end(update, &set);
    bson_t *rest = BCON_NEW("$currentDate", "{", "last_active", BCON_BOOL(true), "}");
    bson_concat(update, rest);
    bson_destroy(rest);
    bson_t *fields = doc ? BCON_NEW("batch_seq", BCON_INT32(1), "draining", BCON_INT32(1),
                                    "settings", BCON_INT32(1), "lease_ms", BCON_INT32(1),
                                    "pause", BCON_INT32(1), "block", BCON_INT32(1),
                                    "step_down", BCON_INT32(1))
                         : BCON_NEW("_id", BCON_INT32(1));
    bson_t unused = BSON_INITIALIZER;
    if (doc)
        bson_init(doc);
    bool ok = store_find_and_modify(services, query, NULL, update, fields, true, false,
                                    doc ? doc : &unused, renewed, error);
    bson_destroy(&unused);
    bson_destroy(fields);
    bson_destroy(update);
    bson_destroy(query);
    mongoc_collection_destroy(services);
    return ok;
}

/* A vacant document's previous holder: a step-down cleared `primary`, so the node comes from
 * stepped_down {node_id, epoch} when it recorded the epoch replaced now (a step-down on
 * request); a SIGTERM's is not recorded, but its renewals left last_active a date. */
static void read_stepped_down(const bson_t *doc, cohort_takeover_t *result)
{
    bson_iter_t it, node;
    result->stepped_down =
        bson_iter_init_find(&it, doc, "last_active") && BSON_ITER_HOLDS_DATE_TIME(&it);
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "stepped_down.epoch", &it) &&
        BSON_ITER_HOLDS_NUMBER(&it) && bson_iter_as_int64(&it) == result->epoch - 1 &&
        bson_iter_init(&node, doc) &&
        bson_iter_find_descendant(&node, "stepped_down.node_id", &node) &&
        BSON_ITER_HOLDS_UTF8(&node))
        snprintf(result->previous, sizeof result->previous, "%s", bson_iter_utf8(&node, NULL));
}

bool cohort_store_take_lease(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *node_id, int64_t cutoff_ms, int64_t seen_lease_ms,
                             int64_t lease_ms, cohort_takeover_t *result, bson_error_t *error)
{
    memset(result, 0, sizeof *result);
    mongoc_collection_t *services = store_collection(store, client, "services");
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
                              BCON_INT32(1), "draining", BCON_INT32(1), "last_active",
                              BCON_INT32(1), "stepped_down", BCON_INT32(1));
    bson_t doc;
    bool found = false;
    bson_init(&doc);
    /* The document as it was before: the previous primary, and the epoch we replace. */
    bool ok = store_find_and_modify(services, query, NULL, update, fields, false, false, &doc,
                                    &found, error);
    if (ok && found) {
        bson_iter_t it;
        result->taken = true;
        result->epoch = 1;
        if (bson_iter_init_find(&it, &doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it))
            result->epoch = bson_iter_as_int64(&it) + 1;
        if (bson_iter_init_find(&it, &doc, "primary") && BSON_ITER_HOLDS_UTF8(&it))
            snprintf(result->previous, sizeof result->previous, "%s",
                     bson_iter_utf8(&it, NULL));
        else
            read_stepped_down(&doc, result);
        cohort_store_parse_batch_state(&doc, &result->batches);
    }
    bson_destroy(&doc);
    bson_destroy(fields);
    bson_destroy(update);
    bson_destroy(query);
    mongoc_collection_destroy(services);
    return ok;
}
