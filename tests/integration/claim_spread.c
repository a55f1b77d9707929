/*
 * claim_spread.c - batch claims racing at the queue head (issue 11, item 4): 8 threads, each
 * with its own client, batch-claim 4 tasks at a time from 40 tasks of priority 5 and 400 of
 * priority 0. A round that loses its candidates looks again over a spread window of the top
 * priority (store/claims.c); that must never let a task of priority 0 go before one of
 * priority 5. So whenever a thread receives a priority-0 task, no priority-5 task may still
 * be pending. Also: every task is claimed exactly once, and the store's contention counters
 * add up (attempts, empty attempts, lost candidates).
 *
 * Threads never call Criterion's asserts; they record problems for the main thread.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "support.h"
#include "core/clock.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/insert.h"

#define SERVICE "spread"
#define QUEUE "queue_" SERVICE
#define HIGH 40
#define LOW 400
#define THREADS 8
#define BATCH 4

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static atomic_int claimed, calls, overtaken, errors;

static void setup(void)
{
    test_service_db_open("claim_spread", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(claim_spread, .init = setup, .fini = teardown, .timeout = 120);

/* Pending tasks of priority 5, on the thread's own client; -1 on an error. */
static int64_t pending_high(mongoc_client_t *own)
{
    mongoc_collection_t *queue = mongoc_client_get_collection(own, db, QUEUE);
    bson_t *filter = BCON_NEW("status", BCON_UTF8("pending"), "priority", BCON_INT32(5));
    int64_t n = mongoc_collection_count_documents(queue, filter, NULL, NULL, NULL, NULL);
    bson_destroy(filter);
    mongoc_collection_destroy(queue);
    return n;
}

static void *claimer(void *arg)
{
    const char *node = arg;
    mongoc_client_t *own = cohort_store_pop(store);
    for (;;) {
        bson_t docs[BATCH];
        size_t n = 0;
        bson_error_t error;
        atomic_fetch_add(&calls, 1);
        if (!cohort_store_claim_tasks(store, own, SERVICE, node, cohort_clock_cluster_ms(), NULL,
                                      BATCH, docs, &n, NULL, &error)) {
            atomic_fetch_add(&errors, 1);
            break;
        }
        if (n == 0)
            break;
        bool low = false;
        for (size_t i = 0; i < n; i++) {
            bson_iter_t it;
            if (bson_iter_init_find(&it, &docs[i], "priority") && bson_iter_as_int64(&it) == 0)
                low = true;
            bson_destroy(&docs[i]);
        }
        atomic_fetch_add(&claimed, (int)n);
        /* Every priority-5 task pending when this round read its candidates was among them
         * (fewer than BATCH were left, or no priority-0 task would be here), so none is
         * pending now: no task is ever made pending again here. */
        if (low && pending_high(own) != 0)
            atomic_fetch_add(&overtaken, 1);
    }
    cohort_store_push(store, own);
    return NULL;
}

static void insert(int priority, int count)
{
    bson_error_t error;
    cohort_new_task_t task = {.created_by = "claim_spread",
                              .now_ms = cohort_clock_cluster_ms(),
                              .priority = priority};
    int64_t inserted = 0;
    cr_assert(cohort_store_insert_tasks(store, client, SERVICE, &task, count, &inserted, &error),
              "insert: %s", error.message);
    cr_assert_eq(inserted, count);
}

Test(claim_spread, racing_batch_claims_keep_priority_order_and_count_their_attempts)
{
    insert(5, HIGH);
    insert(0, LOW);
    cohort_store_stats_t before = cohort_store_stats(store);
    pthread_t threads[THREADS];
    char names[THREADS][16];
    for (int i = 0; i < THREADS; i++) {
        snprintf(names[i], sizeof names[i], "spreader-%d", i);
        cr_assert_eq(pthread_create(&threads[i], NULL, claimer, names[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    cohort_store_stats_t after = cohort_store_stats(store);

    cr_assert_eq(atomic_load(&errors), 0, "claim errors");
    cr_assert_eq(atomic_load(&claimed), HIGH + LOW, "%d tasks claimed of %d",
                 atomic_load(&claimed), HIGH + LOW);
    cr_assert_eq(test_count(client, db, QUEUE, "{\"status\": \"claimed\"}"), HIGH + LOW);
    cr_assert_eq(atomic_load(&overtaken), 0,
                 "%d round(s) got a priority-0 task while a priority-5 task was pending",
                 atomic_load(&overtaken));

    uint64_t attempts = after.claims_attempted - before.claims_attempted;
    uint64_t empty = after.claims_empty - before.claims_empty;
    uint64_t lost = after.claim_candidates_lost - before.claim_candidates_lost;
    fprintf(stderr, "claim_spread: %d calls, %llu attempts (%llu empty), %llu candidates lost\n",
            atomic_load(&calls), (unsigned long long)attempts, (unsigned long long)empty,
            (unsigned long long)lost);
    /* A call is one round, or more after a round that lost everything; each thread's last call
     * found nothing. */
    cr_assert_geq(attempts, (uint64_t)atomic_load(&calls));
    cr_assert_geq(empty, THREADS);
    cr_assert_leq(empty, attempts);
    cr_assert_geq(attempts, (HIGH + LOW) / BATCH);
}

/* The ids of the first `n` pending tasks in claim order, into ids[] (each freed by caller). */
static void first_in_claim_order(size_t n, bson_value_t *ids)
{
    mongoc_collection_t *queue = mongoc_client_get_collection(client, db, QUEUE);
    bson_t *filter = BCON_NEW("status", BCON_UTF8("pending"));
    bson_t *opts = BCON_NEW("sort", "{", "priority", BCON_INT32(-1), "run_at", BCON_INT32(1),
                            "_id", BCON_INT32(1), "}", "limit", BCON_INT64((int64_t)n));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(queue, filter, opts, NULL);
    const bson_t *doc;
    size_t i = 0;
    while (i < n && mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, doc, "_id"));
        bson_value_copy(bson_iter_value(&it), &ids[i++]);
    }
    cr_assert_eq(i, n, "only %zu pending tasks", i);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(queue);
}

static bool same_id(const bson_t *doc, const bson_value_t *id)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it) &&
           id->value_type == BSON_TYPE_OID && bson_oid_equal(bson_iter_oid(&it), &id->value.v_oid);
}

/* A claim that passes over the head (the workers' window: cohort_claim_filter_t.skip) takes
 * the tasks after the first `skip` in claim order, and never one of a lower priority while
 * the top one has due tasks: past the top tier, it takes that tier's last ones. */
Test(claim_spread, a_claim_that_skips_takes_its_window_within_the_top_priority)
{
    insert(5, HIGH);
    insert(0, LOW);
    bson_value_t head[3 * BATCH];
    first_in_claim_order(3 * BATCH, head);
    uint32_t lost = 99;
    cohort_claim_filter_t filter = {.skip = 2 * BATCH, .lost = &lost};
    bson_t docs[BATCH];
    size_t n = 0;
    bson_error_t error;
    cr_assert(cohort_store_claim_tasks(store, client, SERVICE, "skipper",
                                       cohort_clock_cluster_ms(), &filter, BATCH, docs, &n, NULL,
                                       &error),
              "claim: %s", error.message);
    cr_assert_eq(n, BATCH);
    cr_assert_eq(lost, 0, "an uncontended claim lost %u candidates", lost);
    for (size_t i = 0; i < n; i++) {
        cr_assert(same_id(&docs[i], &head[2 * BATCH + i]),
                  "claimed task %zu is not the %zu-th in claim order", i, 2 * BATCH + i + 1);
        bson_destroy(&docs[i]);
    }
    for (size_t i = 0; i < 3 * BATCH; i++)
        bson_value_destroy(&head[i]);

    /* Far past the top tier (HIGH - BATCH of it left): its last BATCH, none of priority 0. */
    filter.skip = COHORT_CLAIM_SKIP_MAX;
    cr_assert(cohort_store_claim_tasks(store, client, SERVICE, "skipper",
                                       cohort_clock_cluster_ms(), &filter, BATCH, docs, &n, NULL,
                                       &error),
              "claim: %s", error.message);
    cr_assert_eq(n, BATCH);
    for (size_t i = 0; i < n; i++) {
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, &docs[i], "priority") && bson_iter_as_int64(&it) == 5,
                  "a claim past the top tier took a task of a lower priority");
        bson_destroy(&docs[i]);
    }
    cr_assert_eq(test_count(client, db, QUEUE, "{\"status\": \"pending\", \"priority\": 5}"),
                 HIGH - 2 * BATCH);
}
