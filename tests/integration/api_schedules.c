/*
 * api_schedules.c - GET /api/v1/services/{svc}/schedules against the local database, called
 * in-process through cohort_api_handle(): the schedules as the config document keeps them
 * (the same objects as `cohortctl schedules --json`), with the last task's live status and
 * the next slot computed from the recorded series; 401 without a token, 404 for an unknown
 * service, 405 for another method, 400 for a query string. And POST
 * .../schedules/{id}/pause|resume: the schedule's state switched (or "changed": false when it
 * already was so, recorded as no change in the audit), operate scope only.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "support.h"
#include "core/token.h"
#include "node/http/api.h"
#include "store/store.h"
#include "store/insert.h"
#include "store/tokens.h"

#define SERVICE "crond"

static test_api_fixture_t fx;
static char token[COHORT_TOKEN_TEXT_MAX];
static char operator_token[COHORT_TOKEN_TEXT_MAX];

static void setup(void)
{
    test_api_fixture_open(&fx, &(test_api_setup_t){.prefix = "api_sched", .service = SERVICE});
    test_api_token(fx.store, fx.client, "reader", "read", token);
    test_api_token(fx.store, fx.client, "oncall", "read,operate", operator_token);
}

static void teardown(void)
{
    test_api_fixture_close(&fx);
}

TestSuite(api_schedules, .init = setup, .fini = teardown, .timeout = 60);

#define SCHEDULES "/api/v1/services/" SERVICE "/schedules"

/* Writes schedules.nightly as a primary would have recorded it, naming task `oid`. */
static void record_state(const bson_oid_t *oid, int64_t last_slot)
{
    mongoc_collection_t *services = mongoc_client_get_collection(fx.client, fx.db, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(SERVICE));
    bson_t *update = BCON_NEW("$set", "{", "schedules.nightly.series",
                              BCON_UTF8("0 3 * * * @ Europe/Berlin"),
                              "schedules.nightly.last_slot", BCON_DATE_TIME(last_slot),
                              "schedules.nightly.last_task", BCON_OID(oid),
                              "schedules.nightly.last_task_slot", BCON_DATE_TIME(last_slot),
                              "schedules.nightly.created", BCON_INT64(4),
                              "schedules.nightly.existed", BCON_INT64(1),
                              "schedules.nightly.skipped", BCON_INT64(2),
                              "schedules.nightly.last_epoch", BCON_INT64(7), "}");
    bson_error_t error;
    cr_assert(mongoc_collection_update_one(services, filter, update, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
}

Test(api_schedules, lists_the_recorded_state_with_the_last_tasks_status)
{
    cohort_new_task_t task = {.created_by = "test", .now_ms = 1795255200000LL,
                              .unique_key = "schedule:nightly:2026-11-24T02:00:00.000Z"};
    bson_oid_t oid;
    bool exists = false, coalesced = false;
    bson_error_t error;
    cr_assert(cohort_store_insert_task(fx.store, fx.client, SERVICE, &task, &oid, &exists,
                                       &coalesced, &error),
              "%s", error.message);
    /* 2026-11-24T02:00:00Z: 03:00 in Berlin. The next slot is the 25th, same time. */
    record_state(&oid, 1795485600000LL);
    test_api_answer_t a = test_api_call(&fx, token, "GET", SCHEDULES, NULL, NULL);
    const bson_t *body = a.body;
    const char *json = a.json;
    cr_assert_eq(a.status, 200, "%s", json);
    cr_assert_str_eq(test_doc_str(body, "service"), SERVICE);
    cr_assert_str_eq(test_doc_str(body, "schedules.0.id"), "nightly", "%s", json);
    cr_assert_str_eq(test_doc_str(body, "schedules.0.state"), "active");
    cr_assert_str_eq(test_doc_str(body, "schedules.0.series"), "0 3 * * * @ Europe/Berlin");
    cr_assert_str_eq(test_doc_str(body, "schedules.0.last_slot"), "2026-11-24T02:00:00.000Z");
    cr_assert_str_eq(test_doc_str(body, "schedules.0.next_slot"), "2026-11-25T02:00:00.000Z");
    cr_assert_str_eq(test_doc_str(body, "schedules.0.last_task.status"), "pending", "%s", json);
    char id[25];
    bson_oid_to_string(&oid, id);
    cr_assert_str_eq(test_doc_str(body, "schedules.0.last_task.id"), id);
    cr_assert_eq(test_doc_int(body, "schedules.0.created"), 4);
    cr_assert_eq(test_doc_int(body, "schedules.0.existed"), 1);
    cr_assert_eq(test_doc_int(body, "schedules.0.skipped"), 2);
    test_api_answer_free(&a);
}

Test(api_schedules, refuses_what_it_should)
{
    test_api_expect(test_api_call(&fx, NULL, "GET", SCHEDULES, NULL, NULL), 401, NULL, NULL,
                    "no token");
    test_api_expect(
        test_api_call(&fx, token, "GET", "/api/v1/services/nosuch/schedules", NULL, NULL), 404,
        "not_found", NULL, "an unknown service");
    test_api_expect(test_api_call(&fx, token, "POST", SCHEDULES, NULL, NULL), 405, NULL, NULL,
                    "POST");
    test_api_expect(test_api_call(&fx, token, "GET", SCHEDULES "?x=1", NULL, NULL), 400, NULL, NULL,
                    "a query string");
    /* A service without schedules: an empty list. */
    test_api_answer_t a = test_api_call(&fx, token, "GET", SCHEDULES, NULL, NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    cr_assert(test_doc_has(a.body, "schedules"));
    cr_assert_not(test_doc_has(a.body, "schedules.0"));
    test_api_answer_free(&a);
}

#define NIGHTLY SCHEDULES "/nightly"

/* The boolean at a dotted path of `doc`; fails the test if it is not one. */
static bool doc_bool(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    cr_assert(bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found) &&
                  BSON_ITER_HOLDS_BOOL(&found),
              "no boolean at %s", path);
    return bson_iter_bool(&found);
}

/* POSTs .../nightly/`verb` as the operator; asserts 200, the state and whether it changed. */
static void switch_nightly(const char *verb, bool changed)
{
    test_api_answer_t a = test_api_call(
        &fx, operator_token, "POST",
        strcmp(verb, "pause") == 0 ? NIGHTLY "/pause" : NIGHTLY "/resume", NULL, NULL);
    cr_assert_eq(a.status, 200, "%s: %s", verb, a.json);
    cr_assert_str_eq(test_doc_str(a.body, "schedule"), "nightly");
    cr_assert_eq(doc_bool(a.body, "paused"), strcmp(verb, "pause") == 0, "%s", a.json);
    cr_assert_eq(doc_bool(a.body, "changed"), changed, "%s: %s", verb, a.json);
    test_api_answer_free(&a);
    a = test_api_call(&fx, token, "GET", SCHEDULES, NULL, NULL);
    cr_assert_str_eq(test_doc_str(a.body, "schedules.0.state"),
                     strcmp(verb, "pause") == 0 ? "paused" : "active", "%s", a.json);
    test_api_answer_free(&a);
}

Test(api_schedules, pause_and_resume_switch_the_schedule_and_say_when_nothing_changed)
{
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    record_state(&oid, 1795485600000LL);
    switch_nightly("pause", true);
    switch_nightly("pause", false); /* already paused: a clear no change */
    switch_nightly("resume", true);
    switch_nightly("resume", false);
    /* The audit, newest first: the operator's four calls, the no-ops marked as such. */
    test_api_answer_t a = test_api_call(&fx, token, "GET", "/api/v1/audit?limit=4", NULL, NULL);
    cr_assert_eq(a.status, 200, "%s", a.json);
    static const char *const paths[] = {NIGHTLY "/resume", NIGHTLY "/resume", NIGHTLY "/pause",
                                        NIGHTLY "/pause"};
    for (int i = 0; i < 4; i++) {
        char key[48];
        snprintf(key, sizeof key, "entries.%d.path", i);
        cr_assert_str_eq(test_doc_str(a.body, key), paths[i], "%s", a.json);
        snprintf(key, sizeof key, "entries.%d.who", i);
        cr_assert_str_eq(test_doc_str(a.body, key), "oncall", "%s", a.json);
        snprintf(key, sizeof key, "entries.%d.changed", i);
        cr_assert_eq(test_doc_has(a.body, key), i % 2 == 0, "entry %d: %s", i, a.json);
    }
    test_api_answer_free(&a);
}

Test(api_schedules, pause_refuses_what_it_should)
{
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    record_state(&oid, 1795485600000LL);
    test_api_expect(test_api_call(&fx, token, "POST", NIGHTLY "/pause", NULL, NULL), 403,
                    "forbidden", NULL, "a read-only token");
    test_api_expect(test_api_call(&fx, NULL, "POST", NIGHTLY "/pause", NULL, NULL), 401, NULL, NULL,
                    "no token");
    test_api_expect(test_api_call(&fx, operator_token, "POST",
                                  "/api/v1/services/nosuch/schedules/nightly/pause", NULL, NULL),
                    404, "not_found", "nosuch", "an unknown service");
    test_api_expect(
        test_api_call(&fx, operator_token, "POST", SCHEDULES "/weekly/resume", NULL, NULL), 404,
        "not_found", "no schedule 'weekly'", "an unknown schedule");
    test_api_expect(test_api_call(&fx, operator_token, "POST", SCHEDULES "/a.b/pause", NULL, NULL),
                    400, "bad_request", "schedule id", "a bad id");
    test_api_expect(test_api_call(&fx, operator_token, "POST", NIGHTLY "/stop", NULL, NULL), 404,
                    "not_found", NULL, "another verb");
    test_api_expect(test_api_call(&fx, operator_token, "GET", NIGHTLY "/pause", NULL, NULL), 405,
                    NULL, NULL, "GET");
    test_api_expect(
        test_api_call(&fx, operator_token, "POST", NIGHTLY "/pause", "{\"kind\": \"x\"}", NULL),
        400, "bad_request", "takes no body", "a body");
    /* Nothing above changed it. */
    test_api_answer_t a = test_api_call(&fx, token, "GET", SCHEDULES, NULL, NULL);
    cr_assert_str_eq(test_doc_str(a.body, "schedules.0.state"), "active", "%s", a.json);
    test_api_answer_free(&a);
}
