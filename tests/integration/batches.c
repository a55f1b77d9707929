/*
 * batches.c - tracked batches and their completion callback (handler ABI 2), through the
 * real service runtime against the local database: cohort_service_t objects ticked from the
 * test thread, tasks created with cohort_task_create() and run either by the service's
 * worker threads or, where the test must control the order of events, claimed and executed
 * on the test thread.
 *
 * Covers: a drained batch closes on one tick and completes on a later one; the callback sees
 * exactly the batch's succeeded tasks (the ids the database holds, in creation order) with
 * the right counts, and (ABI 4) the failed and timed-out ones with their status and last
 * error; untracked tasks never appear and never cause a callback; tasks created
 * after the close join the next batch (from the primary, a secondary and `cohortctl enqueue
 * --tracked`); succeeded tasks get acknowledged; batches_completed and last_batch are
 * recorded; a batch waits for retries; a failing callback is retried and its completion
 * recorded only once it succeeds; a completion under a stale epoch is not applied; a
 * failover while the callback runs makes the new primary run it again and record it exactly
 * once. And tracked tasks that no batch would count: one written into a batch after it
 * completed (a writer that read batch_seq before the close), one enqueued by another
 * program without a batch field, and a service document from before batches existed. A
 * task cancelled by `cohortctl cancel` counts as done (unsuccessful) for its batch.
 *
 * Handler: tests/support/handlers/probe.c, which records every callback (probe.h).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/probe.h"
#include "ctl.h"
#include "support.h"
#include "core/clock.h"
#include "node/handler/context.h"
#include "node/primary/election.h"
#include "node/service.h"
#include "store/batches.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/insert.h"
#include "store/nodes.h"
#include "store/primacy.h"
#include "store/services.h"
#include "node/work/task.h"

#define SERVICE "batches"
#define QUEUE "queue_" SERVICE
#define TAKEOVER_MS 1000 /* short, so the failover test can wait out a takeover */

static test_probe_fixture_t fx;

static void resync(void)
{
    test_sync_clock(fx.store, fx.client, cohort_election_max_rtt_ms(TAKEOVER_MS));
}

static void setup(void)
{
    test_probe_fixture_open(&fx, "batches", SERVICE, TAKEOVER_MS);
}

static void teardown(void)
{
    test_probe_fixture_close(&fx);
}

TestSuite(batches, .init = setup, .fini = teardown, .timeout = 30);

/* Creates node i of the service on the probe handler with the given options ("key", "value"
 * pairs, NULL-terminated); with `workers` its two worker threads run the tasks. */
static test_node_t *start_node(size_t i, const char *node_id, bool workers, const char *const kv[])
{
    test_node_t *n = &fx.nodes[i];
    size_t count = 0;
    for (; kv && kv[2 * count]; count++)
        n->options[count] = (cohort_option_t){kv[2 * count], kv[2 * count + 1], (int)(3 + count)};
    n->config = test_service_config(SERVICE, test_handler_path("probe"));
    n->config.workers = 2;
    n->config.retry_base_ms = 60000; /* a retried task stays pending for the whole test */
    n->config.options = n->options;
    n->config.n_options = count;
    n->service = test_service_new(&n->config, node_id, TAKEOVER_MS, fx.store, fx.client);
    bson_error_t err;
    if (workers)
        cr_assert(cohort_service_start(n->service, &err), "cannot start: %s", err.message);
    return n;
}

static void tick(test_node_t *n)
{
    test_service_tick(n->service, fx.client);
}

/* ---- tasks ------------------------------------------------------------------------------ */

typedef struct task_id {
    char hex[25];
} task_id_t;

/* Creates a task through the handler ABI from a worker-like (unfenced) context of node n. */
static task_id_t create_task(test_node_t *n, const char *data_json, bool tracked)
{
    bson_error_t json_error;
    bson_t *data = bson_new_from_json((const uint8_t *)data_json, -1, &json_error);
    cr_assert_not_null(data, "bad JSON %s: %s", data_json, json_error.message);
    bson_t *opts = BCON_NEW("tracked", BCON_BOOL(tracked));
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, n->service, fx.client, false);
    task_id_t id;
    cohort_error_t error;
    cr_assert(cohort_task_create(&ctx, data, opts, id.hex, &error), "cohort_task_create: %s",
              error.message);
    bson_destroy(opts);
    bson_destroy(data);
    return id;
}

/* Claims and runs every due task on the test thread, as node n's workers would. */
static int process_all(test_node_t *n)
{
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, n->service, fx.client, false);
    int processed = 0;
    for (;;) {
        bson_t claimed;
        bool found = false;
        bson_error_t error;
        cr_assert(cohort_store_claim_task(fx.store, fx.client, SERVICE, n->service->node_id,
                                          cohort_clock_cluster_ms(), NULL, &claimed, &found, NULL, &error),
                  "%s", error.message);
        if (!found) {
            bson_destroy(&claimed);
            return processed;
        }
        cohort_task_execute(&ctx, 0, &claimed);
        bson_destroy(&claimed);
        processed++;
    }
}

static int64_t count(const char *filter)
{
    return test_count(fx.client, fx.db, QUEUE, filter);
}

static bool read_task(const task_id_t *id, bson_t *doc)
{
    char filter[128];
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%s\"}}", id->hex);
    return test_find_one(fx.client, fx.db, QUEUE, filter, doc);
}

/* The ids of the tracked tasks of `batch` in `status`, in _id (creation) order. */
static size_t db_batch_ids(int64_t batch, const char *status, task_id_t *ids, size_t max)
{
    bson_t *filter = BCON_NEW("batch", BCON_INT64(batch), "tracked", BCON_BOOL(true), "status",
                              BCON_UTF8(status));
    bson_t *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}");
    mongoc_collection_t *coll = mongoc_client_get_collection(fx.client, fx.db, QUEUE);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    size_t n = 0;
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it));
        cr_assert_lt(n, max, "more tasks in batch %lld than expected", (long long)batch);
        bson_oid_to_string(bson_iter_oid(&it), ids[n++].hex);
    }
    bson_error_t error;
    cr_assert_not(mongoc_cursor_error(cursor, &error), "%s", error.message);
    mongoc_cursor_destroy(cursor);
    mongoc_collection_destroy(coll);
    bson_destroy(opts);
    bson_destroy(filter);
    return n;
}

/* ---- the service document --------------------------------------------------------------- */

typedef struct batch_state {
    int64_t open;      /* batch_seq */
    int64_t draining;  /* draining.seq, 0 if null */
    int64_t completed; /* batches_completed */
} batch_state_t;

static batch_state_t state(void)
{
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    batch_state_t s = {test_doc_int(&doc, "batch_seq"), test_doc_int(&doc, "draining.seq"),
                       test_doc_int(&doc, "batches_completed")};
    if (s.draining == INT64_MIN)
        s.draining = 0;
    bson_destroy(&doc);
    return s;
}

static void assert_state(int64_t open, int64_t draining, int64_t completed, const char *when)
{
    batch_state_t s = state();
    cr_assert(s.open == open && s.draining == draining && s.completed == completed,
              "%s: batch_seq %lld, draining %lld, batches_completed %lld; want %lld, %lld, %lld",
              when, (long long)s.open, (long long)s.draining, (long long)s.completed,
              (long long)open, (long long)draining, (long long)completed);
}

/* last_batch as recorded in the service document. */
static void assert_last_batch(int64_t seq, int64_t succeeded, int64_t failed, const char *node,
                              int64_t epoch)
{
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    char *json = bson_as_relaxed_extended_json(&doc, NULL);
    cr_assert_eq(test_doc_int(&doc, "last_batch.seq"), seq, "%s", json);
    cr_assert_eq(test_doc_int(&doc, "last_batch.succeeded"), succeeded, "%s", json);
    cr_assert_eq(test_doc_int(&doc, "last_batch.failed"), failed, "%s", json);
    cr_assert(test_doc_str(&doc, "last_batch.completed_by") &&
                  strcmp(test_doc_str(&doc, "last_batch.completed_by"), node) == 0,
              "completed_by: %s", json);
    cr_assert_eq(test_doc_int(&doc, "last_batch.epoch"), epoch, "%s", json);
    bson_iter_t it, at;
    cr_assert(bson_iter_init(&it, &doc) &&
                  bson_iter_find_descendant(&it, "last_batch.completed_at", &at) &&
                  BSON_ITER_HOLDS_DATE_TIME(&at),
              "last_batch.completed_at is not a date: %s", json);
    int64_t server_now = 0;
    bson_error_t error;
    cr_assert(cohort_store_server_time(fx.store, fx.client, &server_now, &error), "%s",
              error.message);
    int64_t age = server_now - bson_iter_date_time(&at);
    cr_assert(age >= -1000 && age < 30000, "completed_at is %lld ms old", (long long)age);
    bson_free(json);
    bson_destroy(&doc);
}

/* The callback call `i` iterated exactly `ids` (n of them), in this order. */
static void assert_call_ids(int i, const task_id_t *ids, size_t n)
{
    const probe_call_t *c = &fx.record->call[i];
    cr_assert_eq(c->iterated, (int64_t)n, "callback %d iterated %lld tasks, want %zu", i + 1,
                 (long long)c->iterated, n);
    for (size_t k = 0; k < n; k++)
        cr_assert_str_eq(c->ids[k], ids[k].hex, "callback %d: task %zu is %s, want %s", i + 1, k,
                         c->ids[k], ids[k].hex);
}

/* ---- the life of a batch ---------------------------------------------------------------- */

Test(batches, a_drained_batch_closes_on_one_tick_and_completes_on_a_later_one)
{
    test_node_t *a = start_node(0, "node-a", true, NULL);
    task_id_t ok[4], failed[2], untracked[3];
    for (size_t i = 0; i < 4; i++) {
        ok[i] = create_task(a, "{}", true);
        if (i < 3)
            untracked[i] = create_task(a, "{}", false);
        if (i < 2)
            failed[i] = create_task(a, "{\"outcome\": 2}", true);
    }
    cr_assert_eq(count("{\"tracked\": true, \"batch\": 1}"), 6);
    cr_assert_eq(count("{\"tracked\": false, \"batch\": {\"$exists\": true}}"), 0,
                 "untracked tasks were put into a batch");

    /* Tick until the completion is recorded, checking the state after every tick. */
    int close_tick = -1, done_tick = -1;
    int64_t deadline = test_now_ms() + 15000;
    for (int t = 0; done_tick < 0; t++) {
        cr_assert_lt(test_now_ms(), deadline, "the batch did not complete within 15 s");
        tick(a);
        batch_state_t s = state();
        if (close_tick < 0 && s.draining == 1) {
            close_tick = t;
            cr_assert_eq(s.open, 2, "closing did not open batch 2");
            cr_assert_eq(count("{\"tracked\": true, \"status\": {\"$in\": [\"pending\", "
                               "\"claimed\"]}}"),
                         0, "the batch closed with unfinished tasks");
            bson_t doc;
            test_read_service(fx.store, fx.client, SERVICE, &doc);
            cr_assert_eq(test_doc_int(&doc, "draining.epoch"), 1);
            bson_destroy(&doc);
        }
        if (s.completed == 1)
            done_tick = t;
        else
            cr_assert_eq(fx.record->calls, 0, "tick %d: callback before the completion", t);
        test_sleep_ms(10);
    }
    cr_assert_geq(close_tick, 0, "the batch was never seen draining");
    cr_assert_gt(done_tick, close_tick, "closed and completed on the same tick (%d)", done_tick);

    cr_assert_eq(fx.record->calls, 1);
    const probe_call_t *c = &fx.record->call[0];
    cr_assert_eq(c->batch_id, 1);
    cr_assert_eq(c->succeeded, 4);
    cr_assert_eq(c->failed, 2);
    cr_assert_str_eq(c->node, "node-a");
    cr_assert_eq(c->epoch, 1);
    cr_assert_not(c->iteration_error);
    /* exactly the succeeded tracked tasks, as the database has them, in creation order */
    task_id_t in_db[8];
    size_t n = db_batch_ids(1, "succeeded", in_db, 8);
    cr_assert_eq(n, 4);
    assert_call_ids(0, ok, 4);
    assert_call_ids(0, in_db, n);
    for (int64_t k = 0; k < c->iterated; k++)
        for (size_t u = 0; u < 3; u++)
            cr_assert_str_neq(c->ids[k], untracked[u].hex, "an untracked task was iterated");

    /* succeeded tasks acknowledged; failed and untracked ones not */
    cr_assert_eq(count("{\"acknowledged\": true}"), 4);
    cr_assert_eq(count("{\"acknowledged\": true, \"batch\": 1, \"status\": \"succeeded\"}"), 4);
    for (size_t i = 0; i < 2; i++) {
        bson_t doc;
        cr_assert(read_task(&failed[i], &doc));
        cr_assert_str_eq(test_doc_str(&doc, "status"), "failed");
        cr_assert_not(test_doc_has(&doc, "acknowledged"));
        bson_destroy(&doc);
    }
    assert_state(2, 0, 1, "after the completion");
    assert_last_batch(1, 4, 2, "node-a", 1);
    cr_assert_eq(atomic_load(&a->service->stats.batches_completed), 1);

    /* nothing more happens */
    for (int t = 0; t < 5; t++) {
        tick(a);
        test_sleep_ms(10);
    }
    cr_assert_eq(fx.record->calls, 1, "the callback ran again");
    assert_state(2, 0, 1, "five ticks later");
}

Test(batches, tasks_created_after_the_close_join_the_next_batch)
{
    test_node_t *a = start_node(0, "node-a", false, NULL);
    test_node_t *b = start_node(1, "node-b", false, NULL); /* never ticked: a secondary */
    tick(a);
    cr_assert_eq(cohort_election_epoch(&a->service->election), 1);
    task_id_t first[2] = {create_task(a, "{\"n\": 1}", true), create_task(b, "{\"n\": 2}", true)};
    cr_assert_eq(process_all(a), 2);

    test_stderr_begin();
    tick(a);
    char *log = test_stderr_end();
    cr_assert(strstr(log, "batch 1 drained (2 succeeded, 0 failed)"), "log: %s", log);
    free(log);
    assert_state(2, 1, 0, "after the closing tick");
    cr_assert_eq(fx.record->calls, 0);

    /* created by the primary (its cached open batch) and by a secondary (the document) */
    task_id_t second[2] = {create_task(a, "{\"n\": 3}", true), create_task(b, "{\"n\": 4}", true)};
    for (size_t i = 0; i < 2; i++) {
        bson_t doc;
        cr_assert(read_task(&second[i], &doc));
        cr_assert_eq(test_doc_int(&doc, "batch"), 2,
                     "a task created after the close is in batch %lld",
                     (long long)test_doc_int(&doc, "batch"));
        bson_destroy(&doc);
    }

    test_stderr_begin();
    tick(a);
    log = test_stderr_end();
    cr_assert(strstr(log, "batch 1 completed: 2 succeeded, 0 failed"), "log: %s", log);
    free(log);
    cr_assert_eq(fx.record->calls, 1);
    cr_assert_eq(fx.record->call[0].batch_id, 1);
    assert_call_ids(0, first, 2);
    assert_state(2, 0, 1, "after batch 1");

    /* batch 2 waits for its tasks */
    for (int t = 0; t < 3; t++)
        tick(a);
    cr_assert_eq(fx.record->calls, 1);
    assert_state(2, 0, 1, "while batch 2 has pending tasks");

    cr_assert_eq(process_all(a), 2);
    tick(a); /* closes batch 2 */
    assert_state(3, 2, 1, "after batch 2 closed");
    tick(a); /* completes it */
    cr_assert_eq(fx.record->calls, 2);
    cr_assert_eq(fx.record->call[1].batch_id, 2);
    cr_assert_eq(fx.record->call[1].succeeded, 2);
    assert_call_ids(1, second, 2);
    assert_state(3, 0, 2, "after batch 2");
    assert_last_batch(2, 2, 0, "node-a", 1);
    cr_assert_eq(count("{\"acknowledged\": true}"), 4);
}

Test(batches, cohortctl_enqueue_tracked_joins_the_open_batch)
{
    test_node_t *a = start_node(0, "node-a", false, NULL);
    tick(a);
    create_task(a, "{}", true);
    cr_assert_eq(process_all(a), 1);
    tick(a); /* closes batch 1: batch 2 is open */
    assert_state(2, 1, 0, "after the close");
    const char *const many[] = {"enqueue", SERVICE, "--tracked", "--count", "3", NULL};
    const char *const one[] = {"enqueue", SERVICE, "--tracked", NULL};
    const char *const untracked[] = {"enqueue", SERVICE, NULL};
    const char *const *runs[] = {many, one, untracked};
    for (size_t i = 0; i < 3; i++) {
        test_run_result_t r = test_ctl_run(fx.db, NULL, runs[i]);
        cr_assert_eq(r.exit_code, 0, "cohortctl enqueue: exit %d: %s", r.exit_code, r.err);
        test_run_result_free(&r);
    }
    cr_assert_eq(count("{\"created_by\": \"cohortctl\", \"tracked\": true, \"batch\": 2}"), 4,
                 "cohortctl enqueue --tracked did not put the tasks into the open batch");
    cr_assert_eq(count("{\"created_by\": \"cohortctl\", \"tracked\": false, "
                       "\"batch\": {\"$exists\": false}}"),
                 1);
    tick(a); /* completes batch 1 without them */
    cr_assert_eq(fx.record->calls, 1);
    cr_assert_eq(fx.record->call[0].iterated, 1);
    cr_assert_eq(process_all(a), 5);
    tick(a);
    tick(a);
    cr_assert_eq(fx.record->calls, 2);
    cr_assert_eq(fx.record->call[1].batch_id, 2);
    cr_assert_eq(fx.record->call[1].iterated, 4, "batch 2's callback saw %lld of cohortctl's 4",
                 (long long)fx.record->call[1].iterated);
}

Test(batches, untracked_tasks_never_cause_a_callback)
{
    test_node_t *a = start_node(0, "node-a", false, NULL);
    tick(a);
    for (int i = 0; i < 5; i++)
        create_task(a, i % 2 ? "{\"outcome\": 2}" : "{}", false);
    cr_assert_eq(process_all(a), 5);
    for (int t = 0; t < 8; t++) {
        tick(a);
        test_sleep_ms(5);
    }
    cr_assert_eq(fx.record->calls, 0, "a callback for untracked tasks");
    assert_state(1, 0, 0, "after untracked tasks only");
    cr_assert_eq(count("{\"batch\": {\"$exists\": true}}"), 0);
    cr_assert_eq(count("{\"acknowledged\": {\"$exists\": true}}"), 0);
}

Test(batches, a_batch_waits_for_its_retrying_tasks)
{
    test_node_t *a = start_node(0, "node-a", false, NULL);
    tick(a);
    create_task(a, "{}", true);
    task_id_t retrying = create_task(a, "{\"outcome\": 1}", true);
    cr_assert_eq(process_all(a), 2);
    bson_t doc;
    cr_assert(read_task(&retrying, &doc));
    cr_assert_str_eq(test_doc_str(&doc, "status"), "pending", "the retry is not pending");
    bson_destroy(&doc);
    for (int t = 0; t < 5; t++)
        tick(a);
    cr_assert_eq(fx.record->calls, 0, "the callback ran while a task still had retries left");
    assert_state(1, 0, 0, "with a task waiting for its retry");
}

Test(batches, a_batch_of_only_failed_tasks_completes_with_nothing_to_iterate)
{
    test_node_t *a = start_node(0, "node-a", false, NULL);
    tick(a);
    create_task(a, "{\"outcome\": 2}", true);
    create_task(a, "{\"outcome\": 2}", true);
    cr_assert_eq(process_all(a), 2);
    tick(a);
    tick(a);
    cr_assert_eq(fx.record->calls, 1);
    cr_assert_eq(fx.record->call[0].succeeded, 0);
    cr_assert_eq(fx.record->call[0].failed, 2);
    cr_assert_eq(fx.record->call[0].iterated, 0);
    assert_state(2, 0, 1, "after an all-failed batch");
    assert_last_batch(1, 0, 2, "node-a", 1);
}

Test(batches, a_cancelled_tracked_task_counts_as_done_and_the_callback_fires_once)
{
    test_node_t *a = start_node(0, "node-a", false, NULL);
    tick(a);
    task_id_t ok = create_task(a, "{}", true);
    task_id_t cancelled = create_task(a, "{}", true);
    test_run_result_t r = test_ctl(fx.db, "cancel", SERVICE, cancelled.hex);
    cr_assert_eq(r.exit_code, 0, "cohortctl cancel: exit %d: %s", r.exit_code, r.err);
    test_run_result_free(&r);
    cr_assert_eq(process_all(a), 1, "the cancelled task ran");
    for (int t = 0; t < 5; t++)
        tick(a);
    cr_assert_eq(fx.record->calls, 1, "the callback ran %d times, want once",
                 fx.record->calls);
    const probe_call_t *c = &fx.record->call[0];
    cr_assert_eq(c->succeeded, 1);
    cr_assert_eq(c->failed, 1, "a cancelled task is counted with the unsuccessful ones");
    assert_call_ids(0, &ok, 1);
    cr_assert_eq(c->unsuccessful, 1);
    cr_assert_str_eq(c->bad[0].id, cancelled.hex);
    cr_assert_str_eq(c->bad[0].status, "cancelled");
    assert_state(2, 0, 1, "after a batch with a cancelled task");
    assert_last_batch(1, 1, 1, "node-a", 1);
}

/* Sets fields of task `id` in the database by hand, as another program (or a node's tick)
 * would: `set_json` is the $set document. */
static void set_task_fields(const task_id_t *id, const char *set_json)
{
    bson_error_t error;
    bson_t *set = bson_new_from_json((const uint8_t *)set_json, -1, &error);
    cr_assert_not_null(set, "bad JSON %s: %s", set_json, error.message);
    bson_oid_t oid;
    bson_oid_init_from_string(&oid, id->hex);
    bson_t *filter = BCON_NEW("_id", BCON_OID(&oid));
    bson_t *update = BCON_NEW("$set", BCON_DOCUMENT(set));
    mongoc_collection_t *coll = mongoc_client_get_collection(fx.client, fx.db, QUEUE);
    cr_assert(mongoc_collection_update_one(coll, filter, update, NULL, NULL, &error), "%s",
              error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(update);
    bson_destroy(filter);
    bson_destroy(set);
}

static void assert_unsuccessful(const probe_unsuccessful_t *bad, const task_id_t *id,
                                const char *status, const char *error_part)
{
    cr_assert_str_eq(bad->id, id->hex, "unsuccessful task %s, want %s", bad->id, id->hex);
    cr_assert_str_eq(bad->status, status, "task %s: status %s, want %s", bad->id, bad->status,
                     status);
    cr_assert(strstr(bad->last_error, error_part), "task %s: last error '%s' lacks '%s'",
              bad->id, bad->last_error, error_part);
}

Test(batches, the_callback_iterates_the_unsuccessful_tasks_with_their_status_and_last_error)
{
    test_node_t *a = start_node(0, "node-a", false, NULL);
    tick(a);
    task_id_t ok = create_task(a, "{}", true);
    task_id_t failed = create_task(a, "{\"outcome\": 2}", true);
    task_id_t malformed = create_task(a, "{}", true);
    task_id_t timed_out = create_task(a, "{}", true);
    create_task(a, "{\"outcome\": 2}", false); /* untracked: never iterated */
    /* data that is not a document fails the task at its claim; a timeout, by hand */
    set_task_fields(&malformed, "{\"data\": \"not a document\"}");
    set_task_fields(&timed_out, "{\"status\": \"timed_out\", \"last_error\": \"ran past "
                                "task_timeout_ms\"}");
    cr_assert_eq(process_all(a), 4);
    tick(a);
    tick(a);
    cr_assert_eq(fx.record->calls, 1, "the batch did not complete");
    const probe_call_t *c = &fx.record->call[0];
    cr_assert_not(c->iteration_error);
    cr_assert_eq(c->succeeded, 1);
    cr_assert_eq(c->failed, 3);
    assert_call_ids(0, &ok, 1);
    cr_assert_eq(c->unsuccessful, 3, "iterated %lld unsuccessful tasks, want 3",
                 (long long)c->unsuccessful);
    /* in creation order, each with its own status and reason */
    assert_unsuccessful(&c->bad[0], &failed, "failed", "permanent failure");
    assert_unsuccessful(&c->bad[1], &malformed, "failed", "not a document");
    assert_unsuccessful(&c->bad[2], &timed_out, "timed_out", "ran past task_timeout_ms");
}

Test(batches, a_failing_callback_is_retried_and_recorded_only_once_it_succeeds)
{
    test_node_t *a = start_node(0, "node-a", false,
                           (const char *const[]){"fail_callbacks", "2", "set_key", "seen", NULL});
    tick(a);
    task_id_t ids[3];
    for (size_t i = 0; i < 3; i++)
        ids[i] = create_task(a, "{}", true);
    cr_assert_eq(process_all(a), 3);
    tick(a); /* closes */
    assert_state(2, 1, 0, "after the close");

    for (int attempt = 1; attempt <= 2; attempt++) {
        test_stderr_begin();
        tick(a);
        char *log = test_stderr_end();
        cr_assert_eq(fx.record->calls, attempt);
        cr_assert_not(fx.record->call[attempt - 1].returned);
        cr_assert(strstr(log, "on_tasks_completed failed") && strstr(log, "failing callback") &&
                      strstr(log, "retrying next tick"),
                  "no log line for failed callback %d: %s", attempt, log);
        free(log);
        assert_state(2, 1, 0, "after a failed callback");
        bson_t doc;
        test_read_service(fx.store, fx.client, SERVICE, &doc);
        cr_assert_not(test_doc_has(&doc, "data.seen"),
                      "a failed callback's cohort_set was applied");
        cr_assert_not(test_doc_has(&doc, "last_batch"), "a failed callback was recorded");
        bson_destroy(&doc);
    }

    tick(a);
    cr_assert_eq(fx.record->calls, 3);
    cr_assert(fx.record->call[2].returned);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(fx.record->call[i].batch_id, 1, "call %d", i + 1);
        cr_assert(fx.record->call[i].read_own_set, "call %d did not read its own set", i + 1);
        assert_call_ids(i, ids, 3);
    }
    assert_state(2, 0, 1, "after the successful callback");
    assert_last_batch(1, 3, 0, "node-a", 1);
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    cr_assert_eq(test_doc_int(&doc, "data.seen"), 1);
    bson_destroy(&doc);

    for (int t = 0; t < 3; t++)
        tick(a);
    cr_assert_eq(fx.record->calls, 3, "a completed batch's callback ran again");
    assert_state(2, 0, 1, "later");
}

/* ---- primacy moving on -------------------------------------------------------------------- */

Test(batches, a_completion_under_a_stale_epoch_is_not_applied)
{
    test_node_t *a = start_node(0, "node-a", false, NULL);
    tick(a);
    create_task(a, "{}", true);
    create_task(a, "{\"outcome\": 2}", true);
    cr_assert_eq(process_all(a), 2);
    tick(a); /* closes batch 1 under epoch 1 */
    assert_state(2, 1, 0, "after the close");

    /* another node takes over (epoch 2) */
    bson_error_t error;
    cohort_takeover_t t;
    cr_assert(cohort_store_take_lease(fx.store, fx.client, SERVICE, "node-b",
                                      cohort_clock_cluster_ms() + 60000, -1, 0, &t, &error),
              "%s", error.message);
    cr_assert(t.taken && t.epoch == 2);

    cohort_batch_counts_t counts = {.succeeded = 1, .failed = 1};
    bson_t *sets = BCON_NEW("k", BCON_UTF8("from the old primary"));
    bool completed = true;
    cr_assert(cohort_store_complete_batch(fx.store, fx.client, SERVICE, "node-a", 1, 1, &counts,
                                          sets, &completed, &error),
              "%s", error.message);
    cr_assert_not(completed, "a completion under epoch 1 was applied after epoch 2 began");
    assert_state(2, 1, 0, "after the stale completion");
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    cr_assert_not(test_doc_has(&doc, "data.k"), "the stale completion's data was applied");
    cr_assert_not(test_doc_has(&doc, "last_batch"));
    bson_destroy(&doc);

    /* the stale primary's own tick records nothing either */
    tick(a);
    assert_state(2, 1, 0, "after the deposed primary ticked");

    /* the new primary's completion applies, once */
    bson_destroy(sets);
    sets = BCON_NEW("k", BCON_UTF8("from the new primary"));
    cr_assert(cohort_store_complete_batch(fx.store, fx.client, SERVICE, "node-b", 2, 1, &counts,
                                          sets, &completed, &error));
    cr_assert(completed);
    completed = true;
    cr_assert(cohort_store_complete_batch(fx.store, fx.client, SERVICE, "node-b", 2, 1, &counts,
                                          sets, &completed, &error));
    cr_assert_not(completed, "batch 1 was completed twice");
    assert_state(2, 0, 1, "after the new primary's completion");
    assert_last_batch(1, 1, 1, "node-b", 2);
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "data.k"), "from the new primary");
    bson_destroy(&doc);
    bson_destroy(sets);
}

typedef struct failover {
    test_node_t *b;
    bool b_took_over;     /* node-b became primary while node-a's callback ran */
    bool a_lease_expired; /* node-a's lease had run out by then */
    int64_t set_error;    /* what node-a's cohort_set inside the callback returned */
} failover_t;

/* Inside node-a's callback: node-b's election takes primacy over (after takeover_ms). */
static bool take_over_during_callback(cohort_ctx_t *ctx, cohort_batch_t *batch, void *arg)
{
    (void)batch;
    failover_t *f = arg;
    bson_value_t who = {.value_type = BSON_TYPE_UTF8};
    who.value.v_utf8.str = (char *)cohort_ctx_node_id(ctx);
    who.value.v_utf8.len = (uint32_t)strlen(who.value.v_utf8.str);
    cohort_error_t error;
    f->set_error = cohort_set(ctx, "completed_by", &who, &error) ? COHORT_OK : error.code;
    if (strcmp(cohort_ctx_node_id(ctx), "node-a") != 0)
        return true;

    mongoc_client_t *own = cohort_store_pop(fx.store);
    int64_t deadline = test_now_ms() + 10 * TAKEOVER_MS;
    cohort_election_t *e = &f->b->service->election;
    while (!cohort_election_has_lease(e) && test_now_ms() < deadline) {
        resync();
        bson_error_t db_error;
        if (!test_election_tick(e, fx.store, own, &db_error))
            break;
        if (!cohort_election_has_lease(e))
            test_sleep_ms(20);
    }
    cohort_store_push(fx.store, own);
    f->b_took_over = cohort_election_has_lease(e);
    f->a_lease_expired = !cohort_ctx_is_primary(ctx);
    return true;
}

Test(batches, a_failover_during_the_callback_reruns_it_and_records_the_batch_once)
{
    test_node_t *a = start_node(0, "node-a", false, NULL);
    test_node_t *b = start_node(1, "node-b", false, NULL);
    failover_t f = {.b = b, .set_error = -1};
    ((probe_set_completed_hook_fn)test_probe_symbol(&fx, "probe_set_completed_hook"))(
        take_over_during_callback, &f);
    tick(a);
    tick(b);
    cr_assert_eq(cohort_election_epoch(&a->service->election), 1);
    cr_assert_not(cohort_election_has_lease(&b->service->election));
    task_id_t ids[3];
    for (size_t i = 0; i < 3; i++)
        ids[i] = create_task(i == 1 ? b : a, "{}", true);
    create_task(a, "{\"outcome\": 2}", true);
    cr_assert_eq(process_all(b), 4);
    tick(a); /* closes batch 1 */
    assert_state(2, 1, 0, "after the close");

    test_stderr_begin();
    tick(a); /* the callback; node-b takes over while it runs */
    char *log = test_stderr_end();
    cr_assert(f.b_took_over, "node-b did not take over within %d ms", 10 * TAKEOVER_MS);
    cr_assert(f.a_lease_expired, "node-a still had a lease when node-b took over");
    cr_assert_eq(f.set_error, COHORT_OK, "cohort_set inside the callback: %lld",
                 (long long)f.set_error);
    cr_assert_eq(fx.record->calls, 1);
    cr_assert_str_eq(fx.record->call[0].node, "node-a");
    cr_assert(fx.record->call[0].returned);
    cr_assert(strstr(log, "primacy moved on before its completion was recorded"), "log: %s", log);
    free(log);
    assert_state(2, 1, 0, "after the deposed primary's callback");
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    cr_assert_not(test_doc_has(&doc, "data.completed_by"), "node-a's cohort_set was applied");
    cr_assert_not(test_doc_has(&doc, "last_batch"));
    bson_destroy(&doc);
    cr_assert_eq(atomic_load(&a->service->stats.batches_completed), 0);

    tick(b); /* the new primary runs the callback again and records it */
    cr_assert_eq(fx.record->calls, 2);
    const probe_call_t *again = &fx.record->call[1];
    cr_assert_str_eq(again->node, "node-b");
    cr_assert_eq(again->epoch, 2);
    cr_assert_eq(again->batch_id, 1);
    cr_assert_eq(again->succeeded, 3);
    cr_assert_eq(again->failed, 1);
    assert_call_ids(0, ids, 3);
    assert_call_ids(1, ids, 3);
    assert_state(2, 0, 1, "after the new primary's callback");
    assert_last_batch(1, 3, 1, "node-b", 2);
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    cr_assert_str_eq(test_doc_str(&doc, "data.completed_by"), "node-b");
    bson_destroy(&doc);
    cr_assert_eq(atomic_load(&b->service->stats.batches_completed), 1);

    /* both keep ticking: nothing runs or counts again */
    for (int t = 0; t < 4; t++) {
        tick(a);
        tick(b);
        test_sleep_ms(10);
    }
    cr_assert_eq(fx.record->calls, 2, "the callback ran a third time");
    assert_state(2, 0, 1, "later");
    cr_assert_eq(cohort_election_epoch(&a->service->election), 0);
    cr_assert_eq(cohort_election_epoch(&b->service->election), 2);
}

/* ---- writers that are late, and documents from before batches ----------------------------- */

/* True if some callback iterated the task `hex`. */
static bool iterated_by_a_callback(const char *hex)
{
    for (int i = 0; i < fx.record->calls && i < PROBE_MAX_CALLS; i++)
        for (int64_t k = 0; k < fx.record->call[i].iterated && k < PROBE_MAX_IDS; k++)
            if (strcmp(fx.record->call[i].ids[k], hex) == 0)
                return true;
    return false;
}

Test(batches, a_task_that_lands_in_a_completed_batch_still_reaches_a_callback)
{
    /* A writer reads the open batch and inserts a moment later: cohortctl enqueue --tracked
     * reads batch_seq once and then inserts in chunks of 10,000; a secondary's
     * cohort_task_create reads it before each insert. If the batch closes and completes in
     * between (a slow writer, a long enqueue), the task lands in a completed batch. */
    test_node_t *a = start_node(0, "node-a", false, NULL);
    tick(a);
    create_task(a, "{}", true);
    cr_assert_eq(process_all(a), 1);
    cohort_batch_state_t seen;
    bson_error_t error;
    cr_assert(cohort_store_batch_state(fx.store, fx.client, SERVICE, &seen, &error), "%s",
              error.message);
    cr_assert_eq(seen.open, 1);
    tick(a); /* closes batch 1 */
    tick(a); /* completes it */
    assert_state(2, 0, 1, "after batch 1");

    cohort_new_task_t late = {.tracked = true,
                              .batch = seen.open,
                              .created_by = "slow-writer",
                              .now_ms = cohort_clock_cluster_ms()};
    bson_oid_t oid;
    cr_assert(cohort_store_insert_task(fx.store, fx.client, SERVICE, &late, &oid, NULL, NULL,
                                       &error),
              "%s", error.message);
    char hex[25];
    bson_oid_to_string(&oid, hex);
    cr_assert_eq(process_all(a), 1);
    for (int t = 0; t < 6; t++)
        tick(a);
    cr_assert(iterated_by_a_callback(hex),
              "tracked task %s succeeded but no on_tasks_completed ever saw it: it was written "
              "into batch %lld after that batch completed, and nothing moves it to an open "
              "batch (callbacks: %d)",
              hex, (long long)seen.open, fx.record->calls);
}

Test(batches, a_service_document_from_before_batches_completes_batches)
{
    /* The previous release created service documents without batch_seq, draining,
     * batches_completed and data; cohort_store_ensure_service() fills them in only when it
     * inserts the document. */
    mongoc_collection_t *services = mongoc_client_get_collection(fx.client, fx.db, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(SERVICE));
    bson_t *update = BCON_NEW("$unset", "{", "batch_seq", BCON_UTF8(""), "draining", BCON_UTF8(""),
                              "batches_completed", BCON_UTF8(""), "data", BCON_UTF8(""), "}");
    bson_error_t error;
    cr_assert(mongoc_collection_update_one(services, filter, update, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    /* a node of this release starts on it */
    cr_assert(test_ensure_service(fx.store, fx.client, SERVICE, &error), "%s",
              error.message);

    test_node_t *a = start_node(0, "node-a", false, NULL);
    tick(a);
    task_id_t ids[2] = {create_task(a, "{}", true), create_task(a, "{}", true)};
    cr_assert_eq(process_all(a), 2);
    for (int t = 0; t < 6 && fx.record->calls == 0; t++)
        tick(a);
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    char json[1024];
    char *text = bson_as_relaxed_extended_json(&doc, NULL);
    snprintf(json, sizeof json, "%s", text);
    bson_free(text);
    int64_t completed = test_doc_int(&doc, "batches_completed");
    bson_destroy(&doc);
    cr_assert_eq(fx.record->calls, 1,
                 "batch 1 never completed on an upgraded service document (the close is fenced "
                 "on batch_seq, which the document lacks): %s",
                 json);
    assert_call_ids(0, ids, 2);
    cr_assert_eq(completed, 1, "%s", json);
}

Test(batches, a_tracked_task_enqueued_by_another_program_reaches_a_callback)
{
    /* docs/SCHEMA.md, "Enqueueing from another program": insert {status: "pending", data,
     * tracked: true} into queue_<service>. Such a task has no batch field. */
    test_node_t *a = start_node(0, "node-a", false, NULL);
    tick(a);
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    bson_t *doc = BCON_NEW("_id", BCON_OID(&oid), "status", BCON_UTF8("pending"), "data", "{",
                           "from", BCON_UTF8("another program"), "}", "tracked", BCON_BOOL(true),
                           "run_at", BCON_DATE_TIME(cohort_clock_cluster_ms()));
    mongoc_collection_t *coll = mongoc_client_get_collection(fx.client, fx.db, QUEUE);
    bson_error_t error;
    cr_assert(mongoc_collection_insert_one(coll, doc, NULL, NULL, &error), "%s", error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(doc);
    char hex[25];
    bson_oid_to_string(&oid, hex);

    cr_assert_eq(process_all(a), 1);
    cr_assert_eq(count("{\"status\": \"succeeded\", \"tracked\": true}"), 1);
    for (int t = 0; t < 6; t++)
        tick(a);
    cr_assert(iterated_by_a_callback(hex),
              "a tracked task enqueued as docs/SCHEMA.md describes succeeded but no callback "
              "saw it (it has no batch field, so no batch ever counts it; callbacks: %d)",
              fx.record->calls);
}
