/*
 * meta.c - the `cohort_meta` collection: the database's schema version (meta.h).
 *
 * Reading never writes into a database that holds Cohort data: a database from before schema
 * versions keeps no schema document until a migration records one. The one write, into an
 * empty database, is an upsert that leaves a concurrent writer's document as it is.
 */
#include "store/meta.h"

#include "core/error.h"
#include "core/version.h"
#include "store/internal.h"

#include <string.h>

/* The schema document's version: a positive integer, or an error naming what is there. */
static bool schema_version(const bson_t *doc, int64_t *version, bson_error_t *error)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "version") &&
        (BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it)) && bson_iter_as_int64(&it) > 0) {
        *version = bson_iter_as_int64(&it);
        return true;
    }
    bson_set_error(error, COHORT_DOMAIN_STORE, COHORT_CODE_INVALID,
                   "cohort_meta {_id: \"schema\"} has no positive integer 'version'; restore it "
                   "(docs/SCHEMA.md#cohort_meta)");
    return false;
}

/* Reads the schema document: *found, and its version when found. */
static bool read_schema(mongoc_collection_t *meta, int64_t *version, bool *found,
                        bson_error_t *error)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8("schema"));
    bson_t doc;
    bool ok = store_find_one(meta, filter, &doc, found, error) &&
              (!*found || schema_version(&doc, version, error));
    bson_destroy(&doc);
    bson_destroy(filter);
    return ok;
}

/* The collections some release of Cohort creates (besides cohort_meta): these, and queue_*. */
static const char *const cohort_collections[] = {"services", "nodes",  "tokens",
                                                 "ui_sessions", "history", "history_hours",
                                                 "audit", "counts"};
#define N_COHORT_COLLECTIONS (sizeof cohort_collections / sizeof cohort_collections[0])

/* Counts a listCollections entry if its name is one of Cohort's: judged here, not only by
 * the command's filter, which a server may ignore (the embedded test server does). */
static bool count_collection(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "name") || !BSON_ITER_HOLDS_UTF8(&it))
        return true;
    const char *name = bson_iter_utf8(&it, NULL);
    bool ours = strncmp(name, "queue_", 6) == 0;
    for (size_t i = 0; !ours && i < N_COHORT_COLLECTIONS; i++)
        ours = strcmp(name, cohort_collections[i]) == 0;
    if (ours)
        (*(int64_t *)user)++;
    return true;
}

/* *any: the database has a collection that some release of Cohort creates. */
static bool holds_cohort_data(cohort_store_t *store, mongoc_client_t *client, bool *any,
                              bson_error_t *error)
{
    mongoc_database_t *db = mongoc_client_get_database(client, store->database);
    /* {nameOnly, filter: {$or: [{name: {$in: [...]}}, {name: /^queue_/}]}} */
    bson_t *opts = BCON_NEW("nameOnly", BCON_BOOL(true)), filter, either, listed, names;
    BSON_APPEND_DOCUMENT_BEGIN(opts, "filter", &filter);
    BSON_APPEND_ARRAY_BEGIN(&filter, "$or", &either);
    BSON_APPEND_DOCUMENT_BEGIN(&either, "0", &listed);
    BSON_APPEND_DOCUMENT_BEGIN(&listed, "name", &names);
    store_append_strings(&names, "$in", cohort_collections, N_COHORT_COLLECTIONS, false);
    bson_append_document_end(&listed, &names);
    bson_append_document_end(&either, &listed);
    BSON_APPEND_DOCUMENT_BEGIN(&either, "1", &listed);
    BSON_APPEND_REGEX(&listed, "name", "^queue_", "");
    bson_append_document_end(&either, &listed);
    bson_append_array_end(&filter, &either);
    bson_append_document_end(opts, &filter);
    int64_t n = 0;
    bool ok = store_walk_cursor(mongoc_database_find_collections_with_opts(db, opts),
                                count_collection, &n, error);
    bson_destroy(opts);
    mongoc_database_destroy(db);
    *any = n > 0;
    return ok;
}

/* Records `version` unless a schema document exists by now (another node's, written first):
 * an upsert that matches only a document without a version, so a concurrent writer's document
 * makes it a duplicate key on _id (and leaves that document as it is); written_at is the
 * server's $currentDate. */
static bool record_schema(mongoc_collection_t *meta, int64_t version, const char *writer,
                          bson_error_t *error)
{
    bson_t *filter =
        BCON_NEW("_id", BCON_UTF8("schema"), "version", "{", "$exists", BCON_BOOL(false), "}");
    bson_t *update = BCON_NEW("$set", "{", "version", BCON_INT64(version), "written_by",
                              BCON_UTF8(writer), "release", BCON_UTF8(COHORT_VERSION), "}",
                              "$currentDate", "{", "written_at", BCON_BOOL(true), "}");
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bool ok = mongoc_collection_update_one(meta, filter, update, opts, NULL, error);
    if (!ok && store_is_duplicate_key(error)) /* a concurrent upsert inserted it first */
        ok = true;
    bson_destroy(opts);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_read_schema(cohort_store_t *store, mongoc_client_t *client, int64_t version,
                              const char *writer, cohort_schema_state_t *state, bson_error_t *error)
{
    *state = (cohort_schema_state_t){.version = 1};
    mongoc_collection_t *meta = store_collection(store, client, "cohort_meta");
    bool any = true;
    bool ok = read_schema(meta, &state->version, &state->recorded, error);
    if (ok && !state->recorded)
        ok = holds_cohort_data(store, client, &any, error);
    if (ok && !state->recorded && !any && writer) {
        ok = record_schema(meta, version, writer, error) &&
             read_schema(meta, &state->version, &state->recorded, error);
        state->written = ok && state->recorded;
    }
    mongoc_collection_destroy(meta);
    if (!ok)
        cohort_error_prefix(error, "reading the schema version (cohort_meta): ");
    return ok;
}

/* The positive integer `key` of the cohort_meta document `id`; *found false without one. */
static bool read_meta_number(mongoc_collection_t *meta, const char *id, const char *key,
                             int64_t *value, bool *found, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id));
    bson_t doc;
    bool ok = store_find_one(meta, filter, &doc, found, error);
    bson_iter_t it;
    if (ok && *found) {
        if (bson_iter_init_find(&it, &doc, key) && BSON_ITER_HOLDS_NUMBER(&it) &&
            bson_iter_as_int64(&it) > 0) {
            *value = bson_iter_as_int64(&it);
        } else {
            bson_set_error(error, COHORT_DOMAIN_STORE, COHORT_CODE_INVALID,
                           "cohort_meta {_id: \"%s\"} has no positive integer '%s'; restore it "
                           "(docs/SCHEMA.md#cohort_meta)",
                           id, key);
            ok = false;
        }
    }
    bson_destroy(&doc);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_read_level(cohort_store_t *store, mongoc_client_t *client, int64_t *level,
                             bson_error_t *error)
{
    mongoc_collection_t *meta = store_collection(store, client, "cohort_meta");
    bool found = false;
    *level = 1;
    bool ok = read_meta_number(meta, "features", "level", level, &found, error);
    if (ok && !found)
        ok = read_meta_number(meta, "schema", "version", level, &found, error);
    mongoc_collection_destroy(meta);
    if (!ok)
        cohort_error_prefix(error, "reading the feature level (cohort_meta): ");
    return ok;
}

static bool set_meta_number(mongoc_collection_t *meta, const char *id, const char *key,
                            int64_t value, const char *by, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id));
    bson_t *update = BCON_NEW("$set", "{", key, BCON_INT64(value), "written_by", BCON_UTF8(by),
                              "release", BCON_UTF8(COHORT_VERSION), "}", "$currentDate", "{",
                              "written_at", BCON_BOOL(true), "}");
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bool ok = mongoc_collection_update_one(meta, filter, update, opts, NULL, error);
    bson_destroy(opts);
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_commit_level(cohort_store_t *store, mongoc_client_t *client, int64_t level,
                               const char *by, bson_error_t *error)
{
    mongoc_collection_t *meta = store_collection(store, client, "cohort_meta");
    bool ok = set_meta_number(meta, "schema", "version", level, by, error) &&
              set_meta_number(meta, "features", "level", level, by, error);
    mongoc_collection_destroy(meta);
    if (!ok)
        cohort_error_prefix(error, "recording level %lld (cohort_meta): ", (long long)level);
    return ok;
}
