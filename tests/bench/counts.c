/*
 * counts.c - times Cohort's queue counts on a large queue (tests/bench/counts.sh runs it;
 * docs/BENCHMARKS.md, "Counts on 1,000,000 tasks", has the results).
 *
 *   counts fill --database DB --tasks N [--service NAME] [--groups G] [--kinds K]
 *   counts time --database DB [--service NAME] [--repeat R]
 *
 * fill: prepares the service as a node does (cohort_store_ensure_service: the config
 * document and every queue index), then inserts N tasks into queue_<NAME> with unordered
 * bulk writes of 10,000. Each task has the fields build_task() in src/store/insert.c writes, plus
 * what its status implies (claimed_by, claimed_at, heartbeat_at, finished_at, history,
 * last_error, group_lock), in a fixed pseudo-random mix (the same for every run):
 *   status   pending 25%, claimed 1%, succeeded 68%, failed 5%, timed_out 1%
 *   kind     K kinds (default 20) with Zipf-like weights; 5% of the tasks have none
 *   group    G groups (default 1000), uniform; 30% of the tasks have none
 *   priority 0 (80%), 5 (15%), 10 (5%); created over the last 7 days
 * Prints one line: "filled tasks=N seconds=S pending=.. claimed=.. ..." (the mix it wrote).
 *
 * time: R rounds (default 5); each round times, in this order, the store calls a count
 * uses (cohort_store_* from src/store/, through the product's code):
 *   status     cohort_store_count_statuses over the 5 statuses (5 count commands)
 *   status_agg cohort_store_count_tasks (one aggregation grouping by status)
 *   kind       cohort_store_count_by(kind) (one aggregation grouping by kind and status)
 *   group      cohort_store_count_by(group)
 * and prints one line per call per round: "count by=status round=1 ms=123.4 rows=5 total=N"
 * (total: the tasks the rows add up to, which must be N).
 *
 * MONGODB_URI names the server. The store applies socketTimeoutMS=15000 unless the URI sets
 * its own; counts.sh sets a longer one, so that a slow scan is measured, not cut off.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "store/queries.h"
#include "store/services.h"

#define FILL_CHUNK 10000
#define DAY_MS (24 * 3600 * 1000LL)

typedef struct options {
    const char *database;
    const char *service;
    int64_t tasks;
    int64_t groups;
    int64_t kinds;
    int64_t repeat;
} options_t;

static void die(const char *fmt, const char *detail)
{
    fprintf(stderr, "counts: ");
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
    exit(1);
}

static int64_t parse_int(const char *name, const char *text, int64_t min, int64_t max)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || v < min || v > max)
        die("%s: not a number in range", name);
    return v;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* xorshift64*: a fixed sequence, so every fill writes the same mix. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 2685821657736338717ULL;
}

/* A number in [0, n). */
static int64_t pick(uint64_t *state, int64_t n)
{
    return (int64_t)(next_random(state) % (uint64_t)n);
}

enum { PENDING, CLAIMED, SUCCEEDED, FAILED, TIMED_OUT, N_STATUSES };
static const char *const STATUS_NAMES[N_STATUSES] = {"pending", "claimed", "succeeded", "failed",
                                                     "timed_out"};

static int pick_status(uint64_t *state)
{
    int64_t r = pick(state, 1000);
    if (r < 250)
        return PENDING;
    if (r < 260)
        return CLAIMED;
    if (r < 940)
        return SUCCEEDED;
    if (r < 990)
        return FAILED;
    return TIMED_OUT;
}

/* Kind i with weight 1/(i+1) (the first kinds are the busy ones); -1: no kind (5%). */
static int64_t pick_kind(uint64_t *state, const double *cumulative, int64_t kinds)
{
    if (pick(state, 100) < 5)
        return -1;
    double r = (double)pick(state, 1000000) / 1e6 * cumulative[kinds - 1];
    for (int64_t i = 0; i < kinds; i++)
        if (r < cumulative[i])
            return i;
    return kinds - 1;
}

static void append_history(bson_t *doc, int32_t attempts, const char *node, int64_t started,
                           int64_t ended, const char *outcome, const char *error)
{
    bson_t history, entry;
    BSON_APPEND_ARRAY_BEGIN(doc, "history", &history);
    for (int32_t a = 1; a <= attempts; a++) {
        char key[16];
        snprintf(key, sizeof key, "%d", a - 1);
        bool last = a == attempts;
        BSON_APPEND_DOCUMENT_BEGIN(&history, key, &entry);
        BSON_APPEND_UTF8(&entry, "node", node);
        BSON_APPEND_INT32(&entry, "attempt", a);
        BSON_APPEND_DATE_TIME(&entry, "started_at", started - (attempts - a) * 2000);
        BSON_APPEND_DATE_TIME(&entry, "ended_at", ended - (attempts - a) * 2000);
        BSON_APPEND_UTF8(&entry, "outcome", last ? outcome : "retry");
        if (!last || error)
            BSON_APPEND_UTF8(&entry, "error", error ? error : "handler failed: try again");
        bson_append_document_end(&history, &entry);
    }
    bson_append_array_end(doc, &history);
}

/* One task: build_task()'s fields in its order, then those its status implies. */
static void build_task(bson_t *doc, uint64_t *state, int64_t seq, int64_t now,
                       const options_t *o, const double *cumulative, bool *group_locked,
                       int64_t *mix)
{
    int status = pick_status(state);
    int64_t kind = pick_kind(state, cumulative, o->kinds);
    int64_t group = pick(state, 100) < 30 ? -1 : pick(state, o->groups);
    int64_t p = pick(state, 100);
    int32_t priority = p < 80 ? 0 : p < 95 ? 5 : 10;
    int64_t created = now - pick(state, 7 * DAY_MS);
    char node[24], name[32];
    snprintf(node, sizeof node, "node-%d", (int)pick(state, 3) + 1);

    bson_oid_t id;
    bson_oid_init(&id, NULL);
    BSON_APPEND_OID(doc, "_id", &id);
    BSON_APPEND_UTF8(doc, "status", STATUS_NAMES[status]);
    bson_t data;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "data", &data);
    BSON_APPEND_INT64(&data, "seq", seq);
    BSON_APPEND_UTF8(&data, "payload", "user-4711/report/2026-11");
    bson_append_document_end(doc, &data);
    BSON_APPEND_BOOL(doc, "tracked", false);
    BSON_APPEND_DATE_TIME(doc, "created_at", created);
    BSON_APPEND_UTF8(doc, "created_by", "cohortctl");
    bool delayed = status == PENDING && pick(state, 100) < 5;
    int64_t run_at = delayed ? now + pick(state, DAY_MS) : created;
    int32_t attempts = status == PENDING ? 0 : status == FAILED ? 3 : 1;
    if (status == PENDING && pick(state, 100) < 3)
        attempts = 1; /* waiting for a retry */
    BSON_APPEND_DATE_TIME(doc, "run_at", run_at);
    BSON_APPEND_INT32(doc, "attempts", attempts);
    BSON_APPEND_INT32(doc, "priority", priority);
    BSON_APPEND_INT32(doc, "base_priority", priority);
    if (delayed)
        BSON_APPEND_DATE_TIME(doc, "not_before", run_at);
    if (kind >= 0) {
        snprintf(name, sizeof name, "kind-%02d", (int)kind);
        BSON_APPEND_UTF8(doc, "kind", name);
    }
    if (group >= 0) {
        snprintf(name, sizeof name, "group-%04d", (int)group);
        BSON_APPEND_UTF8(doc, "group", name);
    }

    int64_t claimed_at = run_at + pick(state, 5000);
    int64_t finished_at = claimed_at + 5 + pick(state, 500);
    if (status != PENDING) {
        BSON_APPEND_UTF8(doc, "claimed_by", node);
        BSON_APPEND_DATE_TIME(doc, "claimed_at", claimed_at);
    }
    if (status == CLAIMED) {
        BSON_APPEND_DATE_TIME(doc, "heartbeat_at", now);
        if (group >= 0 && !group_locked[group]) { /* at most one lock per group */
            group_locked[group] = true;
            BSON_APPEND_UTF8(doc, "group_lock", name);
        }
    } else if (status == SUCCEEDED) {
        BSON_APPEND_DATE_TIME(doc, "finished_at", finished_at);
        append_history(doc, attempts, node, claimed_at, finished_at, "succeeded", NULL);
    } else if (status == FAILED || status == TIMED_OUT) {
        const char *error = status == FAILED ? "handler failed: upstream returned 503"
                                             : "timed out after 30000 ms";
        BSON_APPEND_DATE_TIME(doc, "finished_at", finished_at);
        BSON_APPEND_UTF8(doc, "last_error", error);
        BSON_APPEND_INT64(doc, "task_timeout_ms", 30000);
        append_history(doc, attempts, node, claimed_at, finished_at,
                       status == FAILED ? "failed" : "timed_out", error);
    } else if (attempts > 0) {
        BSON_APPEND_UTF8(doc, "last_error", "handler failed: try again");
        append_history(doc, attempts, node, claimed_at, finished_at, "retry", NULL);
    }
    mix[status]++;
}

static bool fill_chunk(mongoc_collection_t *queue, uint64_t *state, int64_t first, int64_t n,
                       int64_t now, const options_t *o, const double *cumulative,
                       bool *group_locked, int64_t *mix, bson_error_t *error)
{
    bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
    mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(queue, opts);
    bool ok = true;
    for (int64_t i = 0; ok && i < n; i++) {
        bson_t doc = BSON_INITIALIZER;
        build_task(&doc, state, first + i, now, o, cumulative, group_locked, mix);
        ok = mongoc_bulk_operation_insert_with_opts(bulk, &doc, NULL, error);
        bson_destroy(&doc);
    }
    if (ok) {
        bson_t reply;
        ok = mongoc_bulk_operation_execute(bulk, &reply, error) != 0;
        bson_destroy(&reply);
    }
    mongoc_bulk_operation_destroy(bulk);
    bson_destroy(opts);
    return ok;
}

static int cmd_fill(cohort_store_t *store, mongoc_client_t *client, const options_t *o)
{
    bson_error_t error;
    if (!cohort_store_ensure_service(store, client, o->service, &error))
        die("preparing the service: %s", error.message);
    double *cumulative = calloc((size_t)o->kinds, sizeof *cumulative);
    bool *group_locked = calloc((size_t)o->groups, sizeof *group_locked);
    if (!cumulative || !group_locked)
        die("%s", "out of memory");
    for (int64_t i = 0; i < o->kinds; i++)
        cumulative[i] = (i ? cumulative[i - 1] : 0) + 1.0 / (double)(i + 1);

    char name[128];
    snprintf(name, sizeof name, "queue_%s", o->service);
    mongoc_collection_t *queue = mongoc_client_get_collection(client, o->database, name);
    uint64_t state = 0x9E3779B97F4A7C15ULL;
    int64_t mix[N_STATUSES] = {0}, now = wall_ms();
    double started = now_ms();
    for (int64_t done = 0; done < o->tasks; done += FILL_CHUNK) {
        int64_t n = o->tasks - done < FILL_CHUNK ? o->tasks - done : FILL_CHUNK;
        if (!fill_chunk(queue, &state, done, n, now, o, cumulative, group_locked, mix, &error))
            die("inserting tasks: %s", error.message);
    }
    printf("filled tasks=%lld seconds=%.1f", (long long)o->tasks, (now_ms() - started) / 1e3);
    for (int s = 0; s < N_STATUSES; s++)
        printf(" %s=%lld", STATUS_NAMES[s], (long long)mix[s]);
    printf("\n");
    mongoc_collection_destroy(queue);
    free(group_locked);
    free(cumulative);
    return 0;
}

typedef struct tally {
    int64_t rows;
    int64_t total;
} tally_t;

static void count_row(void *user, const char *value, const char *status, int64_t n)
{
    (void)value;
    (void)status;
    tally_t *t = user;
    t->rows++;
    t->total += n;
}

static void report(const char *by, int64_t round, double ms, const tally_t *t)
{
    printf("count by=%s round=%lld ms=%.1f rows=%lld total=%lld\n", by, (long long)round, ms,
           (long long)t->rows, (long long)t->total);
    fflush(stdout);
}

static int cmd_time(cohort_store_t *store, mongoc_client_t *client, const options_t *o)
{
    bson_error_t error;
    for (int64_t round = 1; round <= o->repeat; round++) {
        int64_t counts[N_STATUSES];
        double t0 = now_ms();
        if (!cohort_store_count_statuses(store, client, o->service, STATUS_NAMES, N_STATUSES,
                                         counts, &error))
            die("count_statuses: %s", error.message);
        tally_t t = {.rows = N_STATUSES};
        for (int s = 0; s < N_STATUSES; s++)
            t.total += counts[s];
        report("status", round, now_ms() - t0, &t);

        cohort_status_counts_t c;
        t0 = now_ms();
        if (!cohort_store_count_tasks(store, client, o->service, &c, &error))
            die("count_tasks: %s", error.message);
        t = (tally_t){.rows = N_STATUSES + 1,
                      .total = c.pending + c.claimed + c.succeeded + c.failed + c.timed_out +
                               c.other};
        report("status_agg", round, now_ms() - t0, &t);

        static const char *const fields[] = {"kind", "group"};
        for (size_t f = 0; f < 2; f++) {
            t = (tally_t){0};
            t0 = now_ms();
            if (!cohort_store_count_by(store, client, o->service, fields[f], count_row, &t,
                                       &error))
                die("count_by: %s", error.message);
            report(fields[f], round, now_ms() - t0, &t);
        }
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: counts fill --database DB --tasks N [--service NAME] [--groups G]\n"
                    "                   [--kinds K]\n"
                    "       counts time --database DB [--service NAME] [--repeat R]\n"
                    "  MONGODB_URI names the server.\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    options_t o = {.service = "noop", .groups = 1000, .kinds = 20, .repeat = 5};
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--database") == 0)
            o.database = argv[++i];
        else if (strcmp(argv[i], "--service") == 0)
            o.service = argv[++i];
        else if (strcmp(argv[i], "--tasks") == 0)
            o.tasks = parse_int("--tasks", argv[++i], 1, 100000000);
        else if (strcmp(argv[i], "--groups") == 0)
            o.groups = parse_int("--groups", argv[++i], 1, 1000000);
        else if (strcmp(argv[i], "--kinds") == 0)
            o.kinds = parse_int("--kinds", argv[++i], 1, 100);
        else if (strcmp(argv[i], "--repeat") == 0)
            o.repeat = parse_int("--repeat", argv[++i], 1, 1000);
        else
            usage();
    }
    bool fill = strcmp(argv[1], "fill") == 0;
    if (!o.database || (!fill && strcmp(argv[1], "time") != 0) || (fill && o.tasks == 0))
        usage();

    mongoc_init();
    const char *uri = getenv("MONGODB_URI");
    bson_error_t error;
    cohort_store_t *store = cohort_store_new(uri && *uri ? uri : "mongodb://127.0.0.1:27017",
                                             o.database, "cohort-bench-counts", &error);
    if (!store)
        die("%s", error.message);
    mongoc_client_t *client = cohort_store_pop(store);
    int rc = fill ? cmd_fill(store, client, &o) : cmd_time(store, client, &o);
    cohort_store_push(store, client);
    cohort_store_destroy(store);
    mongoc_cleanup();
    return rc;
}
