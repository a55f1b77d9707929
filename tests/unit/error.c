/*
 * error.c - Cohort's error helpers (src/core/error.h): a prefix keeps the message behind it,
 * and a database error that came without a reason ("", "null", mongo-java-server's "Unknown
 * error: null") is made to say which command failed and its code instead.
 */
#include <criterion/criterion.h>
#include <string.h>

#include <mongoc/mongoc.h>

#include "core/error.h"

Test(error, prefix_keeps_the_message_domain_and_code)
{
    bson_error_t error;
    bson_set_error(&error, 7, 11, "takeover_ms must be > tick_ms");
    cohort_error_prefix(&error, "config line %d: ", 12);
    cr_assert_str_eq(error.message, "config line 12: takeover_ms must be > tick_ms");
    cr_assert_eq(error.domain, 7);
    cr_assert_eq(error.code, 11);
}

Test(error, a_database_error_without_a_reason_names_the_command_and_code)
{
    bson_error_t error;
    bson_set_error(&error, MONGOC_ERROR_QUERY, 1, "Unknown error: null");
    cr_assert(cohort_error_explain_silent(&error, "update of %s", "queue_demo"));
    cr_assert_str_eq(error.message, "the database failed the update of queue_demo (code 1, no "
                                    "message from the server, only \"Unknown error: null\")");
    cr_assert_eq(error.domain, MONGOC_ERROR_QUERY);
    cr_assert_eq(error.code, 1);

    bson_set_error(&error, MONGOC_ERROR_QUERY, 8, "%s", "");
    cr_assert(cohort_error_explain_silent(&error, "find of tasks"));
    cr_assert_str_eq(error.message,
                     "the database failed the find of tasks (code 8, no message from the server)");
    bson_set_error(&error, MONGOC_ERROR_QUERY, 8, "null");
    cr_assert(cohort_error_explain_silent(&error, "find of tasks"));
    cr_assert(strstr(error.message, "the database failed the find of tasks (code 8") != NULL, "%s",
              error.message);
}

Test(error, a_database_error_with_a_reason_is_left_alone)
{
    bson_error_t error;
    bson_set_error(&error, MONGOC_ERROR_QUERY, 11000, "E11000 duplicate key error");
    cr_assert(!cohort_error_explain_silent(&error, "update of queue_demo"));
    cr_assert_str_eq(error.message, "E11000 duplicate key error");
    bson_set_error(&error, MONGOC_ERROR_QUERY, 2, "field 'null' is nullable");
    cr_assert(!cohort_error_explain_silent(&error, "update of queue_demo"));
    cr_assert(!cohort_error_explain_silent(NULL, "update of queue_demo"));
}
