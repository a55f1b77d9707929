/*
 * api_session.h - the dashboard's sessions in the API: who a request is from when it brings
 * the session cookie rather than a bearer token, and the sign-in endpoint that makes one.
 *
 *   POST   /api/v1/session  {"code": C} (a one-time code of `cohortctl ui-link`) or
 *                           {"token": T} (an API token): sets the cookie
 *   DELETE /api/v1/session  ends the session of the cookie and clears it
 *
 * The cookie is `cohort_session=SECRET; Path=/; HttpOnly; SameSite=Strict; Max-Age=N`: the
 * page's scripts cannot read it, and browsers do not send it on another site's requests. On
 * top of that, a request that changes state (any method but GET and HEAD) and comes with the
 * cookie must say it is from this origin: Sec-Fetch-Site: same-origin, or, from a browser
 * that does not send it, an Origin equal to the Host. Sign-in and sign-out must too (no login
 * CSRF). Bearer tokens are unaffected (no browser attaches them by itself).
 *
 * The database keeps only the SHA-256 of codes and sessions (store/sessions.h).
 */
#ifndef COHORT_API_SESSION_H
#define COHORT_API_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "node/http/api_auth.h"
#include "node/http/api_parse.h"
#include "store/store.h"

#define COHORT_SESSION_COOKIE "cohort_session"
#define COHORT_SESSION_TTL_MS (8 * 3600 * 1000LL) /* a session made from a token */

/* The methods the sign-in endpoint takes (its Allow header). */
#define COHORT_API_SESSION_ALLOW "POST, DELETE"

/* Whether `path` is the sign-in endpoint (answered before any authentication). */
bool cohort_api_session_path(const char *path);

/* Answers POST or DELETE /api/v1/session into `reply`; false with `err` set on refusal. */
bool cohort_api_session_handle(cohort_store_t *store, cohort_api_auth_t *auth,
                               mongoc_client_t *client, const cohort_api_request_t *request,
                               cohort_api_reply_t *reply, cohort_api_error_t *err);

/* The caller of a request: its bearer token if it has an Authorization header, else its
 * session cookie (with the same-origin check for a state change), else a 401. */
bool cohort_api_authenticate_request(cohort_api_auth_t *auth, cohort_store_t *store,
                                     mongoc_client_t *client,
                                     const cohort_api_request_t *request,
                                     cohort_api_caller_t *caller, cohort_api_error_t *err);

/* The session secret in a Cookie header into `out` (false if there is none). Pure. */
bool cohort_api_session_cookie(const char *cookie_header, char *out, size_t len);

/* Whether a request says it comes from a page of this origin (see above). Pure. */
bool cohort_api_same_origin(const cohort_api_request_t *request);

#endif
