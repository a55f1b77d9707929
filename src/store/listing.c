/*
 * listing.c - read-only walks over services, nodes and tasks for operators (see listing.h).
 *
 * One find per listing, its cursor drained into the callback; the cursor and collection are
 * released on every path. Nothing here writes.
 */
#include "store/listing.h"

#include "store/internal.h"
#include "store/queries.h"
#include "store/store.h"

#include <string.h>

/* Drains `cursor` into `fn`, then destroys it (internal.h: the API's pages use it too). */
bool store_walk_cursor(mongoc_cursor_t *cursor, cohort_store_doc_fn fn, void *user,
                       bson_error_t *error)
{
    const bson_t *doc;
    bool ok = true;
    while (ok && mongoc_cursor_next(cursor, &doc))
        ok = fn(user, doc, error);
    if (ok && mongoc_cursor_error(cursor, error))
        ok = false;
    mongoc_cursor_destroy(cursor);
    return ok;
}

/* A find on the store's database: `name`'s documents matching `filter` with `opts`. */
static bool find(cohort_store_t *store, mongoc_client_t *client, const char *name,
                 const bson_t *filter, const bson_t *opts, cohort_store_doc_fn fn, void *user,
                 bson_error_t *error)
{
    return store_walk_find(store_collection(store, client, name), filter, opts, fn, user, error);
}

typedef struct name_walk {
    cohort_store_name_fn fn;
    void *user;
} name_walk_t;

static bool each_name(void *user, const bson_t *doc, bson_error_t *error)
{
    name_walk_t *w = user;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
        return true; /* not a service document Cohort wrote: skip it */
    return w->fn(w->user, bson_iter_utf8(&it, NULL), error);
}

bool cohort_store_each_service(cohort_store_t *store, mongoc_client_t *client,
                               cohort_store_name_fn fn, void *user, bson_error_t *error)
{
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "sort", "{", "_id",
                            BCON_INT32(1), "}");
    name_walk_t w = {fn, user};
    bool ok = find(store, client, "services", &filter, opts, each_name, &w, error);
    bson_destroy(opts);
    return ok;
}

/* A listCollections entry: the service's name if it is a queue. */
static bool each_queue_name(void *user, const bson_t *doc, bson_error_t *error)
{
    name_walk_t *w = user;
    bson_iter_t it;
    static const char prefix[] = "queue_";
    if (!bson_iter_init_find(&it, doc, "name") || !BSON_ITER_HOLDS_UTF8(&it))
        return true;
    const char *name = bson_iter_utf8(&it, NULL);
    if (strncmp(name, prefix, sizeof prefix - 1) != 0 || !name[sizeof prefix - 1])
        return true;
    return w->fn(w->user, name + sizeof prefix - 1, error);
}

bool cohort_store_each_queue(cohort_store_t *store, mongoc_client_t *client,
                             cohort_store_name_fn fn, void *user, bson_error_t *error)
{
    mongoc_database_t *db = mongoc_client_get_database(client, store->database);
    bson_t *opts = BCON_NEW("nameOnly", BCON_BOOL(true));
    name_walk_t w = {fn, user};
    bool ok = store_walk_cursor(mongoc_database_find_collections_with_opts(db, opts),
                                each_queue_name, &w, error);
    bson_destroy(opts);
    mongoc_database_destroy(db);
    return ok;
}

static bool longer_lease(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    int64_t *longest = user;
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "lease_ms") && BSON_ITER_HOLDS_NUMBER(&it) &&
        bson_iter_as_int64(&it) > *longest)
        *longest = bson_iter_as_int64(&it);
    return true;
}

bool cohort_store_longest_lease(cohort_store_t *store, mongoc_client_t *client,
                                int64_t *longest_ms, bson_error_t *error)
{
    *longest_ms = 0;
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("projection", "{", "lease_ms", BCON_INT32(1), "}");
    bool ok = find(store, client, "services", &filter, opts, longer_lease, longest_ms, error);
    bson_destroy(opts);
    return ok;
}

bool cohort_store_each_node(cohort_store_t *store, mongoc_client_t *client, int64_t since_ms,
                            cohort_store_doc_fn fn, void *user, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("seen_at", "{", "$gte", BCON_DATE_TIME(since_ms), "}");
    bson_t *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}", "projection", "{", "stats",
                            BCON_INT32(0), "}");
    bool ok = find(store, client, "nodes", filter, opts, fn, user, error);
    bson_destroy(opts);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_each_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                            const char *status, int64_t limit, cohort_store_doc_fn fn,
                            void *user, bson_error_t *error)
{
    return store_walk_cursor(cohort_store_list_tasks(store, client, service, status, limit), fn,
                             user, error);
}
