/*
 * scheduling.c - the scheduling semantics of issue 6 against the local database, through the
 * store calls and through in-process services (cohort_service_t with worker threads, the
 * test thread ticking them).
 *
 * Covers: claim order (priority, then FIFO within a priority); not_before / delay_ms (a task
 * is invisible to claims until then); not_after promotion (once, idempotent, the promoted
 * task overtakes; the primary promotes on its tick, a secondary does not); kinds (a handler
 * that declares kinds claims only those and kindless tasks); the pause and block switches
 * (per kind and for the whole service; resuming is immediate; a running task finishes);
 * coalescing (1,000 creations on 10 keys are 10 tasks and 10 runs; a claimed task no longer
 * absorbs creations; concurrent creators still make one task); groups (one lock per group,
 * unclaim, the busy-group filter, the lock released on every way out of `claimed`); batch
 * claims (order, no double claims under concurrency, a constant number of commands) and
 * bulk outcomes; timed_out under thread isolation; and the validation of task options.
 *
 * Handlers: tests/support/handlers/probe.c (sleep_ms / outcome in the task data; counts its
 * runs), outcome.c (likewise, counts its calls) and kinds.c (declares kinds email and sms).
 * Threads never call Criterion's asserts: they record what happened and the test thread
 * checks it.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "core/clock.h"
#include "node/handler/context.h"
#include "node/primary/election.h"
#include "node/service.h"
#include "store/claims.h"
#include "store/store.h"
#include "store/groups.h"
#include "store/insert.h"
#include "store/nodes.h"
#include "store/outcomes.h"
#include "store/queries.h"
#include "store/services.h"
#include "store/upkeep.h"

#define SERVICE "sched"
#define QUEUE "queue_" SERVICE
#define NODE "node-s"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;
static cohort_service_config_t configs[2];
static cohort_service_t *services[2];

static void setup(void)
{
    test_service_db_open("sched", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    for (size_t i = 0; i < 2; i++) {
        if (services[i])
            cohort_service_destroy(services[i], client);
        services[i] = NULL;
        free(configs[i].handler_path);
        configs[i].handler_path = NULL;
    }
    test_service_db_close(&db, &store, &client);
}

TestSuite(scheduling, .init = setup, .fini = teardown, .timeout = 60);

/* ---- helpers ---------------------------------------------------------------------------- */

/* The config of service i on test handler `handler` (change it before make_service). */
static cohort_service_config_t *prepare(size_t i, const char *handler)
{
    configs[i] = test_service_config(SERVICE, test_handler_path(handler));
    configs[i].not_after_boost = 10;
    configs[i].claim_batch = 1;
    return &configs[i];
}

/* Creates service i (workers not started) as node `node_id`. */
static cohort_service_t *make_service(size_t i, const char *node_id)
{
    services[i] = test_service_new(&configs[i], node_id, 10000, store, client);
    return services[i];
}

static void start(cohort_service_t *service)
{
    bson_error_t err;
    cr_assert(cohort_service_start(service, &err), "cannot start workers: %s", err.message);
}

static bson_t *json(const char *text)
{
    bson_error_t error;
    bson_t *doc = bson_new_from_json((const uint8_t *)text, -1, &error);
    cr_assert_not_null(doc, "bad JSON %s: %s", text, error.message);
    return doc;
}

/* cohort_task_create() on service 0 (from a worker-like context: not fenced) with data and
 * options as JSON (NULL: none). */
static bool create(const char *data_json, const char *opts_json, char id[25],
                   cohort_error_t *error)
{
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, services[0], client, false);
    bson_t *data = data_json ? json(data_json) : NULL;
    bson_t *opts = opts_json ? json(opts_json) : NULL;
    bool ok = cohort_task_create(&ctx, data, opts, id, error);
    if (opts)
        bson_destroy(opts);
    if (data)
        bson_destroy(data);
    return ok;
}

/* create() that must succeed; returns the id in `id`. */
static void must_create(const char *data_json, const char *opts_json, char id[25])
{
    cohort_error_t error = {0};
    cr_assert(create(data_json, opts_json, id, &error), "cohort_task_create(%s, %s): %s",
              data_json ? data_json : "NULL", opts_json ? opts_json : "NULL", error.message);
}

/* A task inserted with the store call, due at `now`. */
static cohort_new_task_t new_task(int64_t priority)
{
    return (cohort_new_task_t){.created_by = "sched-test",
                               .now_ms = cohort_clock_cluster_ms(),
                               .priority = priority};
}

static bson_oid_t insert(const cohort_new_task_t *task)
{
    bson_oid_t oid;
    bson_error_t error;
    bool exists = true, coalesced = true;
    cr_assert(cohort_store_insert_task(store, client, SERVICE, task, &oid, &exists, &coalesced,
                                       &error),
              "%s", error.message);
    cr_assert_not(exists);
    return oid;
}

static bool is_null_or_absent(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    return !(bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found)) ||
           BSON_ITER_HOLDS_NULL(&found);
}

static bson_oid_t oid_of(const bson_t *doc)
{
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it),
              "a task without an ObjectId");
    bson_oid_t oid;
    bson_oid_copy(bson_iter_oid(&it), &oid);
    return oid;
}

static bson_value_t id_value(const bson_oid_t *oid)
{
    bson_value_t v = {.value_type = BSON_TYPE_OID};
    bson_oid_copy(oid, &v.value.v_oid);
    return v;
}

static bson_oid_t oid_from_hex(const char hex[25])
{
    bson_oid_t oid;
    cr_assert(bson_oid_is_valid(hex, 24), "not an id: '%s'", hex);
    bson_oid_init_from_string(&oid, hex);
    return oid;
}

/* Reads the task into *doc (initialised here); fails the test if it is gone. */
static void read_task(const bson_oid_t *oid, bson_t *doc)
{
    char hex[25];
    bson_oid_to_string(oid, hex);
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_read_task(store, client, SERVICE, hex, doc, &found, &error), "%s",
              error.message);
    cr_assert(found, "task %s is gone", hex);
}

static char *as_json(const bson_t *doc)
{
    return bson_as_relaxed_extended_json(doc, NULL);
}

static const char *status_of(const bson_oid_t *oid, char *buf, size_t len)
{
    bson_t doc;
    read_task(oid, &doc);
    const char *s = test_doc_str(&doc, "status");
    snprintf(buf, len, "%s", s ? s : "(none)");
    bson_destroy(&doc);
    return buf;
}

static int64_t count(const char *filter)
{
    return test_count(client, db, QUEUE, filter);
}

/* One claim by `node` at cluster time `now` with `filter`; *doc is valid (destroy it) only
 * if a task was claimed. */
static bool claim_one(const char *node, int64_t now, const cohort_claim_filter_t *filter,
                      bson_t *doc)
{
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_claim_task(store, client, SERVICE, node, now, filter, doc, &found, NULL,
                                      &error),
              "claim: %s", error.message);
    if (!found)
        bson_destroy(doc);
    return found;
}

/* Claims one task now (no filter) and returns its data.i; -1 if none was claimed. */
static int64_t claim_next_i(void)
{
    bson_t doc;
    if (!claim_one(NODE, cohort_clock_cluster_ms(), NULL, &doc))
        return -1;
    int64_t i = test_doc_int(&doc, "data.i");
    bson_destroy(&doc);
    return i;
}

/* Ticks every service made until count(filter) == want. */
static void tick_until_count(const char *filter, int64_t want, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        for (size_t i = 0; i < 2; i++)
            if (services[i])
                test_service_tick(services[i], client);
        int64_t n = count(filter);
        if (n == want)
            return;
        cr_assert_lt(test_now_ms(), deadline, "%s: %lld tasks after %lld ms, want %lld", filter,
                     (long long)n, (long long)timeout_ms, (long long)want);
        test_sleep_ms(20);
    }
}

/* Ticks every service made `n` times, 30 ms apart (to show that something does NOT happen). */
static void tick_idle(int n)
{
    for (int k = 0; k < n; k++) {
        for (size_t i = 0; i < 2; i++)
            if (services[i])
                test_service_tick(services[i], client);
        test_sleep_ms(30);
    }
}

static void *symbol(const char *handler, const char *name)
{
    void *dl = dlopen(test_handler_path(handler), RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(dl, "the %s handler is not loaded", handler);
    void *fn = dlsym(dl, name);
    cr_assert_not_null(fn, "%s not exported by %s", name, handler);
    dlclose(dl);
    return fn;
}

static long long probe_runs(void)
{
    return ((long long (*)(void))symbol("probe", "probe_processed"))();
}

static long long outcome_calls(void)
{
    return ((long long (*)(void))symbol("outcome", "outcome_handler_calls"))();
}

static long long kinds_calls(const char *kind)
{
    return ((long long (*)(const char *))symbol("kinds", "kinds_handler_calls"))(kind);
}

static void set_switch(const char *which, const char *kind, bool on, const char *reason)
{
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_set_switch(store, client, SERVICE, which, kind, on, reason, "sched-test",
                                      &found, &error),
              "%s", error.message);
    cr_assert(found, "no config document for %s", SERVICE);
}

/* ---- order: priority, then FIFO -------------------------------------------------------- */

Test(scheduling, priority_order_then_fifo_within_a_priority)
{
    prepare(0, "probe");
    make_service(0, NODE);
    const int priorities[] = {0, 5, -3, 5, 0, 10, -3, 5, 1000000, -1000000};
    const size_t n = sizeof priorities / sizeof priorities[0];
    for (size_t i = 0; i < n; i++) {
        char data[32], opts[64];
        snprintf(data, sizeof data, "{\"i\": %zu}", i);
        snprintf(opts, sizeof opts, "{\"priority\": %d, \"tracked\": false}", priorities[i]);
        char id[25];
        must_create(data, opts, id);
        bson_t doc;
        bson_oid_t oid = oid_from_hex(id);
        read_task(&oid, &doc);
        cr_assert_eq(test_doc_int(&doc, "priority"), priorities[i]);
        cr_assert_eq(test_doc_int(&doc, "base_priority"), priorities[i]);
        bson_destroy(&doc);
    }
    /* priority descending; within one priority the order of creation */
    const int64_t want[] = {8, 5, 1, 3, 7, 0, 4, 2, 6, 9};
    for (size_t k = 0; k < n; k++) {
        int64_t got = claim_next_i();
        cr_assert_eq(got, want[k], "claim %zu took task i=%lld, want i=%lld", k + 1,
                     (long long)got, (long long)want[k]);
    }
    cr_assert_eq(claim_next_i(), -1, "a claim found an 11th task");
}

Test(scheduling, service_default_and_kind_priority_apply_to_tasks_without_one)
{
    cohort_service_config_t *c = prepare(0, "probe");
    c->defaults.priority = 7;
    static cohort_kind_config_t kinds[1];
    kinds[0] = (cohort_kind_config_t){.name = "urgent",
                                      .defaults = {.priority = 42},
                                      .set_priority = true};
    c->kinds = kinds;
    c->n_kinds = 1;
    make_service(0, NODE);
    char plain[25], urgent[25], explicit_one[25];
    must_create("{\"i\": 0}", "{\"tracked\": false}", plain);
    must_create("{\"i\": 1}", "{\"tracked\": false, \"kind\": \"urgent\"}", urgent);
    must_create("{\"i\": 2}", "{\"tracked\": false, \"kind\": \"urgent\", \"priority\": -1}",
                explicit_one);
    const char *ids[] = {plain, urgent, explicit_one};
    const int64_t want[] = {7, 42, -1};
    for (int i = 0; i < 3; i++) {
        bson_oid_t oid = oid_from_hex(ids[i]);
        bson_t doc;
        read_task(&oid, &doc);
        cr_assert_eq(test_doc_int(&doc, "priority"), want[i], "task %d", i);
        bson_destroy(&doc);
    }
    c->kinds = NULL;
    c->n_kinds = 0;
}

/* ---- not_before ------------------------------------------------------------------------ */

Test(scheduling, not_before_hides_a_task_until_then)
{
    int64_t now = cohort_clock_cluster_ms();
    cohort_new_task_t later = new_task(100); /* the highest priority, but not due */
    later.now_ms = now;
    later.not_before_ms = now + 60000;
    bson_oid_t later_id = insert(&later);
    cohort_new_task_t due = new_task(0);
    due.now_ms = now;
    bson_oid_t due_id = insert(&due);

    bson_t doc;
    read_task(&later_id, &doc);
    cr_assert_eq(test_doc_int(&doc, "run_at"), now + 60000, "run_at = not_before");
    cr_assert_eq(test_doc_int(&doc, "not_before"), now + 60000);
    bson_destroy(&doc);

    cr_assert(claim_one(NODE, now, NULL, &doc), "the due task is claimable");
    bson_oid_t got = oid_of(&doc);
    cr_assert(bson_oid_equal(&got, &due_id), "the not-yet-due task was claimed first");
    bson_destroy(&doc);

    cr_assert_not(claim_one(NODE, now, NULL, &doc), "claimed a task before its not_before");
    cr_assert_not(claim_one(NODE, now + 59999, NULL, &doc),
                  "claimed a task 1 ms before its not_before");
    cr_assert(claim_one(NODE, now + 60000, NULL, &doc), "not claimable at its not_before");
    got = oid_of(&doc);
    cr_assert(bson_oid_equal(&got, &later_id));
    bson_destroy(&doc);
}

Test(scheduling, delay_ms_and_not_before_options_set_the_due_time)
{
    prepare(0, "probe");
    make_service(0, NODE);
    char delayed[25], past[25], relative[25];
    must_create("{}", "{\"tracked\": false, \"delay_ms\": 1500}", delayed);
    int64_t long_ago = cohort_clock_cluster_ms() - 3600000;
    char opts[128];
    snprintf(opts, sizeof opts, "{\"tracked\": false, \"not_before\": {\"$date\": %lld}}",
             (long long)long_ago);
    must_create("{}", opts, past);
    must_create("{}", "{\"tracked\": false, \"delay_ms\": 1000, \"not_after_ms\": 500}",
                relative);

    bson_t doc;
    bson_oid_t oid = oid_from_hex(delayed);
    read_task(&oid, &doc);
    char *text = as_json(&doc);
    cr_assert_eq(test_doc_int(&doc, "run_at") - test_doc_int(&doc, "created_at"), 1500, "%s", text);
    cr_assert_eq(test_doc_int(&doc, "not_before"), test_doc_int(&doc, "run_at"), "%s", text);
    int64_t run_at = test_doc_int(&doc, "run_at");
    bson_free(text);
    bson_destroy(&doc);

    oid = oid_from_hex(past);
    read_task(&oid, &doc);
    cr_assert_eq(test_doc_int(&doc, "not_before"), long_ago);
    cr_assert_eq(test_doc_int(&doc, "run_at"), test_doc_int(&doc, "created_at"),
                 "a not_before in the past is due now");
    bson_destroy(&doc);

    oid = oid_from_hex(relative);
    read_task(&oid, &doc);
    cr_assert_eq(test_doc_int(&doc, "not_after") - test_doc_int(&doc, "created_at"), 1500,
                 "not_after_ms counts from when the task is due");
    int64_t rel_run_at = test_doc_int(&doc, "run_at");
    cr_assert_eq(rel_run_at - test_doc_int(&doc, "created_at"), 1000);
    bson_destroy(&doc);

    /* Only the past one is claimable now; the others exactly from their run_at. */
    int64_t now = cohort_clock_cluster_ms();
    const struct {
        int64_t at;
        const char *want; /* NULL: nothing */
    } claims[] = {{now, past},
                  {rel_run_at - 1, NULL},
                  {rel_run_at, relative},
                  {run_at - 1, NULL},
                  {run_at, delayed}};
    for (size_t k = 0; k < sizeof claims / sizeof claims[0]; k++) {
        bool found = claim_one(NODE, claims[k].at, NULL, &doc);
        if (!claims[k].want) {
            cr_assert_not(found, "claim %zu found a task before it was due", k);
            continue;
        }
        cr_assert(found, "claim %zu found nothing", k);
        bson_oid_t got = oid_of(&doc), want = oid_from_hex(claims[k].want);
        cr_assert(bson_oid_equal(&got, &want), "claim %zu took another task", k);
        bson_destroy(&doc);
    }
}

Test(scheduling, a_delayed_task_runs_within_a_tick_of_its_not_before)
{
    prepare(0, "probe");
    make_service(0, NODE);
    start(services[0]);
    char id[25];
    int64_t created = test_now_ms();
    must_create("{}", "{\"tracked\": false, \"delay_ms\": 700}", id);
    bson_oid_t oid = oid_from_hex(id);
    tick_idle(5); /* about 150 ms: not due yet */
    char status[32];
    status_of(&oid, status, sizeof status);
    /* On a busy machine five ticks can outlast the delay: then "still pending" proves
     * nothing, and the not_before check below is what shows the task waited. */
    if (test_now_ms() - created < 600)
        cr_assert_str_eq(status, "pending");
    tick_until_count("{\"status\": \"succeeded\"}", 1, 10000);
    bson_t doc;
    read_task(&oid, &doc);
    int64_t started = test_doc_int(&doc, "history.0.started_at");
    int64_t not_before = test_doc_int(&doc, "not_before");
    int64_t slack = 2 * cohort_clock_uncertainty_ms() + 5;
    cr_assert_geq(started + slack, not_before, "ran %lld ms before its not_before",
                  (long long)(not_before - started));
    cr_assert_lt(started - not_before, 1000, "ran %lld ms after its not_before (tick: 20 ms)",
                 (long long)(started - not_before));
    bson_destroy(&doc);
}

/* ---- not_after promotion --------------------------------------------------------------- */

Test(scheduling, promote_overdue_raises_priority_once_and_the_task_overtakes)
{
    prepare(0, "probe");
    make_service(0, NODE);
    char old[25], mid[25], top[25];
    must_create("{\"i\": 0}", "{\"tracked\": false, \"priority\": 0, \"not_after_ms\": 500}",
                old);
    must_create("{\"i\": 1}", "{\"tracked\": false, \"priority\": 5}", mid);
    must_create("{\"i\": 2}", "{\"tracked\": false, \"priority\": 12}", top);
    bson_oid_t old_id = oid_from_hex(old);
    bson_t doc;
    read_task(&old_id, &doc);
    int64_t not_after = test_doc_int(&doc, "not_after");
    cr_assert_eq(not_after - test_doc_int(&doc, "run_at"), 500);
    bson_destroy(&doc);

    int64_t promoted = -1;
    bson_error_t error;
    cr_assert(cohort_store_promote_overdue(store, client, SERVICE, not_after - 1, 10, &promoted,
                                           &error),
              "%s", error.message);
    cr_assert_eq(promoted, 0, "promoted before its not_after");
    cr_assert(cohort_store_promote_overdue(store, client, SERVICE, not_after, 10, &promoted,
                                           &error),
              "%s", error.message);
    cr_assert_eq(promoted, 1);
    read_task(&old_id, &doc);
    cr_assert_eq(test_doc_int(&doc, "priority"), 10);
    cr_assert_eq(test_doc_int(&doc, "base_priority"), 0);
    cr_assert(test_doc_has(&doc, "promoted_at"));
    int64_t promoted_at = test_doc_int(&doc, "promoted_at");
    bson_destroy(&doc);

    /* idempotent: a second (and a later) promotion changes nothing */
    for (int k = 1; k <= 2; k++) {
        cr_assert(cohort_store_promote_overdue(store, client, SERVICE, not_after + k * 60000, 10,
                                               &promoted, &error),
                  "%s", error.message);
        cr_assert_eq(promoted, 0, "promoted twice");
    }
    read_task(&old_id, &doc);
    cr_assert_eq(test_doc_int(&doc, "priority"), 10);
    cr_assert_eq(test_doc_int(&doc, "promoted_at"), promoted_at);
    bson_destroy(&doc);

    /* 12, then the promoted 10 before the 5 created after it */
    cr_assert_eq(claim_next_i(), 2);
    cr_assert_eq(claim_next_i(), 0, "the promoted task did not overtake");
    cr_assert_eq(claim_next_i(), 1);
    cr_assert_eq(claim_next_i(), -1);
}

Test(scheduling, the_primary_promotes_on_its_tick_and_a_secondary_does_not)
{
    prepare(0, "probe")->not_after_boost = 100;
    prepare(1, "probe")->not_after_boost = 100;
    cohort_service_t *a = make_service(0, "node-a");
    cohort_service_t *b = make_service(1, "node-b");
    test_service_tick(a, client);
    cr_assert_gt(cohort_election_epoch(&a->election), 0, "node-a did not become primary");

    char late[25], high[25];
    char opts[128];
    snprintf(opts, sizeof opts, "{\"tracked\": false, \"priority\": 1, \"not_after\": %lld}",
             (long long)(cohort_clock_cluster_ms() - 1000));
    must_create("{\"i\": 0}", opts, late);
    must_create("{\"i\": 1}", "{\"tracked\": false, \"priority\": 50}", high);
    bson_oid_t late_id = oid_from_hex(late);

    test_service_tick(b, client);
    cr_assert_eq(cohort_election_epoch(&b->election), 0, "node-b became primary");
    bson_t doc;
    read_task(&late_id, &doc);
    cr_assert_eq(test_doc_int(&doc, "priority"), 1, "a secondary promoted the task");
    cr_assert_not(test_doc_has(&doc, "promoted_at"));
    bson_destroy(&doc);

    a->next_upkeep_ms = 0; /* the promotion's cadence (COHORT_UPKEEP_INTERVAL_MS) is due */
    test_service_tick(a, client);
    read_task(&late_id, &doc);
    cr_assert_eq(test_doc_int(&doc, "priority"), 101, "the primary's tick did not promote");
    cr_assert_eq(test_doc_int(&doc, "base_priority"), 1);
    cr_assert(test_doc_has(&doc, "promoted_at"));
    bson_destroy(&doc);
    for (int i = 0; i < 2; i++) {
        a->next_upkeep_ms = 0;
        test_service_tick(a, client);
    }
    read_task(&late_id, &doc);
    cr_assert_eq(test_doc_int(&doc, "priority"), 101, "promoted on more than one tick");
    bson_destroy(&doc);

    cr_assert_eq(claim_next_i(), 0, "the promoted task (101) did not overtake 50");
    cr_assert_eq(claim_next_i(), 1);
}

/* ---- kinds, pause and block ------------------------------------------------------------- */

Test(scheduling, a_handler_with_kinds_claims_only_those_and_kindless_tasks)
{
    prepare(0, "kinds")->workers = 2;
    make_service(0, NODE);
    char id[25];
    must_create("{}", "{\"tracked\": false, \"kind\": \"email\"}", id);
    must_create("{}", "{\"tracked\": false, \"kind\": \"sms\"}", id);
    must_create("{}", "{\"tracked\": false, \"kind\": \"video\"}", id);
    must_create("{}", "{\"tracked\": false, \"kind\": \"video\", \"priority\": 99}", id);
    must_create("{}", "{\"tracked\": false}", id);

    /* the store's filter itself: exactly the email, sms and kindless tasks */
    const char *const served[] = {"email", "sms"};
    cohort_claim_filter_t filter = {
        .served_kinds = served, .n_served_kinds = 2, .served_no_kind = true};
    bson_t doc;
    bson_oid_t taken[5];
    int seen = 0;
    while (seen < 5 && claim_one("node-filter", cohort_clock_cluster_ms(), &filter, &doc)) {
        const char *kind = test_doc_str(&doc, "kind");
        cr_assert(!kind || strcmp(kind, "email") == 0 || strcmp(kind, "sms") == 0,
                  "claimed a task of kind %s", kind);
        taken[seen++] = oid_of(&doc);
        bson_destroy(&doc);
    }
    cr_assert_eq(seen, 3, "the filter let %d tasks through, want 3", seen);
    for (int i = 0; i < seen; i++) {
        bson_value_t v = id_value(&taken[i]);
        bson_error_t error;
        cr_assert(cohort_store_unclaim(store, client, SERVICE, &v, "node-filter", 1, NULL, &error),
                  "%s", error.message);
    }
    cr_assert_eq(count("{\"status\": \"pending\", \"attempts\": 0}"), 5);

    /* and the service */
    start(services[0]);
    tick_until_count("{\"status\": \"succeeded\"}", 3, 10000);
    tick_idle(5);
    cr_assert_eq(count("{\"kind\": \"video\", \"status\": \"pending\", \"attempts\": 0}"), 2,
                 "a task of a kind the handler does not serve was claimed");
    cr_assert_eq(count("{\"status\": \"succeeded\"}"), 3);
    cr_assert_eq(kinds_calls("email"), 1);
    cr_assert_eq(kinds_calls("sms"), 1);
    cr_assert_eq(kinds_calls(NULL), 1);
    cr_assert_eq(kinds_calls("video"), 0, "the handler was given a kind it does not serve");
}

Test(scheduling, pausing_a_kind_stops_its_claims_and_resuming_is_immediate)
{
    prepare(0, "probe")->workers = 2;
    make_service(0, NODE);
    set_switch("pause", "email", true, "mail server maintenance");
    char id[25];
    must_create("{}", "{\"tracked\": false, \"kind\": \"email\", \"priority\": 9}", id);
    must_create("{}", "{\"tracked\": false, \"kind\": \"email\"}", id);
    must_create("{}", "{\"tracked\": false, \"kind\": \"sms\"}", id);
    must_create("{}", "{\"tracked\": false}", id);
    start(services[0]);
    tick_until_count("{\"status\": \"succeeded\"}", 2, 10000);
    tick_idle(5);
    cr_assert_eq(count("{\"kind\": \"email\", \"status\": \"pending\", \"attempts\": 0}"), 2,
                 "a paused kind was claimed");
    cr_assert_eq(count("{\"kind\": \"sms\", \"status\": \"succeeded\"}"), 1);

    set_switch("pause", "email", false, NULL);
    int64_t resumed = test_now_ms();
    tick_until_count("{\"status\": \"succeeded\"}", 4, 10000);
    cr_assert_lt(test_now_ms() - resumed, 2000, "resuming took %lld ms",
                 (long long)(test_now_ms() - resumed));
    cr_assert_eq(probe_runs(), 4);
}

Test(scheduling, blocking_the_service_stops_every_claim_and_keeps_the_reason)
{
    prepare(0, "probe")->workers = 2;
    make_service(0, NODE);
    set_switch("block", "*", true, "incident 1234: bad deploy");
    bson_t svc;
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_read_service(store, client, SERVICE, &svc, &found, &error), "%s",
              error.message);
    cr_assert(found);
    cr_assert_str_eq(test_doc_str(&svc, "block.*.reason"), "incident 1234: bad deploy");
    cr_assert_str_eq(test_doc_str(&svc, "block.*.by"), "sched-test");
    cr_assert(test_doc_has(&svc, "block.*.at"));
    bson_destroy(&svc);

    char id[25];
    must_create("{}", "{\"tracked\": false, \"kind\": \"email\"}", id);
    must_create("{}", "{\"tracked\": false}", id);
    start(services[0]);
    tick_idle(10);
    cr_assert_eq(count("{\"status\": \"pending\", \"attempts\": 0}"), 2,
                 "a blocked service claimed");
    cr_assert(services[0]->stopped_all, "the node did not see the block");

    /* a pause on top, then the block lifted: still paused */
    set_switch("pause", "*", true, NULL);
    set_switch("block", "*", false, NULL);
    tick_idle(5);
    cr_assert_eq(count("{\"status\": \"pending\", \"attempts\": 0}"), 2,
                 "claimed while still paused");
    set_switch("pause", "*", false, NULL);
    int64_t resumed = test_now_ms();
    tick_until_count("{\"status\": \"succeeded\"}", 2, 10000);
    cr_assert_lt(test_now_ms() - resumed, 2000, "resuming took %lld ms",
                 (long long)(test_now_ms() - resumed));
    cr_assert(cohort_store_read_service(store, client, SERVICE, &svc, &found, &error), "%s",
              error.message);
    cr_assert_not(test_doc_has(&svc, "block.*"), "the block is still recorded");
    cr_assert_not(test_doc_has(&svc, "pause.*"), "the pause is still recorded");
    bson_destroy(&svc);
}

Test(scheduling, a_running_task_finishes_when_the_service_is_paused)
{
    prepare(0, "probe");
    make_service(0, NODE);
    char running[25], waiting[25];
    must_create("{\"sleep_ms\": 800}", "{\"tracked\": false, \"priority\": 5}", running);
    start(services[0]);
    tick_until_count("{\"status\": \"claimed\"}", 1, 10000);
    set_switch("pause", "*", true, "draining");
    test_service_tick(services[0], client); /* the node sees the pause */
    must_create("{}", "{\"tracked\": false}", waiting);
    bson_oid_t running_id = oid_from_hex(running), waiting_id = oid_from_hex(waiting);
    tick_until_count("{\"status\": \"succeeded\"}", 1, 10000);
    tick_idle(5);
    char status[32];
    cr_assert_str_eq(status_of(&running_id, status, sizeof status), "succeeded",
                     "the running task did not finish");
    cr_assert_str_eq(status_of(&waiting_id, status, sizeof status), "pending",
                     "a task was claimed while paused");
    set_switch("pause", "*", false, NULL);
    tick_until_count("{\"status\": \"succeeded\"}", 2, 10000);
}

/* ---- coalescing ------------------------------------------------------------------------- */

Test(scheduling, a_thousand_creations_on_ten_keys_are_ten_tasks_and_ten_runs, .timeout = 120)
{
    prepare(0, "probe")->workers = 2;
    make_service(0, NODE);
    char first_ids[10][25];
    for (int i = 0; i < 1000; i++) {
        char data[64], opts[96], id[25];
        snprintf(data, sizeof data, "{\"n\": %d, \"key\": %d}", i, i % 10);
        snprintf(opts, sizeof opts, "{\"tracked\": false, \"coalesce_key\": \"key-%d\"}", i % 10);
        must_create(data, opts, id);
        if (i < 10)
            memcpy(first_ids[i], id, sizeof id);
        else
            cr_assert_str_eq(id, first_ids[i % 10],
                             "creation %d returned another id than its key's pending task", i);
    }
    cr_assert_eq(count("{}"), 10);
    cr_assert_eq(count("{\"status\": \"pending\"}"), 10);
    int64_t creations = 0;
    for (int k = 0; k < 10; k++) {
        bson_oid_t oid = oid_from_hex(first_ids[k]);
        bson_t doc;
        read_task(&oid, &doc);
        char key[16];
        snprintf(key, sizeof key, "key-%d", k);
        cr_assert_str_eq(test_doc_str(&doc, "coalesce_key"), key);
        cr_assert_eq(test_doc_int(&doc, "creations"), 100, "key %d", k);
        cr_assert_eq(test_doc_int(&doc, "data.n"), 990 + k, "the latest creation's data wins");
        creations += test_doc_int(&doc, "creations");
        bson_destroy(&doc);
    }
    cr_assert_eq(creations, 1000);
    start(services[0]);
    tick_until_count("{\"status\": \"succeeded\"}", 10, 20000);
    tick_idle(3);
    cr_assert_eq(probe_runs(), 10);
    cr_assert_eq(count("{}"), 10);
}

Test(scheduling, a_claimed_task_no_longer_absorbs_creations)
{
    prepare(0, "probe");
    make_service(0, NODE);
    char first[25], again[25], third[25];
    must_create("{\"v\": 1}", "{\"tracked\": false, \"coalesce_key\": \"k\"}", first);
    bson_t doc;
    cr_assert(claim_one(NODE, cohort_clock_cluster_ms(), NULL, &doc));
    bson_destroy(&doc);
    must_create("{\"v\": 2}", "{\"tracked\": false, \"coalesce_key\": \"k\"}", again);
    cr_assert_str_neq(again, first, "coalesced into a task already claimed");
    must_create("{\"v\": 3}", "{\"tracked\": false, \"coalesce_key\": \"k\"}", third);
    cr_assert_str_eq(third, again);
    cr_assert_eq(count("{\"coalesce_key\": \"k\"}"), 2);
    cr_assert_eq(count("{\"coalesce_key\": \"k\", \"status\": \"pending\"}"), 1);
    bson_oid_t oid = oid_from_hex(first);
    read_task(&oid, &doc);
    cr_assert_eq(test_doc_int(&doc, "data.v"), 1, "the claimed task's data changed");
    cr_assert_eq(test_doc_int(&doc, "creations"), 1);
    cr_assert(is_null_or_absent(&doc, "coalesce_pending"));
    bson_destroy(&doc);
    oid = oid_from_hex(again);
    read_task(&oid, &doc);
    cr_assert_eq(test_doc_int(&doc, "data.v"), 3);
    cr_assert_eq(test_doc_int(&doc, "creations"), 2);
    bson_destroy(&doc);
}

#define CREATORS 4
#define CREATIONS 50

typedef struct creator {
    pthread_barrier_t *start;
    int id;
    int failures;
    char first_error[256];
    char ids[CREATIONS][25];
} creator_t;

static void *create_loop(void *arg)
{
    creator_t *c = arg;
    mongoc_client_t *own = cohort_store_pop(store);
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, services[0], own, false);
    bson_t *opts = BCON_NEW("tracked", BCON_BOOL(false), "coalesce_key", BCON_UTF8("shared"));
    for (int i = 0; i < CREATIONS; i++) {
        bson_t *data = BCON_NEW("creator", BCON_INT32(c->id), "i", BCON_INT32(i));
        if (i % 10 == 0)
            pthread_barrier_wait(c->start);
        cohort_error_t error = {0};
        if (!cohort_task_create(&ctx, data, opts, c->ids[i], &error)) {
            if (c->failures++ == 0)
                snprintf(c->first_error, sizeof c->first_error, "%s", error.message);
            c->ids[i][0] = '\0';
        }
        bson_destroy(data);
    }
    bson_destroy(opts);
    cohort_store_push(store, own);
    return NULL;
}

Test(scheduling, concurrent_creators_with_one_key_make_one_task)
{
    prepare(0, "probe");
    make_service(0, NODE);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, CREATORS);
    static creator_t creators[CREATORS];
    pthread_t threads[CREATORS];
    for (int i = 0; i < CREATORS; i++) {
        creators[i] = (creator_t){.start = &barrier, .id = i};
        cr_assert_eq(pthread_create(&threads[i], NULL, create_loop, &creators[i]), 0);
    }
    for (int i = 0; i < CREATORS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < CREATORS; i++)
        cr_assert_eq(creators[i].failures, 0, "creator %d: %d failures, first: %s", i,
                     creators[i].failures, creators[i].first_error);
    cr_assert_eq(count("{}"), 1, "concurrent creators made %lld tasks",
                 (long long)count("{}"));
    bson_t doc;
    cr_assert(test_find_one(client, db, QUEUE, "{}", &doc));
    cr_assert_eq(test_doc_int(&doc, "creations"), CREATORS * CREATIONS);
    char hex[25];
    bson_oid_t oid = oid_of(&doc);
    bson_oid_to_string(&oid, hex);
    bson_destroy(&doc);
    for (int i = 0; i < CREATORS; i++)
        for (int k = 0; k < CREATIONS; k++)
            cr_assert_str_eq(creators[i].ids[k], hex, "creator %d creation %d got another id", i,
                             k);
}

/* ---- groups ----------------------------------------------------------------------------- */

/* A task of `group` (NULL: none) inserted now. */
static bson_oid_t insert_grouped(const char *group, int64_t priority)
{
    cohort_new_task_t task = new_task(priority);
    task.group = group;
    return insert(&task);
}

/* Claims the task `want` (it must be the first in claim order) for `node`. */
static void claim_exactly(const char *node, const bson_oid_t *want)
{
    bson_t doc;
    cr_assert(claim_one(node, cohort_clock_cluster_ms(), NULL, &doc), "nothing to claim");
    bson_oid_t got = oid_of(&doc);
    cr_assert(bson_oid_equal(&got, want), "claimed another task than expected");
    bson_destroy(&doc);
}

static bool lock_group(const char *node, const bson_oid_t *oid, int32_t attempt,
                       const char *group)
{
    bson_value_t v = id_value(oid);
    bool locked = true;
    bson_error_t error;
    cr_assert(cohort_store_lock_group(store, client, SERVICE, &v, node, attempt, group, &locked,
                                      &error),
              "lock_group: %s", error.message);
    return locked;
}

static size_t busy_groups(char **groups, size_t max)
{
    size_t n = 0;
    bson_error_t error;
    cr_assert(cohort_store_busy_groups(store, client, SERVICE, groups, max, &n, &error), "%s",
              error.message);
    return n;
}

static bool contains(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

static void free_all(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
}

Test(scheduling, one_claimed_task_per_group_holds_the_lock)
{
    bson_oid_t a = insert_grouped("g1", 3);
    bson_oid_t b = insert_grouped("g1", 2);
    bson_oid_t c = insert_grouped("g2", 1);
    claim_exactly(NODE, &a);
    claim_exactly("node-other", &b);
    claim_exactly(NODE, &c);
    cr_assert(lock_group(NODE, &a, 1, "g1"));
    cr_assert_not(lock_group("node-other", &b, 1, "g1"), "two tasks of g1 hold its lock");
    cr_assert(lock_group(NODE, &c, 1, "g2"), "g2 is independent of g1");
    cr_assert_not(lock_group("node-other", &a, 1, "g1"), "locked a claim this node does not hold");
    cr_assert_eq(count("{\"group_lock\": \"g1\"}"), 1);

    char *groups[8];
    size_t n = busy_groups(groups, 8);
    cr_assert_eq(n, 2);
    cr_assert(contains(groups, n, "g1") && contains(groups, n, "g2"));
    free_all(groups, n);

    /* the loser gives its claim back: pending, its attempt not counted */
    bson_value_t bv = id_value(&b);
    bson_error_t error;
    cr_assert(cohort_store_unclaim(store, client, SERVICE, &bv, "node-other", 1, NULL, &error), "%s",
              error.message);
    bson_t doc;
    read_task(&b, &doc);
    char *text = as_json(&doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "pending", "%s", text);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 0, "%s", text);
    cr_assert(is_null_or_absent(&doc, "claimed_by"), "%s", text);
    cr_assert_not(test_doc_has(&doc, "group_lock"), "%s", text);
    cr_assert_not(test_doc_has(&doc, "history"), "%s", text);
    bson_free(text);
    bson_destroy(&doc);

    /* busy groups are skipped by claims; other work is not blocked behind them */
    const char *const busy[] = {"g1", "g2"};
    cohort_claim_filter_t filter = {.busy_groups = busy, .n_busy_groups = 2};
    cr_assert_not(claim_one(NODE, cohort_clock_cluster_ms(), &filter, &doc),
                  "claimed a task of a busy group");
    bson_oid_t free_task = insert_grouped(NULL, -5);
    bson_oid_t other_group = insert_grouped("g3", -6);
    cr_assert(claim_one(NODE, cohort_clock_cluster_ms(), &filter, &doc));
    bson_oid_t got = oid_of(&doc);
    cr_assert(bson_oid_equal(&got, &free_task), "an ungrouped task was not claimable");
    bson_destroy(&doc);
    cr_assert(claim_one(NODE, cohort_clock_cluster_ms(), &filter, &doc));
    got = oid_of(&doc);
    cr_assert(bson_oid_equal(&got, &other_group), "a task of a free group was not claimable");
    bson_destroy(&doc);

    /* a's outcome releases g1: b can be claimed and take the lock */
    int64_t now = cohort_clock_cluster_ms();
    cohort_task_result_t ok = {.finish = COHORT_FINISH_SUCCEEDED, .started_at_ms = now,
                               .ended_at_ms = now};
    bool applied = false;
    bson_value_t av = id_value(&a);
    cr_assert(cohort_store_finish_task_value(store, client, SERVICE, &av, NODE, 1, &ok, &applied,
                                             &error),
              "%s", error.message);
    cr_assert(applied);
    n = busy_groups(groups, 8);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(groups[0], "g2");
    free_all(groups, n);
    claim_exactly(NODE, &b);
    cr_assert(lock_group(NODE, &b, 1, "g1"), "g1 still locked after its holder finished");
}

/* The ways a claimed task stops being claimed; each must release its group's lock. */
typedef enum exit_path {
    EXIT_SUCCEEDED,
    EXIT_RETRY,
    EXIT_FAILED,
    EXIT_TIMED_OUT,
    EXIT_BULK_OUTCOME,
    EXIT_UNCLAIM,
    EXIT_RESET_STALLED,
    EXIT_RELEASE_CLAIMS,
    EXIT_EXPIRE_NODES,
    EXIT_COUNT
} exit_path_t;

static const char *const exit_names[EXIT_COUNT] = {
    "succeeded", "retry", "failed", "timed_out", "bulk outcome", "unclaim", "reset_stalled",
    "release_claims", "expire_nodes"};

static void leave_claimed(exit_path_t path, const char *node, const bson_oid_t *oid)
{
    bson_error_t error;
    bool applied = false;
    int64_t now = cohort_clock_cluster_ms();
    cohort_task_result_t result = {.started_at_ms = now, .ended_at_ms = now,
                                   .retry_at_ms = now + 3600000};
    bson_value_t v = id_value(oid);
    int64_t n = 0, nodes = 0;
    bool ok = true;
    switch (path) {
    case EXIT_SUCCEEDED:
    case EXIT_RETRY:
    case EXIT_FAILED:
    case EXIT_TIMED_OUT:
        result.finish = path == EXIT_SUCCEEDED ? COHORT_FINISH_SUCCEEDED
                        : path == EXIT_RETRY   ? COHORT_FINISH_RETRY
                        : path == EXIT_FAILED  ? COHORT_FINISH_FAILED
                                               : COHORT_FINISH_TIMED_OUT;
        result.error = path == EXIT_SUCCEEDED ? NULL : "test";
        ok = cohort_store_finish_task_value(store, client, SERVICE, &v, node, 1, &result, &applied,
                                            &error);
        n = applied;
        break;
    case EXIT_BULK_OUTCOME: {
        cohort_task_outcome_t o = {.id = v, .attempt = 1,
                                   .result = {.finish = COHORT_FINISH_SUCCEEDED,
                                              .started_at_ms = now, .ended_at_ms = now}};
        size_t done = 0;
        ok = cohort_store_finish_tasks(store, client, SERVICE, node, &o, 1, &done, &error);
        n = (int64_t)done;
        break;
    }
    case EXIT_UNCLAIM:
        ok = cohort_store_unclaim(store, client, SERVICE, &v, node, 1, NULL, &error);
        n = 1;
        break;
    case EXIT_RESET_STALLED:
        ok = cohort_store_reset_stalled(store, client, SERVICE, now + 60000, &n, &error);
        break;
    case EXIT_RELEASE_CLAIMS:
        ok = cohort_store_release_claims(store, client, SERVICE, node, &n, &error);
        break;
    case EXIT_EXPIRE_NODES: {
        int64_t server_ms = 0;
        cr_assert(cohort_store_server_time(store, client, &server_ms, &error), "%s",
                  error.message);
        ok = cohort_store_expire_nodes(store, client, SERVICE, server_ms + 1000, &nodes, &n,
                                       &error);
        break;
    }
    case EXIT_COUNT:
        break;
    }
    cr_assert(ok, "%s: %s", exit_names[path], error.message);
    cr_assert_eq(n, 1, "%s: %lld tasks left claimed (want 1)", exit_names[path], (long long)n);
}

Test(scheduling, every_way_out_of_claimed_releases_the_group_lock)
{
    for (int path = 0; path < EXIT_COUNT; path++) {
        char group[32], node[32];
        snprintf(group, sizeof group, "group-%d", path);
        snprintf(node, sizeof node, "node-exit-%d", path);
        if (path == EXIT_EXPIRE_NODES) { /* a node that pinged once and then went silent */
            cohort_node_info_t info = {.node_id = node, .host = "h", .pid = 1,
                                       .version = "test", .started_at_ms = 1};
            int64_t server_ms;
            bson_error_t error;
            cr_assert(cohort_store_ping_node(store, client, &info, NULL, &server_ms, NULL, NULL,
                                             &error),
                      "%s", error.message);
            test_sleep_ms(5);
        }
        bson_oid_t first = insert_grouped(group, 0);
        claim_exactly(node, &first);
        cr_assert(lock_group(node, &first, 1, group), "%s", exit_names[path]);
        leave_claimed((exit_path_t)path, node, &first);
        bson_t doc;
        read_task(&first, &doc);
        char *text = as_json(&doc);
        cr_assert_not(test_doc_has(&doc, "group_lock"), "%s kept the group lock: %s",
                      exit_names[path], text);
        bson_free(text);
        bson_destroy(&doc);
        cr_assert_eq(count("{\"group_lock\": {\"$exists\": true}}"), 0, "%s", exit_names[path]);

        /* another task of the group can take the lock now */
        bson_oid_t second = insert_grouped(group, 1000);
        claim_exactly("node-next", &second);
        cr_assert(lock_group("node-next", &second, 1, group), "%s: the group stayed locked",
                  exit_names[path]);
        leave_claimed(EXIT_SUCCEEDED, "node-next", &second);
        /* leave nothing pending for the next round's claims */
        bson_t *pending = BCON_NEW("status", BCON_UTF8("pending"));
        bson_t *done = BCON_NEW("$set", "{", "status", BCON_UTF8("failed"), "}");
        mongoc_collection_t *coll = mongoc_client_get_collection(client, db, QUEUE);
        bson_error_t error;
        cr_assert(mongoc_collection_update_many(coll, pending, done, NULL, NULL, &error), "%s",
                  error.message);
        mongoc_collection_destroy(coll);
        bson_destroy(done);
        bson_destroy(pending);
    }
}

Test(scheduling, unclaim_keeps_a_coalesced_task_coalescing)
{
    /* A grouped task whose group is busy is given back "untouched": while it is pending
     * again, a creation with its coalesce key must still coalesce into it. */
    prepare(0, "probe");
    make_service(0, NODE);
    char first[25], again[25];
    must_create("{\"v\": 1}", "{\"tracked\": false, \"coalesce_key\": \"ck\", \"group\": \"g\"}",
                first);
    bson_oid_t oid = oid_from_hex(first);
    claim_exactly(NODE, &oid);
    bson_value_t v = id_value(&oid);
    bson_error_t error;
    cr_assert(cohort_store_unclaim(store, client, SERVICE, &v, NODE, 1, "ck", &error), "%s",
              error.message);
    must_create("{\"v\": 2}", "{\"tracked\": false, \"coalesce_key\": \"ck\", \"group\": \"g\"}",
                again);
    cr_assert_eq(count("{\"status\": \"pending\"}"), 1,
                 "an unclaimed task lost its coalesce key: a second pending task was created");
    cr_assert_str_eq(again, first);
}

Test(scheduling, a_long_group_task_does_not_block_other_work_in_the_service)
{
    prepare(0, "probe")->workers = 2;
    make_service(0, NODE);
    char id[25];
    must_create("{\"sleep_ms\": 3000}", "{\"tracked\": false, \"group\": \"g\", \"priority\": 9}",
                id);
    bson_oid_t long_id = oid_from_hex(id);
    must_create("{}", "{\"tracked\": false, \"group\": \"g\", \"priority\": 8}", id);
    bson_oid_t same_group = oid_from_hex(id);
    for (int i = 0; i < 5; i++)
        must_create("{}", "{\"tracked\": false}", id);
    must_create("{}", "{\"tracked\": false, \"group\": \"h\"}", id);
    start(services[0]);
    tick_until_count("{\"status\": \"succeeded\"}", 8, 20000);
    bson_t a, b;
    read_task(&long_id, &a);
    read_task(&same_group, &b);
    /* The 6 others finished while the long one ran (judged by the runs' own times, not by
     * a wall-clock budget, so a busy machine cannot fail it), and its group-mate waited. */
    int64_t long_end = test_doc_int(&a, "history.0.ended_at");
    cr_assert_eq(count("{\"status\": \"succeeded\", \"group\": {\"$ne\": \"g\"}}"), 6);
    mongoc_collection_t *queue = mongoc_client_get_collection(client, db, QUEUE);
    bson_t *others_filter = BCON_NEW("group", "{", "$ne", BCON_UTF8("g"), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(queue, others_filter, NULL, NULL);
    const bson_t *other;
    while (mongoc_cursor_next(cursor, &other))
        cr_assert_leq(test_doc_int(other, "history.0.ended_at"), long_end,
                      "a task waited behind the long group task");
    mongoc_cursor_destroy(cursor);
    bson_destroy(others_filter);
    mongoc_collection_destroy(queue);
    cr_assert_eq(test_doc_int(&b, "attempts"), 1, "a give-back counted an attempt");
    /* Either may run first: the two workers claim at once and either may take the group's
     * lock first (the other's claim is given back). They must not overlap. */
    int64_t slack = 2 * cohort_clock_uncertainty_ms() + 5;
    bool b_after = test_doc_int(&b, "history.0.started_at") + slack >=
                   test_doc_int(&a, "history.0.ended_at");
    bool a_after = test_doc_int(&a, "history.0.started_at") + slack >=
                   test_doc_int(&b, "history.0.ended_at");
    cr_assert(b_after || a_after, "the group's runs overlapped");
    bson_destroy(&a);
    bson_destroy(&b);
}

/* ---- batch claims and bulk outcomes ------------------------------------------------------ */

static size_t claim_batch(const char *node, size_t max, bson_t *docs)
{
    size_t n = 0;
    bson_error_t error;
    cr_assert(cohort_store_claim_tasks(store, client, SERVICE, node, cohort_clock_cluster_ms(),
                                       NULL, max, docs, &n, NULL, &error),
              "claim_tasks: %s", error.message);
    return n;
}

Test(scheduling, batch_claims_follow_claim_order)
{
    prepare(0, "probe");
    make_service(0, NODE);
    /* 20 tasks: i with priority i % 4; claim order is priority desc, then i */
    for (int i = 0; i < 20; i++) {
        char data[32], opts[64], id[25];
        snprintf(data, sizeof data, "{\"i\": %d}", i);
        snprintf(opts, sizeof opts, "{\"tracked\": false, \"priority\": %d}", i % 4);
        must_create(data, opts, id);
    }
    int64_t want[20];
    int w = 0;
    for (int p = 3; p >= 0; p--)
        for (int i = 0; i < 20; i++)
            if (i % 4 == p)
                want[w++] = i;
    static bson_t docs[COHORT_CLAIM_BATCH_MAX];
    const size_t sizes[] = {8, 8, 8, 8};
    const size_t got_n[] = {8, 8, 4, 0};
    int k = 0;
    for (int b = 0; b < 4; b++) {
        size_t n = claim_batch(NODE, sizes[b], docs);
        cr_assert_eq(n, got_n[b], "batch %d claimed %zu", b, n);
        for (size_t j = 0; j < n; j++, k++) {
            cr_assert_eq(test_doc_int(&docs[j], "data.i"), want[k], "claim %d: i=%lld, want %lld",
                         k, (long long)test_doc_int(&docs[j], "data.i"), (long long)want[k]);
            cr_assert_str_eq(test_doc_str(&docs[j], "status"), "claimed");
            cr_assert_str_eq(test_doc_str(&docs[j], "claimed_by"), NODE);
            cr_assert_eq(test_doc_int(&docs[j], "attempts"), 1);
            bson_destroy(&docs[j]);
        }
    }
    cr_assert_eq(count("{\"status\": \"claimed\", \"attempts\": 1}"), 20);
}

Test(scheduling, a_batch_claim_costs_three_commands_whatever_its_size)
{
    cohort_new_task_t task = new_task(0);
    int64_t inserted = 0;
    bson_error_t error;
    cr_assert(cohort_store_insert_tasks(store, client, SERVICE, &task, 100, &inserted, &error),
              "%s", error.message);
    cr_assert_eq(inserted, 100);
    static bson_t docs[COHORT_CLAIM_BATCH_MAX];
    const size_t sizes[] = {1, 8, 32, 50};
    for (size_t s = 0; s < 4; s++) {
        uint64_t before = cohort_store_stats(store).commands;
        size_t n = claim_batch(NODE, sizes[s], docs);
        uint64_t used = cohort_store_stats(store).commands - before;
        cr_assert_eq(n, sizes[s]);
        cr_assert_eq(used, 3, "a claim of %zu took %llu commands", sizes[s],
                     (unsigned long long)used);
        for (size_t j = 0; j < n; j++)
            bson_destroy(&docs[j]);
    }
    uint64_t before = cohort_store_stats(store).commands;
    bson_t doc;
    cr_assert(claim_one(NODE, cohort_clock_cluster_ms(), NULL, &doc));
    bson_destroy(&doc);
    cr_assert_eq(cohort_store_stats(store).commands - before, 1, "a single claim is one command");
}

Test(scheduling, bulk_outcomes_are_one_command_and_skip_lost_claims)
{
    cohort_new_task_t task = new_task(0);
    int64_t inserted = 0;
    bson_error_t error;
    cr_assert(cohort_store_insert_tasks(store, client, SERVICE, &task, 6, &inserted, &error),
              "%s", error.message);
    static bson_t docs[8];
    size_t n = claim_batch(NODE, 6, docs);
    cr_assert_eq(n, 6);
    cohort_task_outcome_t outcomes[6];
    bson_oid_t ids[6];
    int64_t now = cohort_clock_cluster_ms();
    const cohort_finish_t finishes[6] = {COHORT_FINISH_SUCCEEDED, COHORT_FINISH_FAILED,
                                         COHORT_FINISH_RETRY,     COHORT_FINISH_TIMED_OUT,
                                         COHORT_FINISH_SUCCEEDED, COHORT_FINISH_SUCCEEDED};
    for (size_t i = 0; i < n; i++) {
        ids[i] = oid_of(&docs[i]);
        outcomes[i] = (cohort_task_outcome_t){
            .id = id_value(&ids[i]),
            .attempt = 1,
            .result = {.finish = finishes[i], .error = i == 0 ? NULL : "why",
                       .retry_at_ms = now + 3600000, .started_at_ms = now, .ended_at_ms = now}};
        bson_destroy(&docs[i]);
    }
    /* the last one's claim is lost: another node took it after a reset */
    bson_value_t lost = id_value(&ids[5]);
    cr_assert(cohort_store_unclaim(store, client, SERVICE, &lost, NODE, 1, NULL, &error), "%s",
              error.message);
    bson_t mine;
    cr_assert(claim_one("node-thief", now, NULL, &mine));
    bson_oid_t stolen = oid_of(&mine);
    cr_assert(bson_oid_equal(&stolen, &ids[5]));
    bson_destroy(&mine);

    uint64_t before = cohort_store_stats(store).commands;
    size_t applied = 99;
    cr_assert(cohort_store_finish_tasks(store, client, SERVICE, NODE, outcomes, 6, &applied,
                                        &error),
              "%s", error.message);
    cr_assert_eq(cohort_store_stats(store).commands - before, 1, "6 outcomes took %llu commands",
                 (unsigned long long)(cohort_store_stats(store).commands - before));
    cr_assert_eq(applied, 5);
    const char *want[6] = {"succeeded", "failed", "pending", "timed_out", "succeeded", "claimed"};
    const char *history[6] = {"succeeded", "failed", "retry", "timed_out", "succeeded", NULL};
    for (size_t i = 0; i < 6; i++) {
        bson_t doc;
        read_task(&ids[i], &doc);
        char *text = as_json(&doc);
        cr_assert_str_eq(test_doc_str(&doc, "status"), want[i], "task %zu: %s", i, text);
        if (history[i])
            cr_assert_str_eq(test_doc_str(&doc, "history.0.outcome"), history[i], "%s", text);
        else
            cr_assert_str_eq(test_doc_str(&doc, "claimed_by"), "node-thief",
                             "a lost claim's outcome was written: %s", text);
        bson_free(text);
        bson_destroy(&doc);
    }
}

#define RACE_TASKS 2000
#define RACE_THREADS 4

typedef struct batch_racer {
    size_t batch;
    char node[32];
    size_t claimed;
    size_t applied;
    size_t claims;
    int errors;
    char first_error[600];
    bson_oid_t *ids; /* [RACE_TASKS] what this racer claimed */
} batch_racer_t;

static void racer_error(batch_racer_t *r, const char *what, const bson_error_t *error)
{
    if (r->errors++ == 0)
        snprintf(r->first_error, sizeof r->first_error, "%s: %s", what, error->message);
}

static void *batch_race(void *arg)
{
    batch_racer_t *r = arg;
    mongoc_client_t *own = cohort_store_pop(store);
    bson_t *docs = calloc(r->batch, sizeof *docs);
    cohort_task_outcome_t *outcomes = calloc(r->batch, sizeof *outcomes);
    const char *pending[] = {"pending"};
    while (docs && outcomes && r->errors == 0) {
        size_t n = 0;
        bson_error_t error;
        if (!cohort_store_claim_tasks(store, own, SERVICE, r->node, cohort_clock_cluster_ms(),
                                      NULL, r->batch, docs, &n, NULL, &error)) {
            racer_error(r, "claim_tasks", &error);
            break;
        }
        r->claims++;
        if (n == 0) { /* others took our candidates, or nothing is left */
            int64_t left = -1;
            if (!cohort_store_count_statuses(store, own, SERVICE, pending, 1, &left, &error)) {
                racer_error(r, "count", &error);
                break;
            }
            if (left == 0)
                break;
            continue;
        }
        int64_t now = cohort_clock_cluster_ms();
        for (size_t i = 0; i < n; i++) {
            bson_iter_t it;
            if (bson_iter_init_find(&it, &docs[i], "_id") && BSON_ITER_HOLDS_OID(&it) &&
                r->claimed < RACE_TASKS)
                bson_oid_copy(bson_iter_oid(&it), &r->ids[r->claimed]);
            r->claimed++;
            outcomes[i] = (cohort_task_outcome_t){
                .id = *bson_iter_value(&it),
                .attempt = 1,
                .result = {.finish = COHORT_FINISH_SUCCEEDED, .started_at_ms = now,
                           .ended_at_ms = now}};
        }
        size_t applied = 0;
        if (!cohort_store_finish_tasks(store, own, SERVICE, r->node, outcomes, n, &applied,
                                       &error))
            racer_error(r, "finish_tasks", &error);
        r->applied += applied;
        for (size_t i = 0; i < n; i++)
            bson_destroy(&docs[i]);
    }
    free(outcomes);
    free(docs);
    cohort_store_push(store, own);
    return NULL;
}

static int compare_oids(const void *a, const void *b)
{
    return bson_oid_compare(a, b);
}

Test(scheduling, concurrent_batch_claims_claim_every_task_once, .timeout = 180)
{
    cohort_new_task_t task = new_task(0);
    int64_t inserted = 0;
    bson_error_t error;
    cr_assert(cohort_store_insert_tasks(store, client, SERVICE, &task, RACE_TASKS, &inserted,
                                        &error),
              "%s", error.message);
    cr_assert_eq(inserted, RACE_TASKS);
    static batch_racer_t racers[RACE_THREADS];
    pthread_t threads[RACE_THREADS];
    const size_t batches[RACE_THREADS] = {8, 32, 8, 32};
    for (int i = 0; i < RACE_THREADS; i++) {
        racers[i] = (batch_racer_t){.batch = batches[i],
                                    .ids = calloc(RACE_TASKS, sizeof(bson_oid_t))};
        cr_assert_not_null(racers[i].ids);
        snprintf(racers[i].node, sizeof racers[i].node, "node-race-%d", i);
        cr_assert_eq(pthread_create(&threads[i], NULL, batch_race, &racers[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(threads[i], NULL);

    size_t total = 0, applied = 0;
    for (int i = 0; i < RACE_THREADS; i++) {
        cr_assert_eq(racers[i].errors, 0, "racer %d: %s", i, racers[i].first_error);
        total += racers[i].claimed;
        applied += racers[i].applied;
    }
    cr_assert_eq(total, RACE_TASKS, "%zu claims of %d tasks", total, RACE_TASKS);
    cr_assert_eq(applied, RACE_TASKS);
    bson_oid_t *all = calloc(RACE_TASKS, sizeof *all);
    cr_assert_not_null(all);
    size_t k = 0;
    for (int i = 0; i < RACE_THREADS; i++) {
        memcpy(all + k, racers[i].ids, racers[i].claimed * sizeof *all);
        k += racers[i].claimed;
        free(racers[i].ids);
    }
    qsort(all, k, sizeof *all, compare_oids);
    for (size_t i = 1; i < k; i++) {
        char hex[25];
        bson_oid_to_string(&all[i], hex);
        cr_assert_not(bson_oid_equal(&all[i - 1], &all[i]), "task %s was claimed twice", hex);
    }
    free(all);
    cr_assert_eq(count("{\"status\": \"succeeded\", \"attempts\": 1}"), RACE_TASKS);
    for (int i = 0; i < RACE_THREADS; i++)
        cr_assert_gt(racers[i].claimed, 0, "racer %d never claimed (starved?)", i);
}

Test(scheduling, a_service_with_claim_batch_32_runs_everything_once)
{
    prepare(0, "probe");
    configs[0].claim_batch = 32;
    configs[0].workers = 2;
    make_service(0, NODE);
    cohort_new_task_t task = new_task(0);
    int64_t inserted = 0;
    bson_error_t error;
    cr_assert(cohort_store_insert_tasks(store, client, SERVICE, &task, 300, &inserted, &error),
              "%s", error.message);
    start(services[0]);
    tick_until_count("{\"status\": \"succeeded\", \"attempts\": 1}", 300, 30000);
    tick_idle(3);
    cr_assert_eq(probe_runs(), 300);
    cr_assert_eq(atomic_load(&services[0]->stats.claimed), 300);
    cr_assert_eq(atomic_load(&services[0]->stats.succeeded), 300);
    cr_assert_eq(atomic_load(&services[0]->stats.lost_claims), 0);
}

/* ---- timeouts (isolation = thread) ------------------------------------------------------ */

static int64_t wedged(void)
{
    return atomic_load(&services[0]->wedged_slots);
}

Test(scheduling, a_run_past_its_timeout_is_timed_out_final_and_its_slot_freed)
{
    cohort_service_config_t *c = prepare(0, "outcome");
    c->max_attempts = 5;
    c->retry_base_ms = 10;
    make_service(0, NODE);
    char slow[25], quick[25];
    must_create("{\"sleep_ms\": 1500}", "{\"tracked\": false, \"task_timeout_ms\": 300}", slow);
    bson_oid_t slow_id = oid_from_hex(slow);
    bson_t doc;
    read_task(&slow_id, &doc);
    cr_assert_eq(test_doc_int(&doc, "task_timeout_ms"), 300);
    bson_destroy(&doc);
    start(services[0]);
    tick_until_count("{\"status\": \"timed_out\"}", 1, 5000);
    cr_assert_eq(wedged(), 1, "the slot running the timed-out task is not reported wedged");
    cr_assert_eq(atomic_load(&services[0]->stats.timed_out), 1);

    read_task(&slow_id, &doc);
    char *text = as_json(&doc);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 1, "%s", text);
    cr_assert_str_eq(test_doc_str(&doc, "history.0.outcome"), "timed_out", "%s", text);
    cr_assert_eq(test_doc_int(&doc, "history.0.attempt"), 1, "%s", text);
    cr_assert(test_doc_str(&doc, "last_error") &&
                  strstr(test_doc_str(&doc, "last_error"), "timed out"),
              "%s", text);
    cr_assert(test_doc_has(&doc, "finished_at"), "%s", text);
    int64_t ran =
        test_doc_int(&doc, "history.0.ended_at") - test_doc_int(&doc, "history.0.started_at");
    cr_assert_geq(ran + 2 * cohort_clock_uncertainty_ms(), 300, "timed out after %lld ms",
                  (long long)ran);
    cr_assert_lt(ran, 1500, "timed out only after %lld ms", (long long)ran);
    bson_free(text);
    bson_destroy(&doc);

    /* one worker: the next task waits for the wedged slot, then runs */
    must_create("{}", "{\"tracked\": false}", quick);
    bson_oid_t quick_id = oid_from_hex(quick);
    tick_until_count("{\"status\": \"succeeded\"}", 1, 5000);
    cr_assert_eq(wedged(), 0, "the slot is still wedged after the handler returned");
    bson_t slow_doc, quick_doc;
    read_task(&slow_id, &slow_doc);
    read_task(&quick_id, &quick_doc);
    int64_t handler_end = test_doc_int(&slow_doc, "history.0.started_at") + 1500;
    int64_t quick_start = test_doc_int(&quick_doc, "history.0.started_at");
    cr_assert_geq(quick_start + 2 * cohort_clock_uncertainty_ms() + 5, handler_end,
                  "the next task ran %lld ms before the wedged handler returned",
                  (long long)(handler_end - quick_start));
    bson_destroy(&quick_doc);
    bson_destroy(&slow_doc);
    tick_idle(10);

    read_task(&slow_id, &doc);
    text = as_json(&doc);
    cr_assert_str_eq(test_doc_str(&doc, "status"), "timed_out", "the late outcome won: %s", text);
    cr_assert_eq(test_doc_int(&doc, "attempts"), 1, "a timed-out task was retried: %s", text);
    bson_iter_t it, entries;
    uint32_t runs = 0;
    if (bson_iter_init_find(&it, &doc, "history") && bson_iter_recurse(&it, &entries))
        while (bson_iter_next(&entries))
            runs++;
    cr_assert_eq(runs, 1, "the late outcome was recorded: %s", text);
    bson_free(text);
    bson_destroy(&doc);
    char status[32];
    cr_assert_str_eq(status_of(&quick_id, status, sizeof status), "succeeded");
    cr_assert_eq(outcome_calls(), 2);
    cr_assert_eq(atomic_load(&services[0]->stats.succeeded), 1,
                 "the dropped late outcome was counted");
    cr_assert_eq(atomic_load(&services[0]->stats.timed_out), 1);
    cr_assert_eq(atomic_load(&services[0]->stats.retried), 0);
}

Test(scheduling, a_task_timeout_of_zero_means_none_despite_the_service_default)
{
    /* handler.h: "task_timeout_ms (int, >= 0; 0: none)" as a task option. */
    prepare(0, "outcome")->defaults.task_timeout_ms = 200;
    make_service(0, NODE);
    char id[25];
    must_create("{\"sleep_ms\": 700}", "{\"tracked\": false, \"task_timeout_ms\": 0}", id);
    start(services[0]);
    tick_until_count("{\"status\": {\"$in\": [\"succeeded\", \"timed_out\"]}}", 1, 5000);
    char status[32];
    bson_oid_t oid = oid_from_hex(id);
    cr_assert_str_eq(status_of(&oid, status, sizeof status), "succeeded",
                     "a task created with task_timeout_ms = 0 (none) got the service's 200 ms");
}

/* ---- task options ----------------------------------------------------------------------- */

Test(scheduling, bad_task_options_are_rejected_with_a_clear_message)
{
    prepare(0, "probe");
    make_service(0, NODE);
    char long_kind[80];
    memset(long_kind, 'k', 65);
    long_kind[65] = '\0';
    char long_kind_opts[128];
    snprintf(long_kind_opts, sizeof long_kind_opts, "{\"kind\": \"%s\"}", long_kind);
    const struct {
        const char *opts;
        const char *message_part;
    } cases[] = {
        {"{\"colour\": \"red\"}", "unknown task option 'colour'"},
        {"{\"priority\": 1000001}", "'priority' = 1000001 is out of range"},
        {"{\"priority\": -1000001}", "'priority' = -1000001 is out of range"},
        {"{\"priority\": \"high\"}", "'priority' must be an integer"},
        {"{\"priority\": 1.5}", "'priority' must be an integer"},
        {"{\"kind\": \"bad kind!\"}", "'kind' must be 1-64 of [A-Za-z0-9_-]"},
        {"{\"kind\": \"e.mail\"}", "'kind' must be 1-64 of [A-Za-z0-9_-]"},
        {"{\"kind\": \"\"}", "'kind' must be 1-64 of [A-Za-z0-9_-]"},
        {long_kind_opts, "'kind' must be 1-64 of [A-Za-z0-9_-]"},
        {"{\"kind\": 7}", "'kind' must be 1-64 of [A-Za-z0-9_-]"},
        {"{\"delay_ms\": 1000, \"not_before\": {\"$date\": 4102444800000}}",
         "'delay_ms' and 'not_before' exclude each other"},
        {"{\"delay_ms\": -1}", "'delay_ms' = -1 is out of range"},
        {"{\"not_after\": 4102444800000, \"not_after_ms\": 10}",
         "'not_after' and 'not_after_ms' exclude each other"},
        {"{\"unique_key\": \"u\", \"coalesce_key\": \"c\"}",
         "'unique_key' and 'coalesce_key' exclude each other"},
        {"{\"task_timeout_ms\": -5}", "'task_timeout_ms' = -5 is out of range"},
        {"{\"group\": \"\"}", "'group' must be a string of 1 to 512 bytes"},
        {"{\"coalesce_key\": 5}", "'coalesce_key' must be a string of 1 to 512 bytes"},
        {"{\"tracked\": \"yes\"}", "'tracked' must be a bool"},
        {"{\"not_before\": \"tomorrow\"}", "'not_before' must be an integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cohort_error_t error = {0};
        char id[25] = "";
        cr_assert_not(create("{}", cases[i].opts, id, &error), "accepted %s", cases[i].opts);
        cr_assert_eq(error.code, COHORT_ERROR_INVALID, "%s: code %d (%s)", cases[i].opts,
                     error.code, error.message);
        cr_assert(strstr(error.message, cases[i].message_part), "%s: message \"%s\" lacks \"%s\"",
                  cases[i].opts, error.message, cases[i].message_part);
    }
    cr_assert_eq(count("{}"), 0, "a rejected creation wrote a task");

    /* the limits themselves are fine */
    char kind64[80], opts[160], id[25];
    memset(kind64, 'k', 64);
    kind64[64] = '\0';
    snprintf(opts, sizeof opts,
             "{\"tracked\": false, \"priority\": 1000000, \"kind\": \"%s\", \"delay_ms\": 0}",
             kind64);
    must_create("{}", opts, id);
    must_create("{}", "{\"tracked\": false, \"priority\": -1000000, \"kind\": \"a-Z_9\"}", id);
    cr_assert_eq(count("{}"), 2);
}

Test(scheduling, delay_ms_and_not_before_exclude_each_other_even_with_a_zero_delay)
{
    /* "delay_ms (int, >= 0) or not_before": giving both is ambiguous whatever the values,
     * and the message says they exclude each other. */
    prepare(0, "probe");
    make_service(0, NODE);
    cohort_error_t error = {0};
    char id[25];
    cr_assert_not(create("{}", "{\"delay_ms\": 0, \"not_before\": {\"$date\": 4102444800000}}", id,
                         &error),
                  "accepted both delay_ms (0) and not_before");
    cr_assert_eq(error.code, COHORT_ERROR_INVALID);
}

/* Every task carries its partition (0: one partition, COHORT_TASK_PARTITIONS), and a claim
 * that names a partition takes tasks of that partition only; one that names none takes any
 * (docs/SCALING.md: a sharded queue claims by partition). */
Test(scheduling, tasks_carry_partition_zero_and_a_claim_may_name_its_partition)
{
    prepare(0, "probe");
    cohort_new_task_t task = new_task(0);
    bson_oid_t oid = insert(&task);
    bson_t doc;
    read_task(&oid, &doc);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &doc, "partition") && BSON_ITER_HOLDS_INT32(&it),
              "the task document has no int32 partition");
    cr_assert_eq(bson_iter_int32(&it), 0);
    bson_destroy(&doc);

    int64_t now = cohort_clock_cluster_ms();
    cohort_claim_filter_t other = {.by_partition = true, .partition = 1};
    cr_assert_not(claim_one(NODE, now, &other, &doc), "a claim in partition 1 took one of 0");
    cohort_claim_filter_t mine = {.by_partition = true, .partition = 0};
    cr_assert(claim_one(NODE, now, &mine, &doc), "a claim in partition 0 found nothing");
    bson_destroy(&doc);
    insert(&task);
    cr_assert(claim_one(NODE, now, NULL, &doc), "a claim in any partition found nothing");
    bson_destroy(&doc);
}
