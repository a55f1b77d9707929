/*
 * api_session.c - the dashboard's sessions in the API (see api_session.h).
 *
 * A session is looked up in the database on every request (one read by _id), so ending one
 * or letting it expire takes effect at once on every node. Its secret has the shape of an API
 * token (core/token.h) and is made and hashed the same way; a session secret sent as a bearer
 * token, or a token sent as a cookie, finds nothing.
 */
#include "node/http/api_session.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/timefmt.h"
#include "core/token.h"
#include "node/status/api_json.h"
#include "node/http/api_tasks.h"
#include "store/sessions.h"
#include "store/store.h"

#define SESSION_PATH "/api/v1/session"

bool cohort_api_session_path(const char *path)
{
    return path && strcmp(path, SESSION_PATH) == 0;
}

bool cohort_api_session_cookie(const char *cookie_header, char *out, size_t len)
{
    static const char name[] = COHORT_SESSION_COOKIE "=";
    for (const char *p = cookie_header; p && *p;) {
        p += strspn(p, " \t;");
        size_t n = strcspn(p, ";");
        if (n > strlen(name) && strncmp(p, name, strlen(name)) == 0) {
            size_t v = n - strlen(name);
            while (v && (p[strlen(name) + v - 1] == ' ' || p[strlen(name) + v - 1] == '\t'))
                v--;
            if (v == 0 || v >= len)
                return false;
            memcpy(out, p + strlen(name), v);
            out[v] = '\0';
            return true;
        }
        p += n;
    }
    return false;
}

bool cohort_api_same_origin(const cohort_api_request_t *request)
{
    if (request->sec_fetch_site)
        return strcmp(request->sec_fetch_site, "same-origin") == 0;
    const char *o = request->origin_header;
    if (!o || !request->host || !*request->host)
        return false;
    if (strncmp(o, "http://", 7) == 0)
        o += 7;
    else if (strncmp(o, "https://", 8) == 0)
        o += 8;
    else
        return false;
    return strcasecmp(o, request->host) == 0;
}

static bool safe_method(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

static bool cross_site(cohort_api_error_t *err)
{
    return cohort_api_fail(err, 403, "cross_site",
                           "a request that changes state with the session cookie must come "
                           "from the dashboard's own pages (Sec-Fetch-Site: same-origin, or "
                           "an Origin equal to the Host)");
}

/* The scope bits as an array of names. */
static void scopes_array(uint32_t scopes, bson_t *array)
{
    bson_init(array);
    uint32_t n = 0;
    for (int i = 0; i < COHORT_SCOPE_COUNT; i++)
        if (scopes & (1u << i))
            cohort_json_array_append_utf8(array, &n, cohort_scope_names[i]);
}

static const char *doc_utf8(const bson_t *doc, const char *key, const char *fallback)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it)
               ? bson_iter_utf8(&it, NULL)
               : fallback;
}

/* A new session for `name` with `scopes` for `ttl_ms`: stored, its cookie in the reply. */
static bool open_session(cohort_store_t *store, mongoc_client_t *client, const char *name,
                         uint32_t scopes, int64_t ttl_ms, cohort_api_reply_t *reply,
                         cohort_api_error_t *err)
{
    char secret[COHORT_TOKEN_TEXT_MAX], hash[COHORT_TOKEN_HASH_HEX];
    bson_error_t error;
    if (!cohort_token_generate(secret, sizeof secret, &error) ||
        !cohort_token_hash(secret, hash, sizeof hash))
        return cohort_api_fail(err, 500, "internal", "cannot make a session: %s",
                               error.message);
    int64_t now = cohort_clock_cluster_ms();
    bson_t array;
    scopes_array(scopes, &array);
    bool ok = cohort_store_create_ui_session(store, client, hash, name, &array, now,
                                             now + ttl_ms, &error);
    if (ok) {
        BSON_APPEND_UTF8(&reply->body, "name", name);
        BSON_APPEND_ARRAY(&reply->body, "scopes", &array);
        cohort_json_append_time(&reply->body, "expires_at", now + ttl_ms);
        snprintf(reply->set_cookie, sizeof reply->set_cookie,
                 COHORT_SESSION_COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%lld",
                 secret, (long long)(ttl_ms / 1000));
        reply->status = 200;
    }
    bson_destroy(&array);
    return ok || cohort_api_fail_store(err, &error, "cannot store the session");
}

static bool sign_in_with_code(cohort_store_t *store, mongoc_client_t *client, const char *code,
                              cohort_api_reply_t *reply, cohort_api_error_t *err)
{
    char hash[COHORT_TOKEN_HASH_HEX];
    if (!cohort_token_well_formed(code) || !cohort_token_hash(code, hash, sizeof hash))
        return cohort_api_fail(err, 401, "unauthorized", "the sign-in code is not valid");
    bson_t doc;
    bool found = false;
    bson_error_t error;
    if (!cohort_store_redeem_ui_code(store, client, hash, cohort_clock_cluster_ms(), &doc,
                                     &found, &error)) {
        bson_destroy(&doc);
        return cohort_api_fail_store(err, &error, "cannot check the sign-in code");
    }
    bool ok = found;
    if (!found)
        cohort_api_fail(err, 401, "unauthorized",
                        "the sign-in code is unknown, used already or expired: run cohortctl "
                        "ui-link again");
    else {
        bson_iter_t it;
        int64_t ttl = bson_iter_init_find(&it, &doc, "session_ttl_ms") &&
                              BSON_ITER_HOLDS_NUMBER(&it)
                          ? bson_iter_as_int64(&it)
                          : COHORT_SESSION_TTL_MS;
        ok = open_session(store, client, doc_utf8(&doc, "name", "ui-link"), cohort_api_scopes_of(&doc),
                          ttl > 0 ? ttl : COHORT_SESSION_TTL_MS, reply, err);
    }
    bson_destroy(&doc);
    return ok;
}

static bool sign_in_with_token(cohort_store_t *store, cohort_api_auth_t *auth,
                               mongoc_client_t *client, const char *token,
                               cohort_api_reply_t *reply, cohort_api_error_t *err)
{
    char header[COHORT_TOKEN_TEXT_MAX + 16];
    if (strlen(token) >= COHORT_TOKEN_TEXT_MAX)
        return cohort_api_fail(err, 401, "unauthorized", "the token is not valid");
    snprintf(header, sizeof header, "Bearer %s", token);
    cohort_api_caller_t caller;
    if (!cohort_api_authenticate(auth, client, header, &caller, err))
        return false;
    char name[80];
    snprintf(name, sizeof name, "token %s", caller.name);
    return open_session(store, client, name, caller.scopes, COHORT_SESSION_TTL_MS, reply, err);
}

static bool sign_out(cohort_store_t *store, mongoc_client_t *client,
                     const cohort_api_request_t *request, cohort_api_reply_t *reply,
                     cohort_api_error_t *err)
{
    char secret[COHORT_TOKEN_TEXT_MAX], hash[COHORT_TOKEN_HASH_HEX];
    bson_error_t error;
    if (cohort_api_session_cookie(request->cookie, secret, sizeof secret) &&
        cohort_token_hash(secret, hash, sizeof hash) &&
        !cohort_store_end_ui_session(store, client, hash, &error))
        return cohort_api_fail_store(err, &error, "cannot end the session");
    snprintf(reply->set_cookie, sizeof reply->set_cookie,
             COHORT_SESSION_COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    BSON_APPEND_BOOL(&reply->body, "signed_out", true);
    reply->status = 200;
    return true;
}

bool cohort_api_session_handle(cohort_store_t *store, cohort_api_auth_t *auth,
                               mongoc_client_t *client, const cohort_api_request_t *request,
                               cohort_api_reply_t *reply, cohort_api_error_t *err)
{
    bool post = strcmp(request->method, "POST") == 0;
    if (!post && strcmp(request->method, "DELETE") != 0) {
        reply->allow = COHORT_API_SESSION_ALLOW;
        return cohort_api_fail(err, 405, "method_not_allowed",
                               "%s is not allowed here: use " COHORT_API_SESSION_ALLOW,
                               request->method);
    }
    if (!cohort_api_same_origin(request))
        return cross_site(err);
    if (!post)
        return sign_out(store, client, request, reply, err);
    bson_t body;
    if (!cohort_api_parse_object(request->body, request->body_len, false, &body, err))
        return false;
    bson_iter_t it;
    const char *code = NULL, *token = NULL;
    bool ok = true;
    if (bson_iter_init(&it, &body)) {
        while (ok && bson_iter_next(&it)) {
            const char *key = bson_iter_key(&it);
            const char **slot = strcmp(key, "code") == 0    ? &code
                                : strcmp(key, "token") == 0 ? &token
                                                            : NULL;
            if (!slot)
                ok = cohort_api_fail(err, 400, "bad_request",
                                     "field '%.60s': unknown (send code or token)", key);
            else if (!BSON_ITER_HOLDS_UTF8(&it))
                ok = cohort_api_fail(err, 400, "bad_request", "field '%s': must be a string",
                                     key);
            else
                *slot = bson_iter_utf8(&it, NULL);
        }
    }
    if (ok && !code == !token)
        ok = cohort_api_fail(err, 400, "bad_request", "send exactly one of code and token");
    if (ok)
        ok = code ? sign_in_with_code(store, client, code, reply, err)
                  : sign_in_with_token(store, auth, client, token, reply, err);
    bson_destroy(&body);
    return ok;
}

bool cohort_api_authenticate_request(cohort_api_auth_t *auth, cohort_store_t *store,
                                     mongoc_client_t *client,
                                     const cohort_api_request_t *request,
                                     cohort_api_caller_t *caller, cohort_api_error_t *err)
{
    char secret[COHORT_TOKEN_TEXT_MAX], hash[COHORT_TOKEN_HASH_HEX];
    if (request->authorization ||
        !cohort_api_session_cookie(request->cookie, secret, sizeof secret))
        return cohort_api_authenticate(auth, client, request->authorization, caller, err);
    if (!safe_method(request->method) && !cohort_api_same_origin(request))
        return cross_site(err);
    if (!cohort_token_well_formed(secret) || !cohort_token_hash(secret, hash, sizeof hash))
        return cohort_api_fail(err, 401, "unauthorized", "the session cookie is not valid: "
                                                         "sign in again at /ui/login");
    bson_t doc;
    bool found = false;
    bson_error_t error;
    bool ok = cohort_store_find_ui_session(store, client, hash, cohort_clock_cluster_ms(), &doc,
                                           &found, &error);
    if (!ok)
        cohort_api_fail(err, 503, "unavailable",
                        "cannot check the session: the database did not answer: %.300s",
                        error.message);
    else if (!found)
        ok = cohort_api_fail(err, 401, "unauthorized",
                             "the session expired or was ended: sign in again at /ui/login");
    else {
        memset(caller, 0, sizeof *caller);
        snprintf(caller->name, sizeof caller->name, "%s", doc_utf8(&doc, "name", "session"));
        caller->scopes = cohort_api_scopes_of(&doc);
        caller->session = true;
    }
    bson_destroy(&doc);
    return ok;
}
