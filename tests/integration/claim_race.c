/*
 * claim_race.c - "one claim at a time" under contention: 2,000 tasks, 8 threads with a
 * client each (from one store) claiming and finishing as fast as they can. Every task must
 * be claimed exactly once, and end succeeded with one attempt.
 *
 * Threads never call Criterion's asserts (they are not thread-safe); they record problems
 * and the main thread checks them.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "core/clock.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/insert.h"
#include "store/outcomes.h"
#include "store/services.h"

#define TASKS 2000
#define THREADS 8
#define SERVICE "race"

/* The ids claimed so far: an open-addressing hash set guarded by a mutex. */
typedef struct id_set {
    pthread_mutex_t lock;
    bson_oid_t slots[TASKS * 4];
    bool used[TASKS * 4];
    size_t count;
} id_set_t;

typedef struct race {
    cohort_store_t *store;
    id_set_t claimed;
    atomic_int duplicates;
    atomic_int not_applied;
    atomic_int db_errors;
    char first_problem[600];
    pthread_mutex_t problem_lock;
} race_t;

typedef struct worker {
    race_t *race;
    char node_id[32];
    int claims;
} worker_t;

static void note_problem(race_t *race, const char *fmt, const char *detail)
{
    pthread_mutex_lock(&race->problem_lock);
    if (!race->first_problem[0])
        snprintf(race->first_problem, sizeof race->first_problem, fmt, detail);
    pthread_mutex_unlock(&race->problem_lock);
}

/* Adds id; false if it was already there. */
static bool id_set_add(id_set_t *set, const bson_oid_t *id)
{
    size_t n = sizeof set->slots / sizeof set->slots[0];
    size_t i = bson_oid_hash(id) % n;
    bool added = false;
    pthread_mutex_lock(&set->lock);
    for (;; i = (i + 1) % n) {
        if (!set->used[i]) {
            set->used[i] = true;
            bson_oid_copy(id, &set->slots[i]);
            set->count++;
            added = true;
            break;
        }
        if (bson_oid_equal(&set->slots[i], id))
            break;
    }
    pthread_mutex_unlock(&set->lock);
    return added;
}

static void *claim_loop(void *arg)
{
    worker_t *w = arg;
    race_t *race = w->race;
    mongoc_client_t *client = cohort_store_pop(race->store);
    for (;;) {
        bson_t task;
        bool found = false;
        bson_error_t error;
        if (!cohort_store_claim_task(race->store, client, SERVICE, w->node_id,
                                     cohort_clock_cluster_ms(), NULL, &task, &found, NULL, &error)) {
            bson_destroy(&task);
            atomic_fetch_add(&race->db_errors, 1);
            note_problem(race, "claim failed: %s", error.message);
            break;
        }
        if (!found) {
            bson_destroy(&task);
            break;
        }
        w->claims++;
        bson_iter_t it;
        if (!bson_iter_init_find(&it, &task, "_id") || !BSON_ITER_HOLDS_OID(&it)) {
            note_problem(race, "claimed a document without an ObjectId%s", "");
            bson_destroy(&task);
            break;
        }
        bson_oid_t id;
        bson_oid_copy(bson_iter_oid(&it), &id);
        bson_destroy(&task);
        if (!id_set_add(&race->claimed, &id)) {
            char hex[25];
            bson_oid_to_string(&id, hex);
            atomic_fetch_add(&race->duplicates, 1);
            note_problem(race, "task %s was claimed twice", hex);
            break; /* a broken claim would loop over finished tasks forever */
        }
        int64_t now = cohort_clock_cluster_ms();
        cohort_task_result_t result = {
            .finish = COHORT_FINISH_SUCCEEDED, .started_at_ms = now, .ended_at_ms = now};
        bool applied = false;
        bson_value_t id_value = {.value_type = BSON_TYPE_OID};
        bson_oid_copy(&id, &id_value.value.v_oid);
        if (!cohort_store_finish_task_value(race->store, client, SERVICE, &id_value, w->node_id, 1,
                                            &result, &applied, &error)) {
            atomic_fetch_add(&race->db_errors, 1);
            note_problem(race, "finish failed: %s", error.message);
            break;
        }
        if (!applied)
            atomic_fetch_add(&race->not_applied, 1);
    }
    cohort_store_push(race->store, client);
    return NULL;
}

static char *db;
static race_t *race;
static mongoc_client_t *client;

static void setup(void)
{
    db = test_db_name("claim_race");
    race = calloc(1, sizeof *race);
    cr_assert_not_null(race);
    pthread_mutex_init(&race->claimed.lock, NULL);
    pthread_mutex_init(&race->problem_lock, NULL);
    race->store = test_store_new(db);
    client = cohort_store_pop(race->store);
    test_sync_clock(race->store, client, 1000);
}

static void teardown(void)
{
    if (race && race->store) {
        cohort_store_push(race->store, client);
        cohort_store_destroy(race->store);
        test_drop_db(db);
    }
    free(race);
    free(db);
}

Test(claim_race, every_task_is_claimed_exactly_once, .init = setup, .fini = teardown,
     .timeout = 120)
{

    bson_error_t error;
    cr_assert(test_ensure_service(race->store, client, SERVICE, &error), "%s",
              error.message);
    bson_t *data = BCON_NEW("kind", BCON_UTF8("race"));
    cohort_new_task_t task = {.data = data,
                              .tracked = true,
                              .created_by = "claim_race",
                              .now_ms = cohort_clock_cluster_ms()};
    int64_t inserted = 0;
    cr_assert(
        cohort_store_insert_tasks(race->store, client, SERVICE, &task, TASKS, &inserted, &error),
        "insert: %s", error.message);
    cr_assert_eq(inserted, TASKS);
    bson_destroy(data);
    cr_assert_eq(test_count(client, db, "queue_" SERVICE, "{\"status\": \"pending\"}"), TASKS);

    worker_t workers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker_t){.race = race};
        snprintf(workers[i].node_id, sizeof workers[i].node_id, "racer-%d", i);
        cr_assert_eq(pthread_create(&threads[i], NULL, claim_loop, &workers[i]), 0);
    }
    int total = 0, busy_threads = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        total += workers[i].claims;
        busy_threads += workers[i].claims > 0;
    }

    cr_assert_eq(atomic_load(&race->db_errors), 0, "database errors: %s", race->first_problem);
    cr_assert_eq(atomic_load(&race->duplicates), 0, "%d duplicate claims; first: %s",
                 atomic_load(&race->duplicates), race->first_problem);
    cr_assert_eq(total, TASKS, "%d claims for %d tasks", total, TASKS);
    cr_assert_eq(race->claimed.count, TASKS, "%zu distinct tasks claimed", race->claimed.count);
    cr_assert_eq(atomic_load(&race->not_applied), 0, "outcomes not applied to own claims");
    cr_assert_geq(busy_threads, 2, "only %d thread(s) ever claimed: no race was tested",
                  busy_threads);

    /* the database agrees: all succeeded, each after exactly one attempt, by a racer */
    cr_assert_eq(test_count(client, db, "queue_" SERVICE, "{}"), TASKS);
    cr_assert_eq(test_count(client, db, "queue_" SERVICE, "{\"status\": \"succeeded\"}"), TASKS);
    cr_assert_eq(test_count(client, db, "queue_" SERVICE, "{\"attempts\": 1}"), TASKS);
    cr_assert_eq(test_count(client, db, "queue_" SERVICE,
                            "{\"claimed_by\": {\"$regex\": \"^racer-[0-7]$\"}}"),
                 TASKS);
    cr_assert_eq(test_count(client, db, "queue_" SERVICE, "{\"history\": {\"$size\": 1}}"), TASKS);
    for (int i = 0; i < THREADS; i++) {
        char filter[64];
        snprintf(filter, sizeof filter, "{\"claimed_by\": \"%s\"}", workers[i].node_id);
        cr_assert_eq(test_count(client, db, "queue_" SERVICE, filter), workers[i].claims,
                     "%s: the database and the thread disagree", workers[i].node_id);
    }

    /* and nothing is left to claim */
    bson_t none;
    bool found = true;
    cr_assert(cohort_store_claim_task(race->store, client, SERVICE, "late",
                                      cohort_clock_cluster_ms(), NULL, &none, &found, NULL, &error));
    cr_assert_not(found);
    bson_destroy(&none);
}
