/*
 * settings_nodes.c - cohort_service_settings_check_nodes() (node/status/service_settings.h), the
 * one check behind `cohortctl settings set|unset` and the API's PATCH .../settings, against node
 * documents written as each node's ping writes them (store/nodes.c, with `settings` and
 * db_rtt_p99_ms): which nodes count (live, hosting the service, publishing their settings)
 * and what each refuses.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "node/status/service_settings.h"
#include "store/store.h"
#include "store/nodes.h"
#include "support.h"

#define SERVICE "svc"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    test_service_db_open("settings_nodes", SERVICE, &db, &store, &client);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(settings_nodes, .init = setup, .fini = teardown);

/* A node document as a ping writes it: hosting `service`, its file's tick_ms and takeover_ms
 * (the rest defaults), its p99 round trip (-1: none), published or not. */
static void ping(const char *id, const char *service, int64_t tick, int64_t takeover,
                 int64_t rtt, bool publish)
{
    cohort_settings_t file;
    cohort_settings_defaults(&file);
    file.tick_ms = tick;
    file.takeover_ms = takeover;
    bson_t settings = BSON_INITIALIZER, one;
    BSON_APPEND_DOCUMENT_BEGIN(&settings, service, &one);
    cohort_settings_append(&one, "file", &file);
    cohort_settings_append(&one, "effective", &file);
    bson_append_document_end(&settings, &one);
    const char *services[] = {service};
    int64_t workers[] = {1};
    cohort_node_info_t info = {.node_id = id, .host = "h", .pid = 1, .version = "test",
                               .services = services, .workers = workers, .n_services = 1,
                               .settings = publish ? &settings : NULL, .db_rtt_p99_ms = rtt};
    int64_t server_ms;
    bson_error_t error;
    cr_assert(cohort_store_ping_node(store, client, &info, NULL, &server_ms, NULL, NULL, &error),
              "%s", error.message);
    bson_destroy(&settings);
}

/* The refusal of setting `key` = `value` over an empty database settings ("" if accepted). */
static void check(const char *key, int64_t value, bool force, char *refusal, size_t len)
{
    bson_t empty = BSON_INITIALIZER, next;
    cohort_service_settings_next_db(&empty, key, true, value, &next);
    bson_error_t error;
    cr_assert(cohort_service_settings_check_nodes(store, client, SERVICE, &next, force, refusal,
                                                  len, &error),
              "%s", error.message);
    bson_destroy(&next);
    bson_destroy(&empty);
}

Test(settings_nodes, a_node_whose_file_refuses_the_change_is_named)
{
    ping("a", SERVICE, 200, 10000, 5, true);
    ping("b", SERVICE, 3000, 10000, 5, true);
    char why[768];
    check("takeover_ms", 2000, false, why, sizeof why);
    cr_expect(strstr(why, "node b would refuse it") &&
                  strstr(why, "takeover_ms (2000) must be greater than tick_ms (3000)"),
              "refusal: '%s'", why);
    check("takeover_ms", 5000, false, why, sizeof why);
    cr_expect_str_empty(why, "a value every node takes: '%s'", why);
}

Test(settings_nodes, only_live_publishing_nodes_of_the_service_count)
{
    ping("other", "elsewhere", 3000, 10000, 5, true); /* another service */
    ping("old", SERVICE, 3000, 10000, -1, false);     /* an older version: nothing to check */
    char why[768];
    check("takeover_ms", 2000, false, why, sizeof why);
    cr_expect_str_empty(why, "'%s'", why);
    ping("gone", SERVICE, 3000, 10000, 5, true);
    bson_t *filter = BCON_NEW("_id", "gone");
    bson_t *update = BCON_NEW("$set", "{", "expired", BCON_BOOL(true), "}");
    mongoc_collection_t *nodes = mongoc_client_get_collection(client, db, "nodes");
    cr_assert(mongoc_collection_update_one(nodes, filter, update, NULL, NULL, NULL));
    mongoc_collection_destroy(nodes);
    bson_destroy(update);
    bson_destroy(filter);
    check("takeover_ms", 2000, false, why, sizeof why);
    cr_expect_str_empty(why, "an expired node counted: '%s'", why);
}

Test(settings_nodes, a_takeover_under_three_round_trips_needs_force)
{
    ping("slow", SERVICE, 200, 10000, 400, true);
    char why[768];
    check("takeover_ms", 1000, false, why, sizeof why);
    cr_expect(strstr(why, "takeover_ms 1000 is under 3 x the database round trip node slow "
                          "measured (p99 400 ms): at least 1200 ms is safe"),
              "refusal: '%s'", why);
    check("takeover_ms", 1000, true, why, sizeof why);
    cr_expect_str_empty(why, "--force: '%s'", why);
    check("takeover_ms", 1200, false, why, sizeof why);
    cr_expect_str_empty(why, "at the floor: '%s'", why);
    /* A node that would refuse outright is named before a round trip that needs force. */
    ping("strict", SERVICE, 1500, 10000, 5, true);
    check("takeover_ms", 1000, false, why, sizeof why);
    cr_expect(strstr(why, "node strict would refuse it"), "refusal: '%s'", why);
}
