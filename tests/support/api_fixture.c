/*
 * api_fixture.c - the in-process API fixture of the integration tests (see api_fixture.h).
 */
#include "api_fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void test_api_fixture_open(test_api_fixture_t *fx, const test_api_setup_t *setup)
{
    memset(fx, 0, sizeof *fx);
    test_service_db_open(setup->prefix, setup->service, &fx->db, &fx->store, &fx->client);
    fx->options = (cohort_api_options_t){.store = fx->store,
                                         .token_ttl_ms = TEST_API_TOKEN_TTL_MS,
                                         .max_wait_ms = setup->max_wait_ms};
    if (setup->host) {
        fx->config = test_service_config(setup->service, "external");
        fx->config.external = true;
        if (setup->max_attempts)
            fx->config.max_attempts = setup->max_attempts;
        if (setup->retry_base_ms)
            fx->config.retry_base_ms = setup->retry_base_ms;
        fx->service = test_service_new(&fx->config, "node-a", 5000, fx->store, fx->client);
        fx->options.services = &fx->service;
        fx->options.n_services = 1;
    }
    if (setup->listen) {
        test_api_server_start_api(&fx->server, fx->store, setup->listen, &fx->options);
        fx->serving = true;
        return;
    }
    fx->api = cohort_api_new(&fx->options);
    cr_assert_not_null(fx->api);
}

void test_api_fixture_close(test_api_fixture_t *fx)
{
    if (fx->serving)
        test_api_server_stop(&fx->server);
    if (fx->api)
        cohort_api_destroy(fx->api);
    if (fx->service)
        cohort_service_destroy(fx->service, fx->client);
    free(fx->config.handler_path);
    test_service_db_close(&fx->db, &fx->store, &fx->client);
    memset(fx, 0, sizeof *fx);
}

void test_api_answer_free(test_api_answer_t *a)
{
    bson_destroy(a->body);
    bson_free(a->json);
}

test_api_answer_t test_api_call(test_api_fixture_t *fx, const char *token, const char *method,
                                const char *target, const char *body, const char *idempotency_key)
{
    char auth[128], path[1024];
    snprintf(auth, sizeof auth, "Bearer %s", token ? token : "");
    cr_assert_lt(strlen(target), sizeof path, "target too long: %s", target);
    snprintf(path, sizeof path, "%s", target);
    char *query = strchr(path, '?');
    if (query)
        *query++ = '\0';
    cohort_api_request_t request = {.method = method,
                                    .path = path,
                                    .query = query,
                                    .authorization = token ? auth : NULL,
                                    .idempotency_key = idempotency_key,
                                    .body = body ? body : "",
                                    .body_len = body ? strlen(body) : 0};
    cohort_api_reply_t reply;
    cr_assert_not_null(fx->api, "the fixture serves its API over a listener");
    cohort_api_handle(fx->api, fx->client, &request, &reply);
    test_api_answer_t a = {
        .status = reply.status, .hold_ms = reply.hold_ms, .body = bson_copy(&reply.body)};
    memcpy(a.wake, reply.wake, sizeof a.wake);
    bson_destroy(&reply.body);
    a.json = bson_as_relaxed_extended_json(a.body, NULL);
    return a;
}

void test_api_expect(test_api_answer_t a, int status, const char *code, const char *part,
                     const char *what)
{
    cr_assert_eq(a.status, status, "%s: status %d, want %d: %s", what, a.status, status, a.json);
    const char *message = test_doc_str(a.body, "error.message");
    if (code) {
        const char *got = test_doc_str(a.body, "error.code");
        cr_assert(got && strcmp(got, code) == 0, "%s: code %s, want %s (%s)", what, got, code,
                  a.json);
        cr_assert(message, "%s: no message: %s", what, a.json);
    }
    if (part)
        cr_assert(message && strstr(message, part), "%s: the message lacks '%s': %s", what, part,
                  a.json);
    test_api_answer_free(&a);
}
