/*
 * external.c - external workers in another language: 3 real cohortd nodes serving a service
 * of `handler = external`, and 4 Python workers (handlers/external-python/cohort_worker.py,
 * the one shipped) claiming over the HTTP API with long-poll, heartbeats and lease tokens,
 * over one tracked batch of 2,000 tasks. Mid-run one worker is SIGKILLed while it holds
 * leases; another is frozen (SIGSTOP) for longer than its lease and thawed, so it reports
 * outcomes for leases it lost meanwhile; later the primary node is SIGKILLed (the workers
 * fail over to the other nodes).
 *
 * Checked at the end, from the database and the workers' journals (one JSON line per call):
 * - every task succeeded, and its history holds exactly one success;
 * - no outcome was applied from a lost lease: the frozen worker was answered 409 lease_lost
 *   at least once, an outcome answered so is never the attempt the database recorded as the
 *   success, and each task has at most one outcome answered 200 that was not a replay, for
 *   exactly the attempt recorded;
 * - the killed worker's leases ran out and their tasks ran elsewhere (the nodes logged it);
 * - the batch was completed once (batches_completed = 1 in the service document).
 *
 * With 10 ms tasks a late outcome rarely meets its task re-claimed and still running, so the
 * write's own fence (the claim token and attempt in its filter) is proven deterministically
 * by integration/api_workers (lost_lease_changes_nothing); here the whole path is.
 *
 * The waits are bounded by progress (no task finished for 60 s), not by a budget for the
 * whole run: the local server scans the queue for every claim.
 */
#include <bson/bson.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>

#include "cluster.h"
#include "http_client.h"
#include "support.h"

#define SERVICE "jobs"
#define TASKS 2000
#define WORKERS 4
#define NODES 3
#define LEASE_MS "3000"

TestSuite(cluster_external, .fini = cluster_cleanup_all, .timeout = 900);

typedef struct worker {
    pid_t pid;
    char name[16];
    char journal[512];
} worker_t;

static void start_worker(cluster_t *c, worker_t *w, int i, const int *ports, const char *token)
{
    char urls[NODES][64];
    snprintf(w->name, sizeof w->name, "py-%d", i + 1);
    snprintf(w->journal, sizeof w->journal, "%s/%s.jsonl", c->dir, w->name);
    char log[512], script[512];
    snprintf(log, sizeof log, "%s/%s.log", c->dir, w->name);
    snprintf(script, sizeof script, "%s/handlers/external-python/cohort_worker.py",
             COHORT_SOURCE_DIR);
    const char *max = i % 2 ? "1" : "4"; /* one call per task, and batches of claims */
    /* Each starts at another node, so claims spread over the three. */
    for (int k = 0; k < NODES; k++)
        snprintf(urls[k], sizeof urls[k], "http://127.0.0.1:%d", ports[(i + k) % NODES]);
    char *argv[] = {"/usr/bin/env", "python3", script, "--service", SERVICE,
                    "--worker", w->name, "--token-file", (char *)token,
                    "--url", urls[0], "--url", urls[1], "--url", urls[2],
                    "--max", (char *)max, "--wait-ms", "2000", "--lease-ms", LEASE_MS,
                    "--journal", w->journal, NULL};
    w->pid = cluster_spawn(c, argv, log);
}

/* Tasks done so far (succeeded). */
static int64_t succeeded(cluster_t *c)
{
    return cluster_count_status(c, SERVICE, "succeeded");
}

/* Waits until `target` tasks succeeded, as long as some finish every 60 s. */
static bool wait_progress(cluster_t *c, int64_t target)
{
    int64_t last = -1, last_change = test_now_ms();
    for (;;) {
        int64_t now_done = succeeded(c);
        if (now_done >= target)
            return true;
        if (now_done != last) {
            last = now_done;
            last_change = test_now_ms();
        } else if (test_now_ms() - last_change > 60000) {
            return false;
        }
        test_sleep_ms(200);
    }
}

/* One journal line's fields. */
typedef struct record {
    char call[16], task[25], code[32];
    int64_t attempt, status;
    bool replayed;
} record_t;

static bool parse_record(const char *line, record_t *r)
{
    bson_t doc;
    bson_error_t error;
    memset(r, 0, sizeof *r);
    if (!bson_init_from_json(&doc, line, -1, &error))
        return false; /* a line cut by the SIGKILL */
    cluster_doc_utf8(&doc, "call", r->call, sizeof r->call);
    cluster_doc_utf8(&doc, "task", r->task, sizeof r->task);
    cluster_doc_utf8(&doc, "code", r->code, sizeof r->code);
    r->attempt = cluster_doc_number(&doc, "attempt");
    r->status = cluster_doc_number(&doc, "status");
    bson_iter_t it;
    r->replayed = bson_iter_init_find(&it, &doc, "replayed") && BSON_ITER_HOLDS_BOOL(&it) &&
                  bson_iter_bool(&it);
    bson_destroy(&doc);
    return true;
}

/* What the database says of one task: its successful attempt and how many successes. */
typedef struct outcome {
    char id[25];
    int64_t success_attempt;
    char success_by[32];
    int64_t attempts;      /* the task's count: its last claim's attempt */
    char claimed_by[32];   /* its last claimer */
    int successes;
    int applied; /* journal: outcomes answered 200, not replays, for the success attempt */
} outcome_t;

static outcome_t *find_outcome(outcome_t *all, size_t n, const char *id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int cmp = strcmp(all[mid].id, id);
        if (cmp == 0)
            return &all[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Reads every task (in _id order, so ids sort as text) with its history. */
static size_t read_outcomes(cluster_t *c, outcome_t *out, size_t max)
{
    char coll[128];
    snprintf(coll, sizeof coll, "queue_%s", SERVICE);
    mongoc_collection_t *q = mongoc_client_get_collection(c->client, c->db, coll);
    bson_t *filter = bson_new();
    bson_t *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(q, filter, opts, NULL);
    const bson_t *doc;
    size_t n = 0;
    while (n < max && mongoc_cursor_next(cursor, &doc)) {
        outcome_t *o = &out[n++];
        memset(o, 0, sizeof *o);
        bson_iter_t it, hist, entry;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it))
            bson_oid_to_string(bson_iter_oid(&it), o->id);
        o->attempts = cluster_doc_number(doc, "attempts");
        cluster_doc_utf8(doc, "claimed_by", o->claimed_by, sizeof o->claimed_by);
        if (!bson_iter_init_find(&it, doc, "history") || !bson_iter_recurse(&it, &hist))
            continue;
        while (bson_iter_next(&hist)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&hist) || !bson_iter_recurse(&hist, &entry))
                continue;
            const char *outcome = NULL, *node = "";
            int64_t attempt = 0;
            while (bson_iter_next(&entry)) {
                const char *key = bson_iter_key(&entry);
                if (strcmp(key, "outcome") == 0 && BSON_ITER_HOLDS_UTF8(&entry))
                    outcome = bson_iter_utf8(&entry, NULL);
                else if (strcmp(key, "node") == 0 && BSON_ITER_HOLDS_UTF8(&entry))
                    node = bson_iter_utf8(&entry, NULL);
                else if (strcmp(key, "attempt") == 0)
                    attempt = bson_iter_as_int64(&entry);
            }
            if (outcome && strcmp(outcome, "succeeded") == 0) {
                o->successes++;
                o->success_attempt = attempt;
                snprintf(o->success_by, sizeof o->success_by, "%s", node);
            }
        }
    }
    cr_assert(!mongoc_cursor_error(cursor, NULL), "cannot read the queue");
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(q);
    return n;
}

/* The lease_lost answers in a worker's journal so far. */
static int lost_answers(const worker_t *w)
{
    FILE *f = fopen(w->journal, "r");
    int n = 0;
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        record_t r;
        n += parse_record(line, &r) && strcmp(r.code, "lease_lost") == 0;
    }
    if (f)
        fclose(f);
    return n;
}

/* Freezes worker `w` for longer than its lease, until a report of it is refused as lost
 * (it may have been frozen holding nothing: then again, at most 5 times). */
static void freeze_until_lost(cluster_t *c, const worker_t *w)
{
    for (int round = 0; round < 5 && lost_answers(w) == 0; round++) {
        kill(w->pid, SIGSTOP);
        test_sleep_ms(atoi(LEASE_MS) + 1500); /* the lease runs out; the sweep runs each tick */
        kill(w->pid, SIGCONT);
        for (int64_t end = test_now_ms() + 3000; test_now_ms() < end && !lost_answers(w);)
            test_sleep_ms(100);
    }
    cluster_assert(c, lost_answers(w) > 0,
                   "%s was frozen past its lease 5 times and never answered lease_lost",
                   w->name);
}

/* Checks the journals against the database: returns how many lease_lost answers there were. */
static int check_journals(cluster_t *c, worker_t *workers, outcome_t *all, size_t n)
{
    int lost = 0;
    for (int w = 0; w < WORKERS; w++) {
        FILE *f = fopen(workers[w].journal, "r");
        cluster_assert(c, f != NULL, "no journal from %s", workers[w].name);
        char line[1024];
        while (fgets(line, sizeof line, f)) {
            record_t r;
            if (!parse_record(line, &r) || (strcmp(r.call, "succeed") != 0 &&
                                            strcmp(r.call, "fail") != 0))
                continue;
            outcome_t *o = find_outcome(all, n, r.task);
            cluster_assert(c, o != NULL, "%s reported task %s, which is not in the queue",
                           workers[w].name, r.task);
            if (r.status == 409 && strcmp(r.code, "lease_lost") == 0) {
                lost++;
                cluster_assert(c, r.attempt != o->success_attempt,
                               "task %s: attempt %lld was refused as lost by %s, yet the "
                               "database records it as the success",
                               r.task, (long long)r.attempt, workers[w].name);
            } else if (r.status == 200 && r.replayed) {
                cluster_assert(c, r.attempt == o->success_attempt,
                               "task %s: %s was told attempt %lld had succeeded already, but "
                               "the success recorded is attempt %lld",
                               r.task, workers[w].name, (long long)r.attempt,
                               (long long)o->success_attempt);
            } else if (r.status == 200) {
                cluster_assert(c, r.attempt == o->success_attempt,
                               "task %s: %s's outcome for attempt %lld was applied, but the "
                               "success recorded is attempt %lld",
                               r.task, workers[w].name, (long long)r.attempt,
                               (long long)o->success_attempt);
                o->applied++;
                cluster_assert(c, o->applied == 1, "task %s: two outcomes applied", r.task);
            }
        }
        fclose(f);
    }
    return lost;
}

Test(cluster_external, python_workers_over_a_failover)
{
    cluster_options_t options = {
        .tag = "external",
        .services = {{.name = SERVICE, .handler = "external"}},
    };
    cluster_t *c = cluster_new(&options);
    int ports[NODES];
    for (int i = 0; i < NODES; i++) {
        ports[i] = cluster_free_port();
        cluster_node_t *n = cluster_add_node(c, NULL);
        char extra[64];
        snprintf(extra, sizeof extra, "http_listen = 127.0.0.1:%d", ports[i]);
        cluster_node_config_add(n, extra);
    }
    /* One tracked batch, in the queue before any node starts. */
    char count[16];
    snprintf(count, sizeof count, "%d", TASKS);
    const char *enqueue[] = {"enqueue", SERVICE, "--count", count, "--tracked", "--create",
                             "--data", "{\"sleep_ms\": 10}", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cannot enqueue");
    char *token = NULL;
    const char *create[] = {"tokens", "create", "workers", "--scopes", "work", NULL};
    cluster_assert(c, cluster_run_ctl_output(c, create, &token) == 0, "cannot create a token");
    char *token_file = test_write_file(c->dir, "token", token);
    free(token);

    for (int i = 0; i < NODES; i++)
        cluster_node_start(&c->nodes[i]);
    cluster_primacy_t p;
    cluster_assert(c, cluster_wait_primary(c, SERVICE, NULL, 30000, &p), "no primary elected");
    worker_t workers[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        start_worker(c, &workers[i], i, ports, token_file);

    /* A worker dies holding leases (it claims 4 at a time). */
    cluster_assert(c, wait_progress(c, TASKS / 5), "no progress to %d tasks", TASKS / 5);
    cluster_process_kill(c, workers[0].pid);
    /* Another stops past its lease (a long GC pause, a frozen VM), then reports. */
    freeze_until_lost(c, &workers[2]);
    /* Then the primary node. */
    cluster_assert(c, wait_progress(c, TASKS / 2), "no progress to %d tasks", TASKS / 2);
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &p), "no primary");
    cluster_node_t *primary = cluster_node_by_id(c, p.primary);
    cluster_assert(c, primary != NULL, "primary '%s' is not a node of the test", p.primary);
    cluster_node_kill(primary);

    cluster_assert(c, wait_progress(c, TASKS), "stuck at %lld of %d tasks",
                   (long long)succeeded(c), TASKS);
    cluster_assert(c, cluster_wait_count(c, SERVICE, "{\"status\": {\"$ne\": \"succeeded\"}}", 0,
                                         10000),
                   "tasks left in another status");
    /* The batch completes once, on the new primary's ticks. */
    int64_t completed = 0;
    for (int64_t deadline = test_now_ms() + 30000; test_now_ms() < deadline && completed < 1;) {
        bson_t doc;
        if (cluster_read_service_doc(c, SERVICE, &doc)) {
            completed = cluster_doc_number(&doc, "batches_completed");
            bson_destroy(&doc);
        }
        if (completed < 1)
            test_sleep_ms(200);
    }
    for (int i = 1; i < WORKERS; i++)
        cluster_process_kill(c, workers[i].pid);
    test_sleep_ms(1000); /* a completion recorded twice would show by now */
    bson_t doc;
    cluster_assert(c, cluster_read_service_doc(c, SERVICE, &doc), "no service document");
    completed = cluster_doc_number(&doc, "batches_completed");
    bson_destroy(&doc);
    cluster_assert(c, completed == 1, "batches_completed = %lld, want 1", (long long)completed);

    outcome_t *all = calloc(TASKS + 16, sizeof *all);
    size_t n = read_outcomes(c, all, TASKS + 16);
    cluster_assert(c, n == TASKS, "%zu tasks in the queue, want %d", n, TASKS);
    for (size_t i = 0; i < n; i++) {
        outcome_t *o = &all[i];
        cluster_assert(c, o->successes == 1, "task %s has %d successes in its history", o->id,
                       o->successes);
        /* The success is the last claim's: a late outcome under an earlier claim would show
         * as an earlier attempt, or another worker, than the task's last claim. */
        cluster_assert(c, o->success_attempt == o->attempts && !strcmp(o->success_by,
                                                                        o->claimed_by),
                       "task %s: success recorded for attempt %lld by %s, but its last claim "
                       "is attempt %lld by %s",
                       o->id, (long long)o->success_attempt, o->success_by,
                       (long long)o->attempts, o->claimed_by);
    }
    int lost = check_journals(c, workers, all, n);
    cluster_assert(c, lost >= 1, "no lease_lost answer in the journals");
    int expired = cluster_log_count_all(c, "external worker lease(s) ran out", NULL);
    cluster_assert(c, expired >= 1, "no node logged the killed worker's leases running out");
    cr_log_info("external: %d tasks, %d lease_lost answers, %d lease sweeps that released "
                "tasks",
                TASKS, lost, expired);
    free(all);
    free(token_file);
}

/* ---- long-poll -------------------------------------------------------------------------- */

/*
 * One node at tick_ms = 1000 and api_threads = 2. Ten claims held at once (more than the
 * threads) leave the API free: a listing still answers at once, so a held claim holds no
 * thread. A claim held for kind "lat" gets a task enqueued through the same node within
 * 100 ms (median of 5 trials), not on the next tick up to a second later. At their
 * deadline the ten held claims answer {"tasks": []}.
 */
Test(cluster_external, long_poll_wakes_on_enqueue_and_holds_no_thread)
{
    cluster_options_t options = {
        .tag = "longpoll",
        .tick_ms = 1000,
        .takeover_ms = 5000,
        .services = {{.name = SERVICE, .handler = "external"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_node_t *n = cluster_add_node(c, NULL);
    int port = cluster_node_listen(n, "api_threads = 2");
    cluster_node_start(n);
    cluster_primacy_t p;
    cluster_assert(c, cluster_wait_primary(c, SERVICE, NULL, 30000, &p), "no primary");
    char *auth = cluster_api_auth(c, "all", "work,enqueue,read");
    char claims[64];
    snprintf(claims, sizeof claims, "/api/v1/services/%s/claims", SERVICE);
    char tasks[64];
    snprintf(tasks, sizeof tasks, "/api/v1/services/%s/tasks", SERVICE);

    /* Ten held claims, for a kind nobody enqueues. */
    int held[10];
    int64_t held_at = test_now_ms();
    for (int i = 0; i < 10; i++) {
        char body[128];
        snprintf(body, sizeof body,
                 "{\"worker\": \"idle-%d\", \"wait_ms\": 6000, \"kinds\": [\"other\"]}", i);
        held[i] = http_send(port, "POST", claims, auth, body);
        cluster_assert(c, held[i] >= 0, "the node did not take held claim %d", i);
    }
    test_sleep_ms(300);
    http_response_t r;
    int64_t asked = test_now_ms();
    cluster_assert(c, http_request_with(port, "GET", "/api/v1/services", auth, NULL, 5000, &r),
                   "no answer to a listing while 10 claims are held");
    int64_t listing_ms = test_now_ms() - asked;
    cluster_assert(c, r.status == 200 && listing_ms < 1000,
                   "a listing took %lld ms (status %d) with 10 claims held on 2 API threads",
                   (long long)listing_ms, r.status);
    http_response_free(&r);

    /* Enqueue through the node while a claim for the kind is held. */
    int64_t latency[5];
    for (int t = 0; t < 5; t++) {
        int fd = http_send(port, "POST", claims, auth,
                           "{\"worker\": \"lat\", \"wait_ms\": 5000, \"kinds\": [\"lat\"]}");
        cluster_assert(c, fd >= 0, "the node did not take the claim");
        test_sleep_ms(300); /* held by now: it found nothing */
        int64_t t0 = test_now_ms();
        cluster_assert(c, http_request_with(port, "POST", tasks, auth,
                                            "{\"data\": {}, \"kind\": \"lat\"}", 5000, &r) &&
                              r.status == 201,
                       "enqueue failed: %d %s", r.status, r.body ? r.body : "");
        http_response_free(&r);
        cluster_assert(c, http_read_response(fd, 6000, &r), "the held claim never answered");
        latency[t] = test_now_ms() - t0;
        cluster_assert(c, r.status == 200 && strstr(r.body, "\"lease\""),
                       "the held claim answered without the task: %d %s", r.status, r.body);
        http_response_free(&r);
    }
    for (int i = 1; i < 5; i++) /* insertion sort: the median */
        for (int j = i; j > 0 && latency[j] < latency[j - 1]; j--) {
            int64_t tmp = latency[j];
            latency[j] = latency[j - 1];
            latency[j - 1] = tmp;
        }
    cr_log_info("enqueue to held claim answered: %lld %lld %lld %lld %lld ms",
                (long long)latency[0], (long long)latency[1], (long long)latency[2],
                (long long)latency[3], (long long)latency[4]);
    cluster_assert(c, latency[2] < 100,
                   "a task enqueued through the node reached the held claim in %lld ms "
                   "(median of 5), not within 100 ms",
                   (long long)latency[2]);

    /* The idle claims end at their wait, empty. */
    for (int i = 0; i < 10; i++) {
        cluster_assert(c, http_read_response(held[i], 15000, &r), "held claim %d never ended", i);
        cluster_assert(c, r.status == 200 && strstr(r.body, "\"tasks\" : [  ]"),
                       "held claim %d: %d %s", i, r.status, r.body);
        http_response_free(&r);
    }
    int64_t waited = test_now_ms() - held_at;
    cluster_assert(c, waited >= 5500, "the held claims ended after %lld ms, before their wait",
                   (long long)waited);
    free(auth);
}
