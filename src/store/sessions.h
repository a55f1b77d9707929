/*
 * sessions.h - the `ui_sessions` collection: the dashboard's one-time sign-in codes and its
 * browser sessions (docs/UI.md, docs/SCHEMA.md).
 *
 * Both are keyed by the SHA-256 of their secret (core/token.h), never the secret itself:
 *   {_id: HASH, kind: "code" | "session", name, scopes: [...], expires_at, created_at,
 *    session_ttl_ms (codes only)}
 * A code is redeemed by one findAndModify that removes it, so it works once even when two
 * nodes are asked at once; it and every session stop working at `expires_at` on the cluster
 * clock (the server's). Each write also deletes the documents that expired, so the
 * collection holds only live codes and sessions.
 */
#ifndef COHORT_STORE_SESSIONS_H
#define COHORT_STORE_SESSIONS_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* Stores a one-time code: its hash, the `name` its session will carry ("cohortctl
 * USER@HOST"), `scopes` (an array of scope names), valid until `expires_ms`, making a
 * session of `session_ttl_ms`. `now_ms` is the server's time (expired documents go). */
bool cohort_store_create_ui_code(cohort_store_t *store, mongoc_client_t *client,
                                 const char *hash, const char *name, const bson_t *scopes,
                                 int64_t now_ms, int64_t expires_ms, int64_t session_ttl_ms,
                                 bson_error_t *error);

/* Removes the code `hash` if it has not expired at `now_ms`, and hands its document back in
 * `doc` (initialised; destroy it). *found is false if there is no such live code (never
 * made, used already, or expired). */
bool cohort_store_redeem_ui_code(cohort_store_t *store, mongoc_client_t *client,
                                 const char *hash, int64_t now_ms, bson_t *doc, bool *found,
                                 bson_error_t *error);

/* Stores a session: its hash, `name`, `scopes` (an array of names), until `expires_ms`. */
bool cohort_store_create_ui_session(cohort_store_t *store, mongoc_client_t *client,
                                    const char *hash, const char *name, const bson_t *scopes,
                                    int64_t now_ms, int64_t expires_ms, bson_error_t *error);

/* The live session `hash` at `now_ms` into `doc` (initialised; destroy it): {_id, name,
 * scopes, expires_at}. *found is false if none (never made, ended or expired). */
bool cohort_store_find_ui_session(cohort_store_t *store, mongoc_client_t *client,
                                  const char *hash, int64_t now_ms, bson_t *doc, bool *found,
                                  bson_error_t *error);

/* Ends every session signed in with the API token `token_name` (their name is "token NAME"):
 * revoking a token ends them too (cohortctl tokens revoke). *ended counts them. */
bool cohort_store_end_token_sessions(cohort_store_t *store, mongoc_client_t *client,
                                     const char *token_name, int64_t *ended, bson_error_t *error);

/* Ends session `hash` (nothing if there is none). */
bool cohort_store_end_ui_session(cohort_store_t *store, mongoc_client_t *client,
                                 const char *hash, bson_error_t *error);

#endif
