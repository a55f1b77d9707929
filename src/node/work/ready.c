/*
 * ready.c - giving back prefetched tasks (see ready.h). The matching documents leave the
 * ring under the lock, so no worker can start one of them meanwhile; the unclaims run after
 * the lock is released, as every database call does.
 */
#include "node/work/ready.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "node/work/capacity.h"
#include "store/claims.h"

/* Whether the ready task `doc` is of a kind the switches stop (lock held). */
static bool stopped(const cohort_service_t *s, const bson_t *doc)
{
    if (s->stopped_all)
        return true;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "kind") || !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    const char *kind = bson_iter_utf8(&it, NULL);
    for (size_t i = 0; i < s->n_stopped_kinds; i++)
        if (strcmp(s->stopped_kinds[i], kind) == 0)
            return true;
    return false;
}

typedef enum which {
    ALL,     /* shutdown */
    STOPPED, /* of kinds paused or blocked */
    LAST,    /* the last `n` queued */
} which_t;

/* Moves the ready tasks `which` picks into `out` (room for ready_cap), keeping the others in
 * their order. */
static size_t take_out(cohort_service_t *s, which_t which, size_t n, bson_t **out)
{
    size_t n_out = 0, kept = 0;
    pthread_mutex_lock(&s->lock);
    size_t keep_first = which == LAST && n < s->ready_n ? s->ready_n - n : 0;
    for (size_t i = 0; i < s->ready_n; i++) {
        bson_t *doc = s->ready[(s->ready_head + i) % s->ready_cap];
        bool out_now = which == ALL || (which == STOPPED && stopped(s, doc)) ||
                       (which == LAST && i >= keep_first);
        if (out_now)
            out[n_out++] = doc;
        else
            s->ready[(s->ready_head + kept++) % s->ready_cap] = doc;
    }
    s->ready_n = kept;
    pthread_mutex_unlock(&s->lock);
    return n_out;
}

static const char *coalesce_key(const bson_t *doc)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "coalesce_key") && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return NULL;
}

/* Unclaims one task, attempts restored; frees `doc`. */
static bool give_back(cohort_service_t *s, mongoc_client_t *client, bson_t *doc)
{
    bson_iter_t id, at;
    bson_error_t error;
    bool ok = bson_iter_init_find(&id, doc, "_id") && bson_iter_init_find(&at, doc, "attempts") &&
              BSON_ITER_HOLDS_NUMBER(&at) &&
              cohort_store_unclaim(s->store, client, s->config->name, bson_iter_value(&id),
                                   s->node_id, (int32_t)bson_iter_as_int64(&at),
                                   coalesce_key(doc), &error);
    if (ok)
        atomic_fetch_sub(&s->stats.claimed, 1); /* undone, not run */
    cohort_capacity_release(s, doc); /* this node will not run it, given back or not */
    bson_destroy(doc);
    return ok;
}

static size_t give_back_matching(cohort_service_t *s, mongoc_client_t *client, which_t which,
                                 size_t n_last)
{
    if (!s->ready || s->ready_cap == 0)
        return 0;
    bson_t **docs = calloc(s->ready_cap, sizeof *docs);
    if (!docs)
        return 0; /* out of memory: they run, or their claims run out */
    size_t n = take_out(s, which, n_last, docs), given = 0;
    for (size_t i = 0; i < n; i++)
        given += give_back(s, client, docs[i]);
    free(docs);
    return given;
}

size_t cohort_ready_give_back_all(cohort_service_t *s, mongoc_client_t *client)
{
    return give_back_matching(s, client, ALL, 0);
}

size_t cohort_ready_give_back_stopped(cohort_service_t *s, mongoc_client_t *client)
{
    size_t given = give_back_matching(s, client, STOPPED, 0);
    if (given > 0)
        cohort_logf(COHORT_LOG_INFO, s->config->name, cohort_election_role(&s->election), 0,
                    "gave back %zu prefetched task(s) of paused or blocked kinds", given);
    return given;
}

size_t cohort_ready_give_back_last(cohort_service_t *s, mongoc_client_t *client, size_t n)
{
    size_t given = n > 0 ? give_back_matching(s, client, LAST, n) : 0;
    if (given > 0)
        cohort_logf(COHORT_LOG_INFO, s->config->name, cohort_election_role(&s->election), 0,
                    "gave back %zu prefetched task(s): runs now take longer than the prefetch "
                    "window, so other nodes' idle workers should have them",
                    given);
    return given;
}
