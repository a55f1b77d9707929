/*
 * api_auth.c - bearer tokens for the API (see api_auth.h).
 *
 * The cache is a fixed array: memory stays the same whatever callers send. A miss (or an
 * expired slot) costs one indexed read of `tokens` by hash; a slot is reused oldest first.
 * Unknown tokens are not cached, so one cannot fill the cache by guessing. The API's threads
 * share the cache under a mutex that is never held across a database call: each looks up
 * with its own client.
 */
#include "node/http/api_auth.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/token.h"
#include "store/tokens.h"
#include "store/store.h"

#define LAST_USED_EVERY_MS 60000

typedef struct auth_slot {
    char hash[COHORT_TOKEN_HASH_HEX]; /* "" : empty */
    cohort_api_caller_t caller;
    int64_t checked_ms;   /* monotonic: when the database last confirmed it */
    int64_t last_used_ms; /* monotonic: when last_used was last written (0: never) */
} auth_slot_t;

struct cohort_api_auth {
    cohort_store_t *store;
    _Atomic int64_t ttl_ms;
    pthread_mutex_t lock; /* guards the slots, never held across a database call */
    auth_slot_t slots[COHORT_API_AUTH_SLOTS];
};

cohort_api_auth_t *cohort_api_auth_new(cohort_store_t *store, int64_t ttl_ms)
{
    cohort_api_auth_t *auth = calloc(1, sizeof *auth);
    if (auth) {
        auth->store = store;
        atomic_store(&auth->ttl_ms, ttl_ms);
        pthread_mutex_init(&auth->lock, NULL);
    }
    return auth;
}

void cohort_api_auth_destroy(cohort_api_auth_t *auth)
{
    if (!auth)
        return;
    pthread_mutex_destroy(&auth->lock);
    free(auth);
}

void cohort_api_auth_set_ttl(cohort_api_auth_t *auth, int64_t ttl_ms)
{
    atomic_store(&auth->ttl_ms, ttl_ms);
}

/* Whether last_used is due for a write (at most once a minute per token and node); if so,
 * the slot counts it as written. Under the lock. */
static bool use_due(auth_slot_t *slot, int64_t now)
{
    if (slot->last_used_ms && now - slot->last_used_ms < LAST_USED_EVERY_MS)
        return false;
    slot->last_used_ms = now;
    return true;
}

/* The slot holding `hash`, comparing every slot in constant time; NULL if none. */
static auth_slot_t *find_slot(cohort_api_auth_t *auth, const char *hash)
{
    auth_slot_t *hit = NULL;
    for (size_t i = 0; i < COHORT_API_AUTH_SLOTS; i++)
        if (auth->slots[i].hash[0] && cohort_token_equal(auth->slots[i].hash, hash))
            hit = &auth->slots[i];
    return hit;
}

/* An empty slot, else the one confirmed longest ago. */
static auth_slot_t *free_slot(cohort_api_auth_t *auth)
{
    auth_slot_t *oldest = &auth->slots[0];
    for (size_t i = 0; i < COHORT_API_AUTH_SLOTS; i++) {
        if (!auth->slots[i].hash[0])
            return &auth->slots[i];
        if (auth->slots[i].checked_ms < oldest->checked_ms)
            oldest = &auth->slots[i];
    }
    return oldest;
}

uint32_t cohort_api_scopes_of(const bson_t *doc)
{
    uint32_t scopes = 0;
    bson_iter_t it, arr;
    if (!bson_iter_init_find(&it, doc, "scopes") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr))
        return 0;
    while (bson_iter_next(&arr)) {
        uint32_t one = 0;
        if (BSON_ITER_HOLDS_UTF8(&arr) &&
            cohort_scopes_parse(bson_iter_utf8(&arr, NULL), &one, NULL))
            scopes |= one;
    }
    return scopes;
}

/* Looks `hash` up in the database (no lock held) and records what it found in the cache:
 * *caller if the token is known; a revoked one is forgotten. */
static bool confirm(cohort_api_auth_t *auth, mongoc_client_t *client, const char *hash,
                    int64_t now, cohort_api_caller_t *caller, bool *known, bool *touch,
                    cohort_api_error_t *err)
{
    bson_t doc;
    bson_error_t error;
    *known = false;
    if (!cohort_store_find_token(auth->store, client, hash, &doc, known, &error)) {
        bson_destroy(&doc);
        return cohort_api_fail(err, 503, "unavailable", "cannot check the token: the database "
                                                        "did not answer: %.300s",
                               error.message);
    }
    bson_iter_t it;
    const char *name = bson_iter_init_find(&it, &doc, "_id") && BSON_ITER_HOLDS_UTF8(&it)
                           ? bson_iter_utf8(&it, NULL)
                           : "?";
    pthread_mutex_lock(&auth->lock);
    auth_slot_t *slot = find_slot(auth, hash);
    if (*known) {
        if (!slot) {
            slot = free_slot(auth);
            memset(slot, 0, sizeof *slot);
            snprintf(slot->hash, sizeof slot->hash, "%s", hash);
        }
        snprintf(slot->caller.name, sizeof slot->caller.name, "%s", name);
        slot->caller.scopes = cohort_api_scopes_of(&doc);
        slot->checked_ms = now;
        *caller = slot->caller;
        *touch = use_due(slot, now);
    } else if (slot) {
        memset(slot, 0, sizeof *slot); /* revoked: forget it */
    }
    pthread_mutex_unlock(&auth->lock);
    bson_destroy(&doc);
    return true;
}

bool cohort_api_authenticate(cohort_api_auth_t *auth, mongoc_client_t *client,
                             const char *authorization, cohort_api_caller_t *caller,
                             cohort_api_error_t *err)
{
    static const char bearer[] = "Bearer ";
    if (!authorization || strncasecmp(authorization, bearer, strlen(bearer)) != 0)
        return cohort_api_fail(err, 401, "unauthorized",
                               "send a token: Authorization: Bearer TOKEN (cohortctl tokens "
                               "create)");
    const char *token = authorization + strlen(bearer);
    char hash[COHORT_TOKEN_HASH_HEX];
    if (!cohort_token_well_formed(token) || !cohort_token_hash(token, hash, sizeof hash))
        return cohort_api_fail(err, 401, "unauthorized", "the token is not valid");
    int64_t now = cohort_clock_monotonic_ms();
    bool cached = false, touch = false;
    pthread_mutex_lock(&auth->lock);
    auth_slot_t *slot = find_slot(auth, hash);
    if (slot && now - slot->checked_ms < atomic_load(&auth->ttl_ms)) {
        cached = true;
        *caller = slot->caller;
        touch = use_due(slot, now);
    }
    pthread_mutex_unlock(&auth->lock);
    if (!cached) {
        bool known = false;
        if (!confirm(auth, client, hash, now, caller, &known, &touch, err))
            return false;
        if (!known)
            return cohort_api_fail(err, 401, "unauthorized",
                                   "the token is not valid (unknown or revoked)");
    }
    bson_error_t error;
    if (touch && !cohort_store_touch_token(auth->store, client, caller->name, &error))
        cohort_log_node(COHORT_LOG_WARN, "api: cannot record the use of token '%s': %s",
                        caller->name, error.message);
    return true;
}
