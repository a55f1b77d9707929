/*
 * ctl.c - cohortctl end to end against the local database: enqueue (one task, many, with
 * data, tracked), its input errors, `status --json` (a stable machine-readable shape with
 * the right numbers), and a clear, quick failure when the database cannot be reached.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "support.h"
#include "core/clock.h"
#include "store/nodes.h"
#include "store/primacy.h"
#include "store/services.h"
#include "store/store.h"

#define UNREACHABLE "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300&connectTimeoutMS=300"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    db = test_db_name("ctl");
    store = test_store_new(db);
    client = cohort_store_pop(store);
    test_sync_clock(store, client, 1000);
}

static void teardown(void)
{
    if (store) {
        cohort_store_push(store, client);
        cohort_store_destroy(store);
        test_drop_db(db);
    }
    free(db);
}

TestSuite(ctl, .init = setup, .fini = teardown, .timeout = 30);

#define ctl(...) test_ctl(db, __VA_ARGS__)

static int64_t count(const char *filter)
{
    return test_count(client, db, "queue_mail", filter);
}

/* The service "mail" as a node makes it: enqueue refuses a service no node has run. */
static void create_mail(void)
{
    bson_error_t error;
    cr_assert(test_ensure_service(store, client, "mail", &error), "%s", error.message);
}

Test(ctl, enqueue_many_tracked_with_data)
{
    create_mail();
    test_run_result_t r =
        ctl("enqueue", "mail", "--count", "25", "--tracked", "--data", "{\"k\": 1}");
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    cr_assert_str_eq(r.out, "25\n");
    cr_assert_eq(count("{}"), 25);
    cr_assert_eq(count("{\"status\": \"pending\", \"tracked\": true, \"data\": {\"k\": 1}, "
                       "\"attempts\": 0, \"created_by\": \"cohortctl\"}"),
                 25);
    /* due now on the server's clock, so a node claims them at once */
    int64_t server_now;
    bson_error_t error;
    cr_assert(cohort_store_server_time(store, client, &server_now, &error), "%s", error.message);
    char filter[128];
    snprintf(filter, sizeof filter, "{\"run_at\": {\"$lte\": {\"$date\": %lld}}}",
             (long long)server_now);
    cr_assert_eq(count(filter), 25, "tasks enqueued by cohortctl are not due yet");
    test_run_result_free(&r);
}

Test(ctl, enqueue_one_prints_its_id)
{
    create_mail();
    test_run_result_t r = ctl("enqueue", "mail");
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    cr_assert_eq(strlen(r.out), 25, "want 24 hex digits and a newline: '%s'", r.out);
    cr_assert_eq(r.out[24], '\n');
    r.out[24] = '\0';
    cr_assert(bson_oid_is_valid(r.out, 24), "'%s' is not an ObjectId", r.out);
    cr_assert_eq(strspn(r.out, "0123456789abcdef"), 24, "'%s' is not lower-case hex", r.out);
    char filter[160];
    snprintf(filter, sizeof filter,
             "{\"_id\": {\"$oid\": \"%s\"}, \"tracked\": false, \"data\": {}, "
             "\"status\": \"pending\"}",
             r.out);
    cr_assert_eq(count(filter), 1, "the printed id is not an untracked empty task");
    cr_assert_eq(count("{}"), 1);
    test_run_result_free(&r);
}

Test(ctl, enqueue_rejects_bad_data_and_inserts_nothing)
{
    test_run_result_t r = ctl("enqueue", "mail", "--data", "{k: 1");
    cr_assert_eq(r.exit_code, 2, "exit %d", r.exit_code);
    cr_assert_not_null(strstr(r.err, "--data is not a JSON object"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    test_run_result_free(&r);

    r = ctl("enqueue", "mail", "--data", "\"text\"");
    cr_assert_eq(r.exit_code, 2, "a string is not a document");
    test_run_result_free(&r);

    cr_assert_eq(count("{}"), 0, "a refused enqueue inserted tasks");
}

/* What the database would mishandle (issue 23): an integer past int64 (libbson stored
 * 2^64 + 5 as 5), a repeated key (the local server drops the connection), an empty key, text
 * after the object. Each refused with the field named, nothing inserted. */
Test(ctl, enqueue_refuses_data_the_database_would_mishandle)
{
    create_mail();
    static const struct {
        const char *data, *message;
    } cases[] = {
        {"{\"n\": 18446744073709551621}", "field 'n': 18446744073709551621 is outside"},
        {"{\"a\": {\"b\": [9223372036854775808]}}", "field 'a.b[0]'"},
        {"{\"k\": 1, \"k\": 2}", "field 'k' given twice"},
        {"{\"x\": {\"\": 1}}", "a key is empty"},
        {"{\"k\": 1} {\"k\": 2}", "something follows it"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_run_result_t r = ctl("enqueue", "mail", "--data", cases[i].data);
        cr_assert_eq(r.exit_code, 2, "--data %s: exit %d: %s", cases[i].data, r.exit_code, r.err);
        cr_assert(strstr(r.err, cases[i].message), "--data %s: %s", cases[i].data, r.err);
        test_run_result_free(&r);
    }
    cr_assert_eq(count("{}"), 0, "a refused enqueue inserted tasks");
}

Test(ctl, enqueue_rejects_array_data)
{
    /* libbson parses a top-level array into {"0": .., "1": ..}; task data must be an object */
    test_run_result_t r = ctl("enqueue", "mail", "--data", "[1, 2]");
    cr_expect_eq(r.exit_code, 2, "--data '[1, 2]' was accepted (exit %d, stdout %s)", r.exit_code,
                 r.out);
    cr_expect_eq(count("{}"), 0, "an array became a task's data");
    test_run_result_free(&r);
}

Test(ctl, enqueue_usage_errors)
{
    static const char *const bad[][6] = {
        {"enqueue", NULL},                           /* no service */
        {"enqueue", "bad name!", NULL},              /* invalid service name */
        {"enqueue", "mail", "--count", "0", NULL},   /* count out of range */
        {"enqueue", "mail", "--count", "ten", NULL}, /* not a number */
        {"enqueue", "mail", "--frobnicate", NULL},   /* unknown flag */
        {"frobnicate", NULL},                        /* unknown command */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[8] = {0};
        for (size_t j = 0; bad[i][j]; j++)
            args[j] = bad[i][j];
        test_run_result_t r = test_ctl_run(db, NULL, args);
        cr_assert_eq(r.exit_code, 2, "case %zu (%s %s): exit %d", i, bad[i][0],
                     bad[i][1] ? bad[i][1] : "", r.exit_code);
        cr_assert_neq(r.err[0], '\0', "case %zu: no message", i);
        test_run_result_free(&r);
    }
    cr_assert_eq(count("{}"), 0);
}

/* ---- status --json --------------------------------------------------------------------- */

/* Asserts that doc has exactly the NULL-terminated keys, in any order. */
static void assert_keys(const bson_t *doc, const char *what, const char *const keys[])
{
    size_t want = 0;
    while (keys[want])
        want++;
    bson_iter_t it;
    cr_assert(bson_iter_init(&it, doc));
    size_t got = 0;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        bool known = false;
        for (size_t i = 0; keys[i] && !known; i++)
            known = strcmp(key, keys[i]) == 0;
        cr_assert(known, "%s has an unexpected key '%s'", what, key);
        got++;
    }
    cr_assert_eq(got, want, "%s has %zu keys, want %zu", what, got, want);
}

static void sub_document(bson_iter_t *it, bson_t *out)
{
    uint32_t len;
    const uint8_t *data;
    cr_assert(BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it), "'%s' is not a document",
              bson_iter_key(it));
    if (BSON_ITER_HOLDS_DOCUMENT(it))
        bson_iter_document(it, &len, &data);
    else
        bson_iter_array(it, &len, &data);
    cr_assert(bson_init_static(out, data, len));
}

static int64_t number(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, doc, key), "no '%s'", key);
    cr_assert(BSON_ITER_HOLDS_NUMBER(&it), "'%s' is not a number", key);
    return bson_iter_as_int64(&it);
}

static void set_status(int n, const char *status)
{
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, "queue_mail");
    for (int i = 0; i < n; i++) {
        bson_t *filter = BCON_NEW("status", BCON_UTF8("pending"));
        bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8(status), "}");
        bson_error_t error;
        cr_assert(mongoc_collection_update_one(coll, filter, update, NULL, NULL, &error), "%s",
                  error.message);
        bson_destroy(update);
        bson_destroy(filter);
    }
    mongoc_collection_destroy(coll);
}

Test(ctl, status_json_has_a_stable_shape)
{
    bson_error_t error;
    /* "mail": primary node-7 in epoch 1, 10 tasks in every state; "idle": no primary, no tasks */
    cr_assert(test_ensure_service(store, client, "mail", &error), "%s", error.message);
    cr_assert(test_ensure_service(store, client, "idle", &error), "%s", error.message);
    cohort_takeover_t t;
    cr_assert(cohort_store_take_lease(store, client, "mail", "node-7", 0, -1, 0, &t, &error), "%s",
              error.message);
    cr_assert(t.taken);
    test_run_result_t r = ctl("enqueue", "mail", "--count", "10");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    test_run_result_free(&r);
    set_status(1, "claimed");
    set_status(2, "succeeded");
    set_status(3, "failed");

    r = ctl("status", "--json");
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    bson_t *out = bson_new_from_json((const uint8_t *)r.out, -1, &error);
    cr_assert_not_null(out, "status --json is not JSON (%s):\n%s", error.message, r.out);
    assert_keys(out, "the top level", (const char *const[]){"services", NULL});

    bson_iter_t it, entry;
    cr_assert(bson_iter_init_find(&it, out, "services") && BSON_ITER_HOLDS_ARRAY(&it),
              "'services' is not an array: %s", r.out);
    bson_t services;
    sub_document(&it, &services);
    cr_assert(bson_iter_init(&entry, &services));
    int seen = 0;
    while (bson_iter_next(&entry)) {
        bson_t svc, counts;
        sub_document(&entry, &svc);
        assert_keys(&svc, "a service",
                    (const char *const[]){"name", "service_document", "primary", "counts",
                                          "counts_as_of", "counts_age_ms", "paused", "blocked",
                                          "settings_problems", NULL});
        bson_iter_t f;
        cr_assert(bson_iter_init_find(&f, &svc, "name") && BSON_ITER_HOLDS_UTF8(&f));
        const char *name = bson_iter_utf8(&f, NULL);
        cr_assert(bson_iter_init_find(&f, &svc, "counts"));
        sub_document(&f, &counts);
        assert_keys(&counts, "counts",
                    (const char *const[]){"pending", "claimed", "succeeded", "failed", "timed_out",
                                          "cancelled", NULL});
        cr_assert(bson_iter_init_find(&f, &svc, "primary"));
        if (strcmp(name, "mail") == 0) {
            bson_t primary;
            sub_document(&f, &primary);
            assert_keys(&primary, "primary",
                        (const char *const[]){"node_id", "epoch", "last_active_ms_ago", NULL});
            bson_iter_t p;
            cr_assert(bson_iter_init_find(&p, &primary, "node_id") && BSON_ITER_HOLDS_UTF8(&p));
            cr_assert_str_eq(bson_iter_utf8(&p, NULL), "node-7");
            cr_assert_eq(number(&primary, "epoch"), 1);
            int64_t ago = number(&primary, "last_active_ms_ago");
            cr_assert(ago >= 0 && ago < 20000, "last_active_ms_ago = %lld", (long long)ago);
            cr_assert_eq(number(&counts, "pending"), 4);
            cr_assert_eq(number(&counts, "claimed"), 1);
            cr_assert_eq(number(&counts, "succeeded"), 2);
            cr_assert_eq(number(&counts, "failed"), 3);
        } else {
            cr_assert_str_eq(name, "idle", "unexpected service '%s'", name);
            cr_assert(BSON_ITER_HOLDS_NULL(&f), "a service without primary must say null");
            cr_assert_eq(number(&counts, "pending"), 0);
            cr_assert_eq(number(&counts, "claimed"), 0);
            cr_assert_eq(number(&counts, "succeeded"), 0);
            cr_assert_eq(number(&counts, "failed"), 0);
        }
        seen++;
    }
    cr_assert_eq(seen, 2, "status lists %d services, want 2:\n%s", seen, r.out);
    bson_destroy(out);
    test_run_result_free(&r);
}

Test(ctl, status_json_of_an_empty_database)
{
    test_run_result_t r = ctl("status", "--json");
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    bson_error_t error;
    bson_t *out = bson_new_from_json((const uint8_t *)r.out, -1, &error);
    cr_assert_not_null(out, "not JSON (%s): %s", error.message, r.out);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, out, "services") && BSON_ITER_HOLDS_ARRAY(&it), "%s", r.out);
    bson_t services;
    sub_document(&it, &services);
    cr_assert(bson_empty(&services), "services listed in an empty database: %s", r.out);
    bson_destroy(out);
    test_run_result_free(&r);
}

Test(ctl, status_text_lists_the_services)
{
    bson_error_t error;
    cr_assert(test_ensure_service(store, client, "mail", &error), "%s", error.message);
    test_run_result_t r = ctl("status");
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.out, "SERVICE"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "mail"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "(none)"), "%s", r.out);
    test_run_result_free(&r);
}

/* ---- an unreachable database ---------------------------------------------------------- */

Test(ctl, unreachable_database_fails_quickly_and_clearly)
{
    static const char *const env[] = {"MONGODB_URI=" UNREACHABLE, NULL};
    static const char *const commands[][4] = {
        {"status", NULL},
        {"status", "--json", NULL},
        {"enqueue", "mail", NULL},
        {"enqueue", "mail", "--count", "5"},
        {"counts", "mail", "--by", "kind"},
        {"tasks", "mail", NULL},
        {"pause", "mail", NULL},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        const char *args[6] = {0};
        for (size_t j = 0; j < 4 && commands[i][j]; j++)
            args[j] = commands[i][j];
        test_run_result_t r = test_ctl_run(db, env, args);
        cr_assert_neq(r.exit_code, 0, "cohortctl %s succeeded without a database", commands[i][0]);
        cr_assert_not_null(strstr(r.err, "cannot reach the database"),
                           "cohortctl %s: unclear message: %s", commands[i][0], r.err);
        cr_assert_lt(r.elapsed_ms, 5000, "cohortctl %s took %lld ms to give up", commands[i][0],
                     (long long)r.elapsed_ms);
        /* stdout is for results only (scripts read ids and JSON from it): diagnostics,
         * libmongoc's included, belong on stderr */
        cr_expect_str_eq(r.out, "", "cohortctl %s wrote to stdout on failure:\n%s", commands[i][0],
                         r.out);
        test_run_result_free(&r);
    }
}

Test(ctl, invalid_uri_is_reported)
{
    static const char *const env[] = {"MONGODB_URI=not-a-uri", NULL};
    test_run_result_t r = test_ctl_run(db, env, (const char *const[]){"status", NULL});
    cr_assert_neq(r.exit_code, 0);
    cr_assert_not_null(strstr(r.err, "URI"), "%s", r.err);
    test_run_result_free(&r);
}
