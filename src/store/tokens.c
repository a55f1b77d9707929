/*
 * tokens.c - the `tokens` collection (see tokens.h): one document per API token, keyed by
 * its name, holding the SHA-256 of the secret under a unique index.
 *
 * The name is the _id, so a duplicate name is refused by the server, not by a read before
 * the write. Lookups go by the hash index and return no more than the API needs.
 */
#include "store/tokens.h"

#include "store/internal.h"
#include "store/listing.h"
#include "store/store.h"

#define TOKENS "tokens"

static bool ensure_token_index(mongoc_collection_t *tokens, bson_error_t *error)
{
    bson_t *cmd = BCON_NEW("createIndexes", BCON_UTF8(TOKENS), "indexes", "[", "{", "key", "{",
                           "hash", BCON_INT32(1), "}", "name", BCON_UTF8("hash"), "unique",
                           BCON_BOOL(true), "}", "]");
    bool ok = mongoc_collection_write_command_with_opts(tokens, cmd, NULL, NULL, error);
    bson_destroy(cmd);
    return ok;
}

bool cohort_store_create_token(cohort_store_t *store, mongoc_client_t *client, const char *name,
                               const char *hash, const bson_t *scopes, const char *created_by,
                               bool *exists, bson_error_t *error)
{
    *exists = false;
    mongoc_collection_t *tokens = store_collection(store, client, TOKENS);
    bool ok = ensure_token_index(tokens, error);
    if (ok) {
        /* An upsert that only inserts: created_at comes from the server's clock. */
        bson_t *filter = BCON_NEW("_id", BCON_UTF8(name));
        bson_t *update = BCON_NEW("$setOnInsert", "{", "hash", BCON_UTF8(hash), "scopes",
                                  BCON_ARRAY(scopes), "created_by", BCON_UTF8(created_by), "}",
                                  "$currentDate", "{", "created_at", BCON_BOOL(true), "}");
        bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
        bson_t reply;
        ok = mongoc_collection_update_one(tokens, filter, update, opts, &reply, error);
        if (ok && !bson_has_field(&reply, "upsertedId")) {
            *exists = true;
            ok = false;
        }
        bson_destroy(&reply);
        bson_destroy(opts);
        bson_destroy(update);
        bson_destroy(filter);
    }
    mongoc_collection_destroy(tokens);
    return ok;
}

bool cohort_store_each_token(cohort_store_t *store, mongoc_client_t *client,
                             cohort_store_doc_fn fn, void *user, bson_error_t *error)
{
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("projection", "{", "hash", BCON_INT32(0), "}", "sort", "{", "_id",
                            BCON_INT32(1), "}");
    bool ok = store_walk_find(store_collection(store, client, TOKENS), &filter, opts, fn, user,
                              error);
    bson_destroy(opts);
    return ok;
}

bool cohort_store_revoke_token(cohort_store_t *store, mongoc_client_t *client, const char *name,
                               bool *found, bson_error_t *error)
{
    mongoc_collection_t *tokens = store_collection(store, client, TOKENS);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(name));
    int64_t deleted = 0;
    bool ok = store_write(tokens, STORE_DELETE_ONE, filter, NULL, NULL, "deletedCount", &deleted,
                          error);
    *found = deleted > 0;
    bson_destroy(filter);
    mongoc_collection_destroy(tokens);
    return ok;
}

bool cohort_store_find_token(cohort_store_t *store, mongoc_client_t *client, const char *hash,
                             bson_t *doc, bool *found, bson_error_t *error)
{
    mongoc_collection_t *tokens = store_collection(store, client, TOKENS);
    bson_t *filter = BCON_NEW("hash", BCON_UTF8(hash));
    bool ok = store_find_one(tokens, filter, doc, found, error);
    bson_destroy(filter);
    mongoc_collection_destroy(tokens);
    return ok;
}

bool cohort_store_touch_token(cohort_store_t *store, mongoc_client_t *client, const char *name,
                              bson_error_t *error)
{
    mongoc_collection_t *tokens = store_collection(store, client, TOKENS);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(name));
    bson_t *update = BCON_NEW("$currentDate", "{", "last_used", BCON_BOOL(true), "}");
    bool ok = mongoc_collection_update_one(tokens, filter, update, NULL, NULL, error);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(tokens);
    return ok;
}
