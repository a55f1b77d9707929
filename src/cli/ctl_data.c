/*
 * ctl_data.c - `cohortctl data get|set|unset SERVICE KEY [JSON]`: a service's generic data,
 * the same key-value map handlers read and write with cohort_get() and cohort_set().
 *
 * Values are any JSON value; storing null removes the key, as cohort_set() does. Keys are
 * 1-64 characters without '.' or '$' (they become field names in the service's document).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/jsondoc.h"
#include "store/data.h"
#include "store/services.h"

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

/* cohortctl data get SERVICE KEY | data set SERVICE KEY JSON | data unset SERVICE KEY */
int cmd_data(ctl_t *ctl, int argc, char **argv)
{
    struct option none[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, none);
    ctl_reset_getopt();
    /* "+": operands only, so that a JSON value such as -5 is not taken for an option. */
    bool options = getopt_long(argc, argv, "+:", none, NULL) != -1;
    argc -= optind;
    argv += optind;
    if (options || argc < 3 || (strcmp(argv[0], "set") == 0 ? argc != 4 : argc != 3) ||
        (strcmp(argv[0], "get") != 0 && strcmp(argv[0], "set") != 0 &&
         strcmp(argv[0], "unset") != 0)) {
        fprintf(stderr, "cohortctl data: get SERVICE KEY, set SERVICE KEY JSON (any JSON "
                        "value) or unset SERVICE KEY\n");
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
    bson_t wrapped, *wrapper = NULL;
    bson_iter_t value;
    if (strcmp(verb, "set") == 0) {
        /* Any JSON value: parse it as the value of a one-key document, through the gate
         * every stored document passes (core/jsondoc.h): its paths start with "value". */
        char *json = NULL;
        if (asprintf(&json, "{\"value\": %s}", argv[3]) < 0)
            return CTL_FAILED;
        bson_error_t error;
        bool parsed = cohort_json_parse_doc(json, true, &wrapped, &error);
        free(json);
        if (parsed)
            wrapper = &wrapped;
        if (!parsed || !bson_iter_init_find(&value, wrapper, "value")) {
            fprintf(stderr, "cohortctl data set: '%s' is not a JSON value Cohort can store: %s\n",
                    argv[3], parsed ? "it is empty" : error.message);
            bson_destroy(wrapper);
            return CTL_USAGE;
        }
    }
    if (!ctl_open_store(ctl)) {
        bson_destroy(wrapper);
        return CTL_FAILED;
    }
    bson_error_t error;
    int rc = CTL_DONE;
    if (strcmp(verb, "get") == 0) {
        bson_value_t v;
        bool found = false;
        if (!cohort_store_get_data(ctl->store, ctl->client, service, key, &v, &found, &error)) {
            fprintf(stderr, "cohortctl data get: %s\n", error.message);
            rc = CTL_FAILED;
        } else if (!found) {
            bson_t doc;
            bool exists = true;
            cohort_store_read_service(ctl->store, ctl->client, service, &doc, &exists, &error);
            bson_destroy(&doc);
            if (!exists) {
                rc = ctl_unknown_service(ctl, service, "data get");
            } else {
                fprintf(stderr, "cohortctl data get: '%s' is not set for service '%s'\n", key,
                        service);
                rc = CTL_FAILED;
            }
        } else {
            print_value(&v);
            bson_value_destroy(&v);
        }
    } else {
        bool applied = false;
        const bson_value_t *v = wrapper ? bson_iter_value(&value) : NULL;
        if (v && v->value_type == BSON_TYPE_NULL)
            v = NULL; /* as in cohort_set(): storing null removes the key */
        if (!cohort_store_set_data(ctl->store, ctl->client, service, key, v, NULL, 0, &applied,
                                   &error)) {
            fprintf(stderr, "cohortctl data %s: %s\n", verb, error.message);
            rc = CTL_FAILED;
        } else if (!applied) {
            char command[32];
            snprintf(command, sizeof command, "data %s", verb);
            rc = ctl_unknown_service(ctl, service, command);
        }
    }
    bson_destroy(wrapper);
    return rc;
}

