/*
 * watch.c - change streams on the inserts into a service's queue (see watch.h).
 *
 * One stream per queue, on the queue collection: the database-level stream that would serve
 * every queue of a node at once is standard MongoDB, but the local test server answers it with
 * no events (and its events carry no `ns` to match on), so the collection-level stream is the
 * one both servers run. The pipeline keeps inserts, and the drop or rename that ends the
 * stream; updates and deletes (claims, outcomes, purges) never reach the node.
 *
 * Each stream has a client of its own, outside the pool: its getMore waits up to
 * maxAwaitTimeMS on the server, longer than a pooled connection's socket timeout may allow,
 * and a connection held for the node's whole life would shrink the pool.
 */
#include "store/watch.h"

#include "store/internal.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

struct cohort_store_watch {
    mongoc_client_t *client; /* owned */
    mongoc_change_stream_t *stream;
    char queue[96];
    bool ended; /* the queue was dropped or renamed: the stream is over, its token useless */
};

/* The client's socket timeout exceeds the await by this much: a getMore answered after the
 * full await is not cut off as a network error. */
#define WATCH_SOCKET_MARGIN_MS 10000

/* The driver reports a refused or broken stream through its error document. */
static bool stream_failed(mongoc_change_stream_t *stream, bson_error_t *error)
{
    const bson_t *reply = NULL;
    return mongoc_change_stream_error_document(stream, error, &reply);
}

cohort_store_watch_t *cohort_store_watch_open(cohort_store_t *store, const char *service,
                                              int64_t await_ms, const bson_t *resume_after,
                                              bson_error_t *error)
{
    cohort_store_watch_t *w = calloc(1, sizeof *w);
    if (!w) {
        cohort_error_nomem(error, "a change stream");
        return NULL;
    }
    w->client = store_client_new(store, (int32_t)(await_ms + WATCH_SOCKET_MARGIN_MS), error);
    if (!w->client) {
        free(w);
        return NULL;
    }
    snprintf(w->queue, sizeof w->queue, "queue_%s", service);
    /* Inserts; updates that make a task pending again (a claim given back, a retry, a reset:
     * work for idle nodes too); and the events that end a collection's stream (which then
     * closes its cursor without an error: without them the stream would look open and wake
     * no one). MongoDB names an update's fields in updateDescription.updatedFields; the local
     * test server (mongo-java-server 1.46) has no updateDescription and puts the update's
     * $set in fullDocument instead, which MongoDB leaves out of update events unless asked
     * (fullDocument: updateLookup, not asked here): each clause matches one server. */
    bson_t *pipeline = BCON_NEW(
        "pipeline", "[", "{", "$match", "{", "$or", "[",
        "{", "operationType", "{", "$in", "[", "insert", "drop", "rename", "dropDatabase",
        "invalidate", "]", "}", "}",
        "{", "operationType", "update", "updateDescription.updatedFields.status",
        BCON_UTF8("pending"), "}",
        "{", "operationType", "update", "fullDocument.status", BCON_UTF8("pending"), "}",
        "]", "}", "}", "]");
    bson_t *opts = BCON_NEW("maxAwaitTimeMS", BCON_INT64(await_ms));
    if (resume_after && !bson_empty(resume_after))
        BSON_APPEND_DOCUMENT(opts, "resumeAfter", resume_after);
    mongoc_collection_t *queue = store_queue(store, w->client, service);
    w->stream = mongoc_collection_watch(queue, pipeline, opts);
    mongoc_collection_destroy(queue);
    bson_destroy(opts);
    bson_destroy(pipeline);
    bson_error_t why;
    if (stream_failed(w->stream, &why)) {
        bool refused = why.domain == MONGOC_ERROR_SERVER || why.domain == MONGOC_ERROR_QUERY;
        bson_set_error(error, why.domain, why.code, "cannot watch %s for inserts: %s%s",
                       w->queue, why.message,
                       refused ? " (change streams need a replica set)" : "");
        cohort_store_watch_close(w);
        return NULL;
    }
    return w;
}

bool cohort_store_watch_next(cohort_store_watch_t *w, bool *inserted, bson_error_t *error)
{
    /* One event per call: the driver sends a getMore only once the batch it holds is used
     * up, so a caller that acts on each insert at once never waits behind the next await. */
    const bson_t *event = NULL;
    *inserted = !w->ended && mongoc_change_stream_next(w->stream, &event);
    bson_iter_t type;
    if (*inserted && bson_iter_init_find(&type, event, "operationType") &&
        BSON_ITER_HOLDS_UTF8(&type) && strcmp(bson_iter_utf8(&type, NULL), "insert") != 0 &&
        strcmp(bson_iter_utf8(&type, NULL), "update") != 0) {
        w->ended = true;
        *inserted = false;
        bson_set_error(error, COHORT_DOMAIN_STORE, COHORT_CODE_NOT_FOUND,
                       "the change stream on %s ended (%s)", w->queue,
                       bson_iter_utf8(&type, NULL));
        return false;
    }
    bson_error_t why;
    if (!*inserted && stream_failed(w->stream, &why)) {
        bson_set_error(error, why.domain, why.code, "the change stream on %s broke: %s",
                       w->queue, why.message);
        return false;
    }
    return true;
}

bool cohort_store_watch_resume_token(cohort_store_watch_t *w, bson_t *token)
{
    bson_init(token);
    if (w->ended)
        return false;
    const bson_t *current = mongoc_change_stream_get_resume_token(w->stream);
    if (!current || bson_empty(current))
        return false;
    bson_concat(token, current);
    return true;
}

void cohort_store_watch_close(cohort_store_watch_t *w)
{
    if (!w)
        return;
    mongoc_change_stream_destroy(w->stream);
    mongoc_client_destroy(w->client);
    free(w);
}
