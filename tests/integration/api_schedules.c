/*
 * api_schedules.c - GET /api/v1/services/{svc}/schedules against the local database, called
 * in-process through cohort_api_handle(): the schedules as the config document keeps them
 * (the same objects as `cohortctl schedules --json`), with the last task's live status and
 * the next slot computed from the recorded series; 401 without a token, 404 for an unknown
 * service, 405 for another method, 400 for a query string.
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

static void setup(void)
{
    test_api_fixture_open(&fx, &(test_api_setup_t){.prefix = "api_sched", .service = SERVICE});
    test_api_token(fx.store, fx.client, "reader", "read", token);
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
