/*
 * unique_keys.c - the unique_key task option (handler ABI 2) against the local database:
 * cohort_task_create() from several threads, each with a client of its own, as worker
 * threads and nodes would.
 *
 * Covers: racing creations of the same key leave exactly one task per key, and every loser
 * gets COHORT_ERROR_EXISTS with "already exists" in the message; a duplicate changes
 * nothing (not even a finished task's document); tasks without a unique_key are unaffected
 * (any number coexist, beside keyed ones); a primary that took over cannot recreate what
 * the previous primary created; and malformed options are refused with COHORT_ERROR_INVALID.
 *
 * Handler: tests/support/handlers/probe.c (only to have a service; nothing runs here).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "core/clock.h"
#include "node/handler/context.h"
#include "node/primary/election.h"
#include "node/service.h"
#include "store/store.h"
#include "store/insert.h"
#include "store/services.h"

#define SERVICE "unique"
#define QUEUE "queue_" SERVICE
#define KEYS 50
#define RACERS 2

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;
static cohort_service_config_t configs[2];
static cohort_service_t *services[2];

static void setup(void)
{
    test_service_db_open("unique", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    for (size_t i = 0; i < 2; i++) {
        if (services[i])
            cohort_service_destroy(services[i], client);
        free(configs[i].handler_path);
    }
    test_service_db_close(&db, &store, &client);
}

TestSuite(unique_keys, .init = setup, .fini = teardown, .timeout = 30);

static cohort_service_t *make_node(size_t i, const char *node_id)
{
    configs[i] = test_service_config(SERVICE, test_handler_path("probe"));
    services[i] = test_service_new(&configs[i], node_id, 10000, store, client);
    return services[i];
}

/* cohort_task_create with `unique_key` (NULL: none) and data {"n": n}. */
static bool create(cohort_ctx_t *ctx, const char *unique_key, int n, cohort_error_t *error)
{
    bson_t *data = BCON_NEW("n", BCON_INT32(n));
    bson_t *opts = unique_key ? BCON_NEW("unique_key", BCON_UTF8(unique_key)) : NULL;
    bool ok = cohort_task_create(ctx, data, opts, NULL, error);
    if (opts)
        bson_destroy(opts);
    bson_destroy(data);
    return ok;
}

static int64_t count(const char *filter)
{
    return test_count(client, db, QUEUE, filter);
}

/* ---- racing creations ------------------------------------------------------------------ */

typedef struct racer {
    cohort_service_t *service;
    pthread_barrier_t *start;
    int id;
    cohort_error_code_t code[KEYS];
    char message[KEYS][256];
} racer_t;

/* Creates key-0 .. key-49, meeting the other racer at a barrier before each one. */
static void *race(void *arg)
{
    racer_t *r = arg;
    mongoc_client_t *own = cohort_store_pop(store);
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, r->service, own, false);
    for (int k = 0; k < KEYS; k++) {
        char key[32];
        snprintf(key, sizeof key, "key-%d", k);
        pthread_barrier_wait(r->start);
        cohort_error_t error = {0};
        if (create(&ctx, key, r->id, &error))
            r->code[k] = COHORT_OK;
        else
            r->code[k] = error.code;
        snprintf(r->message[k], sizeof r->message[k], "%s", error.message);
    }
    cohort_store_push(store, own);
    return NULL;
}

Test(unique_keys, racing_creations_leave_one_task_per_key)
{
    cohort_service_t *nodes[RACERS] = {make_node(0, "node-a"), make_node(1, "node-b")};
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, RACERS);
    static racer_t racers[RACERS];
    pthread_t threads[RACERS];
    for (int i = 0; i < RACERS; i++) {
        racers[i] = (racer_t){.service = nodes[i], .start = &start, .id = i};
        cr_assert_eq(pthread_create(&threads[i], NULL, race, &racers[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);

    for (int k = 0; k < KEYS; k++) {
        int winners = 0;
        for (int i = 0; i < RACERS; i++) {
            const racer_t *r = &racers[i];
            if (r->code[k] == COHORT_OK) {
                winners++;
                continue;
            }
            cr_assert_eq(r->code[k], COHORT_ERROR_EXISTS,
                         "key-%d, racer %d: code %d (want COHORT_ERROR_EXISTS): %s", k, i,
                         r->code[k], r->message[k]);
            cr_assert(strstr(r->message[k], "already exists"), "key-%d, racer %d: %s", k, i,
                      r->message[k]);
            char quoted[40];
            snprintf(quoted, sizeof quoted, "'key-%d'", k);
            cr_assert(strstr(r->message[k], quoted), "the message does not name the key: %s",
                      r->message[k]);
        }
        cr_assert_eq(winners, 1, "key-%d was created %d times", k, winners);
        char filter[64];
        snprintf(filter, sizeof filter, "{\"unique_key\": \"key-%d\"}", k);
        cr_assert_eq(count(filter), 1, "key-%d has %lld tasks", k, (long long)count(filter));
    }
    cr_assert_eq(count("{}"), KEYS, "tasks: %lld, want %d", (long long)count("{}"), KEYS);
}

/* ---- what a duplicate does and does not do -------------------------------------------- */

Test(unique_keys, a_duplicate_changes_nothing)
{
    cohort_service_t *a = make_node(0, "node-a");
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, a, client, false);
    cohort_error_t error;
    cr_assert(create(&ctx, "once", 1, &error), "%s", error.message);
    bson_t before;
    cr_assert(test_find_one(client, db, QUEUE, "{\"unique_key\": \"once\"}", &before));

    cr_assert_not(create(&ctx, "once", 2, &error), "a duplicate was created");
    cr_assert_eq(error.code, COHORT_ERROR_EXISTS);
    cr_assert_str_eq(error.message, "a task with unique_key 'once' already exists");

    /* still one, untouched; also once it has finished */
    bson_t after;
    cr_assert(test_find_one(client, db, QUEUE, "{\"unique_key\": \"once\"}", &after));
    cr_assert(bson_equal(&before, &after), "the existing task changed");
    bson_destroy(&after);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, QUEUE);
    bson_t *filter = BCON_NEW("unique_key", BCON_UTF8("once"));
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("succeeded"), "}");
    bson_error_t db_error;
    cr_assert(mongoc_collection_update_one(coll, filter, update, NULL, NULL, &db_error), "%s",
              db_error.message);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    cr_assert_not(create(&ctx, "once", 3, &error), "a finished task's key was reused");
    cr_assert_eq(error.code, COHORT_ERROR_EXISTS);
    cr_assert_eq(count("{}"), 1);
    cr_assert_eq(count("{\"data.n\": 1, \"status\": \"succeeded\"}"), 1);
    bson_destroy(&before);
}

Test(unique_keys, tasks_without_a_unique_key_are_unaffected)
{
    cohort_service_t *a = make_node(0, "node-a");
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, a, client, false);
    cohort_error_t error;
    for (int i = 0; i < 20; i++)
        cr_assert(create(&ctx, NULL, i, &error), "plain task %d: %s", i, error.message);
    cr_assert(create(&ctx, "k1", 100, &error), "%s", error.message);
    cr_assert(create(&ctx, "k2", 101, &error), "%s", error.message);
    for (int i = 20; i < 40; i++)
        cr_assert(create(&ctx, NULL, i, &error), "plain task %d after keyed ones: %s", i,
                  error.message);
    cr_assert_not(create(&ctx, "k1", 102, &error));
    cr_assert_eq(error.code, COHORT_ERROR_EXISTS);
    cr_assert_eq(count("{}"), 42);
    cr_assert_eq(count("{\"unique_key\": {\"$exists\": false}}"), 40,
                 "tasks without a key got a unique_key field");
    cr_assert_eq(count("{\"unique_key\": null}"), 40);

    /* the same key in another service is another key */
    cr_assert(test_ensure_service(store, client, "other", &(bson_error_t){0}));
    cohort_new_task_t task = {
        .unique_key = "k1", .created_by = "tests", .now_ms = cohort_clock_cluster_ms()};
    bool exists = true;
    bson_error_t db_error;
    cr_assert(cohort_store_insert_task(store, client, "other", &task, NULL, &exists, NULL, &db_error),
              "k1 in another service: %s", db_error.message);
    cr_assert_not(exists);
}

Test(unique_keys, a_new_primary_cannot_recreate_what_the_old_one_created)
{
    cohort_service_t *a = make_node(0, "node-a");
    cohort_service_t *b = make_node(1, "node-b");
    test_service_tick(a, client);
    cr_assert_eq(cohort_election_epoch(&a->election), 1);
    cohort_ctx_t as_a;
    cohort_ctx_init(&as_a, a, client, true); /* what primary_work gets */
    cohort_error_t error;
    cr_assert(create(&as_a, "rollover:1:board-7", 1, &error), "%s", error.message);

    /* node-a dies; node-b takes over with a new epoch and redoes primary_work */
    cohort_election_step_down(&a->election, store, client);
    test_service_tick(b, client);
    cr_assert_eq(cohort_election_epoch(&b->election), 2);
    cohort_ctx_t as_b;
    cohort_ctx_init(&as_b, b, client, true);
    cr_assert_not(create(&as_b, "rollover:1:board-7", 2, &error), "created twice across failover");
    cr_assert_eq(error.code, COHORT_ERROR_EXISTS, "%s", error.message);
    cr_assert(create(&as_b, "rollover:1:board-8", 2, &error), "%s", error.message);
    cr_assert_eq(count("{\"unique_key\": \"rollover:1:board-7\", \"epoch\": 1}"), 1);
    cr_assert_eq(count("{\"unique_key\": \"rollover:1:board-8\", \"epoch\": 2}"), 1);
    cr_assert_eq(count("{}"), 2);
}

Test(unique_keys, malformed_options_are_refused)
{
    cohort_service_t *a = make_node(0, "node-a");
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, a, client, false);
    char longest[513], too_long[514];
    memset(longest, 'u', 512);
    longest[512] = '\0';
    memset(too_long, 'u', 513);
    too_long[513] = '\0';
    bson_t *bad[] = {
        BCON_NEW("unique_key", BCON_UTF8("")), BCON_NEW("unique_key", BCON_INT32(7)),
        BCON_NEW("unique_key", BCON_NULL),     BCON_NEW("unique_key", BCON_UTF8(too_long)),
        BCON_NEW("unique", BCON_UTF8("typo")),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cohort_error_t error;
        char *json = bson_as_relaxed_extended_json(bad[i], NULL);
        cr_assert_not(cohort_task_create(&ctx, NULL, bad[i], NULL, &error), "accepted %s", json);
        cr_assert_eq(error.code, COHORT_ERROR_INVALID, "%s: code %d: %s", json, error.code,
                     error.message);
        cr_assert(strstr(error.message, "unique_key") || strstr(error.message, "unknown"), "%s: %s",
                  json, error.message);
        bson_free(json);
        bson_destroy(bad[i]);
    }
    cr_assert_eq(count("{}"), 0, "a task with bad options was created");
    cohort_error_t error;
    cr_assert(create(&ctx, longest, 1, &error), "a 512-byte key: %s", error.message);
    cr_assert_eq(count("{}"), 1);
}
