/*
 * probe.c - watches a Cohort benchmark run from outside the nodes, and cleans up after it.
 *
 *   probe wait --database DB --tasks N --since-ms MS [--service NAME] [--interval-ms I]
 *              [--timeout-s S]
 *   probe drop --database DB
 *
 * wait: every I ms (default 100) counts the service's succeeded tasks and reads every node's
 * stats (stats.db_commands and stats.services.NAME.succeeded, which each node writes into its
 * `nodes` document once per tick), until all N tasks have succeeded. Then it prints one line
 * of key=value pairs on stdout (tests/bench/run.sh reads it):
 *
 *   cohort tasks=N seconds=S tasks_per_s=R active_seconds=A active_tasks_per_s=RA nodes=K
 *       steady_commands=C steady_tasks=T steady_commands_per_task=CPT polls=P poll_commands=PC
 *
 * seconds runs from MS (this host's wall clock, ms since the epoch, taken by run.sh just
 * before it started the nodes) to the last finished_at in the queue, converted from the
 * server's clock with an offset measured here; so the 100 ms polling does not round the
 * result. active_seconds is the span from the first claimed_at to the last finished_at.
 *
 * steady_*: the nodes' commands and successes between the first poll that saw 10% of the
 * tasks succeeded and the first that saw 90%, summed over the nodes, each node contributing
 * the difference between its own two snapshots (each snapshot is consistent: both numbers
 * come from the same tick). Start-up (connecting, indexes, first election) and the tail
 * (empty claims, shutdown) fall outside that window. "n/a" if no node ticked in between.
 *
 * The probe's own commands (two per poll plus a few to finish) are counted apart, in
 * poll_commands, and never mixed with the nodes'.
 *
 * idle: reads every cohortd node's stats.ticks and stats.db_commands (written together by
 * its ping), waits S seconds (--seconds), reads them again, and prints one line per node that
 * pinged in between (tests/bench/idle.sh reads them):
 *
 *   node id=ID primary_of=P ticks=T commands=C per_tick=X
 *
 * P is how many services' config documents name the node as primary at the end.
 *
 * drop: drops the database (run.sh does it after stopping the nodes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"

#define MAX_NODES 64

typedef struct snapshot {
    bool taken;
    int64_t commands;
    int64_t succeeded;
} snapshot_t;

typedef struct node_stats {
    char id[129];
    snapshot_t latest; /* from the last poll */
    snapshot_t at_10;  /* from the first poll that saw 10% of the tasks succeeded */
    snapshot_t at_90;  /* from the first poll that saw 90% */
} node_stats_t;

typedef struct watch {
    const char *database;
    const char *service;
    int64_t tasks;
    int64_t since_ms;
    int64_t interval_ms;
    int64_t timeout_s;
    node_stats_t nodes[MAX_NODES];
    size_t n_nodes;
} watch_t;

static int64_t int_at(const bson_t *doc, const char *dotted)
{
    bson_iter_t it, found;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, dotted, &found) &&
        BSON_ITER_HOLDS_NUMBER(&found))
        return bson_iter_as_int64(&found);
    return 0;
}

static node_stats_t *node_named(watch_t *w, const char *id)
{
    for (size_t i = 0; i < w->n_nodes; i++)
        if (strcmp(w->nodes[i].id, id) == 0)
            return &w->nodes[i];
    if (w->n_nodes == MAX_NODES)
        bench_die("more than %d nodes in %s.nodes", MAX_NODES, w->database);
    node_stats_t *n = &w->nodes[w->n_nodes++];
    snprintf(n->id, sizeof n->id, "%s", id);
    return n;
}

/* Reads every node's latest stats into w->nodes[].latest. */
static void read_nodes(watch_t *w, mongoc_client_t *client)
{
    char succeeded_key[128];
    snprintf(succeeded_key, sizeof succeeded_key, "stats.services.%s.succeeded", w->service);
    mongoc_collection_t *nodes = mongoc_client_get_collection(client, w->database, "nodes");
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("projection", "{", "stats.db_commands", BCON_INT32(1), succeeded_key,
                            BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(nodes, &filter, opts, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
            continue;
        node_stats_t *n = node_named(w, bson_iter_utf8(&it, NULL));
        n->latest = (snapshot_t){.taken = true,
                                 .commands = int_at(doc, "stats.db_commands"),
                                 .succeeded = int_at(doc, succeeded_key)};
    }
    bson_error_t error;
    if (mongoc_cursor_error(cursor, &error))
        bench_die("reading %s.nodes: %s", w->database, error.message);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    mongoc_collection_destroy(nodes);
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Prints the steady-state part of the result line. */
static void print_steady(const watch_t *w)
{
    int64_t commands = 0, succeeded = 0;
    for (size_t i = 0; i < w->n_nodes; i++) {
        const node_stats_t *n = &w->nodes[i];
        if (!n->at_10.taken || !n->at_90.taken)
            continue;
        commands += n->at_90.commands - n->at_10.commands;
        succeeded += n->at_90.succeeded - n->at_10.succeeded;
    }
    if (succeeded > 0)
        printf(" steady_commands=%lld steady_tasks=%lld steady_commands_per_task=%.3f",
               (long long)commands, (long long)succeeded, (double)commands / succeeded);
    else
        printf(" steady_commands=n/a steady_tasks=0 steady_commands_per_task=n/a");
}

static int cmd_wait(watch_t *w)
{
    bench_counter_t counter = {0};
    mongoc_client_t *client = bench_client_new(&counter);
    int64_t offset_ms = bench_server_offset_ms(client);
    char queue_name[96];
    snprintf(queue_name, sizeof queue_name, "queue_%s", w->service);
    mongoc_collection_t *queue = mongoc_client_get_collection(client, w->database, queue_name);

    int64_t deadline = bson_get_monotonic_time() + w->timeout_s * 1000000;
    int64_t polls = 0, succeeded = 0;
    bool seen_10 = false, seen_90 = false;
    while (succeeded < w->tasks) {
        if (polls > 0)
            sleep_ms(w->interval_ms);
        if (bson_get_monotonic_time() > deadline)
            bench_die("only %lld of %lld tasks succeeded in %s after %lld s (pending %lld, "
                      "claimed %lld, failed %lld)",
                      (long long)succeeded, (long long)w->tasks, w->database,
                      (long long)w->timeout_s, (long long)bench_count_status(queue, "pending"),
                      (long long)bench_count_status(queue, "claimed"),
                      (long long)bench_count_status(queue, "failed"));
        polls++;
        succeeded = bench_count_status(queue, "succeeded");
        read_nodes(w, client);
        bool now_10 = !seen_10 && succeeded * 10 >= w->tasks;
        bool now_90 = !seen_90 && succeeded * 10 >= w->tasks * 9;
        for (size_t i = 0; i < w->n_nodes; i++) {
            if (now_10)
                w->nodes[i].at_10 = w->nodes[i].latest;
            if (now_90)
                w->nodes[i].at_90 = w->nodes[i].latest;
        }
        seen_10 = seen_10 || now_10;
        seen_90 = seen_90 || now_90;
    }
    uint64_t poll_commands = bench_counter_started(&counter);

    int64_t first_claim = bench_extreme_date(queue, "claimed_at", 1);
    int64_t last_finish = bench_extreme_date(queue, "finished_at", -1);
    double seconds = (double)(last_finish - offset_ms - w->since_ms) / 1e3;
    double active = (double)(last_finish - first_claim) / 1e3;
    if (seconds <= 0 || active <= 0)
        bench_die("the last task finished at %lld, before the run started at %lld (server "
                  "clock offset %lld ms)",
                  (long long)last_finish, (long long)w->since_ms, (long long)offset_ms);
    printf("cohort tasks=%lld seconds=%.3f tasks_per_s=%.1f active_seconds=%.3f "
           "active_tasks_per_s=%.1f nodes=%zu",
           (long long)w->tasks, seconds, (double)w->tasks / seconds, active,
           (double)w->tasks / active, w->n_nodes);
    print_steady(w);
    printf(" polls=%lld poll_commands=%llu\n", (long long)polls, (unsigned long long)poll_commands);
    mongoc_collection_destroy(queue);
    mongoc_client_destroy(client);
    return 0;
}

typedef struct idle_node {
    char id[129];
    int64_t ticks[2], commands[2];
    bool seen[2];
} idle_node_t;

/* Snapshot `at` (0 or 1) of every cohortd node's tick and command counters. */
static void read_idle(mongoc_client_t *client, const char *database, idle_node_t *nodes,
                      size_t *n, int at)
{
    mongoc_collection_t *coll = mongoc_client_get_collection(client, database, "nodes");
    bson_t *filter = BCON_NEW("kind", "{", "$exists", BCON_BOOL(false), "}");
    bson_t *opts = BCON_NEW("projection", "{", "stats.ticks", BCON_INT32(1), "stats.db_commands",
                            BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
            continue;
        const char *id = bson_iter_utf8(&it, NULL);
        size_t i = 0;
        while (i < *n && strcmp(nodes[i].id, id) != 0)
            i++;
        if (i == *n) {
            if (*n == MAX_NODES)
                bench_die("more than %d nodes in %s.nodes", MAX_NODES, database);
            memset(&nodes[i], 0, sizeof nodes[i]);
            snprintf(nodes[i].id, sizeof nodes[i].id, "%s", id);
            (*n)++;
        }
        nodes[i].ticks[at] = int_at(doc, "stats.ticks");
        nodes[i].commands[at] = int_at(doc, "stats.db_commands");
        nodes[i].seen[at] = true;
    }
    bson_error_t error;
    if (mongoc_cursor_error(cursor, &error))
        bench_die("reading %s.nodes: %s", database, error.message);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
}

/* How many services name `id` as their primary. */
static int64_t primary_of(mongoc_client_t *client, const char *database, const char *id)
{
    mongoc_collection_t *coll = mongoc_client_get_collection(client, database, "services");
    bson_t *filter = BCON_NEW("primary", BCON_UTF8(id));
    bson_error_t error;
    int64_t n = mongoc_collection_count_documents(coll, filter, NULL, NULL, NULL, &error);
    if (n < 0)
        bench_die("counting %s.services: %s", database, error.message);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return n;
}

static int cmd_idle(const char *database, int64_t seconds)
{
    bench_counter_t counter = {0};
    mongoc_client_t *client = bench_client_new(&counter);
    idle_node_t nodes[MAX_NODES];
    size_t n = 0;
    read_idle(client, database, nodes, &n, 0);
    sleep_ms(seconds * 1000);
    read_idle(client, database, nodes, &n, 1);
    for (size_t i = 0; i < n; i++) {
        idle_node_t *x = &nodes[i];
        int64_t ticks = x->ticks[1] - x->ticks[0];
        if (!x->seen[0] || !x->seen[1] || ticks <= 0)
            continue;
        int64_t commands = x->commands[1] - x->commands[0];
        printf("node id=%s primary_of=%lld ticks=%lld commands=%lld per_tick=%.3f\n", x->id,
               (long long)primary_of(client, database, x->id), (long long)ticks,
               (long long)commands, (double)commands / (double)ticks);
    }
    mongoc_client_destroy(client);
    return 0;
}

static int cmd_drop(const char *database)
{
    bench_counter_t counter = {0};
    mongoc_client_t *client = bench_client_new(&counter);
    mongoc_database_t *db = mongoc_client_get_database(client, database);
    bson_error_t error;
    bool ok = mongoc_database_drop(db, &error);
    if (!ok)
        fprintf(stderr, "probe: dropping %s: %s\n", database, error.message);
    mongoc_database_destroy(db);
    mongoc_client_destroy(client);
    return ok ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: probe wait --database DB --tasks N --since-ms MS [--service NAME]\n"
                    "                  [--interval-ms I] [--timeout-s S]\n"
                    "       probe idle --database DB --seconds S\n"
                    "       probe drop --database DB\n"
                    "  MONGODB_URI names the server (default mongodb://127.0.0.1:27017).\n");
    exit(2);
}

int main(int argc, char **argv)
{
    bench_set_program("probe");
    if (argc < 2)
        usage();
    watch_t w = {.service = "noop", .interval_ms = 100, .timeout_s = 600};
    int64_t seconds = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--database") == 0 && i + 1 < argc)
            w.database = argv[++i];
        else if (strcmp(argv[i], "--service") == 0 && i + 1 < argc)
            w.service = argv[++i];
        else if (strcmp(argv[i], "--tasks") == 0 && i + 1 < argc)
            w.tasks = bench_parse_int("--tasks", argv[++i], 1, 100000000);
        else if (strcmp(argv[i], "--since-ms") == 0 && i + 1 < argc)
            w.since_ms = bench_parse_int("--since-ms", argv[++i], 1, INT64_MAX);
        else if (strcmp(argv[i], "--interval-ms") == 0 && i + 1 < argc)
            w.interval_ms = bench_parse_int("--interval-ms", argv[++i], 1, 60000);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = bench_parse_int("--seconds", argv[++i], 1, 86400);
        else if (strcmp(argv[i], "--timeout-s") == 0 && i + 1 < argc)
            w.timeout_s = bench_parse_int("--timeout-s", argv[++i], 1, 86400);
        else
            usage();
    }
    if (!w.database)
        usage();

    mongoc_init();
    int rc = 2;
    if (strcmp(argv[1], "wait") == 0) {
        if (w.tasks == 0 || w.since_ms == 0)
            usage();
        rc = cmd_wait(&w);
    } else if (strcmp(argv[1], "idle") == 0) {
        if (seconds == 0)
            usage();
        rc = cmd_idle(w.database, seconds);
    } else if (strcmp(argv[1], "drop") == 0) {
        rc = cmd_drop(w.database);
    } else {
        usage();
    }
    mongoc_cleanup();
    return rc;
}
