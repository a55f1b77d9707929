/*
 * ops_settings_nodes.c - `cohortctl settings set` judges a change by every live node's own
 * values, not only by the -c file's (issue 22, defects 6 and 7).
 *
 * 1. Two nodes, tick 200 ms and takeover 3000 ms, except n2 whose own file says
 *    tick_ms = 1400. `settings set takeover_ms 1300`, run with n1's file, is refused with
 *    exit 2 and names n2 ("node n2 would refuse it ... greater than tick_ms (1400)"); the
 *    database keeps no takeover_ms. Then the value is written into the config document by
 *    hand (as an older cohortctl did): n2 cannot apply it, and says so - `cohortctl nodes`
 *    (SETTINGS: ...), `cohortctl status` (settings: node n2 ...) and `settings get` (n2's own
 *    takeover_ms 3000 beside the database's 1300) - until `settings unset` lets it apply the
 *    database's settings again, when the lines go away.
 * 2. One node reaches the database through a proxy that holds each reply 150 ms
 *    (tests/support/delay_proxy.h): it publishes a p99 round trip of at least 150 ms, and
 *    `settings set takeover_ms 400` (more than tick_ms, under 3 x 150) is refused with the
 *    figures; with --force it is written.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "delay_proxy.h"
#include "support.h"

#define SERVICE "live"

TestSuite(cluster_ops_settings_nodes, .fini = cluster_cleanup_all, .timeout = 120);

/* Runs `cohortctl -c <n1's config> ARGS...`; its stdout into *out (caller frees) and what it
 * wrote to stderr into *err (caller frees; may be NULL). Returns the exit status. */
static int ctl(cluster_t *c, const char *const *args, char **out, char **err)
{
    const char *argv[16] = {"-c", c->nodes[0].config_path};
    size_t k = 2;
    for (size_t i = 0; args[i] && k < 15; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/cohortctl.log", c->dir);
    char *before = test_try_read_file(path);
    int rc = cluster_run_ctl_output(c, argv, out);
    char *after = test_try_read_file(path);
    size_t skip = before ? strlen(before) : 0;
    if (err)
        *err = strdup(after && strlen(after) >= skip ? after + skip : "");
    free(before);
    free(after);
    return rc;
}

/* Waits until node `id`'s document publishes its settings for SERVICE (and, if min_rtt_ms
 * > 0, a db_rtt_p99_ms of at least that). */
static bool wait_published(cluster_t *c, const char *id, int64_t min_rtt_ms, int64_t timeout_ms)
{
    char filter[256];
    snprintf(filter, sizeof filter,
             "{\"_id\": \"%s\", \"settings.%s.file\": {\"$exists\": true}, "
             "\"db_rtt_p99_ms\": {\"$gte\": %lld}}",
             id, SERVICE, (long long)min_rtt_ms);
    int64_t deadline = test_now_ms() + timeout_ms;
    do {
        if (test_count(c->client, c->db, "nodes", filter) == 1)
            return true;
        test_sleep_ms(100);
    } while (test_now_ms() < deadline);
    return false;
}

/* The config document's settings.takeover_ms, or -1 if it is not set. */
static int64_t db_takeover(cluster_t *c)
{
    bson_t doc;
    bson_iter_t it, found;
    int64_t v = -1;
    if (cluster_read_service_doc(c, SERVICE, &doc) && bson_iter_init(&it, &doc) &&
        bson_iter_find_descendant(&it, "settings.takeover_ms", &found) &&
        BSON_ITER_HOLDS_NUMBER(&found))
        v = bson_iter_as_int64(&found);
    bson_destroy(&doc);
    return v;
}

/* Runs `cohortctl ARGS` until its stdout contains `needle` (want) or does not (!want). */
static bool wait_output(cluster_t *c, const char *const *args, const char *needle, bool want,
                        int64_t timeout_ms, char **last)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        free(*last);
        *last = NULL;
        ctl(c, args, last, NULL);
        if ((*last && strstr(*last, needle) != NULL) == want)
            return true;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(200);
    }
}

Test(cluster_ops_settings_nodes, a_change_one_node_would_refuse_is_refused_naming_it)
{
    cluster_options_t options = {
        .tag = "ops_settings_nodes",
        .tick_ms = 200,
        .takeover_ms = 3000,
        .services = {{.name = SERVICE}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_node_start(cluster_add_node(c, NULL));
    cluster_node_t *n2 = cluster_add_node(c, NULL);
    cluster_node_config_set(n2, "tick_ms", "1400");
    cluster_node_start(n2);
    cluster_assert(c, wait_published(c, "n1", 0, 20000) && wait_published(c, "n2", 0, 20000),
                   "the nodes did not publish their settings within 20 s");

    const char *set[] = {"settings", "set", SERVICE, "takeover_ms", "1300", NULL};
    char *out = NULL, *err = NULL;
    int rc = ctl(c, set, &out, &err);
    cluster_assert(c,
                   rc == 2 && strstr(err, "node n2 would refuse it") &&
                       strstr(err, "takeover_ms (1300) must be greater than tick_ms (1400)"),
                   "settings set takeover_ms 1300 exited %d (expected 2, naming n2); stderr: %s",
                   rc, err);
    cluster_assert(c, db_takeover(c) == -1, "the refused value was written: %lld",
                   (long long)db_takeover(c));
    free(out);
    free(err);

    /* Written by hand, as an older cohortctl did: n2 cannot apply it and says so. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "{\"$set\": {\"settings.takeover_ms\": 1300}}");
    bson_error_t error;
    bson_t *update = bson_new_from_json((const uint8_t *)cmd, -1, &error);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(SERVICE));
    mongoc_collection_t *services = mongoc_client_get_collection(c->client, c->db, "services");
    cluster_assert(c, mongoc_collection_update_one(services, filter, update, NULL, NULL, &error),
                   "cannot write the setting: %s", error.message);
    mongoc_collection_destroy(services);
    bson_destroy(filter);
    bson_destroy(update);

    char *last = NULL;
    const char *nodes[] = {"nodes", NULL};
    cluster_assert(c,
                   wait_output(c, nodes, "SETTINGS: service live cannot apply the database's "
                                         "settings: takeover_ms (1300) must be greater than "
                                         "tick_ms (1400)",
                               true, 10000, &last),
                   "cohortctl nodes does not say n2 cannot apply the settings:\n%s", last);
    const char *status[] = {"status", NULL};
    cluster_assert(c,
                   wait_output(c, status, "settings: node n2 cannot apply the database's settings",
                               true, 5000, &last),
                   "cohortctl status does not say n2 cannot apply the settings:\n%s", last);
    const char *get[] = {"settings", "get", SERVICE, NULL};
    cluster_assert(c, wait_output(c, get, "node n2", true, 5000, &last),
                   "settings get does not show n2:\n%s", last);
    char own[128];
    snprintf(own, sizeof own, "  node %-19s %-24s %14d\n", "n2", "takeover_ms", 3000);
    cluster_assert(c, strstr(last, own) && strstr(last, "node n2 cannot apply"),
                   "settings get does not show n2's own takeover_ms 3000 and its problem:\n%s",
                   last);
    cluster_assert(c, !strstr(last, "node n1"), "n1 runs the database's values:\n%s", last);

    const char *unset[] = {"settings", "unset", SERVICE, "takeover_ms", NULL};
    rc = ctl(c, unset, &out, &err);
    cluster_assert(c, rc == 0, "settings unset exited %d: %s", rc, err);
    free(out);
    free(err);
    cluster_assert(c, wait_output(c, status, "cannot apply", false, 10000, &last),
                   "status still reports the problem after the unset:\n%s", last);
    free(last);
}

Test(cluster_ops_settings_nodes, a_takeover_under_three_round_trips_is_refused_unless_forced)
{
    cluster_options_t options = {
        .tag = "ops_settings_rtt",
        .tick_ms = 200,
        .takeover_ms = 4000,
        .services = {{.name = SERVICE}},
    };
    cluster_t *c = cluster_new(&options);
    char uri_env[128];
    delay_proxy_t *proxy = delay_proxy_in_front_of(c->uri, uri_env, sizeof uri_env);
    delay_proxy_set_reply_delay(proxy, 150);
    const char *env[] = {uri_env, NULL};
    cluster_node_start(cluster_add_node(c, env));
    cluster_assert(c, wait_published(c, "n1", 150, 30000),
                   "n1 did not publish a round trip of 150 ms or more within 30 s");

    const char *set[] = {"settings", "set", SERVICE, "takeover_ms", "400", NULL};
    char *out = NULL, *err = NULL;
    int rc = ctl(c, set, &out, &err);
    cluster_assert(c,
                   rc == 2 && strstr(err, "takeover_ms 400 is under 3 x the database round trip "
                                          "node n1 measured (p99 ") &&
                       strstr(err, "--force"),
                   "settings set takeover_ms 400 exited %d (expected 2 with the figures); "
                   "stderr: %s",
                   rc, err);
    cluster_assert(c, db_takeover(c) == -1, "the refused value was written");
    free(out);
    free(err);
    const char *forced[] = {"settings", "set", SERVICE, "takeover_ms", "400", "--force", NULL};
    rc = ctl(c, forced, &out, &err);
    cluster_assert(c, rc == 0 && db_takeover(c) == 400,
                   "settings set --force exited %d, takeover_ms in the database %lld: %s", rc,
                   (long long)db_takeover(c), err);
    free(out);
    free(err);
    /* Back to the file's before the proxy goes, so the node is not left on a short lease. */
    const char *unset[] = {"settings", "unset", SERVICE, "takeover_ms", NULL};
    ctl(c, unset, &out, NULL);
    free(out);
    cluster_destroy(c);
    delay_proxy_stop(proxy);
}
