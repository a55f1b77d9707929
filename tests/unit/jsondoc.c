/*
 * jsondoc.c - the gate for stored documents (src/core/jsondoc.h): integers past int64 (which
 * libbson 1.23 wraps modulo 2^64), text after the object, duplicate, empty and '$' keys, and
 * nesting are refused with a message naming the field; ordinary documents pass unchanged.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "core/jsondoc.h"

/* Parses `json` with the body depth of a batch; true if accepted. */
static bool parse(const char *json, bson_error_t *error)
{
    bson_t doc;
    if (!cohort_json_parse_object(json, -1, COHORT_DOC_DEPTH_MAX + 3, &doc, error))
        return false;
    bson_destroy(&doc);
    return true;
}

static void refused(const char *json, const char *expect)
{
    bson_error_t error;
    cr_assert_not(parse(json, &error), "accepted: %s", json);
    cr_assert(strstr(error.message, expect), "%s: message '%s' lacks '%s'", json, error.message,
              expect);
}

Test(jsondoc, integers_past_int64_are_refused_with_their_field)
{
    refused("{\"priority\": 18446744073709551621}", "field 'priority': 18446744073709551621");
    refused("{\"weight\": 36893488147419103239}", "outside the 64-bit integer range");
    refused("{\"delay_ms\": 18446744073769551616}", "field 'delay_ms'");
    refused("{\"data\": {\"n\": 18446744073709551621}}", "field 'data.n'");
    refused("{\"tasks\": [{}, {\"data\": {\"a\": [1, 2, 18446744073709551621]}}]}",
            "field 'tasks[1].data.a[2]'");
    refused("{\"a\": 9223372036854775808}", "field 'a'");
    refused("{\"a\": -9223372036854775809}", "field 'a'");
    refused("{\"a\": -18446744073709551621}", "field 'a'");
    refused("{\"a\": 100000000000000000000000000000000000000000000000000}", "...");
}

Test(jsondoc, integers_within_int64_and_doubles_pass_exactly)
{
    bson_t doc;
    bson_error_t error;
    const char *json = "{\"max\": 9223372036854775807, \"min\": -9223372036854775808, "
                       "\"zeros\": 0, \"big\": 1.8446744073709552e19, "
                       "\"s\": \"18446744073709551621\"}";
    cr_assert(cohort_json_parse_object(json, -1, 10, &doc, &error), "%s", error.message);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, &doc, "max") && bson_iter_as_int64(&it) == INT64_MAX);
    cr_assert(bson_iter_init_find(&it, &doc, "min") && bson_iter_as_int64(&it) == INT64_MIN);
    cr_assert(bson_iter_init_find(&it, &doc, "big") && BSON_ITER_HOLDS_DOUBLE(&it));
    cr_assert(bson_iter_init_find(&it, &doc, "s") && BSON_ITER_HOLDS_UTF8(&it));
    bson_destroy(&doc);
}

Test(jsondoc, anything_after_the_object_is_refused)
{
    refused("{\"a\": 1}{\"b\": 2}", "something follows it");
    refused("{\"a\": 1} {\"status\": \"pending\"}", "ends at byte 8");
    refused("{\"a\": 1}\n5", "something follows it");
    bson_error_t error;
    cr_assert(parse("  {\"a\": \"}{\"}  \r\n\t", &error), "%s", error.message);
    cr_assert(parse("{\"a\": \"\\\"}\"}", &error), "%s", error.message);
}

Test(jsondoc, keys_the_database_refuses_are_refused_with_their_path)
{
    refused("{\"data\": {\"a\": 1, \"a\": 2}}", "field 'data.a' given twice");
    refused("{\"a\": 1, \"b\": 2, \"a\": 3}", "field 'a' given twice");
    refused("{\"data\": {\"x\": [{\"\": 1}]}}", "field 'data.x[0].': a key is empty");
    refused("{\"data\": {\"$where\": 1}}", "field 'data.$where': a key may not start with '$'");
    bson_error_t error;
    /* '.' in a key is stored by MongoDB 5.0+; extended JSON's $date is a date, not a key. */
    cr_assert(parse("{\"data\": {\"a.b\": 1, \"when\": {\"$date\": \"2026-01-01T00:00:00Z\"}}}",
                    &error),
              "%s", error.message);
}

Test(jsondoc, nesting_is_bounded)
{
    char deep[1024] = "";
    for (int i = 0; i < COHORT_DOC_DEPTH_MAX + 4; i++)
        strcat(deep, "{\"a\":");
    strcat(deep, "1");
    for (int i = 0; i < COHORT_DOC_DEPTH_MAX + 4; i++)
        strcat(deep, "}");
    refused(deep, "nested deeper than");
}

Test(jsondoc, not_an_object_or_broken_json_is_refused)
{
    refused("[1, 2]", "must be an object");
    refused("{\"a\": }", "is not valid");
    refused("{\"a\": 1", "is not valid");
}

Test(jsondoc, bson_from_a_handler_passes_the_same_rules)
{
    bson_error_t error;
    bson_t *doc = bson_new();
    BSON_APPEND_INT32(doc, "n", 1);
    BSON_APPEND_INT32(doc, "n", 2);
    cr_assert_not(cohort_doc_check(doc, "data", &error));
    cr_assert(strstr(error.message, "field 'data.n' given twice"), "%s", error.message);
    bson_reinit(doc);
    BSON_APPEND_INT32(doc, "", 1);
    cr_assert_not(cohort_doc_check(doc, "data", &error));
    bson_reinit(doc);
    bson_t child;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "inner", &child);
    BSON_APPEND_INT32(&child, "$set", 1);
    bson_append_document_end(doc, &child);
    cr_assert_not(cohort_doc_check(doc, "data", &error));
    cr_assert(strstr(error.message, "'data.inner.$set'"), "%s", error.message);
    bson_reinit(doc);
    BSON_APPEND_INT32(doc, "ok", 1);
    cr_assert(cohort_doc_check(doc, "data", &error), "%s", error.message);
    /* A value with a repeated key (cohort_set) is refused; a scalar passes. */
    bson_t *value = bson_new();
    BSON_APPEND_INT32(value, "x", 1);
    BSON_APPEND_INT32(value, "x", 1);
    bson_value_t v = {.value_type = BSON_TYPE_DOCUMENT};
    v.value.v_doc.data = (uint8_t *)bson_get_data(value);
    v.value.v_doc.data_len = value->len;
    cr_assert_not(cohort_value_check(&v, "counts", &error));
    cr_assert(strstr(error.message, "'counts.x'"), "%s", error.message);
    bson_value_t n = {.value_type = BSON_TYPE_INT64, .value.v_int64 = 5};
    cr_assert(cohort_value_check(&n, "counts", &error));
    bson_destroy(value);
    bson_destroy(doc);
}

Test(jsondoc, deep_bson_is_refused)
{
    bson_t *docs[COHORT_DOC_DEPTH_MAX + 2];
    for (int i = 0; i < COHORT_DOC_DEPTH_MAX + 2; i++) {
        docs[i] = bson_new();
    }
    BSON_APPEND_INT32(docs[COHORT_DOC_DEPTH_MAX + 1], "x", 1);
    for (int i = COHORT_DOC_DEPTH_MAX; i >= 0; i--)
        BSON_APPEND_DOCUMENT(docs[i], "a", docs[i + 1]);
    bson_error_t error;
    cr_assert_not(cohort_doc_check(docs[0], "data", &error));
    cr_assert(strstr(error.message, "nested deeper than 64"), "%s", error.message);
    cr_assert(cohort_doc_check(docs[2], "data", &error), "%s", error.message);
    for (int i = 0; i < COHORT_DOC_DEPTH_MAX + 2; i++)
        bson_destroy(docs[i]);
}

Test(jsondoc, parse_doc_bounds_a_users_document)
{
    bson_t doc;
    bson_error_t error;
    cr_assert(cohort_json_parse_doc("{\"k\": [1, {\"v\": null}]}", false, &doc, &error), "%s",
              error.message);
    bson_destroy(&doc);
    cr_assert_not(cohort_json_parse_doc("{\"k\": 1, \"k\": 1}", false, &doc, &error));
    cr_assert_not(cohort_json_parse_doc("{\"k\": 1} x", true, &doc, &error));
    cr_assert_not(cohort_json_parse_doc("{\"$k\": 1}", false, &doc, &error));
    cr_assert(cohort_json_parse_doc("{\"$k\": 1}", true, &doc, &error), "%s", error.message);
    bson_destroy(&doc);
}
