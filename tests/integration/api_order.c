/*
 * api_order.c - GET .../tasks for triage (issue 28): order=newest pages from the newest task
 * down through the keyset cursor, every task once and page 1 unchanged when a task arrives;
 * total=true counts the matching tasks; view=retrying and view=scheduled narrow to pending
 * tasks waiting for a retry or created with a delay; data_path and data_value search the
 * task data (a string, or an integer as a number too) over a bounded scan; bad values are
 * clear 400s.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "api_server.h"
#include "http_client.h"
#include "support.h"
#include "core/token.h"
#include "store/store.h"

#define SERVICE "web"
#define TASKS "/api/v1/services/" SERVICE "/tasks"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;
static char token[COHORT_TOKEN_TEXT_MAX];
static test_api_server_t server;
static char auth[200];

static void setup(void)
{
    test_service_db_open("apiorder", SERVICE, &db, &store, &client);
    test_api_token(store, client, "root", "admin", token);
    test_api_server_start(&server, store, &(cohort_http_callbacks_t){0}, 0);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
}

static void teardown(void)
{
    test_api_server_stop(&server);
    test_service_db_close(&db, &store, &client);
}

TestSuite(api_order, .init = setup, .fini = teardown, .timeout = 120);

/* Inserts one pending task numbered `n` (data.n) with `attempts`, delayed if `delayed`. */
static void insert_task(int n, int attempts, bool delayed)
{
    mongoc_collection_t *queue = mongoc_client_get_collection(client, db, "queue_" SERVICE);
    bson_t *doc =
        BCON_NEW("status", "pending", "priority", BCON_INT64(0), "attempts", BCON_INT32(attempts),
                 "run_at", BCON_DATE_TIME(1000), "data", "{", "n", BCON_INT32(n), "}");
    if (delayed)
        BSON_APPEND_DATE_TIME(doc, "not_before", 1000);
    bson_error_t error;
    cr_assert(mongoc_collection_insert_one(queue, doc, NULL, NULL, &error), "%s", error.message);
    bson_destroy(doc);
    mongoc_collection_destroy(queue);
}

/* GET `path`: the status, and with 200 the body into `body` (destroy it). */
static int get(const char *path, bson_t *body)
{
    http_response_t r;
    cr_assert(http_request_with(server.port, "GET", path, auth, NULL, 30000, &r), "no answer");
    int status = r.status;
    bson_error_t error;
    bson_init(body);
    if (status == 200) {
        bson_destroy(body);
        cr_assert(bson_init_from_json(body, r.body, (ssize_t)r.body_len, &error), "%s",
                  error.message);
    } else {
        cr_assert(strstr(r.body, "query parameter"), "%d: %.300s", status, r.body);
    }
    http_response_free(&r);
    return status;
}

/* The data.n of each item of `body` into `ns` (at most `max`); returns how many. */
static int item_numbers(const bson_t *body, int *ns, int max)
{
    bson_iter_t it, items;
    cr_assert(bson_iter_init_find(&it, body, "items") && bson_iter_recurse(&it, &items));
    int k = 0;
    while (bson_iter_next(&items) && k < max) {
        bson_t item;
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&items, &len, &data);
        cr_assert(bson_init_static(&item, data, len));
        ns[k++] = (int)test_doc_int(&item, "data.n");
    }
    return k;
}

Test(api_order, newest_first_pages_every_task_once_and_page_one_stays)
{
    for (int n = 1; n <= 5; n++)
        insert_task(n, 0, false);
    bson_t body;
    int ns[8];
    cr_assert_eq(get(TASKS "?order=newest&limit=2&total=true", &body), 200);
    cr_assert_eq(item_numbers(&body, ns, 8), 2);
    cr_assert(ns[0] == 5 && ns[1] == 4, "page 1 is %d, %d (newest first)", ns[0], ns[1]);
    cr_assert_eq(test_doc_int(&body, "total"), 5);
    cr_assert_str_eq(test_doc_str(&body, "order"), "newest");
    char path[256];
    snprintf(path, sizeof path, TASKS "?order=newest&limit=2&after=%s",
             test_doc_str(&body, "next"));
    bson_destroy(&body);
    insert_task(6, 0, false); /* arrives while the reader is on page 1 */
    int seen[8], k = 0;
    for (;;) {
        cr_assert_eq(get(path, &body), 200);
        k += item_numbers(&body, seen + k, 8 - k);
        const char *next = test_doc_has(&body, "next") ? test_doc_str(&body, "next") : NULL;
        if (next)
            snprintf(path, sizeof path, TASKS "?order=newest&limit=2&after=%s", next);
        bson_destroy(&body);
        if (!next)
            break;
    }
    cr_assert_eq(k, 3, "pages after the first hold %d tasks", k);
    cr_assert(seen[0] == 3 && seen[1] == 2 && seen[2] == 1, "then %d, %d, %d", seen[0], seen[1],
              seen[2]);
    cr_assert_eq(get(TASKS "?limit=2", &body), 200); /* the default stays oldest first */
    cr_assert_eq(item_numbers(&body, ns, 8), 2);
    cr_assert(ns[0] == 1 && ns[1] == 2);
    cr_assert(!test_doc_has(&body, "total"), "total only when asked");
    bson_destroy(&body);
}

Test(api_order, retrying_and_scheduled_views)
{
    insert_task(1, 0, false); /* plain pending */
    insert_task(2, 2, false); /* ran twice, waits for its retry */
    insert_task(3, 0, true);  /* delayed, never ran */
    insert_task(4, 1, true);  /* delayed, then failed once: retrying */
    bson_t body;
    int ns[8];
    cr_assert_eq(get(TASKS "?view=retrying&total=true", &body), 200);
    cr_assert_eq(item_numbers(&body, ns, 8), 2);
    cr_assert(ns[0] == 2 && ns[1] == 4, "retrying: %d, %d", ns[0], ns[1]);
    cr_assert_eq(test_doc_int(&body, "total"), 2);
    bson_destroy(&body);
    cr_assert_eq(get(TASKS "?view=scheduled&order=newest", &body), 200);
    cr_assert_eq(item_numbers(&body, ns, 8), 1);
    cr_assert_eq(ns[0], 3);
    bson_destroy(&body);
}

/* Inserts a task numbered `n` whose data.customer.id is `id` (a BSON value of `doc`). */
static void insert_customer(int n, const bson_t *customer)
{
    mongoc_collection_t *queue = mongoc_client_get_collection(client, db, "queue_" SERVICE);
    bson_t *doc = BCON_NEW("status", "failed", "data", "{", "n", BCON_INT32(n), "customer",
                           BCON_DOCUMENT(customer), "}");
    bson_error_t error;
    cr_assert(mongoc_collection_insert_one(queue, doc, NULL, NULL, &error), "%s", error.message);
    bson_destroy(doc);
    mongoc_collection_destroy(queue);
}

Test(api_order, search_by_task_data)
{
    bson_t *s42 = BCON_NEW("id", BCON_UTF8("42")), *n42 = BCON_NEW("id", BCON_INT32(42));
    bson_t *other = BCON_NEW("id", BCON_UTF8("7"));
    insert_customer(1, s42);
    insert_customer(2, other);
    insert_customer(3, n42);
    insert_task(4, 0, false); /* no customer at all */
    bson_t body;
    int ns[8];
    cr_assert_eq(get(TASKS "?data_path=customer.id&data_value=42&order=newest", &body), 200);
    cr_assert_eq(item_numbers(&body, ns, 8), 2);
    cr_assert(ns[0] == 3 && ns[1] == 1, "found %d, %d", ns[0], ns[1]);
    cr_assert_eq(test_doc_int(&body, "searched_max"), 10000, "the bound is stated");
    bson_destroy(&body);
    cr_assert_eq(get(TASKS "?data_path=customer.id&data_value=7&status=failed", &body), 200);
    cr_assert_eq(item_numbers(&body, ns, 8), 1);
    cr_assert_eq(ns[0], 2);
    bson_destroy(&body);
    cr_assert_eq(get(TASKS "?data_path=customer.id&data_value=42&limit=1", &body), 200);
    cr_assert(test_doc_has(&body, "next") && item_numbers(&body, ns, 8) == 1 && ns[0] == 1);
    char path[256];
    snprintf(path, sizeof path, TASKS "?data_path=customer.id&data_value=42&limit=1&after=%s",
             test_doc_str(&body, "next"));
    bson_destroy(&body);
    cr_assert_eq(get(path, &body), 200);
    cr_assert(item_numbers(&body, ns, 8) == 1 && ns[0] == 3, "page 2 of the search");
    bson_destroy(&body);
    bson_destroy(s42);
    bson_destroy(n42);
    bson_destroy(other);
}

Test(api_order, bad_values_are_clear_400s)
{
    static const char *const bad[] = {"?order=desc",
                                      "?order=",
                                      "?view=failed",
                                      "?total=yes",
                                      "?order=newest&order=oldest",
                                      "?view=retrying&status=failed",
                                      "?data_path=customer.id",
                                      "?data_value=1",
                                      "?data_path=.x&data_value=1",
                                      "?data_path=a..b&data_value=1",
                                      "?data_path=$where&data_value=1",
                                      "?data_path=a.b.c.d.e.f.g.h.i&data_value=1",
                                      "?data_path=a&data_value=",
                                      "?data_path=a&data_value=1&total=true"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char path[128];
        bson_t body;
        snprintf(path, sizeof path, TASKS "%s", bad[i]);
        cr_assert_eq(get(path, &body), 400, "%s", bad[i]);
        bson_destroy(&body);
    }
}
