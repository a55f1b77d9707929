/*
 * audit.c - the `audit` collection (see audit.h): appended to by the API, read newest first
 * by _id (an ObjectId grows with time), so a page is an index range whatever the size.
 */
#include "store/audit.h"

#include "store/internal.h"
#include "store/listing.h"
#include "store/store.h"

#define AUDIT "audit"

bool cohort_store_audit(cohort_store_t *store, mongoc_client_t *client, const bson_t *entry,
                        int64_t now_ms, bson_error_t *error)
{
    mongoc_collection_t *coll = store_collection(store, client, AUDIT);
    bson_t *index = BCON_NEW("createIndexes", BCON_UTF8(AUDIT), "indexes", "[", "{", "key",
                             "{", "at", BCON_INT32(1), "}", "name", BCON_UTF8("at"), "}", "]");
    bool ok = mongoc_collection_write_command_with_opts(coll, index, NULL, NULL, error);
    bson_destroy(index);
    if (ok) {
        bson_t *old = BCON_NEW("at", "{", "$lt",
                               BCON_DATE_TIME(now_ms - COHORT_AUDIT_RETENTION_MS), "}");
        ok = mongoc_collection_delete_many(coll, old, NULL, NULL, error);
        bson_destroy(old);
    }
    if (ok) {
        bson_t doc = BSON_INITIALIZER;
        bson_oid_t id;
        bson_oid_init(&id, NULL);
        BSON_APPEND_OID(&doc, "_id", &id);
        BSON_APPEND_DATE_TIME(&doc, "at", now_ms);
        bson_concat(&doc, entry);
        ok = mongoc_collection_insert_one(coll, &doc, NULL, NULL, error);
        bson_destroy(&doc);
    }
    mongoc_collection_destroy(coll);
    return ok;
}

bool cohort_store_each_audit(cohort_store_t *store, mongoc_client_t *client,
                             const bson_oid_t *before, int64_t limit, cohort_store_doc_fn fn,
                             void *user, bson_error_t *error)
{
    bson_t *filter = before ? BCON_NEW("_id", "{", "$lt", BCON_OID(before), "}") : bson_new();
    bson_t *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(-1), "}", "limit", BCON_INT64(limit));
    bool ok = store_walk_find(store_collection(store, client, AUDIT), filter, opts, fn, user,
                              error);
    bson_destroy(opts);
    bson_destroy(filter);
    return ok;
}
