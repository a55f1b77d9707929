/*
 * api_workers.c - the external workers' endpoints of the HTTP API v1 (see api_workers.h and
 * docs/API.md): claims with a lease, heartbeats, and outcomes fenced on the claim.
 *
 * A node serves these calls for the services it hosts: it knows their max_attempts, backoff
 * and claim filter (pause and block switches, busy groups) from its own state, as its own
 * workers do. A claim follows the rules of a node's claim (claim order, groups, attempts);
 * the difference is the lease: the task is the worker's until lease_expires_at, which its
 * heartbeats push on, and the primary's sweep gives back a claim whose lease ran out.
 *
 * A claim's token is 128 bits from getrandom(): it is the secret of the lease tokens the
 * worker gets, the only thing that lets a write touch the task. A claim whose reply never
 * reaches its worker (the client left meanwhile; api_pool.c) is given back at once, the
 * attempts not counted (cohort_api_claim_give_back()).
 *
 * Outcomes are one conditional write on {_id, status: claimed, attempts, claim_token}
 * (store/leases.c), recorded in the history with the API token that sent it. The read before
 * it only chooses the answer: applied (200), a replay of the outcome already written under
 * the same claim, with the same body (200, nothing written again), another outcome or body
 * for that claim (409 conflict), or a lost lease (409 lease_lost, nothing written).
 */
#include "node/http/api_workers.h"

#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/token.h"
#include "node/status/api_json.h"
#include "node/http/api_lease.h"
#include "node/http/api_tasks.h"
#include "node/primary/election.h"
#include "node/work/filter.h"
#include "node/handler/host.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/groups.h"
#include "store/leases.h"
#include "store/outcomes.h"

_Static_assert(COHORT_SECRET_HEX_SIZE == COHORT_CLAIM_TOKEN_SIZE,
               "an external claim's token is a secret from core/token.h");

/* The hosted service named `name`, or NULL. */
static cohort_service_t *find_hosted(cohort_service_t *const *services, size_t n,
                                     const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(services[i]->config->name, name) == 0)
            return services[i];
    return NULL;
}

/* The hosted service the call names; else 404: `not_found` if no node has run it,
 * `not_hosted` if it exists but this node does not host it. */
static cohort_service_t *hosted(cohort_api_call_t *call)
{
    cohort_service_t *s = find_hosted(call->services, call->n_services, call->route->service);
    if (s)
        return s;
    if (!cohort_api_service_exists(call))
        return NULL;
    cohort_api_fail(call->err, 404, "not_hosted",
                    "this node does not host service '%s': send external workers' calls to a "
                    "node that has it in its configuration",
                    call->route->service);
    return NULL;
}

static bool read_body(cohort_api_call_t *call, bson_t *body)
{
    return cohort_api_parse_object(call->request->body, call->request->body_len, true, body,
                                   call->err);
}

/* hosted(), then the call's JSON body into `body` (destroy it once this returned the service;
 * on NULL there is nothing to destroy and `err` says why). */
static cohort_service_t *hosted_body(cohort_api_call_t *call, bson_t *body)
{
    cohort_service_t *s = hosted(call);
    if (!s)
        return NULL;
    if (read_body(call, body))
        return s;
    bson_destroy(body);
    return NULL;
}

/* ---- POST /api/v1/services/{svc}/claims -------------------------------------------------- */

/* The string at `key` of `doc`, or NULL. */
static const char *utf8_field(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it)
               ? bson_iter_utf8(&it, NULL)
               : NULL;
}

/* A claimed task that must not run: its attempts are used up (as a node's worker fails it
 * before its handler), or its group is busy (given back untouched). False: skip it. */
static bool may_run(cohort_api_call_t *call, cohort_service_t *s, const char *worker,
                    const bson_t *doc, const cohort_lease_ref_t *ref)
{
    bson_error_t error;
    bool applied = false;
    if (ref->attempt > s->config->max_attempts) {
        cohort_task_result_t result = {.finish = COHORT_FINISH_FAILED,
                                       .error = "attempts exhausted (max_attempts)",
                                       .started_at_ms = cohort_clock_cluster_ms(),
                                       .ended_at_ms = cohort_clock_cluster_ms(),
                                       .api_token = call->caller->name};
        if (!cohort_store_finish_leased(call->store, call->client, ref, worker, &result,
                                        &applied, &error))
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                        "cannot fail task %s, whose attempts are used up: %s (its lease runs "
                        "out and the primary resets it)",
                        ref->task_id, error.message);
        return false;
    }
    bson_iter_t it, id;
    if (!bson_iter_init_find(&it, doc, "group") || !BSON_ITER_HOLDS_UTF8(&it) ||
        !bson_iter_init_find(&id, doc, "_id"))
        return true;
    const char *group = bson_iter_utf8(&it, NULL);
    atomic_store(&s->uses_groups, true);
    bool locked = false;
    if (cohort_store_lock_group(call->store, call->client, s->config->name, bson_iter_value(&id),
                                worker, ref->attempt, group, &locked, &error) &&
        locked)
        return true;
    if (!cohort_store_release_lease(call->store, call->client, ref, utf8_field(doc, "coalesce_key"),
                                    &applied, &error))
        cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                    "cannot give back a task of busy group '%s': %s (its lease runs out)",
                    group, error.message);
    cohort_filter_note_busy_group(s, group);
    return false;
}

/* Appends one claimed task to the reply's array. */
static void append_claimed(bson_t *tasks, uint32_t *n, const bson_t *doc,
                           const cohort_lease_ref_t *ref, int64_t expires_at)
{
    bson_t one, lease;
    cohort_json_array_begin_document(tasks, n, &one);
    BSON_APPEND_UTF8(&one, "id", ref->task_id);
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "data") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_append_iter(&one, "data", -1, &it);
    } else {
        bson_t empty = BSON_INITIALIZER;
        BSON_APPEND_DOCUMENT(&one, "data", &empty);
    }
    BSON_APPEND_INT32(&one, "attempt", ref->attempt);
    cohort_json_append_utf8_or_null(&one, "kind", utf8_field(doc, "kind"));
    cohort_json_append_utf8_or_null(&one, "group", utf8_field(doc, "group"));
    BSON_APPEND_DOCUMENT_BEGIN(&one, "lease", &lease);
    char token[COHORT_LEASE_TOKEN_MAX];
    cohort_lease_token_format(ref, token, sizeof token);
    BSON_APPEND_UTF8(&lease, "token", token);
    cohort_json_append_time(&lease, "expires_at", expires_at);
    bson_append_document_end(&one, &lease);
    bson_append_document_end(tasks, &one);
}

/* The claim filter: the worker's kinds, and this node's copy of the switches and groups. The
 * claim's token is a fresh secret (one getrandom() call per claim call, against the three
 * database commands of the claim). */
static bool claim_tasks(cohort_api_call_t *call, cohort_service_t *s,
                        const cohort_api_claim_t *claim, int64_t now, bson_t *docs, size_t *n,
                        char token[COHORT_CLAIM_TOKEN_SIZE], bson_error_t *error)
{
    cohort_worker_filter_t copy = {0};
    cohort_filter_refresh(s, &copy);
    cohort_claim_filter_t filter = {
        .served_kinds = claim->n_kinds || claim->no_kind ? claim->kinds : NULL,
        .n_served_kinds = claim->n_kinds,
        .served_no_kind = claim->no_kind,
        .stopped_kinds = (const char *const *)copy.kinds,
        .n_stopped_kinds = copy.n_kinds,
        .busy_groups = (const char *const *)copy.groups,
        .n_busy_groups = copy.n_groups,
    };
    if (!cohort_secret_hex(token, error))
        return false;
    bool ok = cohort_store_claim_leased(call->store, call->client, s->config->name, claim->worker,
                                        now, now + claim->lease_ms, &filter, (size_t)claim->max,
                                        docs, n, token, error);
    cohort_filter_release(&copy);
    return ok;
}

/* Whether the service may be claimed from now: the cluster clock is known, the node is not
 * shutting down and the whole service is neither paused nor blocked. */
static bool claimable(cohort_service_t *s)
{
    pthread_mutex_lock(&s->lock);
    bool stopped = s->stopped_all || s->stopping;
    pthread_mutex_unlock(&s->lock);
    return !stopped && cohort_clock_synced();
}

bool cohort_api_claim(cohort_api_call_t *call)
{
    bson_t body;
    cohort_service_t *s = hosted_body(call, &body);
    if (!s)
        return false;
    cohort_api_claim_t claim;
    bool ok = cohort_api_parse_claim(&body, call->max_wait_ms, &claim, call->err);
    int64_t now = cohort_clock_cluster_ms();
    bson_error_t error;
    if (ok && !call->request->again) {
        /* Registered (or refreshed) while it waits and while its leases run. */
        int64_t alive = claim.wait_ms > claim.lease_ms ? claim.wait_ms : claim.lease_ms;
        bool clash = false;
        if (!cohort_store_touch_worker(call->store, call->client, claim.worker, s->config->name,
                                       now + alive + atomic_load(&s->election.takeover_ms),
                                       &clash, &error))
            ok = clash ? cohort_api_fail(call->err, 409, "conflict", "%s", error.message)
                       : cohort_api_fail_store(call->err, &error, "cannot register the worker");
    }
    bson_t docs[COHORT_API_CLAIM_MAX];
    size_t n = 0;
    char token[COHORT_CLAIM_TOKEN_SIZE];
    if (ok && claimable(s) &&
        !claim_tasks(call, s, &claim, now, docs, &n, token, &error))
        ok = cohort_api_fail_store(call->err, &error, "cannot claim");
    if (ok) {
        bson_t tasks;
        uint32_t k = 0;
        BSON_APPEND_ARRAY_BEGIN(&call->reply->body, "tasks", &tasks);
        for (size_t i = 0; i < n; i++) {
            cohort_lease_ref_t ref = {.attempt = 0};
            bson_strncpy(ref.service, s->config->name, sizeof ref.service);
            bson_strncpy(ref.claim, token, sizeof ref.claim);
            bson_iter_t it;
            if (bson_iter_init_find(&it, &docs[i], "_id") && BSON_ITER_HOLDS_OID(&it))
                bson_oid_to_string(bson_iter_oid(&it), ref.task_id);
            if (bson_iter_init_find(&it, &docs[i], "attempts") && BSON_ITER_HOLDS_INT32(&it))
                ref.attempt = bson_iter_int32(&it);
            if (ref.task_id[0] && ref.attempt > 0 &&
                may_run(call, s, claim.worker, &docs[i], &ref))
                append_claimed(&tasks, &k, &docs[i], &ref, now + claim.lease_ms);
        }
        bson_append_array_end(&call->reply->body, &tasks);
        call->reply->status = 200;
        atomic_fetch_add(&s->stats.ext_claimed, k);
        if (k > 0) { /* given back if the reply cannot be delivered */
            bson_strncpy(call->reply->claimed.service, s->config->name,
                         sizeof call->reply->claimed.service);
            bson_strncpy(call->reply->claimed.worker, claim.worker,
                         sizeof call->reply->claimed.worker);
            bson_strncpy(call->reply->claimed.token, token, sizeof call->reply->claimed.token);
        }
        if (k == 0 && claim.wait_ms > 0) {
            call->reply->hold_ms = claim.wait_ms;
            bson_strncpy(call->reply->held_service, s->config->name,
                         sizeof call->reply->held_service);
        }
    }
    for (size_t i = 0; i < n; i++)
        bson_destroy(&docs[i]);
    bson_destroy(&body);
    return ok;
}

void cohort_api_claim_give_back(cohort_store_t *store, mongoc_client_t *client,
                                cohort_service_t *const *services, size_t n_services,
                                cohort_api_reply_t *reply)
{
    cohort_service_t *s = find_hosted(services, n_services, reply->claimed.service);
    if (!s)
        return;
    int64_t given = 0;
    bson_error_t error;
    const char *role = cohort_election_role(&s->election);
    if (!cohort_store_give_back_claim(store, client, s->config->name, reply->claimed.worker,
                                      reply->claimed.token, &given, &error)) {
        cohort_logf(COHORT_LOG_WARN, s->config->name, role, 0,
                    "cannot give back the tasks claimed by external worker '%s', whose client "
                    "left before the reply: %s (their leases run out)",
                    reply->claimed.worker, error.message);
        return;
    }
    atomic_fetch_add(&s->stats.ext_released, (uint64_t)given);
    cohort_logf(COHORT_LOG_INFO, s->config->name, role, 0,
                "gave back %lld task(s) claimed by external worker '%s': its client left "
                "before the reply (attempts not counted)",
                (long long)given, reply->claimed.worker);
    if (given > 0)
        bson_strncpy(reply->wake, s->config->name, sizeof reply->wake);
}

/* ---- POST /api/v1/leases/{token}/... ----------------------------------------------------- */

/* The answer to an outcome whose conditional write matched nothing: a replay of the outcome
 * the claim already has, with the same body (`consistent`: 200), or a lost lease (409). */
static bool not_held(cohort_api_call_t *call, cohort_service_t *s,
                     const cohort_lease_state_t *state, bool consistent)
{
    if (!state->found)
        return cohort_api_fail(call->err, 404, "not_found",
                               "task %s no longer exists (deleted or purged)",
                               call->route->lease.task_id);
    if (state->same_claim && consistent) {
        BSON_APPEND_UTF8(&call->reply->body, "status", cohort_status_name(state->status));
        BSON_APPEND_BOOL(&call->reply->body, "replayed", true);
        call->reply->status = 200;
        return true;
    }
    if (state->same_claim)
        return cohort_api_fail(call->err, 409, "conflict",
                               "this attempt was reported already with another outcome or body: "
                               "the task is %s, and nothing was written",
                               cohort_status_name(state->status));
    atomic_fetch_add(&s->stats.ext_lost, 1);
    return cohort_api_fail(call->err, 409, "lease_lost",
                           "the lease on task %s attempt %d was lost (it ran out, or the task "
                           "was given back or claimed again): nothing was written",
                           call->route->lease.task_id, (int)call->route->lease.attempt);
}

bool cohort_api_heartbeat(cohort_api_call_t *call)
{
    bson_t body;
    cohort_service_t *s = hosted_body(call, &body);
    if (!s)
        return false;
    cohort_api_lease_body_t in;
    bool ok = cohort_api_parse_lease_body(&body, call->route->endpoint, &in, call->err);
    int64_t until = cohort_clock_cluster_ms() + in.lease_ms;
    bool held = false, cancel = false;
    bson_error_t error;
    if (ok && !cohort_store_extend_lease(call->store, call->client, &call->route->lease, until,
                                         in.has_progress ? &in.progress : NULL, &held, &cancel,
                                         &error))
        ok = cohort_api_fail_store(call->err, &error, "cannot extend the lease");
    if (ok && !held) {
        cohort_lease_state_t state;
        ok = cohort_store_read_lease(call->store, call->client, &call->route->lease, &state,
                                     &error)
                 ? not_held(call, s, &state, false)
                 : cohort_api_fail_store(call->err, &error, "cannot read the task");
    } else if (ok) {
        cohort_json_append_time(&call->reply->body, "expires_at", until);
        BSON_APPEND_BOOL(&call->reply->body, "cancel_requested", cancel);
        call->reply->status = 200;
    }
    bson_destroy(&body);
    return ok;
}

/* Whether a task left in `status` is what `endpoint` with `in` would have left: failed, or
 * pending after a retry (not with retry: false). */
static bool consistent_status(cohort_api_endpoint_t endpoint, const cohort_api_lease_body_t *in,
                              cohort_task_status_t status)
{
    switch (endpoint) {
    case COHORT_API_LEASE_SUCCEED:
        return status == COHORT_STATUS_SUCCEEDED;
    case COHORT_API_LEASE_FAIL:
        return status == COHORT_STATUS_FAILED || (in->retry && status == COHORT_STATUS_PENDING);
    default:
        return false;
    }
}

/* The error message a fail with `in` records. */
static const char *fail_message(const cohort_api_lease_body_t *in)
{
    return in->error ? in->error : "failed by its external worker";
}

/* Whether the outcome stored under the claim (`stored`: {result, last_error}) is the one the
 * call sends: succeed's `result` byte for byte (the same keys in the same order, the same
 * values and types; none if it sent none), fail's `error`. */
static bool same_body(cohort_api_endpoint_t endpoint, const cohort_api_lease_body_t *in,
                      const bson_t *stored)
{
    bson_iter_t it;
    if (endpoint == COHORT_API_LEASE_FAIL)
        return bson_iter_init_find(&it, stored, "last_error") && BSON_ITER_HOLDS_UTF8(&it) &&
               strcmp(bson_iter_utf8(&it, NULL), fail_message(in)) == 0;
    bool has = bson_iter_init_find(&it, stored, "result") && BSON_ITER_HOLDS_DOCUMENT(&it);
    if (!has || !in->has_result)
        return has == in->has_result;
    uint32_t len = 0;
    const uint8_t *raw = NULL;
    bson_iter_document(&it, &len, &raw);
    return len == in->result.len && memcmp(raw, bson_get_data(&in->result), len) == 0;
}

/* Whether an outcome the claim already has is this call's (a replay): the same status and
 * body, read from the task. */
static bool is_replay(cohort_api_call_t *call, const cohort_api_lease_body_t *in,
                      const cohort_lease_state_t *state, bool *same, bson_error_t *error)
{
    *same = false;
    if (!state->same_claim || !consistent_status(call->route->endpoint, in, state->status))
        return true;
    bson_t stored;
    if (!cohort_store_read_outcome(call->store, call->client, &call->route->lease, &stored,
                                   error)) {
        bson_destroy(&stored);
        return false;
    }
    *same = same_body(call->route->endpoint, in, &stored);
    bson_destroy(&stored);
    return true;
}

/* succeed and fail: the outcome, as a node's worker records it. */
static bool finish(cohort_api_call_t *call, cohort_service_t *s, const cohort_api_lease_body_t *in,
                   const cohort_lease_state_t *state, bool *applied, bson_error_t *error)
{
    const cohort_lease_ref_t *ref = &call->route->lease;
    cohort_task_result_t result = {.finish = COHORT_FINISH_SUCCEEDED,
                                   .started_at_ms = state->claimed_at_ms,
                                   .ended_at_ms = cohort_clock_cluster_ms(),
                                   .output = in->has_result ? &in->result : NULL,
                                   .api_token = call->caller->name};
    if (call->route->endpoint == COHORT_API_LEASE_FAIL) {
        result.finish = COHORT_FINISH_FAILED;
        result.error = fail_message(in);
        if (in->retry)
            cohort_host_retry(s->config, ref->attempt, &result);
    }
    if (!cohort_store_finish_leased(call->store, call->client, ref, state->claimed_by, &result,
                                    applied, error))
        return false;
    if (*applied) {
        cohort_service_stats_t *st = &s->stats;
        _Atomic uint64_t *counter = result.finish == COHORT_FINISH_SUCCEEDED ? &st->ext_succeeded
                                    : result.finish == COHORT_FINISH_RETRY   ? &st->ext_retried
                                                                             : &st->ext_failed;
        atomic_fetch_add(counter, 1);
        BSON_APPEND_UTF8(&call->reply->body, "status",
                         result.finish == COHORT_FINISH_SUCCEEDED ? "succeeded"
                         : result.finish == COHORT_FINISH_RETRY   ? "pending"
                                                                  : "failed");
        if (result.finish == COHORT_FINISH_RETRY)
            cohort_json_append_time(&call->reply->body, "retry_at", result.retry_at_ms);
    }
    return true;
}

bool cohort_api_lease_outcome(cohort_api_call_t *call)
{
    bson_t body;
    cohort_service_t *s = hosted_body(call, &body);
    if (!s)
        return false;
    const cohort_lease_ref_t *ref = &call->route->lease;
    cohort_api_lease_body_t in;
    cohort_lease_state_t state;
    bson_error_t error;
    bool ok = cohort_api_parse_lease_body(&body, call->route->endpoint, &in, call->err);
    if (ok && !cohort_store_read_lease(call->store, call->client, ref, &state, &error))
        ok = cohort_api_fail_store(call->err, &error, "cannot read the task");
    bool applied = false;
    if (ok && state.held) {
        if (call->route->endpoint == COHORT_API_LEASE_RELEASE) {
            ok = cohort_store_release_lease(call->store, call->client, ref, state.coalesce_key,
                                            &applied, &error);
            if (ok && applied) {
                atomic_fetch_add(&s->stats.ext_released, 1);
                BSON_APPEND_UTF8(&call->reply->body, "status", "pending");
                cohort_api_wake(call); /* due again at once: a held claim may take it */
            }
        } else {
            ok = finish(call, s, &in, &state, &applied, &error);
            if (ok && applied && call->route->endpoint == COHORT_API_LEASE_FAIL)
                cohort_api_wake(call);
        }
        if (!ok)
            cohort_api_fail_store(call->err, &error, "cannot record the outcome");
        else if (applied)
            call->reply->status = 200;
    }
    if (ok && !applied) {
        /* Not held when read, or lost between the read and the write: read what became of it. */
        bool same = false;
        if ((state.held &&
             !cohort_store_read_lease(call->store, call->client, ref, &state, &error)) ||
            !is_replay(call, &in, &state, &same, &error))
            ok = cohort_api_fail_store(call->err, &error, "cannot read the task");
        else
            ok = not_held(call, s, &state, same);
    }
    bson_destroy(&body);
    return ok;
}
