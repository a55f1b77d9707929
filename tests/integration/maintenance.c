/*
 * maintenance.c - the primary's maintenance against the local database: purging finished
 * tasks past their retention and resetting stalled claims, through a real cohort_service_t
 * ticked from the test thread and through the store calls themselves.
 *
 * Covers: purge deletes exactly what succeeded_retention_ms / failed_retention_ms say (tasks
 * written by hand with finished_at just before and after the cutoff), a retention of 0 keeps
 * that status forever, tracked tasks of a batch not completed yet are kept until it is (and
 * tracked tasks from before batches, which have no batch, are not kept forever), at most
 * the per-call limit is deleted per call, and a backlog goes on at the next tick. A claimed
 * task whose heartbeat_at is older than stall_timeout_ms is reset to pending while a fresh
 * one is not; a task kept checked in (cohort_store_checkin_tasks, or the node's own tick
 * while a worker runs it) is never reset; a claim from before check-ins existed (no
 * heartbeat_at) is still reset; and after a reset the original claimer's outcome is not
 * applied.
 *
 * Handler: tests/support/handlers/probe.c (sleep_ms in task data; fail_callbacks).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "core/clock.h"
#include "node/handler/context.h"
#include "node/primary/election.h"
#include "node/service.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/insert.h"
#include "store/nodes.h"
#include "store/outcomes.h"
#include "store/upkeep.h"

#define SERVICE "maint"
#define QUEUE "queue_" SERVICE
#define NODE "node-m"
#define MINUTE 60000LL

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;
static cohort_service_config_t config;
static cohort_option_t options[2];
static cohort_service_t *service;

static void setup(void)
{
    test_service_db_open("maint", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    if (service)
        cohort_service_destroy(service, client);
    test_service_db_close(&db, &store, &client);
    free(config.handler_path);
}

TestSuite(maintenance, .init = setup, .fini = teardown, .timeout = 30);

typedef struct settings {
    int64_t stall_timeout_ms;
    int64_t succeeded_retention_ms;
    int64_t failed_retention_ms;
    int64_t workers; /* 0: none started; the test thread runs what it needs */
    const char *fail_callbacks;
} settings_t;

static void make_service(settings_t s)
{
    size_t n = 0;
    if (s.fail_callbacks)
        options[n++] = (cohort_option_t){"fail_callbacks", s.fail_callbacks, 3};
    config = test_service_config(SERVICE, test_handler_path("probe"));
    if (s.workers > 0)
        config.workers = s.workers;
    if (s.stall_timeout_ms)
        config.stall_timeout_ms = s.stall_timeout_ms;
    config.succeeded_retention_ms = s.succeeded_retention_ms;
    config.failed_retention_ms = s.failed_retention_ms;
    config.options = options;
    config.n_options = n;
    service = test_service_new(&config, NODE, 10000, store, client);
    bson_error_t err;
    if (s.workers > 0)
        cr_assert(cohort_service_start(service, &err), "%s", err.message);
}

/* One tick that runs the maintenance; its log (everything written to stderr) is returned
 * (caller frees). Maintenance has its own cadence (every stall_timeout_ms / 3, at most
 * COHORT_MAINTENANCE_INTERVAL_MS apart, and on the next tick while a purge backlog remains),
 * and so has the purge within it (COHORT_PURGE_INTERVAL_MS, or a quarter of the shorter
 * retention); these tests are about what it does, so they make both due on the ticks they
 * ask for. The cadence itself is exercised by the tests that tick with test_service_tick()
 * alone. */
static char *tick_logged(void)
{
    service->next_maintenance_ms = 0;
    service->next_purge_ms = 0;
    test_stderr_begin();
    test_service_tick(service, client);
    return test_stderr_end();
}

static void tick(void)
{
    free(tick_logged());
}

static int64_t server_now(void)
{
    int64_t now = 0;
    bson_error_t error;
    cr_assert(cohort_store_server_time(store, client, &now, &error), "%s", error.message);
    return now;
}

static int64_t count(const char *filter)
{
    return test_count(client, db, QUEUE, filter);
}

static mongoc_collection_t *queue(void)
{
    return mongoc_client_get_collection(client, db, QUEUE);
}

/* A task document as a finished task looks; batch 0: untracked, -1: tracked without a batch
 * (as the release before batches wrote tracked tasks). finished_at 0: none. */
static void build_task(bson_t *doc, const bson_oid_t *oid, const char *status, int64_t finished_at,
                       int64_t batch, int64_t tag)
{
    int64_t created = finished_at ? finished_at - 1000 : cohort_clock_cluster_ms();
    BSON_APPEND_OID(doc, "_id", oid);
    BSON_APPEND_UTF8(doc, "status", status);
    bson_t data;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "data", &data);
    BSON_APPEND_INT64(&data, "tag", tag);
    bson_append_document_end(doc, &data);
    BSON_APPEND_BOOL(doc, "tracked", batch != 0);
    if (batch > 0)
        BSON_APPEND_INT64(doc, "batch", batch);
    BSON_APPEND_DATE_TIME(doc, "created_at", created);
    BSON_APPEND_UTF8(doc, "created_by", "maintenance-test");
    BSON_APPEND_DATE_TIME(doc, "run_at", created);
    BSON_APPEND_INT32(doc, "attempts", 1);
    if (finished_at)
        BSON_APPEND_DATE_TIME(doc, "finished_at", finished_at);
}

/* Inserts one such task; `tag` (data.tag) lets the test find it again. */
static void insert_task(const char *status, int64_t finished_at, int64_t batch, int64_t tag)
{
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    bson_t doc = BSON_INITIALIZER;
    build_task(&doc, &oid, status, finished_at, batch, tag);
    mongoc_collection_t *coll = queue();
    bson_error_t error;
    cr_assert(mongoc_collection_insert_one(coll, &doc, NULL, NULL, &error), "%s", error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(&doc);
}

/* Inserts n finished tasks at once (tags first .. first + n - 1). */
static void insert_many(const char *status, int64_t finished_at, int64_t n, int64_t first)
{
    mongoc_collection_t *coll = queue();
    mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(coll, NULL);
    for (int64_t i = 0; i < n; i++) {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        bson_t doc = BSON_INITIALIZER;
        build_task(&doc, &oid, status, finished_at, 0, first + i);
        mongoc_bulk_operation_insert(bulk, &doc);
        bson_destroy(&doc);
    }
    bson_error_t error;
    bool ok = mongoc_bulk_operation_execute(bulk, NULL, &error) != 0;
    mongoc_bulk_operation_destroy(bulk);
    mongoc_collection_destroy(coll);
    cr_assert(ok, "bulk insert: %s", error.message);
}

static bool tag_exists(int64_t tag)
{
    char filter[64];
    snprintf(filter, sizeof filter, "{\"data.tag\": %lld}", (long long)tag);
    return count(filter) == 1;
}

/* Exactly the tags in `kept` (terminated by -1) exist, of the tags 1 .. last. */
static void assert_kept(int64_t last, const int64_t *kept, const char *when)
{
    for (int64_t tag = 1; tag <= last; tag++) {
        bool want = false;
        for (const int64_t *k = kept; *k >= 0; k++)
            want = want || *k == tag;
        cr_assert_eq(tag_exists(tag), want, "%s: task %lld was %s", when, (long long)tag,
                     want ? "deleted" : "kept");
    }
}

/* ---- purge --------------------------------------------------------------------------------- */

Test(maintenance, purge_follows_each_status_retention)
{
    make_service((settings_t){.succeeded_retention_ms = MINUTE, .failed_retention_ms = 2 * MINUTE});
    int64_t now = cohort_clock_cluster_ms();
    const int64_t margin = 2000; /* the tick computes its cutoff a moment after `now` */
    insert_task("succeeded", now - MINUTE - margin, 0, 1);  /* past its retention */
    insert_task("succeeded", now - MINUTE - 3600000, 0, 2); /* long past */
    insert_task("succeeded", now - MINUTE + margin, 0, 3);  /* not yet */
    insert_task("succeeded", now - 1000, 0, 4);             /* fresh */
    insert_task("failed", now - 2 * MINUTE - margin, 0, 5); /* past its retention */
    insert_task("failed", now - MINUTE - margin, 0, 6);     /* past succeeded's, not failed's */
    insert_task("failed", now - 2 * MINUTE + margin, 0, 7); /* not yet */
    insert_task("pending", now - 3600000, 0, 8);            /* not finished: never */
    insert_task("claimed", now - 3600000, 0, 9);
    insert_task("succeeded", 0, 0, 10); /* no finished_at: never */
    /* cancelled (by an operator): final, kept as long as failed tasks */
    insert_task("cancelled", now - 2 * MINUTE - margin, 0, 11);
    insert_task("cancelled", now - 2 * MINUTE + margin, 0, 12);

    char *log = tick_logged();
    cr_assert_eq(cohort_election_epoch(&service->election), 1);
    assert_kept(12, (const int64_t[]){3, 4, 6, 7, 8, 9, 10, 12, -1}, "after one tick");
    cr_assert(strstr(log, "purged 2 succeeded task(s) older than 60000 ms"), "log: %s", log);
    cr_assert(strstr(log, "purged 1 failed task(s) older than 120000 ms"), "log: %s", log);
    cr_assert(strstr(log, "purged 1 cancelled task(s) older than 120000 ms"), "log: %s", log);
    free(log);
    cr_assert_eq(atomic_load(&service->stats.purged), 4);

    /* nothing more to do on the next tick */
    log = tick_logged();
    cr_assert_null(strstr(log, "purged"), "a second purge: %s", log);
    free(log);
    cr_assert_eq(count("{}"), 8);
}

Test(maintenance, purge_cutoff_is_exact)
{
    int64_t cutoff = server_now() - MINUTE;
    insert_task("succeeded", cutoff - 1, 0, 1);
    insert_task("succeeded", cutoff, 0, 2);
    insert_task("succeeded", cutoff + 1, 0, 3);
    insert_task("failed", cutoff - 1, 0, 4);
    int64_t deleted = -1;
    bson_error_t error;
    cr_assert(
        cohort_store_purge(store, client, SERVICE, "succeeded", cutoff, 1, 100, &deleted, &error),
        "%s", error.message);
    cr_assert_eq(deleted, 1);
    assert_kept(4, (const int64_t[]){2, 3, 4, -1}, "after purging succeeded tasks");
}

Test(maintenance, a_failed_retention_of_zero_keeps_failed_tasks)
{
    make_service((settings_t){.succeeded_retention_ms = MINUTE, .failed_retention_ms = 0});
    int64_t month_ago = cohort_clock_cluster_ms() - 30LL * 86400000;
    insert_task("failed", month_ago, 0, 1);
    insert_task("failed", month_ago, 0, 2);
    insert_task("succeeded", month_ago, 0, 3);
    char *log = tick_logged();
    assert_kept(3, (const int64_t[]){1, 2, -1}, "with failed_retention_ms = 0");
    cr_assert_null(strstr(log, "failed task(s)"), "failed tasks were purged: %s", log);
    free(log);
}

Test(maintenance, a_succeeded_retention_of_zero_keeps_succeeded_tasks)
{
    make_service((settings_t){.succeeded_retention_ms = 0, .failed_retention_ms = MINUTE});
    int64_t month_ago = cohort_clock_cluster_ms() - 30LL * 86400000;
    insert_task("succeeded", month_ago, 0, 1);
    insert_task("failed", month_ago, 0, 2);
    tick();
    assert_kept(2, (const int64_t[]){1, -1}, "with succeeded_retention_ms = 0");
}

Test(maintenance, purge_keeps_tracked_tasks_of_batches_not_completed)
{
    int64_t old = server_now() - 10 * MINUTE;
    for (int64_t batch = 1; batch <= 4; batch++)
        insert_task("succeeded", old, batch, batch); /* tags 1..4: batches 1..4 */
    insert_task("succeeded", old, 0, 5);             /* untracked */
    int64_t deleted = -1;
    bson_error_t error;
    cr_assert(
        cohort_store_purge(store, client, SERVICE, "succeeded", old + 1, 3, 100, &deleted, &error),
        "%s", error.message);
    cr_assert_eq(deleted, 3);
    assert_kept(5, (const int64_t[]){3, 4, -1}, "keeping batches from 3 on");
}

Test(maintenance, a_batch_keeps_its_tasks_until_its_callback_completed)
{
    /* the callback fails three times, so batch 1 stays draining for a while */
    make_service((settings_t){
        .succeeded_retention_ms = MINUTE, .failed_retention_ms = MINUTE, .fail_callbacks = "3"});
    int64_t old = cohort_clock_cluster_ms() - 10 * MINUTE;
    insert_task("succeeded", old, 1, 1);
    insert_task("succeeded", old, 1, 2);
    insert_task("failed", old, 1, 3);
    insert_task("succeeded", old, 0, 4); /* untracked: purged at once */
    insert_task("succeeded", old, 2, 5); /* the next batch: kept while it is open */

    tick(); /* primary; purges the untracked task; closes batch 1 */
    assert_kept(5, (const int64_t[]){1, 2, 3, 5, -1}, "after the closing tick");
    cr_assert_eq(test_count(client, db, "services", "{\"draining.seq\": 1}"), 1);
    for (int t = 0; t < 3; t++) {
        tick(); /* the callback fails */
        assert_kept(5, (const int64_t[]){1, 2, 3, 5, -1}, "while the callback fails");
    }
    cr_assert_eq(test_count(client, db, "services", "{\"batches_completed\": 0}"), 1);
    tick(); /* the callback succeeds: batch 1 completed */
    cr_assert_eq(test_count(client, db, "services", "{\"batches_completed\": 1}"), 1);
    tick(); /* now batch 1's tasks may go; batch 2 is open */
    assert_kept(5, (const int64_t[]){5, -1}, "after batch 1 completed");
}

Test(maintenance, finished_tracked_tasks_from_before_batches_are_purged)
{
    /* Tracked tasks written by the previous release have no batch field: they belong to no
     * batch, so no callback waits for them, and their retention applies. */
    make_service((settings_t){.succeeded_retention_ms = MINUTE, .failed_retention_ms = MINUTE});
    int64_t old = cohort_clock_cluster_ms() - 10 * MINUTE;
    insert_task("succeeded", old, -1, 1);
    insert_task("failed", old, -1, 2);
    insert_task("succeeded", old, 0, 3);
    tick();
    tick();
    assert_kept(3, (const int64_t[]){-1},
                "tracked tasks without a batch field past their retention (the purge filter "
                "keeps tracked tasks unless batch < N, which a missing batch never is)");
}

Test(maintenance, at_most_the_limit_is_deleted_per_call)
{
    int64_t old = server_now() - 10 * MINUTE;
    insert_many("succeeded", old, 25, 1);
    const int64_t expected[] = {10, 10, 5, 0};
    for (size_t call = 0; call < 4; call++) {
        int64_t deleted = -1;
        bson_error_t error;
        cr_assert(cohort_store_purge(store, client, SERVICE, "succeeded", old + 1, 1, 10, &deleted,
                                     &error),
                  "%s", error.message);
        cr_assert_eq(deleted, expected[call], "call %zu deleted %lld, want %lld", call + 1,
                     (long long)deleted, (long long)expected[call]);
    }
    cr_assert_eq(count("{}"), 0);
}

Test(maintenance, a_purge_backlog_goes_on_at_most_purge_per_tick_per_tick)
{
    /* The default stall_timeout_ms puts maintenance 5 s apart; a backlog must not wait. */
    make_service((settings_t){.succeeded_retention_ms = MINUTE, .failed_retention_ms = MINUTE});
    int64_t old = cohort_clock_cluster_ms() - 10 * MINUTE;
    insert_many("succeeded", old, COHORT_PURGE_PER_TICK + 50, 1);
    insert_many("failed", old, 20, COHORT_PURGE_PER_TICK + 51);
    test_service_tick(service, client);
    cr_assert_eq(count("{\"status\": \"succeeded\"}"), 50, "one tick deleted %lld of %d",
                 (long long)(COHORT_PURGE_PER_TICK + 50 - count("{\"status\": \"succeeded\"}")),
                 COHORT_PURGE_PER_TICK + 50);
    cr_assert_eq(count("{\"status\": \"failed\"}"), 0, "the failed tasks have their own limit");
    test_service_tick(service, client); /* the very next tick, not 5 s later */
    cr_assert_eq(count("{}"), 0, "the backlog waited for the next maintenance interval");
}

/* ---- stalled claims ---------------------------------------------------------------------- */

/* Inserts a pending task and claims it as `node`; returns its id. */
static bson_oid_t claimed_task(const char *node)
{
    bson_oid_t oid;
    cohort_new_task_t task = {.created_by = "maintenance-test",
                              .now_ms = cohort_clock_cluster_ms() - 1000};
    bson_error_t error;
    cr_assert(cohort_store_insert_task(store, client, SERVICE, &task, &oid, NULL, NULL, &error), "%s",
              error.message);
    bson_t claimed;
    bool found = false;
    cr_assert(cohort_store_claim_task(store, client, SERVICE, node, cohort_clock_cluster_ms(),
                                      NULL, &claimed, &found, NULL, &error),
              "%s", error.message);
    cr_assert(found, "nothing to claim");
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &claimed, "_id") && bson_oid_equal(bson_iter_oid(&it), &oid),
              "claimed another task");
    bson_destroy(&claimed);
    return oid;
}

static void read_task(const bson_oid_t *oid, bson_t *doc)
{
    char hex[25], filter[64];
    bson_oid_to_string(oid, hex);
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%s\"}}", hex);
    cr_assert(test_find_one(client, db, QUEUE, filter, doc), "task %s is gone", hex);
}

static const char *str_field(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return NULL;
}

/* The task's status and claimed_by ("" if null or absent). */
static void task_status(const bson_oid_t *oid, char status[16], char claimed_by[64])
{
    bson_t doc;
    read_task(oid, &doc);
    const char *s = str_field(&doc, "status"), *by = str_field(&doc, "claimed_by");
    snprintf(status, 16, "%s", s ? s : "");
    snprintf(claimed_by, 64, "%s", by ? by : "");
    bson_destroy(&doc);
}

static void update_task(const bson_oid_t *oid, bson_t *update)
{
    bson_t *filter = BCON_NEW("_id", BCON_OID(oid));
    mongoc_collection_t *coll = queue();
    bson_error_t error;
    cr_assert(mongoc_collection_update_one(coll, filter, update, NULL, NULL, &error), "%s",
              error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(filter);
    bson_destroy(update);
}

static void set_heartbeat(const bson_oid_t *oid, int64_t at_ms)
{
    update_task(oid, BCON_NEW("$set", "{", "heartbeat_at", BCON_DATE_TIME(at_ms), "}"));
}

static void assert_status(const bson_oid_t *oid, const char *status, const char *claimed_by,
                          const char *what)
{
    char s[16], by[64];
    task_status(oid, s, by);
    cr_assert(strcmp(s, status) == 0 && strcmp(by, claimed_by) == 0,
              "%s: status %s, claimed_by '%s'; want %s, '%s'", what, s, by, status, claimed_by);
}

Test(maintenance, a_claim_without_a_recent_check_in_is_reset)
{
    make_service((settings_t){.stall_timeout_ms = MINUTE});
    bson_oid_t stalled = claimed_task("node-x");
    bson_oid_t recent = claimed_task("node-x");
    bson_oid_t fresh = claimed_task("node-y");
    int64_t now = server_now();
    set_heartbeat(&stalled, now - MINUTE - 5000);
    set_heartbeat(&recent, now - MINUTE + 5000);

    char *log = tick_logged();
    cr_assert(strstr(log, "reset 1 stalled task(s) to pending: no check-in for 60000 ms"),
              "log: %s", log);
    free(log);
    cr_assert_eq(atomic_load(&service->stats.stalled_reset), 1);
    assert_status(&stalled, "pending", "", "the stalled task");
    assert_status(&recent, "claimed", "node-x", "the recently checked-in task");
    assert_status(&fresh, "claimed", "node-y", "the fresh claim");
    bson_t doc;
    read_task(&stalled, &doc);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &doc, "attempts") && bson_iter_as_int64(&it) == 1,
              "the reset changed the attempt count");
    const char *last_error = str_field(&doc, "last_error");
    cr_assert(last_error && strstr(last_error, "stalled"), "no reason recorded");
    bson_destroy(&doc);

    /* it can be claimed again, as the next attempt */
    bson_t claimed;
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_claim_task(store, client, SERVICE, "node-z", cohort_clock_cluster_ms(),
                                      NULL, &claimed, &found, NULL, &error));
    cr_assert(found, "the reset task cannot be claimed");
    cr_assert(bson_iter_init_find(&it, &claimed, "_id") &&
              bson_oid_equal(bson_iter_oid(&it), &stalled));
    cr_assert(bson_iter_init_find(&it, &claimed, "attempts") && bson_iter_as_int64(&it) == 2);
    bson_destroy(&claimed);
}

Test(maintenance, a_task_kept_checked_in_is_never_reset)
{
    const int64_t stall = 600;
    make_service((settings_t){.stall_timeout_ms = stall});
    bson_oid_t kept = claimed_task("node-x");
    bson_oid_t wrong_node = claimed_task("node-x"); /* checked in by a node without its claim */
    int64_t claimed_at = test_now_ms();
    int64_t reset_after = -1;
    bson_error_t error;
    while (test_now_ms() - claimed_at < 4 * stall) {
        cr_assert(cohort_store_checkin_tasks(store, client, SERVICE, "node-x", &kept, 1, &error),
                  "%s", error.message);
        cr_assert(
            cohort_store_checkin_tasks(store, client, SERVICE, "node-y", &wrong_node, 1, &error),
            "%s", error.message);
        test_service_tick(service, client); /* maintenance on its own cadence: stall / 3 */
        assert_status(&kept, "claimed", "node-x", "the task kept checked in");
        char s[16], by[64];
        task_status(&wrong_node, s, by);
        if (reset_after < 0 && strcmp(s, "pending") == 0)
            reset_after = test_now_ms() - claimed_at;
        test_sleep_ms(stall / 6);
    }
    cr_assert_geq(reset_after, 0, "the task nobody checked in was never reset within %lld ms",
                  (long long)(4 * stall));
    cr_assert_geq(reset_after + 2 * cohort_clock_uncertainty_ms() + 5, stall,
                  "reset after %lld ms, before stall_timeout_ms", (long long)reset_after);
    cr_assert_eq(atomic_load(&service->stats.stalled_reset), 1);
}

Test(maintenance, a_running_task_is_checked_in_by_its_node)
{
    /* stall_timeout_ms = 3 * tick: the node checks in every 200 ms; the task runs 2 s */
    make_service((settings_t){.stall_timeout_ms = 600, .workers = 1});
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, service, client, false);
    bson_t *data = BCON_NEW("sleep_ms", BCON_INT32(2000));
    bson_t *opts = BCON_NEW("tracked", BCON_BOOL(false));
    char id[25];
    cohort_error_t cerror;
    cr_assert(cohort_task_create(&ctx, data, opts, id, &cerror), "%s", cerror.message);
    bson_destroy(opts);
    bson_destroy(data);
    bson_oid_t oid;
    bson_oid_init_from_string(&oid, id);

    bool was_claimed = false;
    int64_t deadline = test_now_ms() + 15000;
    for (;;) {
        cr_assert_lt(test_now_ms(), deadline, "the task did not finish within 15 s");
        test_service_tick(service, client); /* maintenance every 200 ms, check-ins too */
        char s[16], by[64];
        task_status(&oid, s, by);
        if (strcmp(s, "succeeded") == 0)
            break;
        if (strcmp(s, "claimed") == 0)
            was_claimed = true;
        cr_assert(!was_claimed || strcmp(s, "claimed") == 0, "the running task was reset to %s", s);
        test_sleep_ms(50);
    }
    cr_assert_eq(atomic_load(&service->stats.stalled_reset), 0);
    cr_assert_eq(atomic_load(&service->stats.lost_claims), 0);
    bson_t doc;
    read_task(&oid, &doc);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &doc, "attempts") && bson_iter_as_int64(&it) == 1,
              "the task ran more than once");
    bson_destroy(&doc);
}

Test(maintenance, a_claim_from_before_check_ins_is_still_reset)
{
    /* A task claimed by a node of the previous release (no heartbeat_at, only claimed_at)
     * whose node died: it must not stay claimed forever. */
    make_service((settings_t){.stall_timeout_ms = MINUTE});
    bson_oid_t oid = claimed_task("old-node");
    update_task(&oid, BCON_NEW("$unset", "{", "heartbeat_at", BCON_UTF8(""), "}", "$set", "{",
                               "claimed_at", BCON_DATE_TIME(server_now() - 60 * MINUTE), "}"));
    tick();
    assert_status(&oid, "pending", "",
                  "a claim without heartbeat_at, claimed an hour ago by a dead node");
}

Test(maintenance, after_a_reset_the_old_claim_cannot_finish_the_task)
{
    make_service((settings_t){.stall_timeout_ms = MINUTE});
    bson_oid_t oid = claimed_task("node-x");
    set_heartbeat(&oid, server_now() - 2 * MINUTE);
    tick();
    assert_status(&oid, "pending", "", "after the reset");

    int64_t now = cohort_clock_cluster_ms();
    cohort_task_result_t done = {
        .finish = COHORT_FINISH_SUCCEEDED, .started_at_ms = now - 1000, .ended_at_ms = now};
    bool applied = true;
    bson_error_t error;
    bson_value_t id = {.value_type = BSON_TYPE_OID};
    bson_oid_copy(&oid, &id.value.v_oid);
    cr_assert(cohort_store_finish_task_value(store, client, SERVICE, &id, "node-x", 1, &done,
                                             &applied, &error),
              "%s", error.message);
    cr_assert_not(applied, "the reset claim's outcome was applied");
    assert_status(&oid, "pending", "", "after the stale outcome");

    /* the same node claims it again: the old attempt still cannot finish it */
    bson_t claimed;
    bool found = false;
    cr_assert(cohort_store_claim_task(store, client, SERVICE, "node-x", cohort_clock_cluster_ms(),
                                      NULL, &claimed, &found, NULL, &error));
    cr_assert(found);
    bson_destroy(&claimed);
    applied = true;
    cr_assert(cohort_store_finish_task_value(store, client, SERVICE, &id, "node-x", 1, &done,
                                             &applied, &error));
    cr_assert_not(applied, "attempt 1's outcome was applied to attempt 2");
    bson_t doc;
    read_task(&oid, &doc);
    /* the history tells of the reset (attempt 1 crashed), and of no outcome */
    cr_assert_str_eq(test_doc_str(&doc, "history.0.event"), "crashed");
    cr_assert_eq(test_doc_int(&doc, "history.0.attempt"), 1);
    cr_assert_not(test_doc_has(&doc, "history.1"), "a stale outcome was recorded");
    cr_assert_not(test_doc_has(&doc, "history.0.outcome"), "a stale outcome was recorded");
    bson_destroy(&doc);
    assert_status(&oid, "claimed", "node-x", "after the stale outcome of attempt 1");
    cr_assert(cohort_store_finish_task_value(store, client, SERVICE, &id, "node-x", 2, &done,
                                             &applied, &error));
    cr_assert(applied, "the current attempt could not finish the task");
    assert_status(&oid, "succeeded", "node-x", "after attempt 2");
}
