/*
 * doctor.c - `cohortctl doctor` (issue 26, part 3) finds what it checks for, on real cohortd
 * processes and the test database:
 *
 * 1. A server that answers an empty change-stream getMore at once (deploy/localdb started
 *    with LOCALDB_HOLD_GETMORE=0, as mongo-java-server alone behaves): doctor warns
 *    (change_streams) and exits 1. Each warning the embedded server causes by design
 *    (change_streams there, server, claim_plan, count_plan) says it is expected there and
 *    what it would mean on real MongoDB. A private server that holds them as MongoDB does (the
 *    local server's default, LOCALDB_HOLD_GETMORE=1): there the same check is ok.
 * 2. A queue index dropped by hand: doctor fails, naming it (indexes SERVICE).
 * 3. Two nodes whose files disagree on tick_ms: doctor warns, naming the key and both nodes
 *    (settings_drift SERVICE); the nodes' clocks and round trips are reported per node.
 * 4. A node killed with SIGKILL while it runs a task, and no other node to reset it: past
 *    stall_timeout_ms doctor warns (stale_claims SERVICE: 1 claimed task).
 *
 * Each reads `doctor --json` ({"checks": [{name, status, detail}]}), whose exit status is 1
 * when anything warns or fails.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "doc"
#define SLEEPER "../tests/handlers/test_handler_sleeper.so"

TestSuite(cluster_doctor, .fini = cluster_cleanup_all, .timeout = 120);

typedef struct finding {
    char status[8];
    char detail[1024];
} finding_t;

/* Runs `cohortctl [-c n1's config] doctor --json` and finds the check `name` in its output.
 * Returns the exit status; fails the test if the output is not the documented JSON. */
static int doctor(cluster_t *c, bool with_config, const char *name, finding_t *found, char **text)
{
    const char *with[] = {"-c", c->n_nodes ? c->nodes[0].config_path : "", "doctor", "--json",
                          NULL};
    const char *without[] = {"doctor", "--json", NULL};
    int rc = cluster_run_ctl_output(c, with_config ? with : without, text);
    bson_t out;
    bson_error_t error;
    cluster_assert(c, bson_init_from_json(&out, *text, -1, &error),
                   "doctor --json printed no JSON (exit %d): %s\n%s", rc, error.message, *text);
    bson_iter_t it, checks, one;
    cluster_assert(c,
                   bson_iter_init_find(&it, &out, "checks") && BSON_ITER_HOLDS_ARRAY(&it) &&
                       bson_iter_recurse(&it, &checks),
                   "no checks array:\n%s", *text);
    memset(found, 0, sizeof *found);
    while (bson_iter_next(&checks)) {
        const char *fields[3] = {NULL, NULL, NULL};
        static const char *const keys[3] = {"name", "status", "detail"};
        cluster_assert(c, BSON_ITER_HOLDS_DOCUMENT(&checks) && bson_iter_recurse(&checks, &one),
                       "a check is not an object:\n%s", *text);
        while (bson_iter_next(&one))
            for (int k = 0; k < 3; k++)
                if (strcmp(bson_iter_key(&one), keys[k]) == 0 && BSON_ITER_HOLDS_UTF8(&one))
                    fields[k] = bson_iter_utf8(&one, NULL);
        cluster_assert(c, fields[0] && fields[1] && fields[2],
                       "a check lacks name, status or detail:\n%s", *text);
        cluster_assert(
            c, !strcmp(fields[1], "ok") || !strcmp(fields[1], "warn") || !strcmp(fields[1], "fail"),
            "check %s has status %s", fields[0], fields[1]);
        if (strcmp(fields[0], name) == 0) {
            snprintf(found->status, sizeof found->status, "%s", fields[1]);
            snprintf(found->detail, sizeof found->detail, "%s", fields[2]);
        }
    }
    bson_destroy(&out);
    return rc;
}

Test(cluster_doctor, a_getmore_answered_at_once_is_a_warning)
{
    /* A private server of its own, started with holding turned off. */
    setenv("LOCALDB_HOLD_GETMORE", "0", 1);
    cluster_options_t options = {
        .tag = "doctor_getmore", .private_db = true, .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    unsetenv("LOCALDB_HOLD_GETMORE");
    finding_t f;
    char *text = NULL;
    int rc = doctor(c, false, "change_streams", &f, &text);
    cluster_assert(c, rc == 1 && strcmp(f.status, "warn") == 0 && strstr(f.detail, "at once"),
                   "doctor exited %d, change_streams %s: %s\n%s", rc, f.status, f.detail, text);
    free(text);
    /* Each warning the embedded server causes by design says so, and what it would mean on
     * real MongoDB (a new user's first run of doctor on the quick start); the exit stays 1. */
    cluster_assert(c,
                   strstr(f.detail, "expected on the embedded test server with --no-hold-getmore"),
                   "change_streams: %s", f.detail);
    const char *create[] = {"enqueue", SERVICE, "--create", NULL};
    cluster_assert(c, cluster_run_ctl(c, create) == 0, "enqueue --create failed");
    static const char *const embedded[] = {"server", "claim_plan " SERVICE, "count_plan " SERVICE};
    for (size_t i = 0; i < sizeof embedded / sizeof embedded[0]; i++) {
        rc = doctor(c, false, embedded[i], &f, &text);
        cluster_assert(c,
                       rc == 1 && strcmp(f.status, "warn") == 0 &&
                           strstr(f.detail, "expected on the embedded test server; on real "
                                            "MongoDB, "),
                       "doctor exited %d, %s %s: %s\n%s", rc, embedded[i], f.status, f.detail,
                       text);
        free(text);
    }
}

Test(cluster_doctor, a_held_getmore_is_ok)
{
    /* A private server that holds getMores (the default; tests/run.sh turns it off for the
     * suite's shared server). */
    setenv("LOCALDB_HOLD_GETMORE", "1", 1);
    cluster_options_t options = {
        .tag = "doctor_held", .private_db = true, .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    unsetenv("LOCALDB_HOLD_GETMORE");
    finding_t f;
    char *text = NULL;
    doctor(c, false, "change_streams", &f, &text);
    cluster_assert(c, strcmp(f.status, "ok") == 0, "change_streams %s on the test database: %s\n%s",
                   f.status, f.detail, text);
    free(text);
}

Test(cluster_doctor, a_missing_index_fails_naming_it)
{
    cluster_options_t options = {.tag = "doctor_index", .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    const char *create[] = {"enqueue", SERVICE, "--create", NULL};
    cluster_assert(c, cluster_run_ctl(c, create) == 0, "enqueue --create failed");
    finding_t f;
    char *text = NULL;
    doctor(c, false, "indexes " SERVICE, &f, &text);
    cluster_assert(c, strcmp(f.status, "ok") == 0, "indexes before the drop: %s %s\n%s", f.status,
                   f.detail, text);
    free(text);

    mongoc_collection_t *queue = mongoc_client_get_collection(c->client, c->db, "queue_" SERVICE);
    bson_error_t error;
    cluster_assert(c, mongoc_collection_drop_index(queue, "claim_order", &error),
                   "cannot drop claim_order: %s", error.message);
    mongoc_collection_destroy(queue);
    int rc = doctor(c, false, "indexes " SERVICE, &f, &text);
    cluster_assert(
        c, rc == 1 && strcmp(f.status, "fail") == 0 && strstr(f.detail, "lacks: claim_order"),
        "doctor exited %d, indexes %s: %s\n%s", rc, f.status, f.detail, text);
    free(text);
}

/* Waits until every node publishes its settings for SERVICE, clock skew and round trips. */
static bool wait_published(cluster_t *c, int64_t timeout_ms)
{
    const char *filter = "{\"settings." SERVICE ".file\": {\"$exists\": true}, "
                         "\"clock_skew_ms\": {\"$exists\": true}, "
                         "\"db_rtt_p99_ms\": {\"$exists\": true}}";
    int64_t deadline = test_now_ms() + timeout_ms;
    do {
        if (test_count(c->client, c->db, "nodes", filter) == (int64_t)c->n_nodes)
            return true;
        test_sleep_ms(100);
    } while (test_now_ms() < deadline);
    return false;
}

Test(cluster_doctor, settings_drift_between_two_nodes_is_a_warning_naming_them)
{
    cluster_options_t options = {.tag = "doctor_drift",
                                 .tick_ms = 200,
                                 .takeover_ms = 3000,
                                 .services = {{.name = SERVICE}}};
    cluster_t *c = cluster_new(&options);
    cluster_node_start(cluster_add_node(c, NULL));
    cluster_node_t *n2 = cluster_add_node(c, NULL);
    cluster_node_config_set(n2, "tick_ms", "400");
    cluster_node_start(n2);
    cluster_assert(c, wait_published(c, 20000), "the nodes did not publish within 20 s");
    finding_t f;
    char *text = NULL;
    int rc = doctor(c, true, "settings_drift " SERVICE, &f, &text);
    cluster_assert(c,
                   rc == 1 && strcmp(f.status, "warn") == 0 &&
                       strstr(f.detail, "tick_ms: node n1 has 200, node n2 400"),
                   "doctor exited %d, settings_drift %s: %s\n%s", rc, f.status, f.detail, text);
    cluster_assert(c, !strstr(f.detail, "takeover_ms"), "takeover_ms agrees: %s", f.detail);
    free(text);
    /* Per node: its clock against the server's and its round trips against takeover_ms. */
    doctor(c, true, "clock n2", &f, &text);
    cluster_assert(c, strcmp(f.status, "ok") == 0 && strstr(f.detail, "ms"), "clock n2: %s %s\n%s",
                   f.status, f.detail, text);
    free(text);
    doctor(c, true, "round_trips n1", &f, &text);
    cluster_assert(c, f.status[0] && strstr(f.detail, "takeover_ms"), "round_trips n1: %s %s\n%s",
                   f.status, f.detail, text);
    free(text);
}

Test(cluster_doctor, a_killed_nodes_stale_claim_is_a_warning)
{
    cluster_options_t options = {
        .tag = "doctor_stale",
        .tick_ms = 200,
        .takeover_ms = 1500,
        .services = {{.name = SERVICE, .settings = "stall_timeout_ms = 1500", .handler = SLEEPER}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_node_t *n1 = cluster_add_node(c, NULL);
    cluster_node_start(n1);
    const char *enqueue[] = {"enqueue", SERVICE, "--create", "--data", "{\"sleep_ms\": 60000}",
                             NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "enqueue failed");
    int64_t deadline = test_now_ms() + 20000;
    while (cluster_try_count(c, SERVICE, "{\"status\": \"claimed\"}") != 1 &&
           test_now_ms() < deadline)
        test_sleep_ms(100);
    cluster_assert(c, cluster_try_count(c, SERVICE, "{\"status\": \"claimed\"}") == 1,
                   "the task was not claimed within 20 s");
    cluster_node_kill(n1);      /* SIGKILL: no other node resets its claim */
    test_sleep_ms(1500 + 2000); /* past stall_timeout_ms, with a margin */
    finding_t f;
    char *text = NULL;
    int rc = doctor(c, true, "stale_claims " SERVICE, &f, &text);
    cluster_assert(
        c, rc == 1 && strcmp(f.status, "warn") == 0 && strncmp(f.detail, "1 claimed task", 14) == 0,
        "doctor exited %d, stale_claims %s: %s\n%s", rc, f.status, f.detail, text);
    free(text);
}
