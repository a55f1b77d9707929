/*
 * ctl_tokens.c - `cohortctl tokens` end to end against the local database: create prints the
 * token once and stores only its SHA-256; a duplicate name is refused with exit 2; list
 * (table and --json) never shows the token or its hash; revoke deletes it; bad scopes and
 * names are refused before the database is touched.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "support.h"
#include "core/token.h"

static char *db;
static mongoc_client_t *client;

static void setup(void)
{
    db = test_db_name("tok");
    client = test_client();
}

static void teardown(void)
{
    mongoc_client_destroy(client);
    test_drop_db(db);
    free(db);
}

TestSuite(ctl_tokens, .init = setup, .fini = teardown, .timeout = 60);

#define ctl(...) test_ctl(db, __VA_ARGS__)

Test(ctl_tokens, create_stores_only_the_hash_and_list_never_shows_it)
{
    test_run_result_t r = ctl("tokens", "create", "ci", "--scopes", "read,enqueue");
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    char token[COHORT_TOKEN_TEXT_MAX + 2] = "";
    snprintf(token, sizeof token, "%s", r.out);
    char *nl = strchr(token, '\n');
    cr_assert(nl && nl[1] == '\0', "create must print one line, got '%s'", r.out);
    *nl = '\0';
    cr_assert(cohort_token_well_formed(token), "not a token: '%s'", token);
    test_run_result_free(&r);

    char hash[COHORT_TOKEN_HASH_HEX], filter[200];
    cr_assert(cohort_token_hash(token, hash, sizeof hash));
    snprintf(filter, sizeof filter, "{\"_id\": \"ci\", \"hash\": \"%s\", \"scopes\": "
             "[\"read\", \"enqueue\"]}", hash);
    cr_assert_eq(test_count(client, db, "tokens", filter), 1);
    char has_token[200];
    snprintf(has_token, sizeof has_token,
             "{\"$or\": [{\"hash\": \"%s\"}, {\"token\": {\"$exists\": true}}]}", token);
    cr_assert_eq(test_count(client, db, "tokens", has_token), 0, "the token itself is stored");

    r = ctl("tokens", "create", "ci", "--scopes", "admin");
    cr_assert_eq(r.exit_code, 2, "a duplicate name: exit %d (%s)", r.exit_code, r.err);
    cr_assert(strstr(r.err, "exists already"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    test_run_result_free(&r);

    r = ctl("tokens", "list", "--json");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\"name\" : \"ci\""), "%s", r.out);
    cr_assert(strstr(r.out, "\"last_used\" : null"), "%s", r.out);
    cr_assert_null(strstr(r.out, token), "list shows the token");
    cr_assert_null(strstr(r.out, hash), "list shows the hash");
    test_run_result_free(&r);
    r = ctl("tokens", "list");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "read,enqueue"), "%s", r.out);
    cr_assert_null(strstr(r.out, hash), "list shows the hash");
    test_run_result_free(&r);

    r = ctl("tokens", "revoke", "ci");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    test_run_result_free(&r);
    cr_assert_eq(test_count(client, db, "tokens", "{}"), 0);
    r = ctl("tokens", "revoke", "ci");
    cr_assert_eq(r.exit_code, 1, "revoking twice: exit %d", r.exit_code);
    cr_assert(strstr(r.err, "no token named 'ci'"), "%s", r.err);
    test_run_result_free(&r);
}

Test(ctl_tokens, bad_scopes_and_names_are_usage_errors)
{
    const char *const *cases[] = {
        (const char *const[]){"tokens", "create", "x", "--scopes", "read,root", NULL},
        (const char *const[]){"tokens", "create", "x", "--scopes", "", NULL},
        (const char *const[]){"tokens", "create", "x", NULL},
        (const char *const[]){"tokens", "create", "bad/name", "--scopes", "read", NULL},
        (const char *const[]){"tokens", "frob", NULL},
        (const char *const[]){"tokens", "list", "extra", NULL},
        (const char *const[]){"tokens", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_run_result_t r = test_ctl_run(db, NULL, cases[i]);
        cr_assert_eq(r.exit_code, 2, "case %zu: exit %d (%s)", i, r.exit_code, r.err);
        cr_assert_str_eq(r.out, "", "case %zu printed '%s'", i, r.out);
        test_run_result_free(&r);
    }
    cr_assert_eq(test_count(client, db, "tokens", "{}"), 0);
}
