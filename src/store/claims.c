/*
 * claims.c - taking pending tasks: one claim, batch claims, and giving a claim back untouched
 * (groups.c holds the group locks).
 *
 * A claim moves a task from pending to claimed by this node in one conditional write, so a
 * task is claimed at most once per attempt; every later write on the task (a lock, an
 * unclaim, an outcome) carries the claim it depends on in its filter (store_held_claim).
 */
#include "store/internal.h"

#include "core/config.h" /* COHORT_CLAIM_BATCH_MAX */

#include <string.h>

static void append_strings(bson_t *doc, const char *key, const char *const *values, size_t n,
                           bool with_null)
{
    bson_t array;
    BSON_APPEND_ARRAY_BEGIN(doc, key, &array);
    uint32_t i = 0;
    char buf[16];
    const char *k;
    if (with_null) {
        bson_uint32_to_string(i++, &k, buf, sizeof buf);
        BSON_APPEND_NULL(&array, k);
    }
    for (size_t j = 0; j < n; j++) {
        bson_uint32_to_string(i++, &k, buf, sizeof buf);
        BSON_APPEND_UTF8(&array, k, values[j]);
    }
    bson_append_array_end(doc, &array);
}

/* {status: pending, run_at <= now} and the filter's kinds and groups. */
static void claim_query(bson_t *query, int64_t now_ms, const cohort_claim_filter_t *filter)
{
    bson_t range, kind, group;
    BSON_APPEND_UTF8(query, "status", "pending");
    BSON_APPEND_DOCUMENT_BEGIN(query, "run_at", &range);
    BSON_APPEND_DATE_TIME(&range, "$lte", now_ms);
    bson_append_document_end(query, &range);
    if (!filter)
        return;
    if (filter->served_kinds || filter->n_stopped_kinds > 0) {
        BSON_APPEND_DOCUMENT_BEGIN(query, "kind", &kind);
        if (filter->served_kinds) /* null: tasks without a kind */
            append_strings(&kind, "$in", filter->served_kinds, filter->n_served_kinds, true);
        if (filter->n_stopped_kinds > 0)
            append_strings(&kind, "$nin", filter->stopped_kinds, filter->n_stopped_kinds, false);
        bson_append_document_end(query, &kind);
    }
    if (filter->n_busy_groups > 0) {
        BSON_APPEND_DOCUMENT_BEGIN(query, "group", &group);
        append_strings(&group, "$nin", filter->busy_groups, filter->n_busy_groups, false);
        bson_append_document_end(query, &group);
    }
    if (filter->weight_room > 0 && !filter->weight_any_first) {
        /* weight <= room, or no weight at all (a task written before weights, which weighs
         * 1): {$not: {$gt}} matches both in one predicate, no $or. */
        bson_t *fits = BCON_NEW("$not", "{", "$gt", BCON_INT64(filter->weight_room), "}");
        BSON_APPEND_DOCUMENT(query, "weight", fits);
        bson_destroy(fits);
    }
}

int64_t cohort_store_task_weight(const bson_t *task)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, task, "weight") || !BSON_ITER_HOLDS_NUMBER(&it))
        return 1;
    int64_t weight = bson_iter_as_int64(&it);
    return weight < 1 ? 1 : weight > COHORT_WEIGHT_MAX ? COHORT_WEIGHT_MAX : weight;
}

/* The ids of the candidates `query` finds (in the order `opts` sorts them) into `ids`, those
 * whose weight the filter allows (see cohort_claim_filter_t: the first within the room, the
 * rest light); *found receives how many the find returned, kept or not. */
static bool find_candidates(mongoc_collection_t *tasks, const bson_t *query, const bson_t *opts,
                            const cohort_claim_filter_t *filter, bson_t *ids, uint32_t *found,
                            bson_error_t *error)
{
    int64_t room = filter ? filter->weight_room : 0;
    bool any_first = filter && filter->weight_any_first;
    uint32_t kept = 0;
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, query, opts, NULL);
    const bson_t *doc;
    bson_iter_t it;
    while (mongoc_cursor_next(cursor, &doc)) {
        int64_t limit = kept > 0 ? 1 : any_first ? COHORT_WEIGHT_MAX : room;
        (*found)++;
        if (room > 0 && cohort_store_task_weight(doc) > limit)
            continue;
        if (!bson_iter_init_find(&it, doc, "_id"))
            continue;
        char key[16];
        const char *k;
        bson_uint32_to_string(kept++, &k, key, sizeof key);
        bson_append_value(ids, k, -1, bson_iter_value(&it));
    }
    bool ok = !mongoc_cursor_error(cursor, error);
    mongoc_cursor_destroy(cursor);
    return ok;
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
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t *back = store_unclaim_update(NULL);
    bson_t *held = BCON_NEW("claim_token", BCON_UTF8(token), "claimed_by", BCON_UTF8(node_id),
                            "status", BCON_UTF8("claimed"));
    bson_t reply;
    bool ok = mongoc_collection_update_many(tasks, held, back, NULL, &reply, error);
    if (released)
        *released = ok ? store_int64_field(&reply, "modifiedCount", 0) : 0;
    bson_destroy(&reply);
    bson_destroy(held);
    bson_destroy(back);
    mongoc_collection_destroy(tasks);
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
    bson_t *sort = store_claim_sort();
    bson_t *update = claim_update(node_id, token, 0);
    bson_t *fields = BCON_NEW("history", BCON_INT32(0));
    bool ok = store_find_and_modify(tasks, &query, sort, update, fields, true, false, claimed,
                                    found, error);
    bson_destroy(fields);
    bson_destroy(update);
    bson_destroy(sort);
    bson_destroy(&query);
    mongoc_collection_destroy(tasks);
    return ok;
}

/* One round of a batch claim; *candidates receives how many tasks the find returned. */
static bool claim_tasks_once(cohort_store_t *store, mongoc_client_t *client,
                             const char *service, const char *node_id, int64_t now_ms,
                             int64_t lease_until_ms, const cohort_claim_filter_t *filter,
                             size_t max, bson_t *claimed, size_t *n, uint32_t *candidates,
                             const char *token, bson_error_t *error)
{
    mongoc_collection_t *tasks = store_queue(store, client, service);
    bson_t query = BSON_INITIALIZER;
    claim_query(&query, now_ms, filter);
    bson_t *sort = store_claim_sort();

    /* 1. The candidates, in claim order. */
    bson_t opts = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(&opts, "sort", sort);
    BSON_APPEND_INT64(&opts, "limit", (int64_t)max);
    bson_t *projection = BCON_NEW("_id", BCON_INT32(1), "weight", BCON_INT32(1));
    BSON_APPEND_DOCUMENT(&opts, "projection", projection);
    bson_t ids = BSON_INITIALIZER;
    uint32_t found = 0;
    bool ok = find_candidates(tasks, &query, &opts, filter, &ids, &found, error);

    /* 2. Claim those still pending and due, under the call's token. */
    if (ok && !bson_empty(&ids)) {
        bson_t in;
        BSON_APPEND_DOCUMENT_BEGIN(&query, "_id", &in);
        BSON_APPEND_ARRAY(&in, "$in", &ids);
        bson_append_document_end(&query, &in);
        bson_t *update = claim_update(node_id, token, lease_until_ms);
        bson_t reply;
        ok = mongoc_collection_update_many(tasks, &query, update, NULL, &reply, error);
        int64_t modified = ok ? store_int64_field(&reply, "modifiedCount", 0) : 0;
        bson_destroy(&reply);
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
    bson_destroy(&ids);
    bson_destroy(projection);
    bson_destroy(&opts);
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
    for (int round = 0; ok && *n == 0 && candidates > 0 && round < CLAIM_ROUNDS; round++)
        ok = claim_tasks_once(store, client, service, node_id, now_ms, lease_until_ms, filter,
                              max, claimed, n, &candidates, token, error);
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
