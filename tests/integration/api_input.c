/*
 * api_input.c - what the HTTP API does with input the database would mishandle or refuse
 * (issue 23), called in-process through cohort_api_handle() against the local database, on
 * a hosted service of `handler = external`:
 *   - integers of 2^63 and above (libbson wraps those of 2^64 and above) are refused with the
 *     field named, in the task options and inside `data`;
 *   - a body with anything after its JSON object is refused;
 *   - duplicate, empty and '$' keys in data, result and progress are refused with 400, the
 *     task untouched, and a refused operator's change still reaches the audit;
 *   - tasks:batch creates all of its tasks or none;
 *   - `kinds` in a claim means exactly those kinds, null naming the tasks without a kind.
 * After every refusal nothing was written.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "api_server.h"
#include "support.h"
#include "core/token.h"
#include "node/http/api.h"
#include "node/http/api_parse.h"
#include "store/store.h"

#define SERVICE "inp"
#define QUEUE "queue_" SERVICE
#define API "/api/v1/services/" SERVICE
#define TASKS API "/tasks"

static test_api_fixture_t fx;
static char tok_all[COHORT_TOKEN_TEXT_MAX];

static void setup(void)
{
    test_api_fixture_open(
        &fx, &(test_api_setup_t){
                 .prefix = "apiinput", .service = SERVICE, .host = true, .max_wait_ms = 1000});
    test_api_token(fx.store, fx.client, "root", "admin", tok_all);
}

static void teardown(void)
{
    test_api_fixture_close(&fx);
}

TestSuite(api_input, .init = setup, .fini = teardown, .timeout = 120);

static test_api_answer_t call(const char *method, const char *path, const char *body)
{
    return test_api_call(&fx, tok_all, method, path, body, NULL);
}

/* Asserts a 400 whose message holds `part`; frees the answer. */
static void refused(const char *method, const char *path, const char *body, const char *part)
{
    test_api_expect(call(method, path, body), 400, NULL, part, body);
}

static int64_t count(const char *filter)
{
    return test_count(fx.client, fx.db, QUEUE, filter);
}

/* Creates a task from `body`; its id into `id`. */
static void create(const char *body, char id[25])
{
    test_api_answer_t a = call("POST", TASKS, body);
    cr_assert_eq(a.status, 201, "%s: %s", body, a.json);
    snprintf(id, 25, "%s", test_doc_str(a.body, "id"));
    test_api_answer_free(&a);
}

/* Claims with `body`; the tasks' ids (at most 8) into `ids`, their lease tokens into
 * `tokens` (may be NULL); returns how many. */
static size_t claim(const char *body, char ids[][25], char tokens[][COHORT_LEASE_TOKEN_MAX])
{
    test_api_answer_t a = call("POST", API "/claims", body);
    cr_assert_eq(a.status, 200, "claim %s: %s", body, a.json);
    size_t n = 0;
    for (; n < 8; n++) {
        char key[64];
        snprintf(key, sizeof key, "tasks.%zu.id", n);
        const char *id = test_doc_str(a.body, key);
        if (!id)
            break;
        snprintf(ids[n], 25, "%s", id);
        snprintf(key, sizeof key, "tasks.%zu.lease.token", n);
        if (tokens)
            snprintf(tokens[n], COHORT_LEASE_TOKEN_MAX, "%s", test_doc_str(a.body, key));
    }
    test_api_answer_free(&a);
    return n;
}

Test(api_input, integers_past_int64_are_refused_naming_the_field)
{
    /* Each was stored wrapped modulo 2^64: priority 5, weight 7, a delay of 60 s, n = 5. */
    refused("POST", TASKS, "{\"priority\": 18446744073709551621}",
            "field 'priority': 18446744073709551621 is outside the 64-bit integer range");
    refused("POST", TASKS, "{\"weight\": 36893488147419103239}", "field 'weight'");
    refused("POST", TASKS, "{\"delay_ms\": 18446744073709611616}", "field 'delay_ms'");
    refused("POST", TASKS, "{\"data\": {\"n\": 18446744073709551621}}", "field 'data.n'");
    refused("POST", TASKS ":batch",
            "{\"tasks\": [{}, {\"data\": {\"list\": [18446744073709551621]}}]}",
            "field 'tasks[1].data.list[0]'");
    refused("POST", TASKS, "{\"priority\": 9223372036854775808}", "field 'priority'");
    cr_assert_eq(count("{}"), 0, "a refused integer wrote a task");
    /* The edges of int64 itself still pass (and are judged by the option's own range). */
    char id[25];
    create("{\"data\": {\"n\": 9223372036854775807, \"m\": -9223372036854775808}}", id);
    cr_assert_eq(count("{\"data.n\": 9223372036854775807}"), 1);
}

Test(api_input, anything_after_the_body_object_is_refused)
{
    refused("POST", TASKS, "{\"data\": {}} {\"data\": {}}", "something follows it");
    refused("POST", TASKS ":batch", "{\"tasks\": [{}]}]", "something follows it");
    char id[25];
    create("{}", id);
    char path[128];
    snprintf(path, sizeof path, TASKS "/%s/cancel", id);
    refused("POST", path, "{}x", "something follows it");
    refused("POST", TASKS ":bulk",
            "{\"action\": \"cancel\", \"filter\": {\"status\": \"pending\"}}{\"dry_run\": true}",
            "something follows it");
    cr_assert_eq(count("{}"), 1);
    cr_assert_eq(count("{\"status\": \"pending\"}"), 1, "a refused body cancelled the task");
}

Test(api_input, keys_the_database_refuses_get_400_and_write_nothing)
{
    refused("POST", TASKS, "{\"data\": {\"a\": 1, \"a\": 2}}", "field 'data.a' given twice");
    refused("POST", TASKS, "{\"data\": {\"\": 1}}", "field 'data.': a key is empty");
    refused("POST", TASKS, "{\"data\": {\"x\": {\"$where\": 1}}}", "'data.x.$where'");
    cr_assert_eq(count("{}"), 0);

    /* result and progress: refused, the claim and the task as they were */
    char id[25], ids[8][25], tokens[8][COHORT_LEASE_TOKEN_MAX];
    create("{\"data\": {\"dotted.key\": 1}}", id); /* '.' is stored (MongoDB 5.0+) */
    cr_assert_eq(claim("{\"worker\": \"w-1\"}", ids, tokens), 1);
    char path[300];
    snprintf(path, sizeof path, "/api/v1/leases/%s/heartbeat", tokens[0]);
    refused("POST", path, "{\"progress\": {\"done\": 1, \"done\": 2}}",
            "field 'progress.done' given twice");
    snprintf(path, sizeof path, "/api/v1/leases/%s/succeed", tokens[0]);
    refused("POST", path, "{\"result\": {\"ok\": true, \"ok\": false}}",
            "field 'result.ok' given twice");
    cr_assert_eq(count("{\"status\": \"claimed\", \"result\": {\"$exists\": false}, "
                       "\"progress\": {\"$exists\": false}}"),
                 1);
    test_api_answer_t a = call("POST", path, "{\"result\": {\"ok\": true}}");
    cr_assert_eq(a.status, 200, "the lease still holds: %s", a.json);
    test_api_answer_free(&a);

    /* A refused operator's change with a repeated key is still in the audit (it was lost:
     * the entry copied the body, and the database refused the entry). */
    refused("PATCH", API "/settings", "{\"tick_ms\": 500, \"tick_ms\": 600}",
            "field 'tick_ms' given twice");
    cr_assert_eq(
        test_count(fx.client, fx.db, "audit", "{\"path\": \"" API "/settings\", \"status\": 400}"),
        1, "the refused change is missing from the audit");
}

Test(api_input, a_batch_creates_all_of_its_tasks_or_none)
{
    /* Refused before anything is written: a bad key in a later task, two tasks with one
     * unique_key. */
    refused("POST", TASKS ":batch", "{\"tasks\": [{}, {\"data\": {\"\": 1}}]}",
            "field 'tasks[1].data.': a key is empty");
    refused("POST", TASKS ":batch", "{\"tasks\": [{}, {\"data\": {\"k\": 1, \"k\": 1}}]}",
            "field 'tasks[1].data.k' given twice");
    refused("POST", TASKS ":batch",
            "{\"tasks\": [{\"unique_key\": \"u\"}, {}, {\"unique_key\": \"u\"}]}",
            "unique_key 'u' is given to two tasks");
    refused("POST", TASKS, "{\"data\": {\"\": 1}}", "a key is empty");
    cr_assert_eq(count("{}"), 0, "a refused batch created tasks");

    /* Refused by the database part way (a unique_key that exists): the tasks created before
     * it are removed again. */
    char id[25];
    create("{\"unique_key\": \"taken\"}", id);
    test_api_answer_t a = call("POST", TASKS ":batch",
                               "{\"tasks\": [{\"data\": {\"n\": 1}}, {\"data\": {\"n\": 2}}, "
                               "{\"unique_key\": \"taken\"}, {\"data\": {\"n\": 4}}]}");
    cr_assert_eq(a.status, 409, "%s", a.json);
    const char *message = test_doc_str(a.body, "error.message");
    cr_assert(message && strstr(message, "tasks[2]") &&
                  strstr(message, "the 2 tasks created before it were removed"),
              "%s", a.json);
    test_api_answer_free(&a);
    cr_assert_eq(count("{}"), 1, "the batch left tasks behind");

    a = call("POST", TASKS ":batch", "{\"tasks\": [{\"data\": {\"n\": 1}}, {}]}");
    cr_assert_eq(a.status, 201, "%s", a.json);
    test_api_answer_free(&a);
    cr_assert_eq(count("{}"), 3);
}

Test(api_input, kinds_in_a_claim_means_exactly_those_kinds)
{
    char mail[25], plain[25], sms[25], ids[8][25];
    create("{\"kind\": \"mail\"}", mail);
    create("{}", plain);
    create("{\"kind\": \"sms\"}", sms);
    /* Only mail: the task without a kind is not handed out (it was). */
    cr_assert_eq(claim("{\"worker\": \"w-1\", \"max\": 8, \"kinds\": [\"mail\"]}", ids, NULL), 1);
    cr_assert_str_eq(ids[0], mail);
    /* null names the tasks without a kind. */
    cr_assert_eq(claim("{\"worker\": \"w-1\", \"max\": 8, \"kinds\": [null]}", ids, NULL), 1);
    cr_assert_str_eq(ids[0], plain);
    refused("POST", API "/claims", "{\"worker\": \"w-1\", \"kinds\": []}", "field 'kinds' is empty");
    refused("POST", API "/claims", "{\"worker\": \"w-1\", \"kinds\": [5]}", "kinds[0]");
    create("{}", plain);
    cr_assert_eq(claim("{\"worker\": \"w-1\", \"max\": 8, \"kinds\": [\"sms\", null]}", ids, NULL),
                 2);
    cr_assert_eq(count("{\"status\": \"pending\"}"), 0);
}
