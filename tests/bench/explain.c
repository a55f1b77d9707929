/*
 * explain.c - the query plan of each claim and count the store sends, as the server explains
 * it (tests/bench/explain.sh runs it; docs/BENCHMARKS.md, "Query plans", says what each
 * should show on real MongoDB).
 *
 *   explain [--database DB] [--service NAME] [--tasks N] [--keep]
 *
 * It prepares the service as a node does (cohort_store_ensure_service: every queue index),
 * fills its queue with N tasks (default 10,000: 70% succeeded, 25% pending in three priorities
 * with a few deadlines, 5% claimed), then calls the product's own store functions, the ones
 * a node, its maintenance and `cohortctl counts` use. A command-started callback records the
 * exact commands they send; each is then sent again wrapped in
 * `{explain: COMMAND, verbosity: "queryPlanner"}`, so the plan is the plan of the filter the
 * store builds, not of a copy of it.
 *
 * For each command it prints one markdown row: the store call, the command, the stages of
 * the winning plan (innermost last, with the index of each scan) and a verdict: "ok" when the
 * plan scans the expected index and has no COLLSCAN or SORT stage (or the SORT is one the
 * call bounds, said in the row), "CHECK" otherwise. Exit status 0 when every row is "ok",
 * 1 when one is not, 3 when the server has no `explain` (mongo-java-server answers "no such
 * command": the rows then show the commands without plans). The database is dropped at the
 * end unless --keep. MONGODB_URI names the server.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/claims.h"
#include "store/store.h"
#include "store/nodes.h"
#include "store/queries.h"
#include "store/upkeep.h"
#include "store/services.h"

#define MAX_CAPTURED 64
#define NODE_ID "explain-node"
#define DAY_MS (24 * 3600 * 1000LL)

/* One command a store call sent, and what its plan must show. */
typedef struct captured {
    const char *call;    /* the store call, as printed */
    const char *indexes; /* expected index names, "|"-separated ("" for any) */
    const char *allowed; /* a stage allowed although it is COLLSCAN or SORT, and why */
    char name[32];       /* the command's name */
    bson_t command;      /* the command as sent, without $db, lsid and the like */
} captured_t;

typedef struct capture {
    bool on;
    const char *call, *indexes, *allowed;
    captured_t rows[MAX_CAPTURED];
    size_t n;
} capture_t;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "explain: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(2);
}

/* APM: keeps the commands sent while capture->on, minus the session and cluster fields. */
static void on_started(const mongoc_apm_command_started_t *event)
{
    capture_t *capture = mongoc_apm_command_started_get_context(event);
    if (!capture->on || capture->n == MAX_CAPTURED)
        return;
    captured_t *row = &capture->rows[capture->n++];
    row->call = capture->call;
    row->indexes = capture->indexes;
    row->allowed = capture->allowed;
    snprintf(row->name, sizeof row->name, "%s", mongoc_apm_command_started_get_command_name(event));
    bson_init(&row->command);
    bson_iter_t it;
    bson_iter_init(&it, mongoc_apm_command_started_get_command(event));
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (key[0] == '$' || strcmp(key, "lsid") == 0 || strcmp(key, "txnNumber") == 0)
            continue;
        BSON_APPEND_VALUE(&row->command, key, bson_iter_value(&it));
    }
}

static void expect(capture_t *c, const char *call, const char *indexes, const char *allowed)
{
    c->call = call;
    c->indexes = indexes;
    c->allowed = allowed;
    c->on = true;
}

/* N tasks in a fixed mix; the first pending ones are overdue (not_after in the past). */
static void fill(mongoc_client_t *client, const char *database, const char *service, int64_t n)
{
    char name[96];
    snprintf(name, sizeof name, "queue_%s", service);
    mongoc_collection_t *queue = mongoc_client_get_collection(client, database, name);
    mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(queue, NULL);
    int64_t now = (int64_t)time(NULL) * 1000;
    static const char *const kinds[] = {"mail", "report", "sync"};
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i % 20;
        const char *status = r < 14 ? "succeeded" : r < 19 ? "pending" : "claimed";
        bson_t *doc = BCON_NEW("status", BCON_UTF8(status), "kind", BCON_UTF8(kinds[i % 3]),
                               "group", BCON_UTF8(i % 2 ? "g1" : "g2"), "priority",
                               BCON_INT32(i % 7 == 0 ? 10 : 0), "run_at",
                               BCON_DATE_TIME(now - DAY_MS + i), "created_at",
                               BCON_DATE_TIME(now - DAY_MS), "attempts", BCON_INT32(r >= 14),
                               "data", "{", "}", "tracked", BCON_BOOL(false));
        if (r < 14)
            BSON_APPEND_DATE_TIME(doc, "finished_at", now - DAY_MS + i);
        if (r == 19) {
            BSON_APPEND_UTF8(doc, "claimed_by", "another-node");
            BSON_APPEND_DATE_TIME(doc, "heartbeat_at", now);
        }
        if (r == 14 && i < n / 10)
            BSON_APPEND_DATE_TIME(doc, "not_after", now - 1000);
        mongoc_bulk_operation_insert(bulk, doc);
        bson_destroy(doc);
    }
    bson_error_t error;
    if (!mongoc_bulk_operation_execute(bulk, NULL, &error))
        die("filling the queue", error.message);
    mongoc_bulk_operation_destroy(bulk);
    mongoc_collection_destroy(queue);
}

static void ignore_row(void *user, const char *value, const char *status, int64_t n)
{
    (void)user, (void)value, (void)status, (void)n;
}

/* Runs the store calls whose commands are explained. */
static void run_calls(cohort_store_t *store, mongoc_client_t *client, const char *service,
                      capture_t *c)
{
    bson_error_t error;
    int64_t now = (int64_t)time(NULL) * 1000;
    bson_t claimed;
    bool found;
    expect(c, "cohort_store_claim_task (a worker's claim)", "claim_order", NULL);
    if (!cohort_store_claim_task(store, client, service, NODE_ID, now, NULL, &claimed, &found,
                                 NULL, &error))
        die("cohort_store_claim_task", error.message);
    bson_destroy(&claimed);

    static const char *const served[] = {"mail", "sync"}, *const busy[] = {"g2"};
    cohort_claim_filter_t filter = {.served_kinds = served, .n_served_kinds = 2,
                                    .served_no_kind = true,
                                    .busy_groups = busy, .n_busy_groups = 1};
    expect(c, "cohort_store_claim_task, kinds served and a busy group", "claim_order", NULL);
    if (!cohort_store_claim_task(store, client, service, NODE_ID, now, &filter, &claimed, &found,
                                 NULL, &error))
        die("cohort_store_claim_task (filtered)", error.message);
    bson_destroy(&claimed);

    bson_t batch[4];
    size_t n = 0;
    expect(c, "cohort_store_claim_tasks (claim_batch = 4): find, updateMany, read back",
           "claim_order|_id_",
           "SORT after an _id lookup: the read-back sorts at most claim_batch documents");
    if (!cohort_store_claim_tasks(store, client, service, NODE_ID, now, NULL, 4, batch, &n, NULL,
                                  &error))
        die("cohort_store_claim_tasks", error.message);
    for (size_t i = 0; i < n; i++)
        bson_destroy(&batch[i]);

    static const char *const statuses[] = {"pending", "claimed"};
    int64_t counts[2];
    expect(c, "cohort_store_count_statuses (cohortctl counts)",
           "claim_order|status_run_at|status_finished_at|status_heartbeat_at", NULL);
    if (!cohort_store_count_statuses(store, client, service, statuses, 2, counts, &error))
        die("cohort_store_count_statuses", error.message);

    cohort_status_counts_t by_status;
    expect(c, "cohort_store_count_tasks (maintenance's queue counts, cohortctl status)",
           "claim_order|status_run_at|status_finished_at|status_heartbeat_at", NULL);
    if (!cohort_store_count_tasks(store, client, service, &by_status, &error))
        die("cohort_store_count_tasks", error.message);

    expect(c, "cohort_store_count_by kind", "kind_status", NULL);
    if (!cohort_store_count_by(store, client, service, "kind", ignore_row, NULL, &error))
        die("cohort_store_count_by kind", error.message);
    expect(c, "cohort_store_count_by group", "group_status", NULL);
    if (!cohort_store_count_by(store, client, service, "group", ignore_row, NULL, &error))
        die("cohort_store_count_by group", error.message);

    int64_t promoted;
    expect(c, "cohort_store_promote_overdue (maintenance)", "not_after", NULL);
    if (!cohort_store_promote_overdue(store, client, service, now, 5, &promoted, &error))
        die("cohort_store_promote_overdue", error.message);

    int64_t peers;
    expect(c, "cohort_store_count_peers (maintenance; the nodes collection)", "",
           "COLLSCAN of `nodes`, one document per node, not of the queue");
    if (!cohort_store_count_peers(store, client, service, NODE_ID, now - 10000, &peers, &error))
        die("cohort_store_count_peers", error.message);
    c->on = false;
}

/* Appends to `out` the stages of every winningPlan under `doc`, outermost first. */
static void collect_stages(bson_iter_t *it, bool in_plan, char *out, size_t size)
{
    while (bson_iter_next(it)) {
        const char *key = bson_iter_key(it);
        if (in_plan && strcmp(key, "stage") == 0 && BSON_ITER_HOLDS_UTF8(it)) {
            size_t used = strlen(out);
            snprintf(out + used, size - used, "%s%s", used ? " < " : "", bson_iter_utf8(it, NULL));
        } else if (in_plan && strcmp(key, "indexName") == 0 && BSON_ITER_HOLDS_UTF8(it)) {
            size_t used = strlen(out);
            snprintf(out + used, size - used, "(%s)", bson_iter_utf8(it, NULL));
        } else if (BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) {
            bson_iter_t child;
            bool plan = in_plan || strcmp(key, "winningPlan") == 0;
            if (strcmp(key, "rejectedPlans") != 0 && bson_iter_recurse(it, &child))
                collect_stages(&child, plan, out, size);
        }
    }
}

/* Whether `stages` scans one of the "|"-separated `indexes` ("" for any). */
static bool uses_index(const char *stages, const char *indexes)
{
    if (!*indexes)
        return true;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", indexes);
    for (char *save, *name = strtok_r(copy, "|", &save); name; name = strtok_r(NULL, "|", &save)) {
        char needle[80];
        snprintf(needle, sizeof needle, "(%s)", name);
        if (strstr(stages, needle))
            return true;
    }
    return false;
}

/* Whether the " < "-separated `stages` has a stage called exactly `name` (SORT, not
 * SORT_MERGE). */
static bool has_stage(const char *stages, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = stages; (p = strstr(p, name)) != NULL; p += len) {
        bool starts = p == stages || p[-1] == ' ';
        bool ends = p[len] == '\0' || p[len] == ' ' || p[len] == '(';
        if (starts && ends)
            return true;
    }
    return false;
}

/* Explains one captured command; prints its row; returns 0 ok, 1 check, 3 no explain. */
static int explain_row(mongoc_client_t *client, const char *database, const captured_t *row)
{
    bson_t cmd = BSON_INITIALIZER, reply;
    BSON_APPEND_DOCUMENT(&cmd, "explain", &row->command);
    BSON_APPEND_UTF8(&cmd, "verbosity", "queryPlanner");
    bson_error_t error;
    char stages[1024] = "";
    int verdict = 0;
    char *json = bson_as_relaxed_extended_json(&row->command, NULL);
    if (!mongoc_client_command_simple(client, database, &cmd, NULL, &reply, &error)) {
        snprintf(stages, sizeof stages, "no plan: %s", error.message);
        verdict = 3;
    } else {
        bson_iter_t it;
        bson_iter_init(&it, &reply);
        collect_stages(&it, false, stages, sizeof stages);
        bool scan = has_stage(stages, "COLLSCAN");
        bool sort = has_stage(stages, "SORT");
        bool expected = uses_index(stages, row->indexes);
        if ((scan || sort || !expected) && !(row->allowed && (scan || sort) && expected))
            verdict = 1;
    }
    printf("| %s | `%s` %s | %s | %s%s%s |\n", row->call, row->name, json, stages,
           verdict == 0 ? "ok" : verdict == 1 ? "CHECK" : "-", row->allowed ? "; " : "",
           row->allowed ? row->allowed : "");
    bson_free(json);
    bson_destroy(&reply);
    bson_destroy(&cmd);
    return verdict;
}

int main(int argc, char **argv)
{
    const char *database = NULL, *service = "explained";
    int64_t tasks = 10000;
    bool keep = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--database") == 0 && i + 1 < argc)
            database = argv[++i];
        else if (strcmp(argv[i], "--service") == 0 && i + 1 < argc)
            service = argv[++i];
        else if (strcmp(argv[i], "--tasks") == 0 && i + 1 < argc) {
            char *end;
            tasks = strtoll(argv[++i], &end, 10);
            if (*end)
                tasks = 0; /* refused below */
        }
        else if (strcmp(argv[i], "--keep") == 0)
            keep = true;
        else
            die("usage: explain [--database DB] [--service NAME] [--tasks N] [--keep]", NULL);
    }
    if (tasks < 20 || tasks > 10000000)
        die("--tasks must be from 20 to 10000000", NULL);
    char default_name[64];
    if (!database) {
        snprintf(default_name, sizeof default_name, "cohort_explain_%ld", (long)time(NULL));
        database = default_name;
    }
    const char *uri = getenv("MONGODB_URI");
    uri = uri && *uri ? uri : "mongodb://127.0.0.1:27017";

    mongoc_init();
    bson_error_t error;
    cohort_store_t *store = cohort_store_new(uri, database, "cohort-explain", &error);
    if (!store)
        die("connecting", error.message);
    mongoc_client_t *client = mongoc_client_new(uri);
    if (!client)
        die("malformed MONGODB_URI", uri);
    static capture_t capture;
    mongoc_apm_callbacks_t *callbacks = mongoc_apm_callbacks_new();
    mongoc_apm_set_command_started_cb(callbacks, on_started);
    mongoc_client_set_apm_callbacks(client, callbacks, &capture);

    if (!cohort_store_ensure_service(store, client, service, &error))
        die("creating the service and its indexes", error.message);
    fill(client, database, service, tasks);
    run_calls(store, client, service, &capture);

    printf("| store call | command as sent | winning plan (outermost first) | verdict |\n");
    printf("|---|---|---|---|\n");
    int status = 0;
    for (size_t i = 0; i < capture.n; i++) {
        int verdict = explain_row(client, database, &capture.rows[i]);
        status = verdict > status ? verdict : status;
        bson_destroy(&capture.rows[i].command);
    }
    if (!keep) {
        mongoc_database_t *db = mongoc_client_get_database(client, database);
        mongoc_database_drop(db, NULL);
        mongoc_database_destroy(db);
    }
    if (status == 3)
        fprintf(stderr, "explain: this server has no `explain` command (mongo-java-server has "
                        "none): the commands are shown, their plans are not; run against real "
                        "MongoDB\n");
    mongoc_client_destroy(client);
    mongoc_apm_callbacks_destroy(callbacks);
    cohort_store_destroy(store);
    mongoc_cleanup();
    return status;
}
