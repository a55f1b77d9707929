/*
 * weight.c - task weights and node capacity without a database: the `weight` task option as
 * the one parser shared by cohort_task_create(), `cohortctl enqueue` and the HTTP API reads
 * it (bad weights get a clear error); the defaults a task gets (option, then `kind.K.weight`,
 * then the service's `weight`, then 1); the `weight`, `kind.K.weight` and `capacity` keys of
 * the config file; and the node's accounting of the weight it holds (node/work/capacity.h).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/taskopts.h"
#include "node/work/capacity.h"
#include "support.h"
#include "store/claims.h"

#define NOOP_SO COHORT_BUILD_DIR "/handlers/cohort_noop.so"

static cohort_config_errors_t errors;

static void clear(void)
{
    cohort_config_errors_clear(&errors);
}

TestSuite(weight, .fini = clear);

static bool parse(const char *json, cohort_task_options_t *out, bson_error_t *error)
{
    bson_error_t bad_json;
    bson_t *opts = bson_new_from_json((const uint8_t *)json, -1, &bad_json);
    cr_assert_not_null(opts, "bad JSON %s: %s", json, bad_json.message);
    bool ok = cohort_task_options_parse(opts, false, out, error);
    bson_destroy(opts);
    return ok;
}

static void assert_refused(const char *json, const char *expect)
{
    cohort_task_options_t o;
    bson_error_t error;
    cr_assert_not(parse(json, &o, &error), "%s was accepted", json);
    cr_assert(strstr(error.message, expect), "%s: '%s' does not say '%s'", json, error.message,
              expect);
}

Test(weight, the_option_takes_1_to_1000)
{
    cohort_task_options_t o;
    bson_error_t error;
    cr_assert(parse("{\"weight\": 1}", &o, &error), "%s", error.message);
    cr_assert(o.has_weight);
    cr_assert_eq(o.weight, 1);
    cr_assert(parse("{\"weight\": {\"$numberLong\": \"1000\"}}", &o, &error), "%s",
              error.message);
    cr_assert_eq(o.weight, 1000);
    cr_assert(parse("{}", &o, &error), "%s", error.message);
    cr_assert_not(o.has_weight);
}

Test(weight, bad_weights_are_refused_with_the_reason)
{
    assert_refused("{\"weight\": 0}", "task option 'weight' = 0 is out of range [1, 1000]");
    assert_refused("{\"weight\": -3}", "'weight' = -3 is out of range [1, 1000]");
    assert_refused("{\"weight\": 1001}", "'weight' = 1001 is out of range [1, 1000]");
    assert_refused("{\"weight\": \"2\"}", "task option 'weight' must be an integer");
    assert_refused("{\"weight\": 2.5}", "task option 'weight' must be an integer");
    assert_refused("{\"weight\": null}", "task option 'weight' must be an integer");
    assert_refused("{\"wieght\": 2}", " weight,"); /* the unknown-option list names it */
}

/* A config whose service section has `lines` (line 4 on). */
static cohort_config_t *load(const char *lines)
{
    char *text = NULL;
    cr_assert_geq(asprintf(&text, "[cluster]\n[service:svc]\nhandler = " NOOP_SO "\n%s", lines),
                  0);
    cohort_config_t *c = cohort_config_load_string(text, "weight.ini", NULL, &errors);
    free(text);
    return c;
}

/* The weight a task created with options `json` gets in the config's service. */
static int64_t applied(const cohort_config_t *c, const char *json)
{
    cohort_task_options_t o;
    bson_error_t error;
    bson_t *opts = bson_new_from_json((const uint8_t *)json, -1, &error);
    cr_assert_not_null(opts);
    cr_assert(cohort_task_options_parse(opts, false, &o, &error), "%s", error.message);
    cohort_new_task_t task = {.now_ms = 1000};
    cohort_task_options_apply(&o, c ? &c->services[0] : NULL, &task);
    bson_destroy(opts);
    return task.weight;
}

Test(weight, a_task_gets_its_option_then_its_kinds_then_the_services_weight)
{
    cohort_config_t *c = load("weight = 3\nkind.heavy.weight = 40\nkind.urgent.priority = 9\n");
    cr_assert_not_null(c, "%s", errors.count ? errors.messages[0] : "?");
    cr_assert_eq(applied(c, "{}"), 3);
    cr_assert_eq(applied(c, "{\"kind\": \"heavy\"}"), 40);
    cr_assert_eq(applied(c, "{\"kind\": \"urgent\"}"), 3, "a kind without weight: the service's");
    cr_assert_eq(applied(c, "{\"kind\": \"heavy\", \"weight\": 2}"), 2);
    cohort_config_destroy(c);
    c = load("");
    cr_assert_not_null(c);
    cr_assert_eq(applied(c, "{}"), 1, "the default weight is 1");
    cr_assert_eq(c->services[0].capacity, 0, "capacity defaults to 0: the worker count");
    cohort_config_destroy(c);
    cr_assert_eq(applied(NULL, "{}"), 1, "without a service's config: 1");
}

static void assert_config_refused(const char *lines, const char *expect)
{
    cohort_config_t *c = load(lines);
    cr_assert_null(c, "'%s' was accepted", lines);
    cr_assert_geq(errors.count, 1);
    cr_assert(strstr(errors.messages[0], expect), "'%s' does not say '%s'", errors.messages[0],
              expect);
    clear();
}

Test(weight, bad_weight_and_capacity_keys_are_refused_with_their_line)
{
    assert_config_refused("weight = 0\n", "line 4");
    assert_config_refused("weight = 1001\n", "out of range [1, 1000]");
    assert_config_refused("kind.big.weight = 0\n", "out of range [1, 1000]");
    assert_config_refused("kind.big.weight = heavy\n", "'heavy' is not a number");
    assert_config_refused("capacity = -1\n", "capacity");
    assert_config_refused("capacity = 1000001\n", "out of range [0, 1000000]");
    cohort_config_t *c = load("capacity = 12\n");
    cr_assert_not_null(c);
    cr_assert_eq(c->services[0].capacity, 12);
    cohort_config_destroy(c);
}

/* ---- the node's accounting (capacity.c) ------------------------------------------------ */

static cohort_service_t service;

static void make_service(int64_t capacity, size_t workers)
{
    memset(&service, 0, sizeof service);
    pthread_mutex_init(&service.lock, NULL);
    pthread_cond_init(&service.wake, NULL);
    service.capacity = capacity;
    service.target_workers = workers;
}

static bson_t *task_of_weight(int64_t weight)
{
    return weight > 0 ? BCON_NEW("weight", BCON_INT32((int32_t)weight)) : bson_new();
}

/* One claim through capacity.c that returns a task of `weight` (0: a task without one). */
static cohort_claim_filter_t claim(int64_t weight)
{
    pthread_mutex_lock(&service.lock);
    cr_assert(cohort_capacity_may_claim(&service), "a claim was refused");
    cohort_capacity_reserve(&service);
    cr_assert_not(cohort_capacity_may_claim(&service), "two claims in flight at once");
    pthread_mutex_unlock(&service.lock);
    cohort_claim_filter_t filter = {0};
    cohort_capacity_filter(&service, &filter);
    bson_t *doc = task_of_weight(weight);
    cohort_capacity_claimed(&service, doc, 1);
    bson_destroy(doc);
    return filter;
}

static bool may_claim(void)
{
    pthread_mutex_lock(&service.lock);
    bool may = cohort_capacity_may_claim(&service);
    pthread_mutex_unlock(&service.lock);
    return may;
}

static void release(int64_t weight)
{
    bson_t *doc = task_of_weight(weight);
    cohort_capacity_release(&service, doc);
    bson_destroy(doc);
}

Test(weight, a_node_claims_while_the_weight_it_holds_fits_its_capacity)
{
    make_service(0, 3); /* capacity: the 3 workers */
    cohort_claim_filter_t f = claim(2);
    cr_assert_eq(f.weight_room, 3);
    cr_assert(f.weight_any_first, "a node holding nothing takes any one task");
    f = claim(0); /* a task written before weights: 1 */
    cr_assert_eq(f.weight_room, 1, "2 held of 3: room for 1");
    cr_assert_not(f.weight_any_first);
    cr_assert_not(may_claim(), "3 of 3 held: no claim");
    release(2);
    cr_assert(may_claim());
    f = claim(1);
    cr_assert_eq(f.weight_room, 2);
    release(1);
    release(0);
    f = claim(5); /* heavier than the capacity: alone */
    cr_assert(f.weight_any_first);
    cr_assert_not(may_claim(), "5 held of 3: no claim until it ends");
    release(5);
    cr_assert(may_claim());
}

Test(weight, capacity_overrides_the_worker_count_and_can_change)
{
    make_service(1, 4);
    claim(1);
    cr_assert_not(may_claim(), "capacity 1: one task at a time");
    cohort_capacity_set(&service, 3);
    cr_assert(may_claim(), "the new capacity applies at once");
    int64_t capacity = 0, held = 0;
    cohort_capacity_read(&service, &capacity, &held);
    cr_assert_eq(capacity, 3);
    cr_assert_eq(held, 1);
    cohort_capacity_set(&service, 0);
    cohort_capacity_read(&service, &capacity, &held);
    cr_assert_eq(capacity, 4, "0: the worker count");
}

/* A claim through capacity.c that comes back empty. */
static void claim_nothing(void)
{
    pthread_mutex_lock(&service.lock);
    cohort_capacity_reserve(&service);
    pthread_mutex_unlock(&service.lock);
    cohort_capacity_claimed(&service, NULL, 0);
}

static bool missed_by_weight(void)
{
    pthread_mutex_lock(&service.lock);
    bool missed = cohort_capacity_missed_by_weight(&service);
    pthread_mutex_unlock(&service.lock);
    return missed;
}

Test(weight, an_empty_claim_limited_by_room_is_no_sign_of_an_empty_queue)
{
    make_service(0, 3);
    claim_nothing();
    cr_assert_not(missed_by_weight(), "holding nothing, the claim had no limit: nothing due");
    claim(2);
    claim_nothing();
    cr_assert(missed_by_weight(), "room 1: heavier tasks may be due");
    claim(1);
    cr_assert_not(missed_by_weight(), "a claim that found a task clears it");
}
