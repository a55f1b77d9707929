/*
 * raw_loop.c - the physical limit for Cohort's throughput: a bare libmongoc claim-and-complete
 * loop against the same server, issuing the same two commands per task that a Cohort worker
 * does and nothing else (no process, no ticks, no election, no handler).
 *
 *   raw_loop [--tasks N] [--claims K] [--threads T] [--poll-ms I] [--database NAME] [--keep]
 *            [--history] [--ordered] [--batch B]
 *
 * It fills queue_noop of a fresh database with N pending tasks shaped like Cohort's (status,
 * data, tracked, created_at, created_by, run_at, attempts) and the same {status, run_at}
 * index, then T threads, each with its own client from one pool, loop:
 *
 *   findAndModify {status: pending, run_at <= now} sort {run_at: 1}
 *       -> status claimed, claimed_by, attempts + 1, claimed_at = $currentDate
 *   updateOne {_id, status: claimed, claimed_by}
 *       -> status succeeded, finished_at = $currentDate
 *
 * until a claim finds nothing, or, with --claims K, until K tasks in all are done (the rate of
 * claiming from a queue of N; tests/bench/growth.sh). Insertion is neither timed nor
 * counted. The timed part starts when the threads are released together and ends when the
 * last one has seen the empty queue; it includes each client's first connection. Commands are counted with the APM
 * "command started" callback, as in Cohort's store, and include each thread's final empty
 * claim; steady_commands_per_task counts only between the 10% and the 90% completed marks.
 *
 * --history (a diagnostic, not used by run.sh) also does the rest of what Cohort's two commands
 * do: the claim leaves out the history field, the completion filters on the attempt and
 * pushes a history entry with $slice -10. It measures what Cohort's per-task record costs.
 *
 * --ordered claims in Cohort's claim order instead (sort {priority: -1, run_at: 1, _id: 1}, the
 * tasks with priority 0 and the claim_order index as Cohort creates it): the same sort the
 * server does for every Cohort claim, which on the local server costs more than one key.
 *
 * --batch B is the batched raw loop, the limit of batch claims (tests/bench/batched.sh): each
 * thread loops
 *
 *   find {status: pending, run_at <= now} sort {priority: -1, run_at: 1, _id: 1} limit B,
 *       only the _ids (Cohort's claim order; implies --ordered)
 *   updateMany {_id: {$in: those}, status: pending} -> status claimed, claimed_by = a fresh
 *       token, attempts + 1, claimed_at = $currentDate
 *   find {claimed_by: token, status: claimed}, only the _ids (what the token won)
 *   one unordered bulk of updateOne {_id, status: claimed, claimed_by: token}
 *       -> status succeeded, finished_at = $currentDate
 *
 * until the find returns nothing: four commands per B tasks. With --claims K it stops
 * claiming once K are reserved (the last batch may take fewer).
 *
 * --poll-ms I adds the load the benchmark's probe puts on a Cohort run: a thread with its
 * own client counts the succeeded tasks every I ms until all are done. Its commands are
 * counted apart (poll_commands).
 *
 * Prints one line of key=value pairs on stdout (tests/bench/run.sh reads it):
 *
 *   raw batch=B threads=T tasks=N seconds=S tasks_per_s=R active_seconds=A active_tasks_per_s=RA
 *       commands=C commands_per_task=CPT steady_commands_per_task=SCPT cpu_ms=U polls=P
 *       poll_commands=PC insert_seconds=I
 *
 * tasks is the number completed (K with --claims). insert_seconds is how long creating the
 * indexes and inserting the N tasks took (not in `seconds`; batched.sh adds it to measure the
 * loop as Cohort is measured, from the enqueue on). cpu_ms is this process's CPU time (user +
 * system) during the timed part. active_* is the span from the first claimed_at to the last
 * finished_at (server clock), the same measure run.sh reports for Cohort. The database is
 * dropped at the end unless --keep.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

#define COLLECTION "queue_noop"
#define INSERT_CHUNK 10000

typedef struct run {
    mongoc_client_pool_t *pool;
    bench_counter_t counter; /* the workers' commands */
    const char *database;
    int64_t tasks;
    int64_t claims;             /* tasks to complete in all: `tasks`, or fewer with --claims */
    _Atomic int64_t reserved;   /* claims the threads have started */
    pthread_barrier_t start;
    _Atomic int64_t completed;
    int64_t mark_10, mark_90;                  /* completed counts of the steady-state window */
    _Atomic uint64_t commands_10, commands_90; /* the counter when each mark was reached */
    int64_t poll_ms;                           /* 0: no poller */
    bool history;                              /* write history entries as Cohort does */
    bool ordered;                              /* Cohort's claim order */
    int64_t batch;                             /* 0: one task per claim; else the batch size */
    int64_t polls;
    bench_counter_t poll_counter;
} run_t;

typedef struct worker {
    run_t *run;
    pthread_t thread;
    char name[32];
    int64_t done;
} worker_t;

static void create_queue(mongoc_client_t *client, const char *database, int64_t tasks,
                         bool ordered)
{
    bson_error_t error;
    mongoc_collection_t *coll = mongoc_client_get_collection(client, database, COLLECTION);
    bson_t *cmd = BCON_NEW("createIndexes", BCON_UTF8(COLLECTION), "indexes", "[", "{", "key", "{",
                           "status", BCON_INT32(1), "run_at", BCON_INT32(1), "}", "name",
                           BCON_UTF8("status_run_at"), "}", "{", "key", "{", "status",
                           BCON_INT32(1), "priority", BCON_INT32(-1), "run_at", BCON_INT32(1),
                           "_id", BCON_INT32(1), "}", "name", BCON_UTF8("claim_order"), "}",
                           "]");
    if (!mongoc_collection_write_command_with_opts(coll, cmd, NULL, NULL, &error))
        bench_die("createIndexes on %s.%s: %s", database, COLLECTION, error.message);
    bson_destroy(cmd);

    int64_t now = bench_realtime_ms();
    for (int64_t inserted = 0; inserted < tasks;) {
        int64_t chunk = tasks - inserted < INSERT_CHUNK ? tasks - inserted : INSERT_CHUNK;
        bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
        mongoc_bulk_operation_t *bulk =
            mongoc_collection_create_bulk_operation_with_opts(coll, opts);
        for (int64_t i = 0; i < chunk; i++) {
            bson_t *doc = BCON_NEW("status", BCON_UTF8("pending"), "data", "{", "}", "tracked",
                                   BCON_BOOL(false), "created_at", BCON_DATE_TIME(now),
                                   "created_by", BCON_UTF8("raw_loop"), "run_at",
                                   BCON_DATE_TIME(now), "attempts", BCON_INT32(0));
            if (ordered)
                BSON_APPEND_INT32(doc, "priority", 0);
            mongoc_bulk_operation_insert(bulk, doc);
            bson_destroy(doc);
        }
        bson_t reply;
        if (!mongoc_bulk_operation_execute(bulk, &reply, &error))
            bench_die("inserting tasks: %s", error.message);
        bson_destroy(&reply);
        mongoc_bulk_operation_destroy(bulk);
        bson_destroy(opts);
        inserted += chunk;
    }
    mongoc_collection_destroy(coll);
}

/* Claims the oldest due pending task. Returns false when there is none. */
static bool claim(mongoc_collection_t *coll, const char *worker_name, const run_t *run,
                  bson_oid_t *id)
{
    bool history = run->history;
    bson_t *query = BCON_NEW("status", BCON_UTF8("pending"), "run_at", "{", "$lte",
                             BCON_DATE_TIME(bench_realtime_ms()), "}");
    bson_t *sort = run->ordered ? BCON_NEW("priority", BCON_INT32(-1), "run_at", BCON_INT32(1),
                                           "_id", BCON_INT32(1))
                                : BCON_NEW("run_at", BCON_INT32(1));
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("claimed"), "claimed_by",
                              BCON_UTF8(worker_name), "}", "$inc", "{", "attempts", BCON_INT32(1),
                              "}", "$currentDate", "{", "claimed_at", BCON_BOOL(true), "}");
    mongoc_find_and_modify_opts_t *opts = mongoc_find_and_modify_opts_new();
    mongoc_find_and_modify_opts_set_sort(opts, sort);
    mongoc_find_and_modify_opts_set_update(opts, update);
    mongoc_find_and_modify_opts_set_flags(opts, MONGOC_FIND_AND_MODIFY_RETURN_NEW);
    bson_t *fields = BCON_NEW("history", BCON_INT32(0));
    if (history)
        mongoc_find_and_modify_opts_set_fields(opts, fields);

    bson_t reply;
    bson_error_t error;
    if (!mongoc_collection_find_and_modify_with_opts(coll, query, opts, &reply, &error))
        bench_die("%s: claim failed: %s", worker_name, error.message);
    bson_iter_t it, oid;
    bool found = bson_iter_init_find(&it, &reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
                 bson_iter_recurse(&it, &oid) && bson_iter_find(&oid, "_id") &&
                 BSON_ITER_HOLDS_OID(&oid);
    if (found)
        bson_oid_copy(bson_iter_oid(&oid), id);
    bson_destroy(&reply);
    mongoc_find_and_modify_opts_destroy(opts);
    bson_destroy(fields);
    bson_destroy(update);
    bson_destroy(sort);
    bson_destroy(query);
    return found;
}

/* Marks a task this worker claimed as succeeded; dies if the claim was not ours. With
 * `history`, also filters on the attempt and pushes a history entry, as Cohort does. */
static void complete(mongoc_collection_t *coll, const char *worker_name, bool history,
                     const bson_oid_t *id)
{
    bson_t *filter = BCON_NEW("_id", BCON_OID(id), "status", BCON_UTF8("claimed"), "claimed_by",
                              BCON_UTF8(worker_name));
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("succeeded"), "}", "$currentDate",
                              "{", "finished_at", BCON_BOOL(true), "}");
    if (history) {
        int64_t now = bench_realtime_ms();
        BSON_APPEND_INT32(filter, "attempts", 1);
        BCON_APPEND(update, "$push", "{", "history", "{", "$each", "[", "{", "node",
                    BCON_UTF8(worker_name), "attempt", BCON_INT32(1), "started_at",
                    BCON_DATE_TIME(now), "ended_at", BCON_DATE_TIME(now), "outcome",
                    BCON_UTF8("succeeded"), "}", "]", "$slice", BCON_INT32(-10), "}", "}");
    }
    bson_t reply;
    bson_error_t error;
    if (!mongoc_collection_update_one(coll, filter, update, NULL, &reply, &error))
        bench_die("%s: completing a task failed: %s", worker_name, error.message);
    bson_iter_t it;
    if (!bson_iter_init_find(&it, &reply, "matchedCount") || bson_iter_as_int64(&it) != 1)
        bench_die("%s: a task it had claimed was no longer claimed by it (is findAndModify "
                  "atomic on this server?)",
                  worker_name);
    bson_destroy(&reply);
    bson_destroy(update);
    bson_destroy(filter);
}

/* The batched loop's claim: up to `want` due ids in claim order, claimed with one updateMany
 * under `token`, then read back. Fills `won` with the ids the token won; returns how many
 * (0 when the queue has nothing due). */
static int64_t claim_batch(mongoc_collection_t *coll, const char *token, int64_t want,
                           bson_oid_t *won)
{
    bson_error_t error;
    bson_t *query = BCON_NEW("status", BCON_UTF8("pending"), "run_at", "{", "$lte",
                             BCON_DATE_TIME(bench_realtime_ms()), "}");
    bson_t *opts = BCON_NEW("sort", "{", "priority", BCON_INT32(-1), "run_at", BCON_INT32(1),
                            "_id", BCON_INT32(1), "}", "projection", "{", "_id", BCON_INT32(1),
                            "}", "limit", BCON_INT64(want), "batchSize", BCON_INT64(want));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, query, opts, NULL);
    bson_t ids;
    bson_init(&ids);
    const bson_t *doc;
    bson_iter_t it;
    int64_t found = 0;
    char key[24];
    while (mongoc_cursor_next(cursor, &doc))
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it)) {
            snprintf(key, sizeof key, "%lld", (long long)found++);
            BSON_APPEND_OID(&ids, key, bson_iter_oid(&it));
        }
    if (mongoc_cursor_error(cursor, &error))
        bench_die("%s: finding due tasks failed: %s", token, error.message);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(query);
    if (found == 0) {
        bson_destroy(&ids);
        return 0;
    }

    bson_t filter;
    bson_init(&filter);
    bson_t in;
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &in);
    BSON_APPEND_ARRAY(&in, "$in", &ids);
    bson_append_document_end(&filter, &in);
    BSON_APPEND_UTF8(&filter, "status", "pending");
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("claimed"), "claimed_by",
                              BCON_UTF8(token), "}", "$inc", "{", "attempts", BCON_INT32(1), "}",
                              "$currentDate", "{", "claimed_at", BCON_BOOL(true), "}");
    if (!mongoc_collection_update_many(coll, &filter, update, NULL, NULL, &error))
        bench_die("%s: claiming a batch failed: %s", token, error.message);
    bson_destroy(update);
    bson_destroy(&filter);
    bson_destroy(&ids);

    bson_t *mine = BCON_NEW("claimed_by", BCON_UTF8(token), "status", BCON_UTF8("claimed"));
    bson_t *only_id = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "batchSize",
                               BCON_INT64(want));
    cursor = mongoc_collection_find_with_opts(coll, mine, only_id, NULL);
    int64_t n = 0;
    while (n < want && mongoc_cursor_next(cursor, &doc))
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it))
            bson_oid_copy(bson_iter_oid(&it), &won[n++]);
    if (mongoc_cursor_error(cursor, &error))
        bench_die("%s: reading back a batch failed: %s", token, error.message);
    mongoc_cursor_destroy(cursor);
    bson_destroy(only_id);
    bson_destroy(mine);
    return n > 0 ? n : -1; /* -1: due tasks seen, all taken by another thread: look again */
}

/* Completes the `n` tasks `token` won in one unordered bulk write; dies unless all matched. */
static void complete_batch(mongoc_collection_t *coll, const char *token, const bson_oid_t *won,
                           int64_t n)
{
    bson_error_t error;
    bson_t *bulk_opts = BCON_NEW("ordered", BCON_BOOL(false));
    mongoc_bulk_operation_t *bulk = mongoc_collection_create_bulk_operation_with_opts(coll,
                                                                                      bulk_opts);
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("succeeded"), "}", "$currentDate",
                              "{", "finished_at", BCON_BOOL(true), "}");
    for (int64_t i = 0; i < n; i++) {
        bson_t *filter = BCON_NEW("_id", BCON_OID(&won[i]), "status", BCON_UTF8("claimed"),
                                  "claimed_by", BCON_UTF8(token));
        if (!mongoc_bulk_operation_update_one_with_opts(bulk, filter, update, NULL, &error))
            bench_die("%s: building the completion bulk: %s", token, error.message);
        bson_destroy(filter);
    }
    bson_t reply;
    if (!mongoc_bulk_operation_execute(bulk, &reply, &error))
        bench_die("%s: completing a batch failed: %s", token, error.message);
    bson_iter_t it;
    if (!bson_iter_init_find(&it, &reply, "nMatched") || bson_iter_as_int64(&it) != n)
        bench_die("%s: %lld tasks it had won were no longer claimed by it", token, (long long)n);
    bson_destroy(&reply);
    bson_destroy(update);
    mongoc_bulk_operation_destroy(bulk);
    bson_destroy(bulk_opts);
}

/* Notes the command count when the completed tasks reach the steady-state window's ends. */
static void record_progress(run_t *run)
{
    int64_t completed = atomic_fetch_add(&run->completed, 1) + 1;
    if (completed == run->mark_10)
        atomic_store(&run->commands_10, bench_counter_started(&run->counter));
    if (completed == run->mark_90)
        atomic_store(&run->commands_90, bench_counter_started(&run->counter));
}

/* The batched loop of one thread: claims of up to run->batch under a fresh token each, until
 * nothing is due or (with --claims) the reservations run out. */
static void run_batches(worker_t *w, mongoc_collection_t *coll)
{
    bson_oid_t *won = calloc((size_t)w->run->batch, sizeof *won);
    if (!won)
        bench_die("out of memory");
    for (;;) {
        int64_t left = w->run->claims - atomic_fetch_add(&w->run->reserved, w->run->batch);
        if (left <= 0)
            break;
        char token[64];
        bson_oid_t fresh;
        bson_oid_init(&fresh, NULL);
        bson_oid_to_string(&fresh, token);
        int64_t n = claim_batch(coll, token, left < w->run->batch ? left : w->run->batch, won);
        if (n == 0)
            break;
        if (n < 0) { /* all taken by other threads: give the reservation back, look again */
            atomic_fetch_sub(&w->run->reserved, w->run->batch);
            continue;
        }
        atomic_fetch_sub(&w->run->reserved, w->run->batch - n);
        complete_batch(coll, token, won, n);
        w->done += n;
        for (int64_t i = 0; i < n; i++)
            record_progress(w->run);
    }
    free(won);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    mongoc_client_t *client = mongoc_client_pool_pop(w->run->pool);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, w->run->database, COLLECTION);
    pthread_barrier_wait(&w->run->start);
    bson_oid_t id;
    if (w->run->batch > 0)
        run_batches(w, coll);
    else
        while (atomic_fetch_add(&w->run->reserved, 1) < w->run->claims &&
               claim(coll, w->name, w->run, &id)) {
            complete(coll, w->name, w->run->history, &id);
            w->done++;
            record_progress(w->run);
        }
    mongoc_collection_destroy(coll);
    mongoc_client_pool_push(w->run->pool, client);
    return NULL;
}

/* The probe's load: counts succeeded tasks every poll_ms until all are done. */
static void *poller_main(void *arg)
{
    run_t *run = arg;
    mongoc_client_t *client = bench_client_new(&run->poll_counter);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, run->database, COLLECTION);
    pthread_barrier_wait(&run->start);
    int64_t succeeded = 0;
    while (succeeded < run->claims) {
        struct timespec ts = {.tv_sec = run->poll_ms / 1000,
                              .tv_nsec = (run->poll_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
        succeeded = bench_count_status(coll, "succeeded");
        run->polls++;
    }
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    return NULL;
}

/* CPU time (user + system) of this process so far. */
static int64_t cpu_ms(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0)
        return 0;
    return ((int64_t)usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000 +
           ((int64_t)usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000;
}

static void usage(void)
{
    fprintf(stderr, "usage: raw_loop [--tasks N] [--claims K] [--threads T] [--poll-ms I]\n"
                    "                [--database NAME] [--keep] [--history] [--ordered]\n"
                    "                [--batch B]\n"
                    "  MONGODB_URI names the server (default mongodb://127.0.0.1:27017).\n");
    exit(2);
}

int main(int argc, char **argv)
{
    bench_set_program("raw_loop");
    int64_t tasks = 2000, claims = 0, threads = 1, poll_ms = 0, batch = 0;
    const char *database = NULL;
    bool keep = false, history = false, ordered = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tasks") == 0 && i + 1 < argc)
            tasks = bench_parse_int("--tasks", argv[++i], 1, 10000000);
        else if (strcmp(argv[i], "--claims") == 0 && i + 1 < argc)
            claims = bench_parse_int("--claims", argv[++i], 1, 10000000);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = bench_parse_int("--threads", argv[++i], 1, 256);
        else if (strcmp(argv[i], "--poll-ms") == 0 && i + 1 < argc)
            poll_ms = bench_parse_int("--poll-ms", argv[++i], 1, 60000);
        else if (strcmp(argv[i], "--database") == 0 && i + 1 < argc)
            database = argv[++i];
        else if (strcmp(argv[i], "--keep") == 0)
            keep = true;
        else if (strcmp(argv[i], "--history") == 0)
            history = true;
        else if (strcmp(argv[i], "--ordered") == 0)
            ordered = true;
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = bench_parse_int("--batch", argv[++i], 1, 10000);
        else
            usage();
    }
    if (claims == 0 || claims > tasks)
        claims = tasks;
    if (batch > 0)
        ordered = true; /* the batched loop finds its ids in Cohort's claim order */
    char default_name[64];
    if (!database) {
        snprintf(default_name, sizeof default_name, "bench_raw_%ld_%lld", (long)getpid(),
                 (long long)(bench_realtime_ms() % 1000000));
        database = default_name;
    }

    mongoc_init();
    run_t run = {.database = database,
                 .tasks = tasks,
                 .claims = claims,
                 .mark_10 = claims / 10,
                 .mark_90 = claims * 9 / 10,
                 .poll_ms = poll_ms,
                 .history = history,
                 .ordered = ordered,
                 .batch = batch};
    run.pool = bench_pool_new(&run.counter);
    mongoc_client_pool_max_size(run.pool, (uint32_t)threads + 1);
    mongoc_client_t *main_client = mongoc_client_pool_pop(run.pool);
    int64_t insert_t0 = bson_get_monotonic_time();
    create_queue(main_client, database, tasks, ordered);
    double insert_seconds = (double)(bson_get_monotonic_time() - insert_t0) / 1e6;

    worker_t *workers = calloc((size_t)threads, sizeof *workers);
    if (!workers)
        bench_die("out of memory");
    pthread_barrier_init(&run.start, NULL, (unsigned)threads + 1 + (poll_ms > 0));
    for (int64_t i = 0; i < threads; i++) {
        workers[i].run = &run;
        snprintf(workers[i].name, sizeof workers[i].name, "raw-%lld", (long long)i + 1);
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0)
            bench_die("cannot start thread %lld", (long long)i + 1);
    }

    pthread_t poller;
    if (poll_ms > 0 && pthread_create(&poller, NULL, poller_main, &run) != 0)
        bench_die("cannot start the poller thread");

    pthread_barrier_wait(&run.start);
    uint64_t commands_before = bench_counter_started(&run.counter);
    int64_t t0 = bson_get_monotonic_time();
    int64_t cpu0 = cpu_ms();
    int64_t done = 0;
    for (int64_t i = 0; i < threads; i++) {
        pthread_join(workers[i].thread, NULL);
        done += workers[i].done;
    }
    int64_t t1 = bson_get_monotonic_time();
    int64_t cpu = cpu_ms() - cpu0;
    uint64_t commands = bench_counter_started(&run.counter) - commands_before;
    if (poll_ms > 0)
        pthread_join(poller, NULL);

    mongoc_collection_t *coll = mongoc_client_get_collection(main_client, database, COLLECTION);
    int64_t succeeded = bench_count_status(coll, "succeeded");
    if (done != claims || succeeded != claims)
        bench_die("%lld tasks to complete, %lld completed by the threads, %lld succeeded in the "
                  "database",
                  (long long)claims, (long long)done, (long long)succeeded);
    int64_t first_claim = bench_extreme_date(coll, "claimed_at", 1);
    int64_t last_finish = bench_extreme_date(coll, "finished_at", -1);
    mongoc_collection_destroy(coll);

    double seconds = (double)(t1 - t0) / 1e6;
    double active = (double)(last_finish - first_claim) / 1e3;
    if (active <= 0)
        active = 0.001;
    printf("raw batch=%lld threads=%lld tasks=%lld seconds=%.3f tasks_per_s=%.1f active_seconds=%.3f "
           "active_tasks_per_s=%.1f commands=%llu commands_per_task=%.3f",
           (long long)batch, (long long)threads, (long long)claims, seconds, (double)claims / seconds, active,
           (double)claims / active, (unsigned long long)commands, (double)commands / claims);
    if (run.mark_10 > 0 && run.mark_90 > run.mark_10)
        printf(" steady_commands_per_task=%.3f",
               (double)(atomic_load(&run.commands_90) - atomic_load(&run.commands_10)) /
                   (double)(run.mark_90 - run.mark_10));
    else
        printf(" steady_commands_per_task=n/a");
    printf(" cpu_ms=%lld polls=%lld poll_commands=%llu insert_seconds=%.3f\n", (long long)cpu,
           (long long)run.polls, (unsigned long long)bench_counter_started(&run.poll_counter),
           insert_seconds);

    if (!keep) {
        mongoc_database_t *db = mongoc_client_get_database(main_client, database);
        mongoc_database_drop(db, NULL);
        mongoc_database_destroy(db);
    }
    pthread_barrier_destroy(&run.start);
    free(workers);
    mongoc_client_pool_push(run.pool, main_client);
    mongoc_client_pool_destroy(run.pool);
    mongoc_cleanup();
    return 0;
}
