/*
 * claims.c - taking pending tasks: one claim, batch claims, and giving a claim back untouched
 * (groups.c holds the group locks).
 *
 * A claim moves a task from pending to claimed by this node in one conditional write, so a
 * task is claimed at most once per attempt; every later write on the task (a lock, an
 * unclaim, an outcome) carries the claim it depends on in its filter (store_held_claim).
 */
#include "store/claims.h"

#include "store/internal.h"
#include "store/store.h"

#include "core/config.h" /* COHORT_CLAIM_BATCH_MAX */
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

/* One claim attempt for the store's contention counters (store.h): `won` tasks claimed, of
 * `candidates` the attempt saw (a findAndModify sees the one it claims, or none). */
static void count_claim(cohort_store_t *store, uint32_t candidates, int64_t won)
{
    atomic_fetch_add_explicit(&store->claims_attempted, 1, memory_order_relaxed);
    if (won <= 0)
        atomic_fetch_add_explicit(&store->claims_empty, 1, memory_order_relaxed);
    if ((int64_t)candidates > won)
        atomic_fetch_add_explicit(&store->claim_candidates_lost,
                                  (uint64_t)((int64_t)candidates - won), memory_order_relaxed);
}

/* {status: pending, run_at <= now} and the filter's partition, kinds and groups. */
static void claim_query(bson_t *query, int64_t now_ms, const cohort_claim_filter_t *filter)
{
    bson_t range, kind, group;
    BSON_APPEND_UTF8(query, "status", "pending");
    BSON_APPEND_DOCUMENT_BEGIN(query, "run_at", &range);
    BSON_APPEND_DATE_TIME(&range, "$lte", now_ms);
    bson_append_document_end(query, &range);
    if (!filter)
        return;
    if (filter->by_partition)
        BSON_APPEND_INT32(query, "partition", filter->partition);
    if (filter->served_kinds || filter->n_stopped_kinds > 0) {
        BSON_APPEND_DOCUMENT_BEGIN(query, "kind", &kind);
        if (filter->served_kinds) /* null: tasks without a kind */
            store_append_strings(&kind, "$in", filter->served_kinds, filter->n_served_kinds,
                                 filter->served_no_kind);
        if (filter->n_stopped_kinds > 0)
            store_append_strings(&kind, "$nin", filter->stopped_kinds, filter->n_stopped_kinds,
                                 false);
        bson_append_document_end(query, &kind);
    }
    if (filter->n_busy_groups > 0) {
        BSON_APPEND_DOCUMENT_BEGIN(query, "group", &group);
        store_append_strings(&group, "$nin", filter->busy_groups, filter->n_busy_groups, false);
        bson_append_document_end(query, &group);
    }
    if (filter->weight_room > 0 && !filter->weight_any_first) {
        /* weight <= room, or no weight at all (a task written before weights, which weighs
         * 1): {$not: {$gt}} matches both in one predicate, no $or. Once every task carries a
         * weight (feature level 2), the plain range. */
        bson_t *fits = filter->weight_always_set
                           ? BCON_NEW("$lte", BCON_INT64(filter->weight_room))
                           : BCON_NEW("$not", "{", "$gt", BCON_INT64(filter->weight_room), "}");
        BSON_APPEND_DOCUMENT(query, "weight", fits);
        bson_destroy(fits);
    }
}

/* The claim's rule for suspects: {suspect: {$ne: true}} or {suspect: true}. */
static void append_suspects(bson_t *query, cohort_suspects_t suspects)
{
    if (suspects == COHORT_SUSPECTS_ONLY) {
        BSON_APPEND_BOOL(query, "suspect", true);
    } else if (suspects == COHORT_SUSPECTS_SKIP) {
        bson_t ne;
        BSON_APPEND_DOCUMENT_BEGIN(query, "suspect", &ne);
        BSON_APPEND_BOOL(&ne, "$ne", true);
        bson_append_document_end(query, &ne);
    }
}

static cohort_suspects_t suspects_of(const cohort_claim_filter_t *filter)
{
    return filter ? filter->suspects : COHORT_SUSPECTS_ANY;
}

bool cohort_store_task_suspect(const bson_t *task)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, task, "suspect") && bson_iter_as_bool(&it);
}

int64_t cohort_store_task_weight(const bson_t *task)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, task, "weight") || !BSON_ITER_HOLDS_NUMBER(&it))
        return 1;
    int64_t weight = bson_iter_as_int64(&it);
    return weight < 1 ? 1 : weight > COHORT_WEIGHT_MAX ? COHORT_WEIGHT_MAX : weight;
}

bson_t *store_claim_sort(void)
{
    return BCON_NEW("priority", BCON_INT32(-1), "run_at", BCON_INT32(1), "_id", BCON_INT32(1));
}

/* The claim itself; `token` (may be NULL) marks the claims of one batch claim. With
 * `lease_until_ms` > 0 (an external worker's claim) the claim ends at that time unless the
 * worker extends it (leases.c); a node's claim has no lease_expires_at (check-ins keep it). */
static bson_t *claim_update(const char *node_id, const char *token, int64_t lease_until_ms)
{
    bson_t *update = bson_new(), set, unset;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
    BSON_APPEND_UTF8(&set, "status", "claimed");
    BSON_APPEND_UTF8(&set, "claimed_by", node_id);
    BSON_APPEND_UTF8(&set, "claim_token", token ? token : "");
    if (lease_until_ms > 0)
        BSON_APPEND_DATE_TIME(&set, "lease_expires_at", lease_until_ms);
    bson_append_document_end(update, &set);
    bson_t *rest = BCON_NEW("$inc", "{", "attempts", BCON_INT32(1), "}", "$currentDate", "{",
                            "claimed_at", BCON_BOOL(true), "heartbeat_at", BCON_BOOL(true), "}");
    bson_concat(update, rest);
    bson_destroy(rest);
    BSON_APPEND_DOCUMENT_BEGIN(update, "$unset", &unset);
    BSON_APPEND_UTF8(&unset, "coalesce_pending", "");
    if (lease_until_ms <= 0)
        BSON_APPEND_UTF8(&unset, "lease_expires_at", "");
    bson_append_document_end(update, &unset);
    return update;
}

void cohort_store_new_claim_token(char token[COHORT_CLAIM_TOKEN_SIZE])
{
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    bson_oid_to_string(&oid, token);
}

bool cohort_store_release_token(cohort_store_t *store, mongoc_client_t *client,
                                const char *service, const char *node_id, const char *token,
                                int64_t *released, bson_error_t *error)
{
    bson_t *back = store_unclaim_update(NULL);
    bson_t *held = BCON_NEW("claim_token", BCON_UTF8(token), "claimed_by", BCON_UTF8(node_id),
                            "status", BCON_UTF8("claimed"));
    bool ok = store_update_queue(store, client, service, held, back, released, error);
    bson_destroy(held);
    bson_destroy(back);
    return ok;
}

bool cohort_store_claim_task(cohort_store_t *store, mongoc_client_t *client, const char *service,
                             const char *node_id, int64_t now_ms,
                             const cohort_claim_filter_t *filter, bson_t *claimed, bool *found,
                             const char *token, bson_error_t *error)
{
    char fresh[COHORT_CLAIM_TOKEN_SIZE];
    if (!token) {
        cohort_store_new_claim_token(fresh);
        token = fresh;
    }
    bson_init(claimed);
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t query = BSON_INITIALIZER;
    claim_query(&query, now_ms, filter);
    append_suspects(&query, suspects_of(filter));
    bson_t *sort = store_claim_sort();
    bson_t *update = claim_update(node_id, token, 0);
    bson_t *fields = BCON_NEW("history", BCON_INT32(0));
    bool ok = store_find_and_modify(tasks, &query, sort, update, fields, true, false, claimed,
                                    found, error);
    if (ok)
        count_claim(store, *found ? 1 : 0, *found ? 1 : 0);
    bson_destroy(fields);
    bson_destroy(update);
    bson_destroy(sort);
    bson_destroy(&query);
    mongoc_collection_destroy(tasks);
    return ok;
}

/* A batch round that lost every candidate to other claimers looks again (CLAIM_ROUNDS) with
 * its candidates spread: it reads CLAIM_SPREAD times as many in claim order and, if more than
 * `max` of them share the top priority, claims a random one of the CLAIM_SPREAD windows of
 * `max` among those (never the one it lost). A first round takes the `max` after the
 * filter's `skip` (0: the first in claim order). Strict run_at order within that priority
 * gives way to fewer collisions; between priorities the order holds, since no task of a
 * lower priority is taken while more of the top one are due than the window reaches. */
#define CLAIM_SPREAD 4

/* The candidates' ids into `ids` (an array) and their number into *n. With the filter's
 * weight room (cohort_claim_filter_t), of the candidates chosen the first is kept (the query
 * let it through: within the room, or any when the node holds nothing) and after it only
 * tasks of weight 1: a batch prefetches light work only. Skipping suspects, the query finds
 * them too (so that a node learns one is due) and they are left out, not counted. */
static bool find_candidates(mongoc_collection_t *tasks, const bson_t *query, const bson_t *sort,
                            size_t max, size_t pass, const cohort_claim_filter_t *filter,
                            bson_t *ids, uint32_t *n, bson_error_t *error)
{
    bool weighed = filter && filter->weight_room > 0;
    bool skip = suspects_of(filter) == COHORT_SUSPECTS_SKIP;
    size_t limit = pass + max;
    bool spread = pass > 0;
    bson_t *opts = BCON_NEW("limit", BCON_INT64((int64_t)limit), "projection", "{", "_id",
                            BCON_INT32(1), "priority", BCON_INT32(1), "weight", BCON_INT32(1),
                            "suspect", BCON_INT32(1), "}");
    BSON_APPEND_DOCUMENT(opts, "sort", sort);
    if (!spread && !weighed && !skip) {
        bool ok = store_find_ids(tasks, query, opts, ids, n, error);
        bson_destroy(opts);
        return ok;
    }
    bson_value_t *seen = calloc(limit, sizeof *seen);
    bool *light = calloc(limit, sizeof *light);
    size_t got = 0, tier = 0;
    int32_t top = 0;
    mongoc_cursor_t *cursor = seen && light
                                  ? mongoc_collection_find_with_opts(tasks, query, opts, NULL)
                                  : NULL;
    const bson_t *doc;
    while (cursor && got < limit && mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (!bson_iter_init_find(&it, doc, "_id"))
            continue;
        if (skip && cohort_store_task_suspect(doc)) {
            if (filter->suspect_seen)
                *filter->suspect_seen = true;
            continue;
        }
        bson_value_copy(bson_iter_value(&it), &seen[got]);
        light[got] = cohort_store_task_weight(doc) <= 1;
        int32_t priority = bson_iter_init_find(&it, doc, "priority") &&
                                   BSON_ITER_HOLDS_INT32(&it)
                               ? bson_iter_int32(&it)
                               : 0;
        if (got == 0)
            top = priority;
        if (priority == top && tier == got)
            tier++;
        got++;
    }
    bool ok = cursor && !mongoc_cursor_error(cursor, error);
    if (!seen || !light)
        ok = cohort_error_nomem(error, "a batch claim's candidates");
    size_t from = pass + max <= tier ? pass : tier > max ? tier - max : 0;
    uint32_t kept = 0;
    for (size_t i = from; ok && i < got && i < from + max; i++) {
        (*n)++;
        if (weighed && kept > 0 && !light[i])
            continue;
        char key[16];
        const char *k;
        bson_uint32_to_string(kept++, &k, key, sizeof key);
        bson_append_value(ids, k, -1, &seen[i]);
    }
    for (size_t i = 0; i < got; i++)
        bson_value_destroy(&seen[i]);
    free(light);
    free(seen);
    if (cursor)
        mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    return ok;
}

/* One round of a batch claim; *candidates receives how many tasks the find returned. */
static bool claim_tasks_once(cohort_store_t *store, mongoc_client_t *client,
                             const char *service, const char *node_id, int64_t now_ms,
                             int64_t lease_until_ms, const cohort_claim_filter_t *filter,
                             size_t max, size_t pass, bson_t *claimed, size_t *n,
                             uint32_t *candidates, const char *token, bson_error_t *error)
{
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t query = BSON_INITIALIZER;
    claim_query(&query, now_ms, filter);
    if (suspects_of(filter) == COHORT_SUSPECTS_ONLY)
        append_suspects(&query, COHORT_SUSPECTS_ONLY);
    bson_t *sort = store_claim_sort();

    /* 1. The candidates, in claim order, after the first `pass` of the top tier. */
    bson_t ids = BSON_INITIALIZER;
    uint32_t found = 0;
    bool ok = find_candidates(tasks, &query, sort, max, pass, filter, &ids, &found, error);

    /* 2. Claim those still pending and due, under the call's token. */
    if (ok && !bson_empty(&ids)) {
        bson_t in;
        BSON_APPEND_DOCUMENT_BEGIN(&query, "_id", &in);
        BSON_APPEND_ARRAY(&in, "$in", &ids);
        bson_append_document_end(&query, &in);
        if (suspects_of(filter) == COHORT_SUSPECTS_SKIP) /* one sent back meanwhile */
            append_suspects(&query, COHORT_SUSPECTS_SKIP);
        bson_t *update = claim_update(node_id, token, lease_until_ms);
        int64_t modified = 0;
        ok = store_write(tasks, STORE_UPDATE_MANY, &query, update, NULL, "modifiedCount",
                         &modified, error);
        bson_destroy(update);

        /* 3. Read back what this token won. */
        if (ok && modified > 0) {
            bson_t *mine = BCON_NEW("claim_token", BCON_UTF8(token), "claimed_by",
                                    BCON_UTF8(node_id));
            bson_t in2;
            BSON_APPEND_DOCUMENT_BEGIN(mine, "_id", &in2);
            BSON_APPEND_ARRAY(&in2, "$in", &ids);
            bson_append_document_end(mine, &in2);
            bson_t read = BSON_INITIALIZER;
            BSON_APPEND_DOCUMENT(&read, "sort", sort);
            bson_t *no_history = BCON_NEW("history", BCON_INT32(0));
            BSON_APPEND_DOCUMENT(&read, "projection", no_history);
            mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, mine, &read, NULL);
            const bson_t *doc;
            while (*n < max && mongoc_cursor_next(cursor, &doc))
                bson_copy_to(doc, &claimed[(*n)++]);
            ok = !mongoc_cursor_error(cursor, error);
            mongoc_cursor_destroy(cursor);
            if (!ok) {
                /* The claims landed but could not be read: give them back by token rather
                 * than leave them to the stall timeout (best effort: the database may be
                 * away, and then they are reset as stalled). */
                for (size_t i = 0; i < *n; i++)
                    bson_destroy(&claimed[i]);
                *n = 0;
                bson_error_t ignored;
                cohort_store_release_token(store, client, service, node_id, token, NULL,
                                           &ignored);
            }
            bson_destroy(no_history);
            bson_destroy(&read);
            bson_destroy(mine);
        }
    }
    *candidates = found;
    if (ok)
        count_claim(store, found, found > 0 ? (int64_t)*n : 0);
    if (ok && filter && filter->lost && found > *n)
        *filter->lost += found - (uint32_t)*n;
    bson_destroy(&ids);
    bson_destroy(sort);
    bson_destroy(&query);
    mongoc_collection_destroy(tasks);
    return ok;
}

/* Claimers at the same time see the same first candidates: a round that found some but won
 * none lost them to another claimer, not to an empty queue, so it looks again (at most
 * CLAIM_ROUNDS times) rather than report "nothing to claim" and park the workers. The rounds
 * share the call's token: a round runs only when those before it won nothing. */
#define CLAIM_ROUNDS 4

/* A batch claim, with a lease for an external worker's (lease_until_ms > 0). */
bool store_claim_tasks(cohort_store_t *store, mongoc_client_t *client, const char *service,
                       const char *node_id, int64_t now_ms, int64_t lease_until_ms,
                       const cohort_claim_filter_t *filter, size_t max, bson_t *claimed,
                       size_t *n, const char *token, bson_error_t *error)
{
    char fresh[COHORT_CLAIM_TOKEN_SIZE];
    if (!token) {
        cohort_store_new_claim_token(fresh);
        token = fresh;
    }
    *n = 0;
    if (max > COHORT_CLAIM_BATCH_MAX)
        max = COHORT_CLAIM_BATCH_MAX;
    if (max == 0)
        return true;
    bool ok = true;
    uint32_t candidates = 1;
    size_t pass = filter ? filter->skip : 0;
    if (pass > COHORT_CLAIM_SKIP_MAX)
        pass = COHORT_CLAIM_SKIP_MAX;
    if (filter && filter->lost)
        *filter->lost = 0;
    for (int round = 0; ok && *n == 0 && candidates > 0 && round < CLAIM_ROUNDS; round++) {
        if (round > 0) { /* lost: another window of the spread than the one just lost */
            size_t lost = pass / max % CLAIM_SPREAD;
            pass = (lost + 1 + (size_t)random() % (CLAIM_SPREAD - 1)) % CLAIM_SPREAD * max;
        }
        ok = claim_tasks_once(store, client, service, node_id, now_ms, lease_until_ms, filter,
                              max, pass, claimed, n, &candidates, token, error);
    }
    return ok;
}

bool cohort_store_claim_tasks(cohort_store_t *store, mongoc_client_t *client,
                              const char *service, const char *node_id, int64_t now_ms,
                              const cohort_claim_filter_t *filter, size_t max, bson_t *claimed,
                              size_t *n, const char *token, bson_error_t *error)
{
    return store_claim_tasks(store, client, service, node_id, now_ms, 0, filter, max, claimed, n,
                             token, error);
}

/* {_id, status: claimed, claimed_by: node, attempts: attempt}: the claim still held. */
bson_t *store_held_claim(const bson_value_t *id, const char *node_id, int32_t attempt)
{
    bson_t *filter = bson_new();
    BSON_APPEND_VALUE(filter, "_id", id);
    BSON_APPEND_UTF8(filter, "status", "claimed");
    BSON_APPEND_UTF8(filter, "claimed_by", node_id);
    BSON_APPEND_INT32(filter, "attempts", attempt);
    return filter;
}

/* The update that gives a claim back: pending, the attempt not counted, no lock or token;
 * with `coalesce_key`, the task holds that key for coalescing again. */
bson_t *store_unclaim_update(const char *coalesce_key)
{
    bson_t *update = bson_new(), set;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
    BSON_APPEND_UTF8(&set, "status", "pending");
    BSON_APPEND_NULL(&set, "claimed_by");
    if (coalesce_key)
        BSON_APPEND_UTF8(&set, "coalesce_pending", coalesce_key);
    bson_append_document_end(update, &set);
    bson_t *rest = BCON_NEW("$inc", "{", "attempts", BCON_INT32(-1), "}", "$unset", "{",
                            "group_lock", BCON_UTF8(""), "claim_token", BCON_UTF8(""),
                            "lease_expires_at", BCON_UTF8(""), "}");
    bson_concat(update, rest);
    bson_destroy(rest);
    return update;
}

bool cohort_store_unclaim(cohort_store_t *store, mongoc_client_t *client, const char *service,
                          const bson_value_t *id, const char *node_id, int32_t attempt,
                          const char *coalesce_key, bson_error_t *error)
{
    bson_t *filter = store_held_claim(id, node_id, attempt);
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t *update = store_unclaim_update(coalesce_key);
    bool ok = mongoc_collection_update_one(tasks, filter, update, NULL, NULL, error);
    bson_destroy(update);
    if (!ok && coalesce_key && store_is_duplicate_key(error)) {
        /* A newer pending task holds the key by now: give it back without. */
        update = store_unclaim_update(NULL);
        ok = mongoc_collection_update_one(tasks, filter, update, NULL, NULL, error);
        bson_destroy(update);
    }
    mongoc_collection_destroy(tasks);
    bson_destroy(filter);
    return ok;
}
