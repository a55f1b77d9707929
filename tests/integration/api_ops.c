/*
 * api_ops.c - the operators' endpoints of the HTTP API v1 against the local database, called
 * in-process through cohort_api_handle(): retry, cancel and delete of one task (200, 404 for
 * an unknown task, 409 naming the status the action does not take, 400 for a bad id or a
 * body), tasks:bulk (dry_run counts what the real run then changes, 0 matches, the limit
 * and `more`, each bad field named, 409 for a status the action does not take), and the live
 * settings (GET, PATCH/POST with the rules of `cohortctl settings`). Every endpoint's 401,
 * 403 and 405. The listener's limits (413, connections, slow clients) are in
 * integration/api_http.c.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "api_server.h"
#include "support.h"
#include "core/token.h"
#include "node/http/api.h"
#include "store/store.h"

#define SERVICE "web"
#define QUEUE "queue_" SERVICE
#define API "/api/v1/services/" SERVICE
#define TASKS API "/tasks"

static test_api_fixture_t fx;
static char tok_read[COHORT_TOKEN_TEXT_MAX], tok_ops[COHORT_TOKEN_TEXT_MAX];
static char tok_enqueue[COHORT_TOKEN_TEXT_MAX];

static void setup(void)
{
    test_api_fixture_open(&fx, &(test_api_setup_t){.prefix = "apiops", .service = SERVICE});
    test_api_token(fx.store, fx.client, "reader", "read", tok_read);
    test_api_token(fx.store, fx.client, "ops", "operate,enqueue", tok_ops);
    test_api_token(fx.store, fx.client, "producer", "enqueue", tok_enqueue);
}

static void teardown(void)
{
    test_api_fixture_close(&fx);
}

TestSuite(api_ops, .init = setup, .fini = teardown, .timeout = 120);

/* One request; `token` NULL sends no Authorization header. */
static test_api_answer_t call(const char *token, const char *method, const char *path,
                              const char *body)
{
    return test_api_call(&fx, token, method, path, body, NULL);
}

/* Asserts the status and, for an error, its code and a part of its message; frees it. */
static void expect(test_api_answer_t a, int status, const char *code, const char *part,
                   const char *what)
{
    test_api_expect(a, status, code, part, what);
}

/* Creates a task through the API (with `fields` added to its body); its id in id[25]. */
static void enqueue(char id[25], const char *fields)
{
    char body[256];
    snprintf(body, sizeof body, "{\"data\": {}%s%s}", fields ? ", " : "", fields ? fields : "");
    test_api_answer_t a = call(tok_ops, "POST", TASKS, body);
    cr_assert_eq(a.status, 201, "%s", a.json);
    snprintf(id, 25, "%s", test_doc_str(a.body, "id"));
    test_api_answer_free(&a);
}

/* $set on every task `filter_json` matches, as a node would write it. */
static void set_fields(const char *filter_json, const char *set_json)
{
    bson_error_t error;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &error);
    cr_assert_not_null(filter, "%s", error.message);
    bson_t *set = bson_new_from_json((const uint8_t *)set_json, -1, &error);
    cr_assert_not_null(set, "%s", error.message);
    bson_t *update = BCON_NEW("$set", BCON_DOCUMENT(set));
    mongoc_collection_t *coll = mongoc_client_get_collection(fx.client, fx.db, QUEUE);
    cr_assert(mongoc_collection_update_many(coll, filter, update, NULL, NULL, &error), "%s",
              error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(update);
    bson_destroy(set);
    bson_destroy(filter);
}

static void set_status(const char *id, const char *status)
{
    char filter[96], set[160];
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%s\"}}", id);
    snprintf(set, sizeof set, "{\"status\": \"%s\", \"finished_at\": {\"$date\": 1000}}", status);
    set_fields(filter, set);
}

static int64_t count(const char *filter)
{
    return test_count(fx.client, fx.db, QUEUE, filter);
}

static int64_t count_status(const char *status)
{
    char filter[64];
    snprintf(filter, sizeof filter, "{\"status\": \"%s\"}", status);
    return count(filter);
}

/* The task as stored; false if it is gone. */
static bool read_task(const char *id, bson_t *doc)
{
    char filter[96];
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%s\"}}", id);
    return test_find_one(fx.client, fx.db, QUEUE, filter, doc);
}

static void assert_status(const char *id, const char *want)
{
    bson_t doc;
    cr_assert(read_task(id, &doc), "task %s is gone", id);
    const char *status = test_doc_str(&doc, "status");
    cr_assert(status && strcmp(status, want) == 0, "task %s is %s, want %s", id, status, want);
    bson_destroy(&doc);
}

static void task_path(char *out, size_t len, const char *id, const char *action)
{
    snprintf(out, len, TASKS "/%s%s%s", id, action ? "/" : "", action ? action : "");
}

/* ---- one task ----------------------------------------------------------------------------- */

Test(api_ops, retry_a_failed_task_records_the_token)
{
    char id[25], path[160];
    enqueue(id, NULL);
    set_fields("{}", "{\"status\": \"failed\", \"attempts\": 5, \"finished_at\": {\"$date\": "
                     "1000}, \"last_error\": \"smtp down\"}");
    task_path(path, sizeof path, id, "retry");
    test_api_answer_t a = call(tok_ops, "POST", path, NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_str_eq(test_doc_str(a.body, "action"), "retry");
    cr_assert_eq(test_doc_int(a.body, "changed"), 1);
    test_api_answer_free(&a);
    bson_t doc;
    cr_assert(read_task(id, &doc));
    cr_assert_str_eq(test_doc_str(&doc, "status"), "pending");
    cr_assert_eq(test_doc_int(&doc, "attempts"), 0);
    cr_assert_str_eq(test_doc_str(&doc, "history.0.event"), "retried");
    cr_assert_str_eq(test_doc_str(&doc, "history.0.by"), "api token ops");
    cr_assert_str_eq(test_doc_str(&doc, "history.0.from"), "failed");
    bson_destroy(&doc);
    /* GET shows who did it */
    task_path(path, sizeof path, id, NULL);
    a = call(tok_read, "GET", path, NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_str_eq(test_doc_str(a.body, "history.0.event"), "retried");
    cr_assert_str_eq(test_doc_str(a.body, "history.0.by"), "api token ops");
    const char *at = test_doc_str(a.body, "history.0.at");
    cr_assert(at && strchr(at, 'T'), "not an ISO-8601 time: %s", a.json);
    test_api_answer_free(&a);
    task_path(path, sizeof path, id, "retry");

    /* Now pending: a retry does not apply, and the refusal names the status. */
    expect(call(tok_ops, "POST", path, NULL), 409, "conflict", "is pending", "retry pending");
    expect(call(tok_ops, "POST", path, "{}"), 409, "conflict", "is pending", "{} is no body");
    expect(call(tok_ops, "POST", path, "{\"force\": true}"), 400, "bad_request", "'force'",
           "a body field");
    expect(call(tok_ops, "POST", path, "{\"force\""), 400, "bad_request", "JSON", "malformed");
    assert_status(id, "pending");
}

Test(api_ops, cancel_pending_only)
{
    char pending[25], claimed[25], path[160];
    enqueue(pending, NULL);
    enqueue(claimed, NULL);
    set_status(claimed, "claimed");
    task_path(path, sizeof path, claimed, "cancel");
    /* A running task is not cancelled: its claimer is asked to stop (202). */
    expect(call(tok_ops, "POST", path, NULL), 202, NULL, NULL, "cancel claimed");
    assert_status(claimed, "claimed");
    task_path(path, sizeof path, pending, "cancel");
    expect(call(tok_ops, "POST", path, NULL), 200, NULL, NULL, "cancel pending");
    assert_status(pending, "cancelled");
    bson_t doc;
    cr_assert(read_task(pending, &doc));
    cr_assert_str_eq(test_doc_str(&doc, "last_error"), "cancelled by api token ops");
    bson_destroy(&doc);
    expect(call(tok_ops, "POST", path, NULL), 409, "conflict", "is cancelled", "cancel twice");
}

Test(api_ops, delete_final_tasks_only)
{
    char pending[25], claimed[25], done[25], path[160];
    enqueue(pending, NULL);
    enqueue(claimed, NULL);
    enqueue(done, NULL);
    set_status(claimed, "claimed");
    set_status(done, "succeeded");
    task_path(path, sizeof path, pending, NULL);
    expect(call(tok_ops, "DELETE", path, NULL), 409, "conflict", "is pending", "delete pending");
    task_path(path, sizeof path, claimed, NULL);
    expect(call(tok_ops, "DELETE", path, NULL), 409, "conflict", "is claimed", "delete claimed");
    cr_assert_eq(count("{}"), 3);
    task_path(path, sizeof path, done, NULL);
    expect(call(tok_ops, "DELETE", path, NULL), 200, NULL, NULL, "delete succeeded");
    cr_assert_eq(count("{}"), 2);
    expect(call(tok_ops, "DELETE", path, NULL), 404, "not_found", done, "delete twice");
    expect(call(tok_read, "GET", path, NULL), 404, "not_found", NULL, "read it");
}

Test(api_ops, one_task_refusals)
{
    char id[25], path[160];
    enqueue(id, NULL);
    set_status(id, "failed");
    task_path(path, sizeof path, id, "retry");
    expect(call(NULL, "POST", path, NULL), 401, "unauthorized", NULL, "no token");
    expect(call(tok_read, "POST", path, NULL), 403, "forbidden", "operate", "read token");
    expect(call(tok_enqueue, "POST", path, NULL), 403, "forbidden", "operate", "enqueue token");
    expect(call(tok_ops, "GET", path, NULL), 405, "method_not_allowed", NULL, "GET retry");
    task_path(path, sizeof path, id, NULL);
    expect(call(tok_read, "DELETE", path, NULL), 403, "forbidden", NULL, "read deletes");
    expect(call(tok_ops, "PUT", path, NULL), 405, "method_not_allowed", NULL, "PUT task");
    expect(call(tok_ops, "POST", TASKS "/0123456789abcdef01234567/retry", NULL), 404,
           "not_found", "0123456789abcdef01234567", "unknown task");
    expect(call(tok_ops, "POST", TASKS "/0123456789abcdef0123456/retry", NULL), 400,
           "bad_request", "24 hex", "short id");
    expect(call(tok_ops, "POST", TASKS "/%2e%2e/cancel", NULL), 400, "bad_request", NULL, "..");
    expect(call(tok_ops, "POST", TASKS "/0123456789abcdef01234567/rerun", NULL), 404,
           "not_found", NULL, "unknown action");
    expect(call(tok_ops, "DELETE", "/api/v1/services/nope/tasks/0123456789abcdef01234567",
                NULL),
           404, "not_found", "nope", "unknown service");
    assert_status(id, "failed");
}

/* ---- tasks:bulk --------------------------------------------------------------------------- */

#define BULK API "/tasks:bulk"

Test(api_ops, bulk_dry_run_counts_what_the_real_run_changes)
{
    char id[25];
    for (int i = 0; i < 6; i++)
        enqueue(id, i < 4 ? "\"kind\": \"mail\"" : "\"kind\": \"sms\"");
    set_fields("{}", "{\"status\": \"failed\", \"finished_at\": {\"$date\": 1000}}");
    const char *body = "{\"action\": \"retry\", \"filter\": {\"status\": \"failed\", \"kind\": "
                       "\"mail\"}, \"dry_run\": true}";
    test_api_answer_t a = call(tok_ops, "POST", BULK, body);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_str_eq(test_doc_str(a.body, "action"), "retry");
    int64_t matched = test_doc_int(a.body, "matched");
    cr_assert_eq(matched, 4, "%s", a.json);
    cr_assert_not(test_doc_has(a.body, "changed"));
    test_api_answer_free(&a);
    cr_assert_eq(count_status("failed"), 6, "a dry run changed something");

    a = call(tok_ops, "POST", BULK,
             "{\"action\": \"retry\", \"filter\": {\"status\": \"failed\", \"kind\": "
             "\"mail\"}}");
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "changed"), matched, "%s", a.json);
    cr_assert_eq(
        test_count(fx.client, fx.db, QUEUE, "{\"status\": \"pending\", \"kind\": \"mail\"}"),
        matched);
    cr_assert_eq(test_count(fx.client, fx.db, QUEUE,
                            "{\"history.by\": \"api token ops\", \"kind\": \"mail\"}"),
                 matched);
    test_api_answer_free(&a);

    /* Nothing left to match: 0, not an error. */
    a = call(tok_ops, "POST", BULK,
             "{\"action\": \"retry\", \"filter\": {\"status\": \"failed\", \"kind\": "
             "\"mail\"}}");
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "changed"), 0, "%s", a.json);
    test_api_answer_free(&a);

    /* A limit, then `more` until the selection is done; older_than_ms on finished_at. */
    a = call(tok_ops, "POST", BULK,
             "{\"action\": \"delete\", \"filter\": {\"status\": \"failed\", \"older_than_ms\": "
             "60000}, \"limit\": 1}");
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "changed"), 1, "%s", a.json);
    cr_assert(strstr(a.json, "\"more\" : true"), "%s", a.json);
    test_api_answer_free(&a);
    a = call(tok_ops, "POST", BULK,
             "{\"action\": \"delete\", \"filter\": {\"status\": \"failed\"}, \"limit\": 10}");
    cr_assert_eq(test_doc_int(a.body, "changed"), 1, "%s", a.json);
    cr_assert(strstr(a.json, "\"more\" : false"), "%s", a.json);
    test_api_answer_free(&a);
    cr_assert_eq(count("{}"), 4);

    /* cancel takes pending by default, given a filter */
    a = call(tok_ops, "POST", BULK, "{\"action\": \"cancel\", \"filter\": {\"kind\": \"mail\"}}");
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "changed"), 4, "%s", a.json);
    test_api_answer_free(&a);
    cr_assert_eq(count_status("cancelled"), 4);
}

Test(api_ops, bulk_bad_input_names_the_field_and_changes_nothing)
{
    char id[25];
    enqueue(id, NULL);
    set_status(id, "failed");
    static const struct {
        const char *body, *part;
    } bad[] = {
        {"{\"action\": \"retry\"", "JSON"},
        {"[1]", "object"},
        {"", "object"},
        {"{}", "'action'"},
        {"{\"action\": \"rerun\", \"filter\": {\"status\": \"failed\"}}", "'action'"},
        {"{\"action\": 1, \"filter\": {\"status\": \"failed\"}}", "'action'"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": \"failed\"}, \"x\": 1}", "'x'"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": \"failed\", \"y\": 1}}", "filter.y"},
        {"{\"action\": \"retry\", \"filter\": \"failed\"}", "'filter'"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": 3}}", "filter.status"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": \"broken\"}}", "filter.status"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": \"failed\", \"kind\": \"a b\"}}",
         "filter.kind"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": \"failed\", \"group\": 7}}",
         "filter.group"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": \"failed\", \"older_than_ms\": -5}}",
         "filter.older_than_ms"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": \"failed\", \"older_than_ms\": "
         "\"1h\"}}",
         "filter.older_than_ms"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": \"failed\"}, \"dry_run\": \"yes\"}",
         "'dry_run'"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": \"failed\"}, \"limit\": 0}", "'limit'"},
        {"{\"action\": \"retry\", \"filter\": {\"status\": \"failed\"}, \"limit\": 1.5}",
         "'limit'"},
        {"{\"action\": \"retry\", \"action\": \"retry\", \"filter\": {\"status\": \"failed\"}}",
         "twice"},
        {"{\"action\": \"retry\"}", "filter.status"},
        {"{\"action\": \"delete\", \"filter\": {\"kind\": \"mail\"}}", "filter.status"},
        {"{\"action\": \"cancel\"}", "which tasks"},
        {"{\"action\": \"cancel\", \"filter\": {}}", "which tasks"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect(call(tok_ops, "POST", BULK, bad[i].body), 400, "bad_request", bad[i].part,
               bad[i].body);
    /* A status the action does not take: 409 naming it, as cohortctl refuses it. */
    expect(call(tok_ops, "POST", BULK,
                "{\"action\": \"retry\", \"filter\": {\"status\": \"succeeded\"}}"),
           409, "conflict", "succeeded", "retry succeeded");
    expect(call(tok_ops, "POST", BULK,
                "{\"action\": \"delete\", \"filter\": {\"status\": \"pending\"}}"),
           409, "conflict", "pending", "delete pending");
    expect(call(tok_ops, "POST", BULK,
                "{\"action\": \"cancel\", \"filter\": {\"status\": \"claimed\"}}"),
           409, "conflict", "claimed", "cancel claimed");
    assert_status(id, "failed");

    const char *good = "{\"action\": \"retry\", \"filter\": {\"status\": \"failed\"}}";
    expect(call(NULL, "POST", BULK, good), 401, "unauthorized", NULL, "no token");
    expect(call(tok_read, "POST", BULK, good), 403, "forbidden", NULL, "read token");
    expect(call(tok_ops, "GET", BULK, NULL), 405, "method_not_allowed", NULL, "GET bulk");
    expect(call(tok_ops, "POST", "/api/v1/services/nope/tasks:bulk", good), 404, "not_found",
           "nope", "unknown service");
    assert_status(id, "failed");
}

/* ---- settings ------------------------------------------------------------------------------ */

#define SETTINGS API "/settings"

static bool db_setting(const char *key, int64_t *value)
{
    bson_t doc;
    test_read_service(fx.store, fx.client, SERVICE, &doc);
    char path[64];
    snprintf(path, sizeof path, "settings.%s", key);
    bool has = test_doc_has(&doc, path);
    if (has && value)
        *value = test_doc_int(&doc, path);
    bson_destroy(&doc);
    return has;
}

Test(api_ops, settings_read_and_change_with_cohortctl_rules)
{
    test_api_answer_t a = call(tok_read, "GET", SETTINGS, NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "settings.tick_ms"), 1000, "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "settings.takeover_ms"), 10000, "%s", a.json);
    cr_assert_str_eq(test_doc_str(a.body, "source.tick_ms"), "default");
    test_api_answer_free(&a);

    a = call(tok_ops, "PATCH", SETTINGS, "{\"tick_ms\": 500, \"stall_timeout_ms\": 60000}");
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "settings.tick_ms"), 500, "%s", a.json);
    cr_assert_str_eq(test_doc_str(a.body, "source.tick_ms"), "database");
    test_api_answer_free(&a);
    int64_t v = 0;
    cr_assert(db_setting("tick_ms", &v) && v == 500);
    cr_assert(db_setting("stall_timeout_ms", &v) && v == 60000);

    /* The rules between settings, on the values as they will be: nothing written. */
    expect(call(tok_ops, "PATCH", SETTINGS, "{\"takeover_ms\": 400}"), 400, "bad_request",
           "takeover_ms (400) must be greater than tick_ms (500)", "takeover <= tick");
    expect(call(tok_ops, "PATCH", SETTINGS, "{\"tick_ms\": 30000, \"takeover_ms\": 20000}"),
           400, "bad_request", "takeover_ms", "both at once");
    cr_assert(db_setting("tick_ms", &v) && v == 500, "a refused change was written");
    cr_assert_not(db_setting("takeover_ms", NULL));

    /* null unsets (POST does what PATCH does) */
    a = call(tok_ops, "POST", SETTINGS, "{\"tick_ms\": null}");
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert_eq(test_doc_int(a.body, "settings.tick_ms"), 1000, "%s", a.json);
    test_api_answer_free(&a);
    cr_assert_not(db_setting("tick_ms", NULL));
    cr_assert(db_setting("stall_timeout_ms", NULL));

    static const struct {
        const char *body, *part;
    } bad[] = {
        {"{\"tick_ms\": ", "JSON"},
        {"{}", "names no setting"},
        {"", "object"},
        {"{\"tick\": 5}", "'tick'"},
        {"{\"workers\": 5}", "'workers'"},
        {"{\"tick_ms\": \"500\"}", "'tick_ms' must be a whole number"},
        {"{\"tick_ms\": 1.5}", "'tick_ms' must be a whole number"},
        {"{\"tick_ms\": true}", "'tick_ms'"},
        {"{\"tick_ms\": 5}", "out of range"},
        {"{\"tick_ms\": 500, \"tick_ms\": 600}", "twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect(call(tok_ops, "PATCH", SETTINGS, bad[i].body), 400, "bad_request", bad[i].part,
               bad[i].body);
    expect(call(NULL, "GET", SETTINGS, NULL), 401, "unauthorized", NULL, "no token");
    expect(call(tok_read, "PATCH", SETTINGS, "{\"tick_ms\": 500}"), 403, "forbidden", "operate",
           "read token");
    expect(call(tok_enqueue, "GET", SETTINGS, NULL), 403, "forbidden", "read", "enqueue token");
    expect(call(tok_ops, "PUT", SETTINGS, "{\"tick_ms\": 500}"), 405, "method_not_allowed", NULL,
           "PUT");
    expect(call(tok_read, "GET", "/api/v1/services/nope/settings", NULL), 404, "not_found",
           "nope", "unknown service");
    expect(call(tok_ops, "PATCH", "/api/v1/services/nope/settings", "{\"tick_ms\": 500}"), 404,
           "not_found", "nope", "unknown service");
    cr_assert_not(db_setting("tick_ms", NULL));
}
