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

#include "support.h"
#include "core/token.h"
#include "node/http/api.h"
#include "store/store.h"
#include "store/insert.h"
#include "store/tokens.h"

#define SERVICE "crond"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;
static cohort_api_t *api;
static char token[COHORT_TOKEN_TEXT_MAX];

static void setup(void)
{
    test_service_db_open("api_sched", SERVICE, &db, &store, &client);
    cohort_api_options_t options = {.store = store, .token_ttl_ms = 300};
    api = cohort_api_new(&options);
    cr_assert_not_null(api);
    char hash[COHORT_TOKEN_HASH_HEX];
    bson_error_t error;
    cr_assert(cohort_token_generate(token, sizeof token, &error), "%s", error.message);
    cr_assert(cohort_token_hash(token, hash, sizeof hash));
    bson_t scopes = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&scopes, "0", "read");
    bool exists = false;
    cr_assert(cohort_store_create_token(store, client, "reader", hash, &scopes, "test", &exists,
                                        &error),
              "%s", error.message);
    bson_destroy(&scopes);
}

static void teardown(void)
{
    cohort_api_destroy(api);
    test_service_db_close(&db, &store, &client);
}

TestSuite(api_schedules, .init = setup, .fini = teardown, .timeout = 60);

/* One request; `auth` false sends no Authorization header. Returns the status; *body gets a
 * copy of the reply (destroy it). */
static int get(const char *method, const char *path, const char *query, bool auth,
               bson_t **body)
{
    char header[128];
    snprintf(header, sizeof header, "Bearer %s", token);
    cohort_api_request_t request = {.method = method,
                                    .path = path,
                                    .query = query,
                                    .authorization = auth ? header : NULL,
                                    .body = "",
                                    .body_len = 0};
    cohort_api_reply_t reply;
    cohort_api_handle(api, client, &request, &reply);
    *body = bson_copy(&reply.body);
    bson_destroy(&reply.body);
    return reply.status;
}

/* Writes schedules.nightly as a primary would have recorded it, naming task `oid`. */
static void record_state(const bson_oid_t *oid, int64_t last_slot)
{
    mongoc_collection_t *services = mongoc_client_get_collection(client, db, "services");
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
    cr_assert(cohort_store_insert_task(store, client, SERVICE, &task, &oid, &exists, &coalesced,
                                       &error),
              "%s", error.message);
    /* 2026-11-24T02:00:00Z: 03:00 in Berlin. The next slot is the 25th, same time. */
    record_state(&oid, 1795485600000LL);
    bson_t *body;
    int status = get("GET", "/api/v1/services/" SERVICE "/schedules", NULL, true, &body);
    char *json = bson_as_relaxed_extended_json(body, NULL);
    cr_assert_eq(status, 200, "%s", json);
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
    bson_free(json);
    bson_destroy(body);
}

Test(api_schedules, refuses_what_it_should)
{
    bson_t *body;
    cr_assert_eq(get("GET", "/api/v1/services/" SERVICE "/schedules", NULL, false, &body), 401);
    bson_destroy(body);
    cr_assert_eq(get("GET", "/api/v1/services/nosuch/schedules", NULL, true, &body), 404);
    cr_assert_str_eq(test_doc_str(body, "error.code"), "not_found");
    bson_destroy(body);
    cr_assert_eq(get("POST", "/api/v1/services/" SERVICE "/schedules", NULL, true, &body), 405);
    bson_destroy(body);
    cr_assert_eq(get("GET", "/api/v1/services/" SERVICE "/schedules", "x=1", true, &body), 400);
    bson_destroy(body);
    /* A service without schedules: an empty list. */
    cr_assert_eq(get("GET", "/api/v1/services/" SERVICE "/schedules", NULL, true, &body), 200);
    cr_assert(test_doc_has(body, "schedules"));
    cr_assert_not(test_doc_has(body, "schedules.0"));
    bson_destroy(body);
}
