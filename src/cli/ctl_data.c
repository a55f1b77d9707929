/*
 * ctl_data.c - `cohortctl data get|set|unset|inc|cas SERVICE KEY ...`: a service's generic
 * data, the same key-value map handlers read and write with cohort_get(), cohort_set(),
 * cohort_data_inc() and cohort_data_cas().
 *
 * Values are any JSON value; storing null removes the key, as cohort_set() does. Keys are
 * 1-64 characters without '.' or '$' (they become field names in the service's document).
 * inc and cas are one findAndModify each (store/data.c), unfenced as from process_task: two
 * operators, or an operator and a handler, never lose each other's update.
 * Exit status: 0 done; 1 the database, or `get` of a key that is not set; 2 bad usage, an
 * unknown service, or `inc` of a value that is not an integer or would overflow; 3 `cas`
 * found another value (printed on stdout, `null` when absent) and changed nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/jsondoc.h"
#include "store/data.h"
#include "store/services.h"

#define INC_TRIES 3 /* an increment missed because the value changed meanwhile is tried again */

/* libbson prints documents, not bare values: the value is printed as the only field of a
 * document, and the text libbson puts around a field is learnt from the same document with
 * null in it, so the output follows libbson's own format whatever its spacing. */
static void print_value(const bson_value_t *value)
{
    bson_t probe = BSON_INITIALIZER, doc = BSON_INITIALIZER;
    BSON_APPEND_NULL(&probe, "v");
    bson_append_value(&doc, "v", 1, value);
    char *frame = bson_as_relaxed_extended_json(&probe, NULL);
    char *text = bson_as_relaxed_extended_json(&doc, NULL);
    const char *hole = strstr(frame, "null");
    size_t before = (size_t)(hole - frame), after = strlen(hole + 4), len = strlen(text);
    printf("%.*s\n", (int)(len - before - after), text + before);
    bson_free(text);
    bson_free(frame);
    bson_destroy(&doc);
    bson_destroy(&probe);
}

/* A JSON value typed on the command line, copied into *copy (release it with
 * bson_value_destroy(); the caller set its type to BSON_TYPE_NULL); *value points at it, or
 * is NULL for null (absent, as in cohort_set()). The value passes through the gate every
 * stored document passes (core/jsondoc.h) as the field "value" of a document: its paths
 * start with "value". False, with the message printed, if `text` is not a JSON value Cohort
 * can store. */
static bool parse_value(const char *verb, const char *what, const char *text, bson_value_t *copy,
                        const bson_value_t **value)
{
    char *json = NULL;
    if (asprintf(&json, "{\"value\": %s}", text) < 0)
        return false;
    bson_error_t error;
    bson_t wrapper;
    bool parsed = cohort_json_parse_doc(json, true, &wrapper, &error);
    free(json);
    bson_iter_t it;
    bool found = parsed && bson_iter_init_find(&it, &wrapper, "value");
    if (found)
        bson_value_copy(bson_iter_value(&it), copy);
    if (parsed)
        bson_destroy(&wrapper);
    if (!found) {
        fprintf(stderr, "cohortctl data %s: %s '%s' is not a JSON value Cohort can store: %s\n",
                verb, what, text, parsed ? "it is empty" : error.message);
        return false;
    }
    *value = copy->value_type == BSON_TYPE_NULL ? NULL : copy;
    return true;
}

/* The value of `key` now (*found false: not set; *exists false: no such service). */
static bool read_current(ctl_t *ctl, const char *service, const char *key, bson_value_t *v,
                         bool *found, bool *exists, bson_error_t *error)
{
    *exists = true;
    if (!cohort_store_get_data(ctl->store, ctl->client, service, key, v, found, error))
        return false;
    if (*found)
        return true;
    bson_t doc;
    bool ok = cohort_store_read_service(ctl->store, ctl->client, service, &doc, exists, error);
    bson_destroy(&doc);
    return ok;
}

static int data_get(ctl_t *ctl, const char *service, const char *key)
{
    bson_value_t v;
    bool found, exists;
    bson_error_t error;
    if (!read_current(ctl, service, key, &v, &found, &exists, &error)) {
        fprintf(stderr, "cohortctl data get: %s\n", error.message);
        return CTL_FAILED;
    }
    if (!exists)
        return ctl_unknown_service(ctl, service, "data get");
    if (!found) {
        fprintf(stderr, "cohortctl data get: '%s' is not set for service '%s'\n", key, service);
        return CTL_FAILED;
    }
    print_value(&v);
    bson_value_destroy(&v);
    return CTL_DONE;
}

/* set KEY JSON, unset KEY (value NULL) */
static int data_set(ctl_t *ctl, const char *verb, const char *service, const char *key,
                    const bson_value_t *value)
{
    bool applied = false;
    bson_error_t error;
    if (!cohort_store_set_data(ctl->store, ctl->client, service, key, value, NULL, 0, &applied,
                               &error)) {
        fprintf(stderr, "cohortctl data %s: %s\n", verb, error.message);
        return CTL_FAILED;
    }
    if (applied)
        return CTL_DONE;
    char command[32];
    snprintf(command, sizeof command, "data %s", verb);
    return ctl_unknown_service(ctl, service, command);
}

/* inc KEY [DELTA]: prints the new value. A miss is explained by a read: no service, a value
 * that is not an integer, or one the sum would overflow; a value that changed meanwhile
 * (removed, or made an integer) is tried again. */
static int data_inc(ctl_t *ctl, const char *service, const char *key, int64_t delta)
{
    bson_error_t error;
    for (int tries = 0; tries < INC_TRIES; tries++) {
        bool applied = false, found, exists;
        int64_t sum = 0;
        if (!cohort_store_inc_data(ctl->store, ctl->client, service, key, delta, NULL, 0, &sum,
                                   &applied, &error))
            break;
        if (applied) {
            printf("%lld\n", (long long)sum);
            return CTL_DONE;
        }
        bson_value_t v;
        if (!read_current(ctl, service, key, &v, &found, &exists, &error))
            break;
        if (!exists)
            return ctl_unknown_service(ctl, service, "data inc");
        if (!found)
            continue;
        bson_type_t type = v.value_type;
        bson_value_destroy(&v);
        if (type == BSON_TYPE_INT32 || type == BSON_TYPE_INT64) {
            fprintf(stderr, "cohortctl data inc: refused: '%s' + %lld would overflow a 64-bit "
                            "integer; nothing changed\n", key, (long long)delta);
            return CTL_REFUSED;
        }
        fprintf(stderr, "cohortctl data inc: refused: '%s' is %s, not an integer; nothing "
                        "changed\n", key, cohort_value_type_name(type));
        return CTL_REFUSED;
    }
    fprintf(stderr, "cohortctl data inc: %s\n",
            error.domain ? error.message : "the value kept changing under the increment");
    return CTL_FAILED;
}

/* cas KEY EXPECTED NEW: sets NEW only if KEY holds EXPECTED (null: absent); otherwise prints
 * the value it holds and exits 3. */
static int data_cas(ctl_t *ctl, const char *service, const char *key,
                    const bson_value_t *expected, const bson_value_t *value)
{
    bool applied = false, found, exists;
    bson_error_t error = {0};
    bson_value_t v;
    if (cohort_store_cas_data(ctl->store, ctl->client, service, key, expected, value, NULL, 0,
                              &applied, &error) &&
        (applied || read_current(ctl, service, key, &v, &found, &exists, &error))) {
        if (applied)
            return CTL_DONE;
        if (!exists)
            return ctl_unknown_service(ctl, service, "data cas");
        if (found) {
            print_value(&v);
            bson_value_destroy(&v);
        } else {
            printf("null\n");
        }
        fprintf(stderr, "cohortctl data cas: '%s' holds another value (printed); nothing "
                        "changed\n", key);
        return CTL_DIFFERS;
    }
    fprintf(stderr, "cohortctl data cas: %s\n", error.message);
    return CTL_FAILED;
}

/* The operands each verb takes after SERVICE KEY: min and max. */
static bool operands_fit(const char *verb, int n)
{
    static const struct {
        const char *verb;
        int min, max;
    } verbs[] = {{"get", 0, 0}, {"set", 1, 1}, {"unset", 0, 0}, {"inc", 0, 1}, {"cas", 2, 2}};
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (strcmp(verb, verbs[i].verb) == 0)
            return n >= verbs[i].min && n <= verbs[i].max;
    return false;
}

/* cohortctl data get|set|unset|inc|cas SERVICE KEY [...] */
int cmd_data(ctl_t *ctl, int argc, char **argv)
{
    struct option none[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, none);
    ctl_reset_getopt();
    /* "+": operands only, so that a JSON value such as -5 is not taken for an option. */
    bool options = getopt_long(argc, argv, "+:", none, NULL) != -1;
    argc -= optind;
    argv += optind;
    if (options || argc < 3 || !operands_fit(argv[0], argc - 3)) {
        fprintf(stderr, "cohortctl data: get SERVICE KEY, set SERVICE KEY JSON (any JSON "
                        "value), unset SERVICE KEY, inc SERVICE KEY [DELTA] or cas SERVICE KEY "
                        "EXPECTED NEW\n");
        return CTL_USAGE;
    }
    const char *verb = argv[0], *service = argv[1], *key = argv[2];
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl data: '%s' is not a valid service name\n", service);
        return CTL_USAGE;
    }
    if (!*key || strlen(key) > 64 || strpbrk(key, ".$")) {
        fprintf(stderr, "cohortctl data: key '%s' is invalid (1-64 characters, no '.' or '$')\n",
                key);
        return CTL_USAGE;
    }
    int64_t delta = 1;
    if (strcmp(verb, "inc") == 0 && argc == 4 && !ctl_parse_int(argv[3], &delta)) {
        fprintf(stderr, "cohortctl data inc: DELTA '%s' is not a 64-bit integer\n", argv[3]);
        return CTL_USAGE;
    }
    /* set's value; cas's expected value and new one */
    bson_value_t first = {.value_type = BSON_TYPE_NULL}, second = first;
    const bson_value_t *a = NULL, *b = NULL;
    bool set = strcmp(verb, "set") == 0, cas = strcmp(verb, "cas") == 0;
    int rc = CTL_USAGE;
    if ((set && !parse_value(verb, "value", argv[3], &first, &a)) ||
        (cas && (!parse_value(verb, "EXPECTED", argv[3], &first, &a) ||
                 !parse_value(verb, "NEW", argv[4], &second, &b))))
        goto out;
    rc = CTL_FAILED;
    if (!ctl_open_store(ctl))
        goto out;
    if (strcmp(verb, "get") == 0)
        rc = data_get(ctl, service, key);
    else if (strcmp(verb, "inc") == 0)
        rc = data_inc(ctl, service, key, delta);
    else if (cas)
        rc = data_cas(ctl, service, key, a, b);
    else
        rc = data_set(ctl, verb, service, key, a);
out:
    bson_value_destroy(&first);
    bson_value_destroy(&second);
    return rc;
}
