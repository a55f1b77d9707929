/*
 * cohortctl.c - the operator's tool: inspect services and enqueue tasks.
 *
 *   cohortctl [-c FILE] status [--json]
 *   cohortctl [-c FILE] enqueue SERVICE [--count N] [--data JSON] [--tracked]
 *   cohortctl [-c FILE] data get|set|unset SERVICE KEY [JSON]
 *   cohortctl [-c FILE] settings get|set|unset SERVICE [KEY [VALUE]]
 *   cohortctl [-c FILE] nodes [--json]
 *
 * The database comes from FILE's [cluster] section, or without -c from MONGODB_URI and
 * --database (default "cohort"). MONGODB_URI always wins over the file, as in cohortd.
 */
#include <errno.h>
#include <getopt.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "log.h"
#include "store.h"

#ifndef COHORT_VERSION
#define COHORT_VERSION "0.0.0"
#endif

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: cohortctl [-c FILE | --database NAME] COMMAND ...\n"
            "\n"
            "Commands:\n"
            "  status [--json]      per service: primary (node, epoch, last active) and task\n"
            "                       counts by status\n"
            "  enqueue SERVICE [--count N] [--data JSON] [--tracked]\n"
            "                       insert N tasks (default 1) with the JSON document as data\n"
            "                       (default {}); tracked tasks join the service's open batch\n"
            "  data get SERVICE KEY | data set SERVICE KEY JSON | data unset SERVICE KEY\n"
            "                       the service's generic data (any JSON value)\n"
            "  nodes [--json]       nodes seen in the last day: live or expired, last ping\n"
            "  settings get SERVICE | settings set SERVICE KEY VALUE | settings unset SERVICE KEY\n"
            "                       live settings (tick_ms, takeover_ms, primary_task_count,\n"
            "                       secondary_task_count, stall_timeout_ms, *_retention_ms):\n"
            "                       the database value wins over the config file while set\n"
            "\n"
            "The database is taken from FILE, or from MONGODB_URI (default\n"
            "mongodb://127.0.0.1:27017) and --database (default cohort).\n");
}

typedef struct ctl {
    cohort_config_t *config; /* NULL without -c */
    const char *uri;
    const char *database;
    cohort_store_t *store;
    mongoc_client_t *client;
} ctl_t;

static bool open_store(ctl_t *ctl)
{
    bson_error_t error;
    ctl->store = cohort_store_new(ctl->uri, ctl->database, "cohortctl", &error);
    if (!ctl->store) {
        fprintf(stderr, "cohortctl: invalid MongoDB URI: %s\n", error.message);
        return false;
    }
    ctl->client = cohort_store_pop(ctl->store);
    return true;
}

/* Services to report: the config's, or every service document in the database. */
static bool list_services(ctl_t *ctl, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    if (ctl->config) {
        *names = calloc(ctl->config->n_services, sizeof **names);
        for (size_t i = 0; i < ctl->config->n_services; i++)
            (*names)[(*count)++] = strdup(ctl->config->services[i].name);
        return true;
    }
    mongoc_collection_t *coll =
        mongoc_client_get_collection(ctl->client, ctl->database, "services");
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "sort", "{", "_id",
                            BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, &filter, opts, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it)) {
            char **grown = realloc(*names, (*count + 1) * sizeof *grown);
            if (!grown)
                break;
            *names = grown;
            (*names)[(*count)++] = strdup(bson_iter_utf8(&it, NULL));
        }
    }
    bson_error_t error;
    bool ok = !mongoc_cursor_error(cursor, &error);
    if (!ok)
        fprintf(stderr, "cohortctl: cannot list services: %s\n", error.message);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    mongoc_collection_destroy(coll);
    return ok;
}

static int cmd_status(ctl_t *ctl, int argc, char **argv)
{
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else {
            fprintf(stderr, "cohortctl status: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!open_store(ctl))
        return 1;
    bson_error_t error;
    int64_t server_now;
    if (!cohort_store_server_time(ctl->store, ctl->client, &server_now, &error)) {
        fprintf(stderr, "cohortctl: cannot reach the database: %s\n", error.message);
        return 1;
    }
    char **names;
    size_t count;
    if (!list_services(ctl, &names, &count))
        return 1;

    bson_t out = BSON_INITIALIZER, services;
    BSON_APPEND_ARRAY_BEGIN(&out, "services", &services);
    if (!json)
        printf("%-20s %-32s %6s %12s %9s %9s %10s %9s\n", "SERVICE", "PRIMARY", "EPOCH",
               "LAST ACTIVE", "PENDING", "CLAIMED", "SUCCEEDED", "FAILED");
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        bson_t doc;
        bool found = false;
        cohort_status_counts_t counts;
        if (!cohort_store_read_service(ctl->store, ctl->client, names[i], &doc, &found, &error) ||
            !cohort_store_count_tasks(ctl->store, ctl->client, names[i], &counts, &error)) {
            fprintf(stderr, "cohortctl: service '%s': %s\n", names[i], error.message);
            bson_destroy(&doc);
            rc = 1;
            break;
        }
        const char *primary = NULL;
        int64_t epoch = 0, last_active = 0;
        bson_iter_t it;
        if (found && bson_iter_init_find(&it, &doc, "primary") && BSON_ITER_HOLDS_UTF8(&it))
            primary = bson_iter_utf8(&it, NULL);
        if (found && bson_iter_init_find(&it, &doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it))
            epoch = bson_iter_as_int64(&it);
        if (found && bson_iter_init_find(&it, &doc, "last_active") &&
            BSON_ITER_HOLDS_DATE_TIME(&it))
            last_active = bson_iter_date_time(&it);
        int64_t ago = last_active ? server_now - last_active : -1;
        if (ago < 0 && last_active)
            ago = 0;

        char key[16];
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
        bson_t svc, p, c;
        BSON_APPEND_DOCUMENT_BEGIN(&services, k, &svc);
        BSON_APPEND_UTF8(&svc, "name", names[i]);
        if (primary) {
            BSON_APPEND_DOCUMENT_BEGIN(&svc, "primary", &p);
            BSON_APPEND_UTF8(&p, "node_id", primary);
            BSON_APPEND_INT64(&p, "epoch", epoch);
            BSON_APPEND_INT64(&p, "last_active_ms_ago", ago);
            bson_append_document_end(&svc, &p);
        } else {
            BSON_APPEND_NULL(&svc, "primary");
        }
        BSON_APPEND_DOCUMENT_BEGIN(&svc, "counts", &c);
        BSON_APPEND_INT64(&c, "pending", counts.pending);
        BSON_APPEND_INT64(&c, "claimed", counts.claimed);
        BSON_APPEND_INT64(&c, "succeeded", counts.succeeded);
        BSON_APPEND_INT64(&c, "failed", counts.failed);
        bson_append_document_end(&svc, &c);
        bson_append_document_end(&services, &svc);

        if (!json) {
            char active[32] = "-";
            if (primary)
                snprintf(active, sizeof active, "%.1fs ago", (double)ago / 1000.0);
            printf("%-20s %-32s %6lld %12s %9lld %9lld %10lld %9lld\n", names[i],
                   primary ? primary : "(none)", (long long)epoch, active,
                   (long long)counts.pending, (long long)counts.claimed,
                   (long long)counts.succeeded, (long long)counts.failed);
        }
        bson_destroy(&doc);
    }
    bson_append_array_end(&out, &services);
    if (json && rc == 0) {
        char *text = bson_as_relaxed_extended_json(&out, NULL);
        printf("%s\n", text);
        bson_free(text);
    }
    bson_destroy(&out);
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    return rc;
}

static int cmd_enqueue(ctl_t *ctl, int argc, char **argv)
{
    const char *service = NULL, *data_json = NULL;
    int64_t count = 1;
    bool tracked = false, count_given = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            count = strtoll(argv[++i], &end, 10);
            if (errno || *end || count < 1 || count > 100000000) {
                fprintf(stderr, "cohortctl enqueue: --count '%s' must be 1..100000000\n",
                        argv[i]);
                return 2;
            }
            count_given = true;
        } else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            data_json = argv[++i];
        } else if (strcmp(argv[i], "--tracked") == 0) {
            tracked = true;
        } else if (argv[i][0] != '-' && !service) {
            service = argv[i];
        } else {
            fprintf(stderr, "cohortctl enqueue: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!service) {
        fprintf(stderr, "cohortctl enqueue: which SERVICE?\n");
        return 2;
    }
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl enqueue: '%s' is not a valid service name\n", service);
        return 2;
    }
    bson_t *data = NULL;
    if (data_json) {
        if (data_json[strspn(data_json, " \t\r\n")] != '{') {
            fprintf(stderr, "cohortctl enqueue: --data must be a JSON object, like '{\"k\": 1}'\n");
            return 2;
        }
        bson_error_t error;
        data = bson_new_from_json((const uint8_t *)data_json, -1, &error);
        if (!data) {
            fprintf(stderr, "cohortctl enqueue: --data is not a JSON object: %s\n",
                    error.message);
            return 2;
        }
    }
    int rc = 1;
    if (open_store(ctl)) {
        bson_error_t error;
        int64_t server_now = 0;
        /* Tasks are due "now" on the server's clock, not this machine's. */
        if (!cohort_store_server_time(ctl->store, ctl->client, &server_now, &error)) {
            fprintf(stderr, "cohortctl: cannot reach the database: %s\n", error.message);
        } else {
            cohort_new_task_t task = {.data = data,
                                      .tracked = tracked,
                                      .created_by = "cohortctl",
                                      .now_ms = server_now};
            cohort_batch_state_t batches = {.open = 1};
            if (tracked &&
                !cohort_store_batch_state(ctl->store, ctl->client, service, &batches, &error)) {
                fprintf(stderr, "cohortctl enqueue: %s\n", error.message);
                bson_destroy(data);
                return 1;
            }
            task.batch = batches.open;
            if (!count_given) {
                bson_oid_t oid;
                if (cohort_store_insert_task(ctl->store, ctl->client, service, &task, &oid, NULL,
                                             NULL, &error)) {
                    char id[25];
                    bson_oid_to_string(&oid, id);
                    printf("%s\n", id);
                    rc = 0;
                }
            } else {
                int64_t inserted = 0;
                bool ok = cohort_store_insert_tasks(ctl->store, ctl->client, service, &task,
                                                    count, &inserted, &error);
                printf("%lld\n", (long long)inserted);
                rc = ok ? 0 : 1;
            }
            if (rc != 0)
                fprintf(stderr, "cohortctl enqueue: %s\n", error.message);
        }
    }
    bson_destroy(data);
    return rc;
}

/* cohortctl data get SERVICE KEY | data set SERVICE KEY JSON | data unset SERVICE KEY */
static int cmd_data(ctl_t *ctl, int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[0], "set") == 0 ? argc != 4 : argc != 3) ||
        (strcmp(argv[0], "get") != 0 && strcmp(argv[0], "set") != 0 &&
         strcmp(argv[0], "unset") != 0)) {
        fprintf(stderr, "usage: cohortctl data get SERVICE KEY\n"
                        "       cohortctl data set SERVICE KEY JSON   (any JSON value)\n"
                        "       cohortctl data unset SERVICE KEY\n");
        return 2;
    }
    const char *verb = argv[0], *service = argv[1], *key = argv[2];
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl data: '%s' is not a valid service name\n", service);
        return 2;
    }
    if (!*key || strlen(key) > 64 || strpbrk(key, ".$")) {
        fprintf(stderr, "cohortctl data: key '%s' is invalid (1-64 characters, no '.' or '$')\n",
                key);
        return 2;
    }
    bson_t *wrapper = NULL;
    bson_iter_t value;
    if (strcmp(verb, "set") == 0) {
        /* Any JSON value: parse it as the value of a one-key document. */
        char *json = NULL;
        if (asprintf(&json, "{\"v\": %s}", argv[3]) < 0)
            return 1;
        bson_error_t error;
        wrapper = bson_new_from_json((const uint8_t *)json, -1, &error);
        free(json);
        if (!wrapper || !bson_iter_init_find(&value, wrapper, "v")) {
            fprintf(stderr, "cohortctl data set: '%s' is not a JSON value: %s\n", argv[3],
                    wrapper ? "empty" : error.message);
            bson_destroy(wrapper);
            return 2;
        }
    }
    if (!open_store(ctl)) {
        bson_destroy(wrapper);
        return 1;
    }
    bson_error_t error;
    int rc = 0;
    if (strcmp(verb, "get") == 0) {
        bson_value_t v;
        bool found = false;
        if (!cohort_store_get_data(ctl->store, ctl->client, service, key, &v, &found, &error)) {
            fprintf(stderr, "cohortctl data get: %s\n", error.message);
            rc = 1;
        } else if (!found) {
            bson_t doc;
            bool exists = true;
            cohort_store_read_service(ctl->store, ctl->client, service, &doc, &exists, &error);
            bson_destroy(&doc);
            if (!exists)
                fprintf(stderr, "cohortctl data get: service '%s' does not exist (start a node "
                                "that hosts it first)\n",
                        service);
            else
                fprintf(stderr, "cohortctl data get: '%s' is not set for service '%s'\n", key,
                        service);
            rc = 1;
        } else {
            bson_t doc = BSON_INITIALIZER;
            bson_append_value(&doc, "v", 1, &v);
            char *text = bson_as_relaxed_extended_json(&doc, NULL);
            /* Print only the value: strip '{ "v" : ' and ' }'. */
            size_t len = strlen(text);
            printf("%.*s\n", (int)(len - 10), text + 8);
            bson_free(text);
            bson_destroy(&doc);
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
            rc = 1;
        } else if (!applied) {
            fprintf(stderr, "cohortctl data %s: service '%s' does not exist (start a node that "
                            "hosts it first)\n",
                    verb, service);
            rc = 1;
        }
    }
    bson_destroy(wrapper);
    return rc;
}

/* The longest lease_ms any service's primary declared, 0 if none (or on error). */
static int64_t longest_declared_lease(ctl_t *ctl)
{
    mongoc_collection_t *services =
        mongoc_client_get_collection(ctl->client, ctl->database, "services");
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("projection", "{", "lease_ms", BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(services, &filter, opts, NULL);
    int64_t longest = 0;
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "lease_ms") && BSON_ITER_HOLDS_NUMBER(&it) &&
            bson_iter_as_int64(&it) > longest)
            longest = bson_iter_as_int64(&it);
    }
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    mongoc_collection_destroy(services);
    return longest;
}

/* cohortctl nodes [--json]: nodes seen in the last day, live or expired. */
static int cmd_nodes(ctl_t *ctl, int argc, char **argv)
{
    bool json = argc == 1 && strcmp(argv[0], "--json") == 0;
    if (argc > 1 || (argc == 1 && !json)) {
        fprintf(stderr, "usage: cohortctl nodes [--json]\n");
        return 2;
    }
    if (!open_store(ctl))
        return 1;
    bson_error_t error;
    int64_t now;
    if (!cohort_store_server_time(ctl->store, ctl->client, &now, &error)) {
        fprintf(stderr, "cohortctl: cannot reach the database: %s\n", error.message);
        return 1;
    }
    /* A node is live while its last ping is younger than the takeover time: the longest
     * lease a primary declared (primaries expire nodes by their service's), else the file's. */
    int64_t lease = ctl->config ? ctl->config->takeover_ms : 10000;
    int64_t declared = longest_declared_lease(ctl);
    if (declared > 0)
        lease = declared;
    mongoc_collection_t *nodes =
        mongoc_client_get_collection(ctl->client, ctl->database, "nodes");
    bson_t *filter = BCON_NEW("seen_at", "{", "$gte", BCON_DATE_TIME(now - 86400000), "}");
    bson_t *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}", "projection", "{", "stats",
                            BCON_INT32(0), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(nodes, filter, opts, NULL);
    bson_t out = BSON_INITIALIZER, list;
    BSON_APPEND_ARRAY_BEGIN(&out, "nodes", &list);
    if (!json)
        printf("%-32s %-8s %-20s %8s %-8s %10s  %s\n", "NODE", "STATE", "HOST", "PID", "VERSION",
               "LAST PING", "SERVICES");
    const bson_t *doc;
    uint32_t i = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        const char *id = "", *host = "", *version = "";
        int64_t pid = 0, seen = 0;
        bool expired = false;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it))
            id = bson_iter_utf8(&it, NULL);
        if (bson_iter_init_find(&it, doc, "host") && BSON_ITER_HOLDS_UTF8(&it))
            host = bson_iter_utf8(&it, NULL);
        if (bson_iter_init_find(&it, doc, "version") && BSON_ITER_HOLDS_UTF8(&it))
            version = bson_iter_utf8(&it, NULL);
        if (bson_iter_init_find(&it, doc, "pid") && BSON_ITER_HOLDS_NUMBER(&it))
            pid = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, doc, "seen_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
            seen = bson_iter_date_time(&it);
        if (bson_iter_init_find(&it, doc, "expired") && BSON_ITER_HOLDS_BOOL(&it))
            expired = bson_iter_bool(&it);
        int64_t ago = now - seen;
        const char *state = expired || ago > lease ? "expired" : "live";
        char services[512] = "";
        bson_iter_t arr;
        if (bson_iter_init_find(&it, doc, "services") && BSON_ITER_HOLDS_ARRAY(&it) &&
            bson_iter_recurse(&it, &arr)) {
            while (bson_iter_next(&arr))
                if (BSON_ITER_HOLDS_UTF8(&arr))
                    snprintf(services + strlen(services), sizeof services - strlen(services),
                             "%s%s", services[0] ? "," : "", bson_iter_utf8(&arr, NULL));
        }
        char key[16];
        const char *k;
        bson_uint32_to_string(i++, &k, key, sizeof key);
        bson_t one;
        BSON_APPEND_DOCUMENT_BEGIN(&list, k, &one);
        BSON_APPEND_UTF8(&one, "node_id", id);
        BSON_APPEND_UTF8(&one, "state", state);
        BSON_APPEND_UTF8(&one, "host", host);
        BSON_APPEND_INT64(&one, "pid", pid);
        BSON_APPEND_UTF8(&one, "version", version);
        BSON_APPEND_INT64(&one, "last_ping_ms_ago", ago);
        if (bson_iter_init_find(&it, doc, "services"))
            bson_append_value(&one, "services", -1, bson_iter_value(&it));
        if (bson_iter_init_find(&it, doc, "workers"))
            bson_append_value(&one, "workers", -1, bson_iter_value(&it));
        bson_append_document_end(&list, &one);
        if (!json)
            printf("%-32s %-8s %-20s %8lld %-8s %9.1fs  %s\n", id, state, host, (long long)pid,
                   version, (double)ago / 1000.0, services);
    }
    bson_append_array_end(&out, &list);
    int rc = 0;
    if (mongoc_cursor_error(cursor, &error)) {
        fprintf(stderr, "cohortctl nodes: %s\n", error.message);
        rc = 1;
    } else if (json) {
        char *text = bson_as_relaxed_extended_json(&out, NULL);
        printf("%s\n", text);
        bson_free(text);
    }
    bson_destroy(&out);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(nodes);
    return rc;
}

/* The service's live settings as the nodes will see them: the config file's (with -c; the
 * built-in defaults otherwise) overridden by the config document's. */
static bool effective_settings(ctl_t *ctl, const char *service, cohort_settings_t *eff,
                               bson_t *doc_settings, bool *found)
{
    const cohort_service_config_t *sc =
        ctl->config ? cohort_config_find_service(ctl->config, service) : NULL;
    if (sc) {
        cohort_settings_from_config(ctl->config, sc, eff);
    } else {
        *eff = (cohort_settings_t){.tick_ms = ctl->config ? ctl->config->tick_ms : 1000,
                                   .takeover_ms = ctl->config ? ctl->config->takeover_ms : 10000,
                                   .primary_task_count = 10,
                                   .secondary_task_count = 0,
                                   .stall_timeout_ms = 1800000,
                                   .succeeded_retention_ms = 7LL * 86400000,
                                   .failed_retention_ms = 7LL * 86400000};
    }
    bson_t doc;
    bson_error_t error;
    bson_init(doc_settings);
    if (!cohort_store_read_service(ctl->store, ctl->client, service, &doc, found, &error)) {
        fprintf(stderr, "cohortctl settings: %s\n", error.message);
        bson_destroy(&doc);
        return false;
    }
    bson_iter_t it, child;
    /* Without the file, the values the primary declared are the best defaults. */
    if (*found && !sc) {
        if (bson_iter_init_find(&it, &doc, "tick_ms") && BSON_ITER_HOLDS_NUMBER(&it))
            eff->tick_ms = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, &doc, "lease_ms") && BSON_ITER_HOLDS_NUMBER(&it))
            eff->takeover_ms = bson_iter_as_int64(&it);
    }
    if (*found && bson_iter_init_find(&it, &doc, "settings") &&
        BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &child)) {
        while (bson_iter_next(&child)) {
            int64_t *field = cohort_settings_field(eff, bson_iter_key(&child));
            if (field && BSON_ITER_HOLDS_NUMBER(&child)) {
                *field = bson_iter_as_int64(&child);
                BSON_APPEND_INT64(doc_settings, bson_iter_key(&child), *field);
            }
        }
    }
    bson_destroy(&doc);
    return true;
}

/* cohortctl settings get SERVICE | set SERVICE KEY VALUE | unset SERVICE KEY */
static int cmd_settings(ctl_t *ctl, int argc, char **argv)
{
    const char *verb = argc > 0 ? argv[0] : "";
    int want = strcmp(verb, "get") == 0 ? 2 : strcmp(verb, "set") == 0 ? 4 : strcmp(verb, "unset") == 0 ? 3 : -1;
    if (want < 0 || argc != want) {
        fprintf(stderr, "usage: cohortctl settings get SERVICE\n"
                        "       cohortctl settings set SERVICE KEY VALUE\n"
                        "       cohortctl settings unset SERVICE KEY\n"
                        "keys: tick_ms takeover_ms primary_task_count secondary_task_count\n"
                        "      stall_timeout_ms succeeded_retention_ms failed_retention_ms\n");
        return 2;
    }
    const char *service = argv[1];
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl settings: '%s' is not a valid service name\n", service);
        return 2;
    }
    char why[512];
    int64_t value = -1;
    if (want >= 3) {
        cohort_settings_t probe = {0};
        if (!cohort_settings_field(&probe, argv[2])) {
            cohort_settings_check_value(argv[2], 0, why, sizeof why);
            fprintf(stderr, "cohortctl settings: %s\n", why);
            return 2;
        }
    }
    if (want == 4) {
        char *end;
        errno = 0;
        long long v = strtoll(argv[3], &end, 10);
        if (errno || end == argv[3] || *end) {
            fprintf(stderr, "cohortctl settings set: %s = '%s' is not a number\n", argv[2],
                    argv[3]);
            return 2;
        }
        if (!cohort_settings_check_value(argv[2], v, why, sizeof why)) {
            fprintf(stderr, "cohortctl settings set: refused: %s\n", why);
            return 2;
        }
        value = v;
    }
    if (!open_store(ctl))
        return 1;
    cohort_settings_t eff;
    bson_t in_db;
    bool found = false;
    if (!effective_settings(ctl, service, &eff, &in_db, &found)) {
        bson_destroy(&in_db);
        return 1;
    }
    int rc = 0;
    if (!found) {
        fprintf(stderr, "cohortctl settings: service '%s' does not exist (start a node that "
                        "hosts it first)\n", service);
        rc = 1;
    } else if (want == 2) {
        for (size_t i = 0; cohort_setting_names[i]; i++) {
            bson_iter_t it;
            bool set = bson_iter_init_find(&it, &in_db, cohort_setting_names[i]);
            printf("%-24s %14lld  %s\n", cohort_setting_names[i],
                   (long long)*cohort_settings_field(&eff, cohort_setting_names[i]),
                   set ? "(set in the database)" : ctl->config ? "(config file)" : "(default)");
        }
    } else {
        cohort_settings_t next = eff;
        if (want == 4)
            *cohort_settings_field(&next, argv[2]) = value;
        else if (ctl->config && cohort_config_find_service(ctl->config, service)) {
            cohort_settings_t file;
            cohort_settings_from_config(ctl->config,
                                        cohort_config_find_service(ctl->config, service), &file);
            *cohort_settings_field(&next, argv[2]) = *cohort_settings_field(&file, argv[2]);
        }
        bson_error_t error;
        if (!cohort_settings_check(&next, why, sizeof why)) {
            fprintf(stderr, "cohortctl settings %s: refused: %s\n", verb, why);
            rc = 2;
        } else if (!cohort_store_set_setting(ctl->store, ctl->client, service, argv[2], value,
                                             &found, &error)) {
            fprintf(stderr, "cohortctl settings %s: %s\n", verb, error.message);
            rc = 1;
        } else if (want == 4) {
            printf("%s.%s = %lld (every node applies it by its next tick)\n", service, argv[2],
                   (long long)value);
        } else {
            printf("%s.%s unset (back to each node's config file)\n", service, argv[2]);
        }
    }
    bson_destroy(&in_db);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"database", required_argument, NULL, 'd'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL, *database = NULL;
    int opt;
    /* "+": stop at the command, whose own flags come after it */
    while ((opt = getopt_long(argc, argv, "+c:d:h", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'd':
            database = optarg;
            break;
        case 'V':
            printf("cohortctl %s\n", COHORT_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    mongoc_init();
    cohort_log_route_mongoc();
    ctl_t ctl = {0};
    int rc = 2;
    if (path) {
        cohort_config_errors_t errors = {0};
        ctl.config = cohort_config_load(path, &errors);
        for (size_t i = 0; i < errors.count; i++)
            fprintf(stderr, "%s\n", errors.messages[i]);
        cohort_config_errors_clear(&errors);
        if (!ctl.config)
            goto out;
        ctl.uri = ctl.config->mongodb_uri;
        ctl.database = database ? database : ctl.config->database;
    } else {
        const char *env = getenv("MONGODB_URI");
        ctl.uri = env && *env ? env : "mongodb://127.0.0.1:27017";
        ctl.database = database ? database : "cohort";
    }
    const char *command = argv[optind];
    if (strcmp(command, "status") == 0) {
        rc = cmd_status(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "enqueue") == 0) {
        rc = cmd_enqueue(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "data") == 0) {
        rc = cmd_data(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "nodes") == 0) {
        rc = cmd_nodes(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "settings") == 0) {
        rc = cmd_settings(&ctl, argc - optind - 1, argv + optind + 1);
    } else {
        fprintf(stderr, "cohortctl: unknown command '%s'\n", command);
        usage(stderr);
    }
out:
    if (ctl.store) {
        cohort_store_push(ctl.store, ctl.client);
        cohort_store_destroy(ctl.store);
    }
    cohort_config_destroy(ctl.config);
    mongoc_cleanup();
    return rc;
}
