/*
 * generic_data.c - the service's generic data (cohort_get / cohort_set, handler ABI 2, and
 * `cohortctl data`) against the local database, through real cohort_service_t objects.
 *
 * Covers: a round trip of many BSON types, stored under data.<key> of the service document
 * and readable by another node; removal; invalid keys refused with COHORT_ERROR_INVALID and
 * nothing written; writes from a fenced (primary_work) context refused with
 * COHORT_ERROR_NOT_PRIMARY once the lease ran out or primacy moved on, and nothing written;
 * writes inside on_tasks_completed invisible in the database until the completion is
 * recorded, readable by the callback itself at once, and gone if the callback fails or the
 * completion's fenced write does not apply; and cohortctl data set/get/unset end to end
 * (numbers, strings, objects, arrays), its key validation (exit 2) and an unknown service.
 *
 * Handler: tests/support/handlers/probe.c (its hooks run the test's code in the callbacks).
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
#include "store/claims.h"
#include "store/primacy.h"
#include "node/work/task.h"

#define SERVICE "gdata"
#define QUEUE "queue_" SERVICE
#define TAKEOVER_MS 1000 /* a 750 ms lease: short enough to wait out */
#define LONGEST_KEY "k-64-chars-abcdefghijklmnopqrstuvwxyz-0123456789-abcdefghijklmno"

static test_probe_fixture_t fx;

static void setup(void)
{
    test_probe_fixture_open(&fx, "gdata", SERVICE, TAKEOVER_MS);
}

static void teardown(void)
{
    test_probe_fixture_close(&fx);
}

TestSuite(generic_data, .init = setup, .fini = teardown, .timeout = 30);

/* Node i of the service on the probe handler; its tasks are run by the test thread. */
static test_node_t *make_node(size_t i, const char *node_id)
{
    test_node_t *n = &fx.nodes[i];
    n->config = test_service_config(SERVICE, test_handler_path("probe"));
    n->service = test_service_new(&n->config, node_id, TAKEOVER_MS, fx.store, fx.client);
    return n;
}

static void tick(test_node_t *n)
{
    test_service_tick(n->service, fx.client);
}

/* A context like a worker's (unfenced) or like primary_work's (fenced) for node n. */
static cohort_ctx_t context(test_node_t *n, bool fenced)
{
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, n->service, fx.client, fenced);
    return ctx;
}

/* ---- values ------------------------------------------------------------------------------ */

/* A copy of the value of "v" in a JSON document (extended JSON allowed); caller destroys it
 * with bson_value_destroy(). */
static bson_value_t json_value(const char *json)
{
    bson_t doc;
    bson_error_t error;
    cr_assert(bson_init_from_json(&doc, json, -1, &error), "bad JSON %s: %s", json, error.message);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &doc, "v"), "no \"v\" in %s", json);
    bson_value_t value;
    bson_value_copy(bson_iter_value(&it), &value);
    bson_destroy(&doc);
    return value;
}

/* Same type and same bytes. */
static bool values_equal(const bson_value_t *a, const bson_value_t *b)
{
    bson_t da = BSON_INITIALIZER, dbb = BSON_INITIALIZER;
    bson_append_value(&da, "v", 1, a);
    bson_append_value(&dbb, "v", 1, b);
    bool same = bson_equal(&da, &dbb);
    bson_destroy(&da);
    bson_destroy(&dbb);
    return same;
}

static char *value_json(const bson_value_t *v)
{
    bson_t doc = BSON_INITIALIZER;
    bson_append_value(&doc, "v", 1, v);
    char *json = bson_as_canonical_extended_json(&doc, NULL);
    bson_destroy(&doc);
    return json;
}

/* data.<key> of the service document: true and a copy in *value if it is there. */
static bool db_data(const char *key, bson_value_t *value)
{
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    char path[128];
    snprintf(path, sizeof path, "data.%s", key);
    bson_iter_t it, found;
    bool there = bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, path, &found);
    if (there)
        bson_value_copy(bson_iter_value(&found), value);
    bson_destroy(&doc);
    return there;
}

static bool db_has(const char *key)
{
    bson_value_t v;
    if (!db_data(key, &v))
        return false;
    bson_value_destroy(&v);
    return true;
}

/* How many keys the service document's data sub-document has (-1: no data document). */
static int db_data_keys(void)
{
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    bson_iter_t it, child;
    int n = -1;
    if (bson_iter_init_find(&it, &doc, "data") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &child))
        for (n = 0; bson_iter_next(&child);)
            n++;
    bson_destroy(&doc);
    return n;
}

static void set_int64(cohort_ctx_t *ctx, const char *key, int64_t v)
{
    bson_value_t value = {.value_type = BSON_TYPE_INT64, .value.v_int64 = v};
    cohort_error_t error;
    cr_assert(cohort_set(ctx, key, &value, &error), "cohort_set(%s): %s", key, error.message);
}

static int64_t db_int64(const char *key)
{
    bson_value_t v;
    cr_assert(db_data(key, &v), "data.%s is not in the database", key);
    cr_assert_eq(v.value_type, BSON_TYPE_INT64, "data.%s is not an int64", key);
    int64_t n = v.value.v_int64;
    bson_value_destroy(&v);
    return n;
}

/* ---- cohort_get / cohort_set ------------------------------------------------------------- */

Test(generic_data, values_of_many_types_round_trip)
{
    test_node_t *a = make_node(0, "node-a");
    test_node_t *b = make_node(1, "node-b");
    cohort_ctx_t ctx = context(a, false);
    static const struct {
        const char *key;
        const char *json;
    } cases[] = {
        {"int32", "{\"v\": {\"$numberInt\": \"-7\"}}"},
        {"int64", "{\"v\": {\"$numberLong\": \"9007199254740993\"}}"},
        {"double", "{\"v\": {\"$numberDouble\": \"2.5\"}}"},
        {"bool", "{\"v\": true}"},
        {"string", "{\"v\": \"h\\u00e9llo, w\\u00f6rld\"}"},
        {"empty_string", "{\"v\": \"\"}"},
        {"document", "{\"v\": {\"a\": 1, \"b\": {\"c\": [1, \"x\", null]}}}"},
        {"array", "{\"v\": [1, \"two\", {\"three\": 3}, [4]]}"},
        {"date", "{\"v\": {\"$date\": {\"$numberLong\": \"1763731041445\"}}}"},
        {"oid", "{\"v\": {\"$oid\": \"0123456789abcdef01234567\"}}"},
        {"binary", "{\"v\": {\"$binary\": {\"base64\": \"AAEC/w==\", \"subType\": \"00\"}}}"},
        {"decimal", "{\"v\": {\"$numberDecimal\": \"1.10\"}}"},
        {LONGEST_KEY, "{\"v\": 64}"},
    };
    size_t n = sizeof cases / sizeof cases[0];
    cr_assert_eq(strlen(LONGEST_KEY), 64);
    for (size_t i = 0; i < n; i++) {
        bson_value_t want = json_value(cases[i].json);
        cohort_error_t error;
        cr_assert(cohort_set(&ctx, cases[i].key, &want, &error), "set %s: %s", cases[i].key,
                  error.message);
        bson_value_destroy(&want);
    }
    for (size_t i = 0; i < n; i++) {
        bson_value_t value = json_value(cases[i].json);
        const bson_value_t *want = &value;
        bson_value_t got, stored;
        cohort_error_t error;
        /* read back by this node, by another node (failover), and as stored */
        cohort_ctx_t other = context(b, false);
        cr_assert(cohort_get(&ctx, cases[i].key, &got, &error), "get %s: %s", cases[i].key,
                  error.message);
        char *got_json = value_json(&got);
        cr_assert(values_equal(want, &got), "%s: got %s, want %s", cases[i].key, got_json,
                  cases[i].json);
        bson_value_destroy(&got);
        cr_assert(cohort_get(&other, cases[i].key, &got, &error), "%s", error.message);
        cr_assert(values_equal(want, &got), "%s read by node-b differs", cases[i].key);
        bson_value_destroy(&got);
        cr_assert(db_data(cases[i].key, &stored), "data.%s is not in the service document",
                  cases[i].key);
        cr_assert(values_equal(want, &stored), "data.%s stored differently", cases[i].key);
        bson_value_destroy(&stored);
        bson_free(got_json);
        bson_value_destroy(&value);
    }

    /* overwrite with another type; remove with NULL and with a null value */
    bson_value_t text = {.value_type = BSON_TYPE_UTF8};
    text.value.v_utf8.str = "now a string";
    text.value.v_utf8.len = 12;
    cohort_error_t error;
    cr_assert(cohort_set(&ctx, "int32", &text, &error), "%s", error.message);
    bson_value_t got;
    cr_assert(cohort_get(&ctx, "int32", &got, &error));
    cr_assert(values_equal(&text, &got), "the overwrite did not stick");
    bson_value_destroy(&got);
    cr_assert(cohort_set(&ctx, "int32", NULL, &error), "remove: %s", error.message);
    bson_value_t null_value = {.value_type = BSON_TYPE_NULL};
    cr_assert(cohort_set(&ctx, "bool", &null_value, &error), "set null: %s", error.message);
    for (const char *const *key = (const char *const[]){"int32", "bool", "never_set", NULL}; *key;
         key++) {
        cr_assert_not(cohort_get(&ctx, *key, &got, &error), "%s is still set", *key);
        cr_assert_eq(error.code, COHORT_OK, "a missing key is not an error: %s", error.message);
        cr_assert_not(db_has(*key), "data.%s is still in the database", *key);
    }
    cr_assert(db_has("int64"), "removing one key removed others");

    /* a worker's (unfenced) write needs no primacy: node-b never was primary */
    cohort_ctx_t other = context(b, false);
    set_int64(&other, "from_b", 5);
    cr_assert_eq(db_int64("from_b"), 5);
}

Test(generic_data, invalid_keys_are_refused)
{
    test_node_t *a = make_node(0, "node-a");
    cohort_ctx_t ctx = context(a, false);
    char long_key[66];
    memset(long_key, 'k', 65);
    long_key[65] = '\0';
    const char *const keys[] = {"", "a.b", ".", "$x", "x$", "data.$", long_key};
    bson_value_t one = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 1};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        cohort_error_t error;
        cr_assert_not(cohort_set(&ctx, keys[i], &one, &error), "key '%s' accepted", keys[i]);
        cr_assert_eq(error.code, COHORT_ERROR_INVALID, "set '%s': code %d", keys[i], error.code);
        cr_assert(strstr(error.message, "invalid"), "set '%s': %s", keys[i], error.message);
        cr_assert_not(cohort_set(&ctx, keys[i], NULL, &error));
        cr_assert_eq(error.code, COHORT_ERROR_INVALID);
        bson_value_t got;
        cr_assert_not(cohort_get(&ctx, keys[i], &got, &error), "get '%s' succeeded", keys[i]);
        cr_assert_eq(error.code, COHORT_ERROR_INVALID, "get '%s': code %d", keys[i], error.code);
    }
    cohort_error_t error;
    cr_assert_not(cohort_set(&ctx, NULL, &one, &error));
    cr_assert_eq(error.code, COHORT_ERROR_INVALID);
    cr_assert_eq(db_data_keys(), 0, "something was written to the generic data");
}

typedef struct expiry {
    int calls;
    int64_t before_code; /* cohort_set while the lease is valid */
    int64_t after_code;  /* cohort_set after it ran out */
    int64_t remove_code; /* cohort_set(NULL) after it ran out */
    char after_message[256];
    bool lease_ran_out;
} expiry_t;

/* primary_work that outlives its lease: sets a key before and after the lease ends. */
static bool outlive_the_lease(cohort_ctx_t *ctx, void *arg)
{
    expiry_t *x = arg;
    if (x->calls++ > 0)
        return true;
    bson_value_t v = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 1};
    cohort_error_t error;
    x->before_code = cohort_set(ctx, "before", &v, &error) ? COHORT_OK : error.code;
    int64_t deadline = test_now_ms() + 2 * TAKEOVER_MS;
    while (cohort_ctx_is_primary(ctx) && test_now_ms() < deadline)
        test_sleep_ms(10);
    x->lease_ran_out = !cohort_ctx_is_primary(ctx);
    v.value.v_int32 = 2;
    x->after_code = cohort_set(ctx, "after", &v, &error) ? COHORT_OK : error.code;
    snprintf(x->after_message, sizeof x->after_message, "%s", error.message);
    x->remove_code = cohort_set(ctx, "before", NULL, &error) ? COHORT_OK : error.code;
    return true;
}

Test(generic_data, a_fenced_set_after_the_lease_ran_out_is_refused)
{
    test_node_t *a = make_node(0, "node-a");
    expiry_t x = {.before_code = -1, .after_code = -1, .remove_code = -1};
    ((probe_set_primary_hook_fn)test_probe_symbol(&fx, "probe_set_primary_hook"))(
        outlive_the_lease, &x);
    tick(a);
    cr_assert_eq(x.calls, 1, "primary_work did not run");
    cr_assert_eq(x.before_code, COHORT_OK, "a set under a valid lease failed");
    cr_assert(x.lease_ran_out, "the lease did not run out");
    cr_assert_eq(x.after_code, COHORT_ERROR_NOT_PRIMARY, "set after the lease: code %lld",
                 (long long)x.after_code);
    cr_assert(strstr(x.after_message, "not primary"), "message: %s", x.after_message);
    cr_assert_eq(x.remove_code, COHORT_ERROR_NOT_PRIMARY, "removal after the lease: code %lld",
                 (long long)x.remove_code);
    cr_assert_not(db_has("after"), "a set after the lease ran out was written");
    bson_value_t v;
    cr_assert(db_data("before", &v), "a removal after the lease ran out was applied");
    cr_assert(v.value_type == BSON_TYPE_INT32 && v.value.v_int32 == 1);
    bson_value_destroy(&v);
}

/* node-b takes over while the node of `fenced` still believes its lease valid. */
static void take_over_behind_its_back(const cohort_ctx_t *fenced)
{
    bson_error_t db_error;
    cohort_takeover_t t;
    cr_assert(cohort_store_take_lease(fx.store, fx.client, SERVICE, "node-b",
                                      cohort_clock_cluster_ms() + 60000, -1, 0, &t, &db_error));
    cr_assert(t.taken);
    cr_assert(cohort_ctx_is_primary(fenced), "the lease ran out too soon for this test");
}

Test(generic_data, a_fenced_set_after_primacy_moved_on_is_refused)
{
    test_node_t *a = make_node(0, "node-a");
    tick(a);
    cr_assert_eq(cohort_election_epoch(&a->service->election), 1);
    cohort_ctx_t fenced = context(a, true);
    set_int64(&fenced, "k", 1);
    cr_assert_eq(db_int64("k"), 1);

    take_over_behind_its_back(&fenced);
    bson_value_t two = {.value_type = BSON_TYPE_INT64, .value.v_int64 = 2};
    cohort_error_t error;
    cr_assert_not(cohort_set(&fenced, "k", &two, &error), "a deposed primary's set succeeded");
    cr_assert_eq(error.code, COHORT_ERROR_NOT_PRIMARY, "code %d: %s", error.code, error.message);
    cr_assert_not(cohort_set(&fenced, "k", NULL, &error));
    cr_assert_eq(error.code, COHORT_ERROR_NOT_PRIMARY);
    cr_assert_eq(db_int64("k"), 1, "a deposed primary's write was applied");
}

/* ---- inside on_tasks_completed ------------------------------------------------------------- */

/* Runs tracked tasks to completion and ticks node a until its batch is draining. */
static void drain_a_batch(test_node_t *a, int tasks)
{
    tick(a);
    cr_assert_eq(cohort_election_epoch(&a->service->election), 1);
    cohort_ctx_t ctx = context(a, false);
    for (int i = 0; i < tasks; i++) {
        cohort_error_t error;
        cr_assert(cohort_task_create(&ctx, NULL, NULL, NULL, &error), "%s", error.message);
    }
    for (int i = 0; i < tasks; i++) {
        bson_t claimed;
        bool found = false;
        bson_error_t error;
        cr_assert(cohort_store_claim_task(fx.store, fx.client, SERVICE, "node-a",
                                          cohort_clock_cluster_ms(), NULL, &claimed, &found, NULL, &error));
        cr_assert(found);
        cohort_task_execute(&ctx, 0, &claimed);
        bson_destroy(&claimed);
    }
    tick(a); /* closes the batch; the next tick runs the callback */
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    bson_iter_t it, seq;
    cr_assert(bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, "draining.seq", &seq),
              "the batch did not close");
    bson_destroy(&doc);
}

static int64_t batches_completed(void)
{
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    bson_iter_t it;
    int64_t n = -1;
    if (bson_iter_init_find(&it, &doc, "batches_completed") && BSON_ITER_HOLDS_NUMBER(&it))
        n = bson_iter_as_int64(&it);
    bson_destroy(&doc);
    return n;
}

typedef struct pending {
    bool db_had_total;  /* data.total was in the database during the callback */
    bool db_lost_old;   /* data.old was gone from the database during the callback */
    int64_t read_total; /* cohort_get(total) inside the callback */
    bool read_old;      /* cohort_get(old) found it after the callback removed it */
    int64_t read_old_code;
    int64_t read_untouched; /* cohort_get(untouched): from the database */
    int64_t invalid_code;   /* cohort_set with an invalid key inside the callback */
    int64_t set_failures;
} pending_t;

static bool set_in_callback(cohort_ctx_t *ctx, const char *key, const bson_value_t *v)
{
    cohort_error_t error;
    return cohort_set(ctx, key, v, &error);
}

static bool write_inside_the_callback(cohort_ctx_t *ctx, cohort_batch_t *batch, void *arg)
{
    (void)batch;
    pending_t *p = arg;
    bson_value_t three = {.value_type = BSON_TYPE_INT64, .value.v_int64 = 3};
    bson_value_t four = {.value_type = BSON_TYPE_INT64, .value.v_int64 = 4};
    bson_value_t label = {.value_type = BSON_TYPE_UTF8};
    label.value.v_utf8.str = "batch-1";
    label.value.v_utf8.len = 7;
    p->set_failures += !set_in_callback(ctx, "total", &three);
    p->set_failures += !set_in_callback(ctx, "label", &label);
    p->set_failures += !set_in_callback(ctx, "old", NULL);
    p->db_had_total = db_has("total");
    p->db_lost_old = !db_has("old");

    bson_value_t v;
    cohort_error_t error;
    if (cohort_get(ctx, "total", &v, &error)) {
        p->read_total = v.value_type == BSON_TYPE_INT64 ? v.value.v_int64 : -2;
        bson_value_destroy(&v);
    }
    p->read_old = cohort_get(ctx, "old", &v, &error);
    if (p->read_old)
        bson_value_destroy(&v);
    p->read_old_code = error.code;
    if (cohort_get(ctx, "untouched", &v, &error)) {
        p->read_untouched = v.value_type == BSON_TYPE_INT64 ? v.value.v_int64 : -2;
        bson_value_destroy(&v);
    }
    p->set_failures += !set_in_callback(ctx, "total", &four); /* the last write wins */
    p->invalid_code = cohort_set(ctx, "bad.key", &four, &error) ? COHORT_OK : error.code;
    return true;
}

Test(generic_data, callback_writes_apply_only_with_the_completion)
{
    test_node_t *a = make_node(0, "node-a");
    cohort_ctx_t ctx = context(a, false);
    set_int64(&ctx, "old", 1);
    set_int64(&ctx, "untouched", 7);
    pending_t p = {.read_total = -1, .read_old_code = -1, .read_untouched = -1};
    ((probe_set_completed_hook_fn)test_probe_symbol(&fx, "probe_set_completed_hook"))(
        write_inside_the_callback, &p);
    drain_a_batch(a, 2);
    tick(a);
    cr_assert_eq(fx.record->calls, 1);
    cr_assert_eq(p.set_failures, 0, "a cohort_set inside the callback failed");
    cr_assert_not(p.db_had_total, "a callback write was in the database before completion");
    cr_assert_not(p.db_lost_old, "a callback removal was applied before completion");
    cr_assert_eq(p.read_total, 3, "the callback did not read its own write (got %lld)",
                 (long long)p.read_total);
    cr_assert_not(p.read_old, "the callback still read a key it removed");
    cr_assert_eq(p.read_old_code, COHORT_OK);
    cr_assert_eq(p.read_untouched, 7, "the callback could not read stored data");
    cr_assert_eq(p.invalid_code, COHORT_ERROR_INVALID, "invalid key inside the callback: %lld",
                 (long long)p.invalid_code);

    cr_assert_eq(batches_completed(), 1);
    cr_assert_eq(db_int64("total"), 4);
    bson_value_t v;
    cr_assert(db_data("label", &v));
    cr_assert(v.value_type == BSON_TYPE_UTF8 && strcmp(v.value.v_utf8.str, "batch-1") == 0);
    bson_value_destroy(&v);
    cr_assert_not(db_has("old"), "the callback's removal was not applied");
    cr_assert_eq(db_int64("untouched"), 7);
    cr_assert_not(db_has("bad.key"));
}

/* First call: writes x and fails. Later calls: write y and succeed. */
static bool fail_once_after_writing(cohort_ctx_t *ctx, cohort_batch_t *batch, void *arg)
{
    (void)batch;
    int *calls = arg;
    bson_value_t one = {.value_type = BSON_TYPE_INT64, .value.v_int64 = 1};
    if ((*calls)++ == 0) {
        set_in_callback(ctx, "x", &one);
        cohort_ctx_set_error(ctx, "failing after a write, on purpose");
        return false;
    }
    return set_in_callback(ctx, "y", &one);
}

Test(generic_data, callback_writes_vanish_when_the_callback_fails)
{
    test_node_t *a = make_node(0, "node-a");
    int calls = 0;
    ((probe_set_completed_hook_fn)test_probe_symbol(&fx, "probe_set_completed_hook"))(
        fail_once_after_writing, &calls);
    drain_a_batch(a, 1);
    tick(a);
    cr_assert_eq(calls, 1);
    cr_assert_not(db_has("x"), "a failed callback's write was applied");
    cr_assert_eq(batches_completed(), 0);
    tick(a);
    cr_assert_eq(calls, 2);
    cr_assert_eq(batches_completed(), 1);
    cr_assert_eq(db_int64("y"), 1);
    cr_assert_not(db_has("x"), "the failed callback's write came back with the retry");
}

/* Writes z, then another node takes primacy before the completion is recorded. */
static bool lose_primacy_after_writing(cohort_ctx_t *ctx, cohort_batch_t *batch, void *arg)
{
    (void)batch;
    (void)arg;
    bson_value_t one = {.value_type = BSON_TYPE_INT64, .value.v_int64 = 1};
    bool ok = set_in_callback(ctx, "z", &one);
    bson_error_t error;
    cohort_takeover_t t;
    ok = ok &&
         cohort_store_take_lease(fx.store, fx.client, SERVICE, "node-b",
                                 cohort_clock_cluster_ms() + 60000, -1, 0, &t, &error) &&
         t.taken;
    return ok;
}

Test(generic_data, callback_writes_vanish_when_the_completion_is_not_applied)
{
    test_node_t *a = make_node(0, "node-a");
    ((probe_set_completed_hook_fn)test_probe_symbol(&fx, "probe_set_completed_hook"))(
        lose_primacy_after_writing, NULL);
    drain_a_batch(a, 1);
    tick(a);
    cr_assert_eq(fx.record->calls, 1);
    cr_assert(fx.record->call[0].returned, "the hook failed");
    cr_assert_eq(batches_completed(), 0, "a completion was recorded after primacy moved on");
    cr_assert_not(db_has("z"), "a write of a callback whose completion failed was applied");
}

/* ---- cohortctl data ------------------------------------------------------------------------ */

#define ctl(...) test_ctl(fx.db, __VA_ARGS__)

Test(generic_data, cohortctl_sets_gets_and_unsets_json_values)
{
    test_node_t *a = make_node(0, "node-a");
    cohort_ctx_t ctx = context(a, false);
    static const char *const values[] = {
        "42",
        "-3.25",
        "12345678901",
        "\"hello\"",
        "true",
        "{\"a\": 1, \"b\": [1, 2]}",
        "[1, \"two\", {\"three\": 3}]",
        "{}",
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        test_run_result_t r = ctl("data", "set", SERVICE, "key", values[i]);
        cr_assert_eq(r.exit_code, 0, "set %s: exit %d: %s", values[i], r.exit_code, r.err);
        test_run_result_free(&r);

        char *want_json = NULL;
        cr_assert_geq(asprintf(&want_json, "{\"v\": %s}", values[i]), 0);
        bson_value_t value = json_value(want_json);
        const bson_value_t *want = &value;

        /* what a handler reads */
        bson_value_t got;
        cohort_error_t error;
        cr_assert(cohort_get(&ctx, "key", &got, &error), "cohort_get after set %s: %s", values[i],
                  error.message);
        char *got_json = value_json(&got);
        cr_assert(values_equal(want, &got), "set %s, handler read %s", values[i], got_json);
        bson_value_destroy(&got);
        bson_free(got_json);

        /* what cohortctl prints */
        r = ctl("data", "get", SERVICE, "key");
        cr_assert_eq(r.exit_code, 0, "get: exit %d: %s", r.exit_code, r.err);
        cr_assert(strlen(r.out) > 0 && r.out[strlen(r.out) - 1] == '\n', "out: '%s'", r.out);
        char *printed = NULL;
        cr_assert_geq(asprintf(&printed, "{\"v\": %s}", r.out), 0);
        bson_t printed_doc;
        bson_error_t json_error;
        cr_assert(bson_init_from_json(&printed_doc, printed, -1, &json_error),
                  "get printed '%s', not JSON: %s", r.out, json_error.message);
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, &printed_doc, "v"));
        cr_assert(values_equal(want, bson_iter_value(&it)), "set %s, get printed %s", values[i],
                  r.out);
        bson_destroy(&printed_doc);
        free(printed);
        test_run_result_free(&r);
        bson_value_destroy(&value);
        free(want_json);
    }

    /* a value a handler set is readable by cohortctl */
    set_int64(&ctx, "from_handler", 77);
    test_run_result_t r = ctl("data", "get", SERVICE, "from_handler");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "77\n");
    test_run_result_free(&r);

    r = ctl("data", "unset", SERVICE, "key");
    cr_assert_eq(r.exit_code, 0, "unset: exit %d: %s", r.exit_code, r.err);
    test_run_result_free(&r);
    cr_assert_not(db_has("key"), "unset left the key");
    bson_value_t got;
    cohort_error_t error;
    cr_assert_not(cohort_get(&ctx, "key", &got, &error));
    r = ctl("data", "get", SERVICE, "key");
    cr_assert_eq(r.exit_code, 1, "get of an unset key: exit %d", r.exit_code);
    cr_assert(strstr(r.err, "'key' is not set"), "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "");
    test_run_result_free(&r);
    cr_assert_eq(db_int64("from_handler"), 77, "unset removed another key");
}

Test(generic_data, cohortctl_refuses_invalid_keys_and_values)
{
    char long_key[66];
    memset(long_key, 'k', 65);
    long_key[65] = '\0';
    const char *const keys[] = {"a.b", "$x", "", long_key};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *const verbs[][5] = {{"data", "set", SERVICE, keys[i], "1"},
                                        {"data", "get", SERVICE, keys[i], NULL},
                                        {"data", "unset", SERVICE, keys[i], NULL}};
        for (size_t v = 0; v < 3; v++) {
            const char *args[6] = {verbs[v][0], verbs[v][1], verbs[v][2],
                                   verbs[v][3], verbs[v][4], NULL};
            test_run_result_t r = test_ctl_run(fx.db, NULL, args);
            cr_assert_eq(r.exit_code, 2, "data %s with key '%s': exit %d: %s", verbs[v][1], keys[i],
                         r.exit_code, r.err);
            cr_assert(strstr(r.err, "invalid"), "data %s with key '%s': %s", verbs[v][1], keys[i],
                      r.err);
            test_run_result_free(&r);
        }
    }
    test_run_result_t r = ctl("data", "set", SERVICE, "k", "{not json");
    cr_assert_eq(r.exit_code, 2, "a bad JSON value: exit %d: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "not a JSON value"), "%s", r.err);
    test_run_result_free(&r);
    /* What the database would mishandle (issue 23): a wrapped integer (stored as 5), a
     * repeated key (the local server drops the connection), text after the value. */
    static const struct {
        const char *value, *message;
    } stored_wrong[] = {
        {"18446744073709551621", "field 'value': 18446744073709551621 is outside the 64-bit"},
        {"{\"n\": [18446744073709551621]}", "field 'value.n[0]'"},
        {"{\"a\": 1, \"a\": 2}", "field 'value.a' given twice"},
        {"{\"\": 1}", "a key is empty"},
        {"1} {\"x\": 2", "something follows it"},
    };
    for (size_t i = 0; i < sizeof stored_wrong / sizeof stored_wrong[0]; i++) {
        r = ctl("data", "set", SERVICE, "k", stored_wrong[i].value);
        cr_assert_eq(r.exit_code, 2, "data set %s: exit %d: %s", stored_wrong[i].value,
                     r.exit_code, r.err);
        cr_assert(strstr(r.err, stored_wrong[i].message), "data set %s: %s",
                  stored_wrong[i].value, r.err);
        test_run_result_free(&r);
    }
    r = ctl("data", "set", "bad service!", "k", "1");
    cr_assert_eq(r.exit_code, 2, "a bad service name: exit %d: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "not a valid service name"), "%s", r.err);
    test_run_result_free(&r);
    cr_assert_eq(db_data_keys(), 0, "something was written to the generic data");
}

/* The handler ABI's calls that store a document refuse what the database would mishandle
 * (issue 23): a repeated key reached the database, which dropped the connection. */
Test(generic_data, handler_calls_refuse_repeated_and_empty_keys)
{
    test_node_t *a = make_node(0, "node-a");
    cohort_ctx_t ctx = context(a, false);
    bson_t *doc = bson_new();
    BSON_APPEND_INT32(doc, "n", 1);
    BSON_APPEND_INT32(doc, "n", 2);
    bson_value_t value = {.value_type = BSON_TYPE_DOCUMENT};
    value.value.v_doc.data = (uint8_t *)bson_get_data(doc);
    value.value.v_doc.data_len = doc->len;
    cohort_error_t error;
    cr_assert_not(cohort_set(&ctx, "k", &value, &error), "a repeated key was stored");
    cr_assert_eq(error.code, COHORT_ERROR_INVALID, "%s", error.message);
    cr_assert(strstr(error.message, "'k.n' given twice"), "%s", error.message);
    cr_assert_not(cohort_data_cas(&ctx, "k", NULL, &value, &error));
    cr_assert_eq(error.code, COHORT_ERROR_INVALID, "%s", error.message);
    char id[25];
    cr_assert_not(cohort_task_create(&ctx, doc, NULL, id, &error), "a repeated key was stored");
    cr_assert_eq(error.code, COHORT_ERROR_INVALID, "%s", error.message);
    cr_assert(strstr(error.message, "'data.n' given twice"), "%s", error.message);
    bson_reinit(doc);
    BSON_APPEND_INT32(doc, "", 1);
    cr_assert_not(cohort_task_create(&ctx, doc, NULL, id, &error), "an empty key was stored");
    cr_assert(strstr(error.message, "a key is empty"), "%s", error.message);
    bson_destroy(doc);
    cr_assert_eq(db_data_keys(), 0, "something was written to the generic data");
    cr_assert_eq(test_count(fx.client, fx.db, "queue_" SERVICE, "{}"), 0, "a task was created");
}

Test(generic_data, cohortctl_names_an_unknown_service)
{
    static const char *const verbs[][5] = {{"data", "set", "nosuch", "k", "1"},
                                           {"data", "unset", "nosuch", "k", NULL},
                                           {"data", "get", "nosuch", "k", NULL}};
    for (size_t v = 0; v < 3; v++) {
        const char *args[6] = {verbs[v][0], verbs[v][1], verbs[v][2],
                               verbs[v][3], verbs[v][4], NULL};
        test_run_result_t r = test_ctl_run(fx.db, NULL, args);
        cr_assert_eq(r.exit_code, 2, "data %s on an unknown service: exit %d: %s", verbs[v][1],
                     r.exit_code, r.err);
        cr_assert(strstr(r.err, "'nosuch'") && strstr(r.err, "does not exist"),
                  "data %s on an unknown service does not say the service does not exist: %s",
                  verbs[v][1], r.err);
        cr_assert_not_null(strstr(r.err, "known services: "), "data %s: %s", verbs[v][1], r.err);
        test_run_result_free(&r);
    }
    cr_assert_eq(test_count(fx.client, fx.db, "services", "{\"_id\": \"nosuch\"}"), 0,
                 "cohortctl created a service document");
}

/* ---- cohort_data_inc / cohort_data_cas (ABI 4) --------------------------------------------- */

static int64_t inc(cohort_ctx_t *ctx, const char *key, int64_t delta)
{
    int64_t result = INT64_MIN;
    cohort_error_t error;
    cr_assert(cohort_data_inc(ctx, key, delta, &result, &error), "inc(%s, %lld): %s", key,
              (long long)delta, error.message);
    return result;
}

/* cohort_data_inc fails with COHORT_ERROR_INVALID and a message holding `part`. */
static void assert_inc_refused(cohort_ctx_t *ctx, const char *key, int64_t delta,
                               const char *part)
{
    int64_t result = 12345;
    cohort_error_t error;
    cr_assert_not(cohort_data_inc(ctx, key, delta, &result, &error), "inc(%s) succeeded", key);
    cr_assert_eq(error.code, COHORT_ERROR_INVALID, "inc(%s): code %d: %s", key, error.code,
                 error.message);
    cr_assert(strstr(error.message, part), "inc(%s): '%s' lacks '%s'", key, error.message, part);
    cr_assert_eq(result, 12345, "a failed inc wrote *result");
}

Test(generic_data, inc_starts_a_missing_key_from_zero_and_adds_exactly)
{
    test_node_t *a = make_node(0, "node-a");
    cohort_ctx_t ctx = context(a, false);
    cr_assert_eq(inc(&ctx, "n", 5), 5, "a missing key did not start from 0");
    cr_assert_eq(inc(&ctx, "n", -7), -2);
    cr_assert_eq(db_int64("n"), -2);
    cohort_error_t error;
    cr_assert(cohort_data_inc(&ctx, "n", 2, NULL, &error), "a NULL result: %s", error.message);
    cr_assert_eq(db_int64("n"), 0);

    /* an int32 (written by cohort_set or by hand) is an integer too; it becomes an int64 */
    bson_value_t small = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 40};
    cr_assert(cohort_set(&ctx, "i32", &small, &error), "%s", error.message);
    cr_assert_eq(inc(&ctx, "i32", 2), 42);
    cr_assert_eq(db_int64("i32"), 42);
}

Test(generic_data, inc_on_a_value_that_is_not_an_integer_fails_and_changes_nothing)
{
    test_node_t *a = make_node(0, "node-a");
    cohort_ctx_t ctx = context(a, false);
    static const struct {
        const char *key, *json, *part;
    } cases[] = {
        {"double", "{\"v\": {\"$numberDouble\": \"2.5\"}}", "is a double, not an integer"},
        {"whole_double", "{\"v\": {\"$numberDouble\": \"3.0\"}}", "is a double"},
        {"string", "{\"v\": \"7\"}", "is a string"},
        {"document", "{\"v\": {\"n\": 1}}", "is a document"},
        {"array", "{\"v\": [1]}", "is an array"},
    };
    cohort_error_t error;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bson_value_t v = json_value(cases[i].json);
        cr_assert(cohort_set(&ctx, cases[i].key, &v, &error), "%s", error.message);
        assert_inc_refused(&ctx, cases[i].key, 1, cases[i].part);
        bson_value_t stored;
        cr_assert(db_data(cases[i].key, &stored));
        cr_assert(values_equal(&v, &stored), "a refused inc changed data.%s", cases[i].key);
        bson_value_destroy(&stored);
        bson_value_destroy(&v);
    }
    /* a sum past the int64 range is refused rather than wrapped */
    set_int64(&ctx, "big", INT64_MAX - 1);
    assert_inc_refused(&ctx, "big", 2, "overflow");
    set_int64(&ctx, "low", INT64_MIN + 1);
    assert_inc_refused(&ctx, "low", -2, "overflow");
    cr_assert_eq(db_int64("big"), INT64_MAX - 1);
    cr_assert_eq(inc(&ctx, "big", 1), INT64_MAX, "the last representable sum was refused");
    /* invalid keys, like cohort_set */
    cr_assert_not(cohort_data_inc(&ctx, "a.b", 1, NULL, &error));
    cr_assert_eq(error.code, COHORT_ERROR_INVALID);
    cr_assert_not(cohort_data_cas(&ctx, "$x", NULL, NULL, &error));
    cr_assert_eq(error.code, COHORT_ERROR_INVALID);
}

/* cohort_data_cas(key, expected, value): the result, with the code it left in error. */
static bool cas(cohort_ctx_t *ctx, const char *key, const char *expected_json,
                const char *value_json, cohort_error_code_t *code)
{
    bson_value_t expected, value;
    if (expected_json)
        expected = json_value(expected_json);
    if (value_json)
        value = json_value(value_json);
    cohort_error_t error = {.code = -1};
    bool done = cohort_data_cas(ctx, key, expected_json ? &expected : NULL,
                                value_json ? &value : NULL, &error);
    *code = error.code;
    if (expected_json)
        bson_value_destroy(&expected);
    if (value_json)
        bson_value_destroy(&value);
    return done;
}

static void assert_stored(const char *key, const char *json)
{
    bson_value_t want = json_value(json), got;
    cr_assert(db_data(key, &got), "data.%s is missing", key);
    char *got_json = value_json(&got);
    cr_assert(values_equal(&want, &got), "data.%s is %s, want %s", key, got_json, json);
    bson_free(got_json);
    bson_value_destroy(&got);
    bson_value_destroy(&want);
}

Test(generic_data, cas_sets_only_when_the_value_is_the_expected_one)
{
    test_node_t *a = make_node(0, "node-a");
    cohort_ctx_t ctx = context(a, false);
    cohort_error_code_t code;
    /* expected NULL: only if absent */
    cr_assert(cas(&ctx, "k", NULL, "{\"v\": \"first\"}", &code), "code %d", code);
    assert_stored("k", "{\"v\": \"first\"}");
    cr_assert_not(cas(&ctx, "k", NULL, "{\"v\": \"second\"}", &code), "set over a present key");
    cr_assert_eq(code, COHORT_OK, "a differing value is not an error");
    assert_stored("k", "{\"v\": \"first\"}");
    /* a null expected value is "absent" too */
    cr_assert_not(cas(&ctx, "k", "{\"v\": null}", "{\"v\": 1}", &code));
    cr_assert_eq(code, COHORT_OK);
    /* expected == stored: set; else not */
    cr_assert_not(cas(&ctx, "k", "{\"v\": \"other\"}", "{\"v\": 2}", &code));
    cr_assert_eq(code, COHORT_OK);
    assert_stored("k", "{\"v\": \"first\"}");
    cr_assert(cas(&ctx, "k", "{\"v\": \"first\"}", "{\"v\": {\"$numberInt\": \"7\"}}", &code),
              "code %d", code);
    assert_stored("k", "{\"v\": {\"$numberInt\": \"7\"}}");
    /* numbers compare by value whatever their type */
    cr_assert(cas(&ctx, "k", "{\"v\": {\"$numberLong\": \"7\"}}", "{\"v\": [1, 2]}", &code),
              "code %d", code);
    /* whole values: an array is not equal to one of its elements */
    cr_assert_not(cas(&ctx, "k", "{\"v\": 1}", "{\"v\": 3}", &code));
    cr_assert_eq(code, COHORT_OK);
    cr_assert(cas(&ctx, "k", "{\"v\": [1, 2]}", "{\"v\": {\"$x\": 1}}", &code), "code %d", code);
    /* a document with $-keys is a value, not an expression; NULL value removes */
    cr_assert(cas(&ctx, "k", "{\"v\": {\"$x\": 1}}", NULL, &code), "code %d", code);
    cr_assert_not(db_has("k"), "a cas to NULL did not remove the key");
    cr_assert(cas(&ctx, "k", NULL, "{\"v\": 1}", &code), "absent again: code %d", code);
}

/* What the atomic calls answer inside on_tasks_completed. */
typedef struct in_callback {
    int inc_code, cas_code;
    char inc_message[256];
} in_callback_t;

static bool atomic_calls_in_the_callback(cohort_ctx_t *ctx, cohort_batch_t *batch, void *arg)
{
    (void)batch;
    in_callback_t *c = arg;
    cohort_error_t error;
    c->inc_code = cohort_data_inc(ctx, "n", 1, NULL, &error) ? COHORT_OK : (int)error.code;
    snprintf(c->inc_message, sizeof c->inc_message, "%s", error.message);
    c->cas_code = cohort_data_cas(ctx, "n", NULL, NULL, &error) ? COHORT_OK : (int)error.code;
    return true;
}

Test(generic_data, inc_and_cas_are_fenced_in_primary_work_and_refused_in_the_callback)
{
    test_node_t *a = make_node(0, "node-a");
    tick(a);
    cr_assert_eq(cohort_election_epoch(&a->service->election), 1);
    cohort_ctx_t fenced = context(a, true);
    cr_assert_eq(inc(&fenced, "n", 1), 1, "a primary's fenced inc failed");
    cohort_error_code_t code;
    cr_assert(cas(&fenced, "c", NULL, "{\"v\": 1}", &code), "a primary's fenced cas: %d", code);

    /* on_tasks_completed: refused, nothing written */
    in_callback_t c = {-1, -1, ""};
    ((probe_set_completed_hook_fn)test_probe_symbol(&fx, "probe_set_completed_hook"))(
        atomic_calls_in_the_callback, &c);
    drain_a_batch(a, 1);
    tick(a);
    cr_assert_eq(fx.record->calls, 1);
    cr_assert_eq(c.inc_code, COHORT_ERROR_INVALID, "inc in the callback: code %d", c.inc_code);
    cr_assert(strstr(c.inc_message, "on_tasks_completed"), "message: %s", c.inc_message);
    cr_assert_eq(c.cas_code, COHORT_ERROR_INVALID, "cas in the callback: code %d", c.cas_code);
    cr_assert_eq(db_int64("n"), 1, "a refused inc in the callback was applied");

    take_over_behind_its_back(&fenced);
    cohort_error_t error;
    cr_assert_not(cohort_data_inc(&fenced, "n", 1, NULL, &error), "a deposed primary's inc");
    cr_assert_eq(error.code, COHORT_ERROR_NOT_PRIMARY, "code %d: %s", error.code, error.message);
    cr_assert_not(cas(&fenced, "c", "{\"v\": 1}", "{\"v\": 2}", &code));
    cr_assert_eq(code, COHORT_ERROR_NOT_PRIMARY, "a deposed primary's cas: code %d", code);
    cr_assert_eq(db_int64("n"), 1, "a deposed primary's inc was applied");
    assert_stored("c", "{\"v\": 1}");
}

/* ---- counting from tasks on two nodes ----------------------------------------------------- */

#define COUNTED_TASKS 240

/* Node i with its worker threads running, so tasks run concurrently on both nodes. */
static test_node_t *start_workers(size_t i, const char *node_id)
{
    test_node_t *n = make_node(i, node_id);
    n->config.workers = 4;
    bson_error_t err;
    cr_assert(cohort_service_start(n->service, &err), "cannot start %s: %s", node_id,
              err.message);
    return n;
}

static int64_t count_tasks(const char *filter)
{
    return test_count(fx.client, fx.db, QUEUE, filter);
}

/* Creates `n` untracked tasks with `data_json` and ticks both nodes until none is pending
 * or claimed, failing only if no task finished for 30 s. */
static void run_tasks(test_node_t *a, test_node_t *b, const char *data_json, int n)
{
    cohort_ctx_t ctx = context(a, false);
    bson_error_t json_error;
    bson_t *data = bson_new_from_json((const uint8_t *)data_json, -1, &json_error);
    bson_t *opts = BCON_NEW("tracked", BCON_BOOL(false));
    for (int i = 0; i < n; i++) {
        cohort_error_t error;
        cr_assert(cohort_task_create(&ctx, data, opts, NULL, &error), "%s", error.message);
    }
    bson_destroy(opts);
    bson_destroy(data);
    const char *unfinished = "{\"status\": {\"$in\": [\"pending\", \"claimed\"]}}";
    int64_t left = count_tasks(unfinished), last_progress = test_now_ms();
    while (left > 0) {
        cr_assert_lt(test_now_ms() - last_progress, 30000,
                     "no task finished for 30 s (%lld left)", (long long)left);
        tick(a);
        tick(b);
        test_sleep_ms(20);
        int64_t now_left = count_tasks(unfinished);
        if (now_left < left)
            last_progress = test_now_ms();
        left = now_left;
    }
}

Test(generic_data, inc_from_tasks_on_two_nodes_counts_every_success_exactly, .timeout = 240)
{
    test_node_t *a = start_workers(0, "node-a");
    test_node_t *b = start_workers(1, "node-b");
    run_tasks(a, b, "{\"inc\": \"counted\"}", COUNTED_TASKS);
    int64_t succeeded = count_tasks("{\"status\": \"succeeded\"}");
    cr_assert_eq(succeeded, COUNTED_TASKS, "only %lld of %d tasks succeeded",
                 (long long)succeeded, COUNTED_TASKS);
    cr_assert_eq(db_int64("counted"), succeeded, "inc counted %lld for %lld successes",
                 (long long)db_int64("counted"), (long long)succeeded);
    int64_t ran_on_b = count_tasks("{\"status\": \"succeeded\", \"claimed_by\": \"node-b\"}");
    cr_log_info("node-b ran %lld of the %d tasks", (long long)ran_on_b, COUNTED_TASKS);

    /* The same count by cohort_get + cohort_set is last-writer-wins: never more than the
     * successes, and not required to be exact (on a busy machine it often is not). */
    run_tasks(a, b, "{\"getset\": \"racy\"}", COUNTED_TASKS);
    bson_value_t racy;
    cr_assert(db_data("racy", &racy), "the get+set tasks counted nothing");
    cr_assert_leq(racy.value.v_int64, COUNTED_TASKS);
    cr_log_info("get+set counted %lld of %d successes", (long long)racy.value.v_int64,
                COUNTED_TASKS);
}
