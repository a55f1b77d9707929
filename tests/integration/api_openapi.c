/*
 * api_openapi.c - GET /api/v1/openapi.yaml over a real socket: the node serves docs/openapi.yaml
 * byte for byte, as the build embedded it, with Content-Type application/yaml, to a token of
 * any scope; without a token it is the API's JSON 401, another method a 405 naming GET, and
 * HEAD the headers alone. (tests/openapi checks the document itself.)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "api_server.h"
#include "http_client.h"
#include "support.h"
#include "core/token.h"

#define DOC "/api/v1/openapi.yaml"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;
static char token[COHORT_TOKEN_TEXT_MAX];
static test_api_server_t server;
static const cohort_http_callbacks_t limits = {.api_max_body = 4096};

static void setup(void)
{
    test_service_db_open("apidoc", "web", &db, &store, &client);
    test_api_token(store, client, "worker", "work", token); /* a scope that reads nothing else */
    test_api_server_start(&server, store, &limits, 0);
}

static void teardown(void)
{
    test_api_server_stop(&server);
    test_service_db_close(&db, &store, &client);
}

TestSuite(api_openapi, .init = setup, .fini = teardown, .timeout = 60);

static void request(const char *method, bool with_token, http_response_t *r)
{
    char headers[256] = "";
    if (with_token)
        snprintf(headers, sizeof headers, "Authorization: Bearer %s\r\n", token);
    cr_assert(http_request_with(server.port, method, DOC, headers, NULL, 10000, r),
              "%s " DOC ": no answer", method);
}

Test(api_openapi, any_token_gets_the_document_as_built)
{
    http_response_t r;
    request("GET", true, &r);
    cr_assert_eq(r.status, 200, "want 200, got %d: %.300s", r.status, r.body);
    cr_assert(strstr(r.headers, "Content-Type: application/yaml"), "headers: %s", r.headers);
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/openapi.yaml", COHORT_SOURCE_DIR);
    char *want = test_read_file(path);
    cr_assert_eq(r.body_len, strlen(want), "served %zu bytes, docs/openapi.yaml has %zu",
                 r.body_len, strlen(want));
    cr_assert(memcmp(r.body, want, r.body_len) == 0, "the served document differs from the file");
    cr_assert(strncmp(r.body, "openapi: 3.1", 12) == 0);
    free(want);
    http_response_free(&r);
}

Test(api_openapi, no_token_is_the_json_401)
{
    http_response_t r;
    request("GET", false, &r);
    cr_assert_eq(r.status, 401, "want 401, got %d", r.status);
    cr_assert(strstr(r.headers, "Content-Type: application/json"), "headers: %s", r.headers);
    cr_assert(strstr(r.body, "\"unauthorized\""), "body: %.300s", r.body);
    cr_assert_null(strstr(r.body, "openapi"), "the document leaked: %.300s", r.body);
    http_response_free(&r);
}

Test(api_openapi, head_has_no_body_and_other_methods_are_405)
{
    http_response_t r;
    request("HEAD", true, &r);
    cr_assert_eq(r.status, 200, "HEAD: want 200, got %d", r.status);
    cr_assert(strstr(r.headers, "Content-Type: application/yaml"), "headers: %s", r.headers);
    cr_assert_eq(r.body_len, 0, "HEAD sent %zu bytes of body", r.body_len);
    http_response_free(&r);
    request("DELETE", true, &r);
    cr_assert_eq(r.status, 405, "DELETE: want 405, got %d: %.300s", r.status, r.body);
    cr_assert(strstr(r.headers, "Allow: GET"), "headers: %s", r.headers);
    http_response_free(&r);
}
