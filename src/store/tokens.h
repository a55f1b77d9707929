/*
 * tokens.h - the `tokens` collection: API tokens by name, each with the SHA-256 of its
 * secret and its scopes (see docs/SCHEMA.md). cohortctl creates, lists and revokes them;
 * the node's API looks them up by hash and records when each was last used.
 *
 * The secret itself is never stored or read back: only its hash (core/token.h).
 */
#ifndef COHORT_STORE_TOKENS_H
#define COHORT_STORE_TOKENS_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/listing.h"
#include "store/store.h"

/* Inserts token `name` with its hash and scopes (an array of scope names), created_at =
 * server time, and makes sure the collection's unique index on the hash exists. *exists is
 * true (and false returned, nothing written) if a token of that name exists already. */
bool cohort_store_create_token(cohort_store_t *store, mongoc_client_t *client, const char *name,
                               const char *hash, const bson_t *scopes, const char *created_by,
                               bool *exists, bson_error_t *error);

/* Every token by name, without its hash: {_id: name, scopes, created_at, created_by,
 * last_used}. */
bool cohort_store_each_token(cohort_store_t *store, mongoc_client_t *client,
                             cohort_store_doc_fn fn, void *user, bson_error_t *error);

/* Deletes token `name`; *found is false if there was none. */
bool cohort_store_revoke_token(cohort_store_t *store, mongoc_client_t *client, const char *name,
                               bool *found, bson_error_t *error);

/* The token whose hash is `hash`, into `doc` (initialised; destroy it): {_id, hash, scopes}.
 * *found is false if there is none (never made, or revoked). */
bool cohort_store_find_token(cohort_store_t *store, mongoc_client_t *client, const char *hash,
                             bson_t *doc, bool *found, bson_error_t *error);

/* last_used = server time on token `name` (if it still exists). */
bool cohort_store_touch_token(cohort_store_t *store, mongoc_client_t *client, const char *name,
                              bson_error_t *error);

#endif
