/*
 * ctl_tokens.c - `cohortctl tokens create NAME --scopes S,... | list [--json] | revoke NAME`:
 * the API's bearer tokens.
 *
 * `create` prints the new token once, on stdout, alone on its line: the database keeps only
 * its SHA-256 (core/token.h, store/tokens.h), so it cannot be shown again. `list` never shows
 * a token or its hash. A revoked token is refused by every node within one tick (the nodes
 * cache a token for at most one tick).
 */
#include <stdio.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/timefmt.h"
#include "core/token.h"
#include "node/status/api_json.h"
#include "store/sessions.h"
#include "store/tokens.h"

#define TOKENS_USAGE                                                                          \
    "usage: cohortctl tokens create NAME --scopes read,enqueue,operate,work,admin\n"          \
    "       cohortctl tokens list [--json]\n"                                                  \
    "       cohortctl tokens revoke NAME\n"

static int tokens_usage(const char *why, const char *arg)
{
    fprintf(stderr, "cohortctl tokens: %s%s%s%s\n%s", why, arg ? " '" : "", arg ? arg : "",
            arg ? "'" : "", TOKENS_USAGE);
    return CTL_USAGE;
}

/* The scope bits as the array of names the collection stores. */
static void scopes_array(uint32_t scopes, bson_t *array)
{
    bson_init(array);
    uint32_t n = 0;
    for (int i = 0; i < COHORT_SCOPE_COUNT; i++) {
        if (!(scopes & (1u << i)))
            continue;
        char key[16];
        const char *k;
        bson_uint32_to_string(n++, &k, key, sizeof key);
        BSON_APPEND_UTF8(array, k, cohort_scope_names[i]);
    }
}

static int tokens_create(ctl_t *ctl, const char *name, const char *scopes_text)
{
    uint32_t scopes = 0;
    bson_error_t error;
    if (!cohort_token_valid_name(name))
        return tokens_usage("NAME must be 1-64 of [A-Za-z0-9_.-], not", name);
    if (!scopes_text)
        return tokens_usage("--scopes is required (read, enqueue, operate, work, admin)", NULL);
    if (!cohort_scopes_parse(scopes_text, &scopes, &error))
        return tokens_usage(error.message, NULL);
    char token[COHORT_TOKEN_TEXT_MAX], hash[COHORT_TOKEN_HASH_HEX];
    if (!cohort_token_generate(token, sizeof token, &error) ||
        !cohort_token_hash(token, hash, sizeof hash)) {
        fprintf(stderr, "cohortctl tokens create: %s\n", error.message);
        return CTL_FAILED;
    }
    if (!ctl_reach_database(ctl, NULL))
        return CTL_FAILED;
    bson_t array;
    scopes_array(scopes, &array);
    char by[300];
    ctl_author(by, sizeof by);
    bool exists = false;
    bool ok = cohort_store_create_token(ctl->store, ctl->client, name, hash, &array, by, &exists,
                                        &error);
    bson_destroy(&array);
    if (exists) {
        fprintf(stderr,
                "cohortctl tokens create: a token named '%s' exists already (revoke it first, "
                "or choose another name)\n",
                name);
        return CTL_USAGE;
    }
    if (!ok) {
        fprintf(stderr, "cohortctl tokens create: %s\n", error.message);
        return CTL_FAILED;
    }
    printf("%s\n", token);
    fflush(stdout);
    fprintf(stderr,
            "cohortctl tokens create: token '%s' created; it is shown only now: keep it\n",
            name);
    return CTL_DONE;
}

typedef struct token_list {
    bson_t *tokens; /* the JSON array being built */
    uint32_t n;
    bool json;
} token_list_t;

/* The scopes of a token's document joined by commas, and copied into `one`. */
static void token_scopes(const bson_t *doc, bson_t *one, char *text, size_t len)
{
    text[0] = '\0';
    bson_iter_t it, arr;
    bson_t out;
    BSON_APPEND_ARRAY_BEGIN(one, "scopes", &out);
    uint32_t n = 0;
    if (bson_iter_init_find(&it, doc, "scopes") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &arr)) {
        while (bson_iter_next(&arr)) {
            if (!BSON_ITER_HOLDS_UTF8(&arr))
                continue;
            char key[16];
            const char *k;
            bson_uint32_to_string(n++, &k, key, sizeof key);
            BSON_APPEND_UTF8(&out, k, bson_iter_utf8(&arr, NULL));
            snprintf(text + strlen(text), len - strlen(text), "%s%s", text[0] ? "," : "",
                     bson_iter_utf8(&arr, NULL));
        }
    }
    bson_append_array_end(one, &out);
}

static bool list_token(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    token_list_t *list = user;
    const char *name = "", *by = NULL;
    ctl_doc_string(doc, "_id", &name);
    ctl_doc_string(doc, "created_by", &by);
    int64_t created = ctl_doc_date(doc, "created_at"), used = ctl_doc_date(doc, "last_used");
    char created_text[COHORT_TIME_TEXT_MAX] = "-", used_text[COHORT_TIME_TEXT_MAX] = "never";
    if (created)
        cohort_time_format(created, created_text, sizeof created_text);
    if (used)
        cohort_time_format(used, used_text, sizeof used_text);
    bson_t one;
    char scopes[128];
    cohort_json_array_begin_document(list->tokens, &list->n, &one);
    BSON_APPEND_UTF8(&one, "name", name);
    token_scopes(doc, &one, scopes, sizeof scopes);
    ctl_append_utf8_or_null(&one, "created_at", created ? created_text : NULL);
    ctl_append_utf8_or_null(&one, "created_by", by);
    ctl_append_utf8_or_null(&one, "last_used", used ? used_text : NULL);
    bson_append_document_end(list->tokens, &one);
    if (!list->json)
        printf("%-24s %-32s %-24s %s\n", name, scopes, created_text, used_text);
    return true;
}

static int tokens_list(ctl_t *ctl, bool json)
{
    if (!ctl_reach_database(ctl, NULL))
        return CTL_FAILED;
    bson_t out = BSON_INITIALIZER, tokens;
    BSON_APPEND_ARRAY_BEGIN(&out, "tokens", &tokens);
    token_list_t list = {.tokens = &tokens, .json = json};
    if (!json)
        printf("%-24s %-32s %-24s %s\n", "NAME", "SCOPES", "CREATED", "LAST USED");
    bson_error_t error;
    bool ok = cohort_store_each_token(ctl->store, ctl->client, list_token, &list, &error);
    bson_append_array_end(&out, &tokens);
    return ctl_finish_listing(&out, json, ok, "cohortctl tokens list: cannot list tokens",
                              &error);
}

static int tokens_revoke(ctl_t *ctl, const char *name)
{
    if (!cohort_token_valid_name(name))
        return tokens_usage("NAME must be 1-64 of [A-Za-z0-9_.-], not", name);
    if (!ctl_reach_database(ctl, NULL))
        return CTL_FAILED;
    bool found = false;
    bson_error_t error;
    if (!cohort_store_revoke_token(ctl->store, ctl->client, name, &found, &error)) {
        fprintf(stderr, "cohortctl tokens revoke: %s\n", error.message);
        return CTL_FAILED;
    }
    /* The dashboard sessions it signed in go with it (a second run ends what a failed one
     * left). */
    int64_t ended = 0;
    if (!cohort_store_end_token_sessions(ctl->store, ctl->client, name, &ended, &error)) {
        fprintf(stderr, "cohortctl tokens revoke: the dashboard sessions of token '%s' could "
                        "not be ended: %s (run it again)\n",
                name, error.message);
        return CTL_FAILED;
    }
    if (!found) {
        fprintf(stderr, "cohortctl tokens revoke: no token named '%s'%s\n", name,
                ended > 0 ? " (its dashboard sessions are ended now)" : "");
        return CTL_FAILED;
    }
    printf("revoked %s: every node refuses it by its next tick", name);
    if (ended > 0)
        printf("; %lld dashboard session(s) signed in with it ended", (long long)ended);
    printf("\n");
    return CTL_DONE;
}

/* tokens create NAME --scopes S | tokens list [--json] | tokens revoke NAME */
int cmd_tokens(ctl_t *ctl, int argc, char **argv)
{
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    const char *scopes = NULL;
    bool json = false;
    int opt;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (opt == 's' && !scopes)
            scopes = optarg;
        else if (opt == 'j')
            json = true;
        else
            return tokens_usage("unexpected argument", ctl_bad_arg(argv));
    }
    const char *verb = optind < argc ? argv[optind] : NULL;
    const char *name = optind + 1 < argc ? argv[optind + 1] : NULL;
    int operands = argc - optind;
    if (!verb)
        return tokens_usage("which of create, list, revoke?", NULL);
    bool is_list = strcmp(verb, "list") == 0;
    bool is_create = strcmp(verb, "create") == 0, is_revoke = strcmp(verb, "revoke") == 0;
    if (!is_list && !is_create && !is_revoke)
        return tokens_usage("unknown subcommand", verb);
    if (operands > (is_list ? 1 : 2))
        return tokens_usage("unexpected argument", argv[optind + (is_list ? 1 : 2)]);
    if (!is_list && !name)
        return tokens_usage("which NAME?", NULL);
    if ((scopes && !is_create) || (json && !is_list))
        return tokens_usage("unexpected option for", verb);
    if (is_create)
        return tokens_create(ctl, name, scopes);
    return is_list ? tokens_list(ctl, json) : tokens_revoke(ctl, name);
}
