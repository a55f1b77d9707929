/*
 * sessions.c - the `ui_sessions` collection (see sessions.h): one-time codes and browser
 * sessions, each a document keyed by the SHA-256 of its secret.
 *
 * Every condition on time is written into the filter with a time the caller read from the
 * server (or the cluster clock), never this process's wall clock, so a node whose clock is
 * off neither stretches nor cuts a session.
 */
#include "store/sessions.h"

#include "store/internal.h"
#include "store/store.h"

#define SESSIONS "ui_sessions"

/* Deletes what expired before `now_ms`: the collection stays as small as what is live. */
static bool purge_expired(mongoc_collection_t *coll, int64_t now_ms, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("expires_at", "{", "$lte", BCON_DATE_TIME(now_ms), "}");
    bool ok = mongoc_collection_delete_many(coll, filter, NULL, NULL, error);
    bson_destroy(filter);
    return ok;
}

static bool ensure_index(mongoc_collection_t *coll, bson_error_t *error)
{
    bson_t *cmd = BCON_NEW("createIndexes", BCON_UTF8(SESSIONS), "indexes", "[", "{", "key",
                           "{", "expires_at", BCON_INT32(1), "}", "name",
                           BCON_UTF8("expires_at"), "}", "]");
    bool ok = mongoc_collection_write_command_with_opts(coll, cmd, NULL, NULL, error);
    bson_destroy(cmd);
    return ok;
}

static bool insert(cohort_store_t *store, mongoc_client_t *client, bson_t *doc, int64_t now_ms,
                   bson_error_t *error)
{
    mongoc_collection_t *coll = store_collection(store, client, SESSIONS);
    bool ok = ensure_index(coll, error) && purge_expired(coll, now_ms, error) &&
              mongoc_collection_insert_one(coll, doc, NULL, NULL, error);
    mongoc_collection_destroy(coll);
    return ok;
}

/* Inserts a code or a session: {_id: hash, kind, name, scopes, created_at, expires_at}, and
 * a code's session_ttl_ms (`session_ttl_ms` NULL: none). */
static bool create(cohort_store_t *store, mongoc_client_t *client, const char *kind,
                   const char *hash, const char *name, const bson_t *scopes, int64_t now_ms,
                   int64_t expires_ms, const int64_t *session_ttl_ms, bson_error_t *error)
{
    bson_t *doc = BCON_NEW("_id", BCON_UTF8(hash), "kind", BCON_UTF8(kind), "name",
                           BCON_UTF8(name), "scopes", BCON_ARRAY(scopes), "created_at",
                           BCON_DATE_TIME(now_ms), "expires_at", BCON_DATE_TIME(expires_ms));
    if (session_ttl_ms)
        BSON_APPEND_INT64(doc, "session_ttl_ms", *session_ttl_ms);
    bool ok = insert(store, client, doc, now_ms, error);
    bson_destroy(doc);
    return ok;
}

bool cohort_store_create_ui_code(cohort_store_t *store, mongoc_client_t *client,
                                 const char *hash, const char *name, const bson_t *scopes,
                                 int64_t now_ms, int64_t expires_ms, int64_t session_ttl_ms,
                                 bson_error_t *error)
{
    return create(store, client, "code", hash, name, scopes, now_ms, expires_ms, &session_ttl_ms,
                  error);
}

bool cohort_store_redeem_ui_code(cohort_store_t *store, mongoc_client_t *client,
                                 const char *hash, int64_t now_ms, bson_t *doc, bool *found,
                                 bson_error_t *error)
{
    bson_init(doc);
    *found = false;
    mongoc_collection_t *coll = store_collection(store, client, SESSIONS);
    bson_t *query = BCON_NEW("_id", BCON_UTF8(hash), "kind", BCON_UTF8("code"), "expires_at",
                             "{", "$gt", BCON_DATE_TIME(now_ms), "}");
    mongoc_find_and_modify_opts_t *opts = mongoc_find_and_modify_opts_new();
    mongoc_find_and_modify_opts_set_flags(opts, MONGOC_FIND_AND_MODIFY_REMOVE);
    bson_t removed;
    bool ok = store_find_and_modify_with(coll, query, opts, &removed, found, error);
    if (*found) {
        bson_destroy(doc);
        bson_steal(doc, &removed);
    }
    mongoc_find_and_modify_opts_destroy(opts);
    bson_destroy(query);
    mongoc_collection_destroy(coll);
    return ok;
}

bool cohort_store_create_ui_session(cohort_store_t *store, mongoc_client_t *client,
                                    const char *hash, const char *name, const bson_t *scopes,
                                    int64_t now_ms, int64_t expires_ms, bson_error_t *error)
{
    return create(store, client, "session", hash, name, scopes, now_ms, expires_ms, NULL, error);
}

bool cohort_store_find_ui_session(cohort_store_t *store, mongoc_client_t *client,
                                  const char *hash, int64_t now_ms, bson_t *doc, bool *found,
                                  bson_error_t *error)
{
    mongoc_collection_t *coll = store_collection(store, client, SESSIONS);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(hash), "kind", BCON_UTF8("session"),
                              "expires_at", "{", "$gt", BCON_DATE_TIME(now_ms), "}");
    bool ok = store_find_one(coll, filter, doc, found, error);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return ok;
}

bool cohort_store_end_ui_session(cohort_store_t *store, mongoc_client_t *client,
                                 const char *hash, bson_error_t *error)
{
    mongoc_collection_t *coll = store_collection(store, client, SESSIONS);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(hash), "kind", BCON_UTF8("session"));
    bool ok = mongoc_collection_delete_one(coll, filter, NULL, NULL, error);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return ok;
}

bool cohort_store_end_token_sessions(cohort_store_t *store, mongoc_client_t *client,
                                     const char *token_name, int64_t *ended, bson_error_t *error)
{
    char name[128];
    snprintf(name, sizeof name, "token %s", token_name);
    mongoc_collection_t *coll = store_collection(store, client, SESSIONS);
    bson_t *filter = BCON_NEW("kind", BCON_UTF8("session"), "name", BCON_UTF8(name));
    bool ok = store_write(coll, STORE_DELETE_MANY, filter, NULL, NULL, "deletedCount", ended,
                          error);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return ok;
}
