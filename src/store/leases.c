/*
 * leases.c - external workers (the HTTP API's `work` scope): their entries in `nodes`, their
 * claims with a lease, heartbeats that extend it, and outcomes fenced on the claim.
 *
 * An external worker's claim is a node's claim plus `lease_expires_at`: the task is claimed
 * by the worker's name under a claim token, and the worker holds the lease token that names
 * the task, the attempt and that claim token (cohort_lease_ref_t). Every later write on the
 * task (heartbeat, outcome, release) matches {_id, status: claimed, attempts, claim_token},
 * so once a lease ran out and the primary's sweep gave the task back (or another claim took
 * it), a late worker's write matches nothing and changes nothing. A release by the sweep
 * unsets the claim token; an outcome keeps it, which is how a replayed outcome is told from a
 * lost lease (cohort_store_read_lease()).
 *
 * The claim token of an external claim is the lease token's secret: 128 bits from getrandom()
 * (node/http/api_workers.c), where a node's own claims use ObjectIds (unique, not secret: a node's
 * claim is no capability). Every filter here also asks for lease_expires_at, which only an
 * external claim has, so no lease token, guessed or not, can name a node's claim.
 */
#include "store/leases.h"

#include "store/claims.h"
#include "store/internal.h"
#include "store/outcomes.h"
#include "store/store.h"

#include "core/error.h"

#include <string.h>

/* {_id, status: claimed, attempts, claim_token}: the lease still held. NULL for a task id
 * that is not 24 hex digits. */
static bson_t *held_lease(const cohort_lease_ref_t *ref)
{
    if (!bson_oid_is_valid(ref->task_id, strlen(ref->task_id)))
        return NULL;
    bson_oid_t oid;
    bson_oid_init_from_string(&oid, ref->task_id);
    return BCON_NEW("_id", BCON_OID(&oid), "status", BCON_UTF8("claimed"), "attempts",
                    BCON_INT32(ref->attempt), "claim_token", BCON_UTF8(ref->claim),
                    "lease_expires_at", "{", "$exists", BCON_BOOL(true), "}");
}

static bool bad_ref(bson_error_t *error)
{
    bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_INVALID,
                   "not a lease token this API handed out");
    return false;
}

bool cohort_store_touch_worker(cohort_store_t *store, mongoc_client_t *client, const char *name,
                               const char *service, int64_t alive_until_ms, bool *clash,
                               bson_error_t *error)
{
    *clash = false;
    mongoc_collection_t *nodes = store_collection(store, client, "nodes");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(name), "kind", BCON_UTF8("external"));
    bson_t *update = BCON_NEW("$set", "{", "kind", BCON_UTF8("external"), "alive_until",
                              BCON_DATE_TIME(alive_until_ms), "}", "$addToSet", "{", "services",
                              BCON_UTF8(service), "}", "$currentDate", "{", "seen_at",
                              BCON_BOOL(true), "}", "$unset", "{", "expired", BCON_UTF8(""), "}");
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bool ok = mongoc_collection_update_one(nodes, filter, update, opts, NULL, error);
    if (!ok && store_is_duplicate_key(error)) {
        /* The upsert would insert a second document with that _id: a cohortd node has it. */
        *clash = true;
        bson_set_error(error, COHORT_DOMAIN_USAGE, COHORT_CODE_CONFLICT,
                       "the worker name '%s' is a cohortd node's id: pick another", name);
    }
    bson_destroy(opts);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(nodes);
    return ok;
}

bool cohort_store_claim_leased(cohort_store_t *store, mongoc_client_t *client,
                               const char *service, const char *worker, int64_t now_ms,
                               int64_t lease_until_ms, const cohort_claim_filter_t *filter,
                               size_t max, bson_t *claimed, size_t *n, const char *token,
                               bson_error_t *error)
{
    return store_claim_tasks(store, client, service, worker, now_ms, lease_until_ms, filter, max,
                             claimed, n, token, error);
}

bool cohort_store_extend_lease(cohort_store_t *store, mongoc_client_t *client,
                               const cohort_lease_ref_t *ref, int64_t lease_until_ms,
                               const bson_t *progress, bool *held, bool *cancel_requested,
                               bson_error_t *error)
{
    *held = *cancel_requested = false;
    bson_t *filter = held_lease(ref);
    if (!filter)
        return bad_ref(error);
    bson_t update = BSON_INITIALIZER, set;
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    BSON_APPEND_DATE_TIME(&set, "lease_expires_at", lease_until_ms);
    if (progress)
        BSON_APPEND_DOCUMENT(&set, "progress", progress);
    bson_append_document_end(&update, &set);
    bson_t *current = BCON_NEW("$currentDate", "{", "heartbeat_at", BCON_BOOL(true), "}");
    bson_concat(&update, current);
    bson_destroy(current);
    bson_t *fields = BCON_NEW("cancel_requested", BCON_INT32(1));
    mongoc_collection_t *tasks = store_queue(store, client, ref->service);
    bson_t doc;
    bool ok = store_find_and_modify(tasks, filter, NULL, &update, fields, true, false, &doc, held,
                                    error);
    if (ok && *held) {
        bson_iter_t it;
        *cancel_requested = bson_iter_init_find(&it, &doc, "cancel_requested") &&
                            BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
        bson_destroy(&doc);
    }
    mongoc_collection_destroy(tasks);
    bson_destroy(fields);
    bson_destroy(&update);
    bson_destroy(filter);
    return ok;
}

/* The task `ref` names, read with `projection`, through `fn`; `extra` (may be NULL) adds
 * conditions to {_id}. */
static bool read_task(cohort_store_t *store, mongoc_client_t *client,
                      const cohort_lease_ref_t *ref, const bson_t *extra, const bson_t *projection,
                      store_doc_fn fn, void *user, bson_error_t *error)
{
    if (!bson_oid_is_valid(ref->task_id, strlen(ref->task_id)))
        return bad_ref(error);
    bson_oid_t oid;
    bson_oid_init_from_string(&oid, ref->task_id);
    bson_t *filter = BCON_NEW("_id", BCON_OID(&oid));
    if (extra)
        bson_concat(filter, extra);
    bson_t *opts = BCON_NEW("limit", BCON_INT64(1));
    BSON_APPEND_DOCUMENT(opts, "projection", projection);
    bool ok = store_walk_find(store_queue(store, client, ref->service), filter, opts, fn, user,
                              error);
    bson_destroy(opts);
    bson_destroy(filter);
    return ok;
}

typedef struct lease_read {
    const cohort_lease_ref_t *ref;
    cohort_lease_state_t *state;
} lease_read_t;

static bool read_state(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    const cohort_lease_ref_t *ref = ((lease_read_t *)user)->ref;
    cohort_lease_state_t *state = ((lease_read_t *)user)->state;
    state->found = true;
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "status") && BSON_ITER_HOLDS_UTF8(&it))
        cohort_status_parse(bson_iter_utf8(&it, NULL), &state->status);
    if (bson_iter_init_find(&it, doc, "claimed_by") && BSON_ITER_HOLDS_UTF8(&it))
        bson_strncpy(state->claimed_by, bson_iter_utf8(&it, NULL), sizeof state->claimed_by);
    bool same_token = bson_iter_init_find(&it, doc, "claim_token") && BSON_ITER_HOLDS_UTF8(&it) &&
                      strcmp(bson_iter_utf8(&it, NULL), ref->claim) == 0;
    bool same_attempt = bson_iter_init_find(&it, doc, "attempts") &&
                        BSON_ITER_HOLDS_INT32(&it) && bson_iter_int32(&it) == ref->attempt;
    bool leased = bson_iter_init_find(&it, doc, "lease_expires_at"); /* not a node's claim */
    state->same_claim = same_token && same_attempt && leased;
    state->held = state->same_claim && state->status == COHORT_STATUS_CLAIMED;
    store_date_field(doc, "claimed_at", &state->claimed_at_ms);
    if (bson_iter_init_find(&it, doc, "coalesce_key") && BSON_ITER_HOLDS_UTF8(&it))
        bson_strncpy(state->coalesce_key, bson_iter_utf8(&it, NULL), sizeof state->coalesce_key);
    return true;
}

bool cohort_store_read_lease(cohort_store_t *store, mongoc_client_t *client,
                             const cohort_lease_ref_t *ref, cohort_lease_state_t *state,
                             bson_error_t *error)
{
    memset(state, 0, sizeof *state);
    bson_t *projection = BCON_NEW("history", BCON_INT32(0), "data", BCON_INT32(0));
    lease_read_t read = {.ref = ref, .state = state};
    bool ok = read_task(store, client, ref, NULL, projection, read_state, &read, error);
    bson_destroy(projection);
    return ok;
}

static bool copy_doc(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    return bson_concat(user, doc);
}

bool cohort_store_read_outcome(cohort_store_t *store, mongoc_client_t *client,
                               const cohort_lease_ref_t *ref, bson_t *outcome,
                               bson_error_t *error)
{
    bson_init(outcome);
    bson_t *claim = BCON_NEW("claim_token", BCON_UTF8(ref->claim), "attempts",
                             BCON_INT32(ref->attempt));
    bson_t *projection = BCON_NEW("_id", BCON_INT32(0), "result", BCON_INT32(1), "last_error",
                                  BCON_INT32(1));
    bool ok = read_task(store, client, ref, claim, projection, copy_doc, outcome, error);
    bson_destroy(projection);
    bson_destroy(claim);
    return ok;
}

typedef struct give_back {
    cohort_store_t *store;
    mongoc_client_t *client;
    const char *service, *token;
    int64_t given;
} give_back_t;

/* One task of the claim, given back as its release would: fenced on the claim, its coalesce
 * key taken back. */
static bool give_back_one(void *user, const bson_t *doc, bson_error_t *error)
{
    give_back_t *g = user;
    cohort_lease_ref_t ref = {.attempt = 0};
    bson_strncpy(ref.service, g->service, sizeof ref.service);
    bson_strncpy(ref.claim, g->token, sizeof ref.claim);
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_OID(&it))
        return true; /* never handed out (node/http/api_workers.c): its lease runs out */
    bson_oid_to_string(bson_iter_oid(&it), ref.task_id);
    if (bson_iter_init_find(&it, doc, "attempts") && BSON_ITER_HOLDS_INT32(&it))
        ref.attempt = bson_iter_int32(&it);
    const char *key = bson_iter_init_find(&it, doc, "coalesce_key") && BSON_ITER_HOLDS_UTF8(&it)
                          ? bson_iter_utf8(&it, NULL)
                          : NULL;
    bool applied = false;
    if (!cohort_store_release_lease(g->store, g->client, &ref, key, &applied, error))
        return false;
    g->given += applied;
    return true;
}

bool cohort_store_give_back_claim(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, const char *worker, const char *token,
                                  int64_t *given, bson_error_t *error)
{
    bson_t *filter = BCON_NEW("claim_token", BCON_UTF8(token), "claimed_by", BCON_UTF8(worker),
                              "status", BCON_UTF8("claimed"), "lease_expires_at", "{",
                              "$exists", BCON_BOOL(true), "}");
    bson_t *opts = BCON_NEW("projection", "{", "attempts", BCON_INT32(1), "coalesce_key",
                            BCON_INT32(1), "}");
    give_back_t g = {.store = store, .client = client, .service = service, .token = token};
    bool ok = store_walk_find(store_queue(store, client, service), filter, opts, give_back_one,
                              &g, error);
    *given = g.given;
    bson_destroy(opts);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_finish_leased(cohort_store_t *store, mongoc_client_t *client,
                                const cohort_lease_ref_t *ref, const char *worker,
                                const cohort_task_result_t *result, bool *applied,
                                bson_error_t *error)
{
    *applied = false;
    bson_t *filter = held_lease(ref);
    if (!filter)
        return bad_ref(error);
    bson_t update = BSON_INITIALIZER;
    store_finish_update(&update, worker, ref->attempt, result);
    bool ok = store_update_task(store, client, ref->service, filter, &update, applied, error);
    bson_destroy(&update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_release_lease(cohort_store_t *store, mongoc_client_t *client,
                                const cohort_lease_ref_t *ref, const char *coalesce_key,
                                bool *applied, bson_error_t *error)
{
    *applied = false;
    bson_t *filter = held_lease(ref);
    if (!filter)
        return bad_ref(error);
    bool keyed = coalesce_key && *coalesce_key;
    bson_t *update = store_unclaim_update(keyed ? coalesce_key : NULL);
    bool ok = store_update_task(store, client, ref->service, filter, update, applied, error);
    if (!ok && keyed && store_is_duplicate_key(error)) {
        /* A newer pending task holds the key by now: give it back without. */
        bson_destroy(update);
        update = store_unclaim_update(NULL);
        ok = store_update_task(store, client, ref->service, filter, update, applied, error);
    }
    bson_destroy(update);
    bson_destroy(filter);
    return ok;
}

bool cohort_store_expire_leases(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, int64_t now_ms, int64_t *released,
                                bson_error_t *error)
{
    bson_t *filter = BCON_NEW("lease_expires_at", "{", "$lt", BCON_DATE_TIME(now_ms), "}",
                              "status", BCON_UTF8("claimed"));
    bool ok = store_release_claims(store, client, service, filter,
                                   "lease expired: its external worker neither reported nor "
                                   "extended the lease in time",
                                   false, released, error);
    bson_destroy(filter);
    return ok;
}
