/*
 * leaderboard.c - the seed's use case end to end on 3 real nodes: the leaderboard handler
 * rolls 200 boards over every period while the primary is killed with SIGKILL three times:
 * as a rollover begins, inside the batch callback, and while it runs boards.
 *
 * Timeline: period P0 begins when the first primary comes up. When the primary logs "period
 * P0+1 begins" it is killed at once, while it creates that period's tasks (kill 1). When the
 * next primary logs "batch N drained", it is killed a tick later, inside on_tasks_completed
 * (callback_delay_ms keeps the callback open for 800 ms; kill 2). When the primary after
 * that begins the next period, it is killed as soon as it holds claims of that period's
 * tasks (kill 3); those claims go back to pending by node expiry, the stall timeout or the
 * node's own restart, whichever comes first. Each killed node is
 * restarted once another has taken over. The run goes on until at least 4 periods have
 * rolled over, then the test waits for a quiet moment (no batch draining, every task
 * finished, the current period completed) and stops every node.
 *
 * Checks, over everything the cluster did:
 *   - each kill landed in its window: after kill 1 that period's boards were not all done;
 *     after kill 2 the batch was still draining and the killed node had not logged its
 *     completion; at kill 3 the node held claims, which were released or reset and ran
 *     again as attempt 2;
 *   - for every period from the first to the last, every board 0..199 has exactly one task
 *     (unique_key "rollover:<period>:<board>") and it succeeded;
 *   - across all nodes' logs, "batch N completed" appears exactly once per N, and the
 *     services document's batches_completed is the number of distinct N;
 *   - last_rollover (cohortctl data get) is the last period;
 *   - the journal ("<period> <board> <node> <attempt>") has every (period, board), and any
 *     repeat of one is a later attempt (at-least-once execution after a kill);
 *   - no epoch was announced twice.
 *
 * Periods are 4 s, so a rollover (about 1 s with 3 nodes x 4 workers x 40 ms) and its
 * callback (0.8 s) fit in one with room for a takeover (takeover_ms 1.5 s) and a stalled
 * task reset (stall_timeout_ms 1.5 s). Periods are contiguous in this test because no
 * outage lasts a period; the handler itself skips periods during which no primary ran.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "lb"
#define BOARDS 200
#define PERIOD_MS 4000
#define CALLBACK_DELAY_MS 800
#define MIN_PERIODS 4
#define MAX_PERIODS 16

TestSuite(cluster_leaderboard, .fini = cluster_cleanup_all, .timeout = 150);

static int64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- logs -------------------------------------------------------------------------------- */

/* The node that logged `needle` (first match over the nodes), or NULL. */
static cluster_node_t *node_logging(cluster_t *c, const char *needle)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        if (cluster_log_count(&c->nodes[i], needle, NULL) > 0)
            return &c->nodes[i];
    return NULL;
}

/* Polls every 10 ms (a kill must follow the line closely) for a node logging `needle`. */
static cluster_node_t *wait_node_logging(cluster_t *c, const char *needle, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        cluster_node_t *n = node_logging(c, needle);
        if (n || test_now_ms() >= deadline)
            return n;
        test_sleep_ms(10);
    }
}

static bool parse_first_period(const char *line, void *arg)
{
    const char *at = strstr(line, "leaderboard: period ");
    if (at)
        *(long long *)arg = strtoll(at + strlen("leaderboard: period "), NULL, 10);
    return false;
}

/* The N of a "| batch N <verb>" line, or -1. */
static long long batch_of(const char *line, const char *verb)
{
    const char *at = strstr(line, "| batch ");
    if (!at)
        return -1;
    char *end;
    long long n = strtoll(at + strlen("| batch "), &end, 10);
    return strncmp(end, verb, strlen(verb)) == 0 ? n : -1;
}

typedef struct completions {
    long long ids[256];
    int times[256];
    size_t count;
    long long max_id;
} completions_t;

static bool note_completion(const char *line, void *arg)
{
    completions_t *cs = arg;
    long long n = batch_of(line, " completed: ");
    if (n < 0)
        return true;
    if (n > cs->max_id)
        cs->max_id = n;
    for (size_t i = 0; i < cs->count; i++) {
        if (cs->ids[i] == n) {
            cs->times[i]++;
            return true;
        }
    }
    if (cs->count < sizeof cs->ids / sizeof cs->ids[0]) {
        cs->ids[cs->count] = n;
        cs->times[cs->count++] = 1;
    }
    return true;
}

static bool note_drained(const char *line, void *arg)
{
    long long n = batch_of(line, " drained ");
    if (n >= 0)
        *(long long *)arg = n;
    return true;
}

/* Claimed tasks given back to pending, over every node's log: "... released N of their
 * claimed task(s)" (node expiry, by the primary), "reset N stalled task(s)" (stall timeout,
 * by the primary) and "released N task(s) claimed by an earlier run" (by a restarted node). */
static bool add_released(const char *line, void *arg)
{
    const char *at;
    long long n = 0;
    if ((at = strstr(line, "; released ")) && strstr(at, " of their claimed task(s)"))
        n = strtoll(at + strlen("; released "), NULL, 10);
    else if ((at = strstr(line, "| reset ")) && strstr(at, " stalled task(s)"))
        n = strtoll(at + strlen("| reset "), NULL, 10);
    else if ((at = strstr(line, "| released ")) && strstr(at, " claimed by an earlier run"))
        n = strtoll(at + strlen("| released "), NULL, 10);
    *(int64_t *)arg += n;
    return true;
}

static int64_t released_in_logs(cluster_t *c)
{
    int64_t total = 0;
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_log_scan(&c->nodes[i], " service=" SERVICE " ", "task(s)", add_released, &total);
    return total;
}

/* ---- the database ------------------------------------------------------------------------ */

static int64_t count_period(cluster_t *c, long long period, const char *status)
{
    char filter[128];
    snprintf(filter, sizeof filter, "{\"data.period\": %lld%s%s%s}", period,
             status ? ", \"status\": \"" : "", status ? status : "", status ? "\"" : "");
    int64_t n = cluster_try_count(c, SERVICE, filter);
    cluster_assert(c, n >= 0, "cannot count the tasks of period %lld", period);
    return n;
}

static int64_t doc_int(const bson_t *doc, const char *dotted, int64_t fallback)
{
    bson_iter_t it, child;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, dotted, &child) &&
        BSON_ITER_HOLDS_NUMBER(&child))
        return bson_iter_as_int64(&child);
    return fallback;
}

static bool doc_is_null(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return !bson_iter_init_find(&it, doc, key) || BSON_ITER_HOLDS_NULL(&it);
}

/* The period whose tasks all exist (rollover_started), or -1. */
static long long doc_period_started(cluster_t *c)
{
    bson_t doc;
    bool ok = cluster_read_service_doc(c, SERVICE, &doc);
    long long started = ok ? doc_int(&doc, "data.rollover_started", -1) : -1;
    bson_destroy(&doc);
    return started;
}

/* A quiet moment: nothing draining, every task finished, the period the cluster is in has
 * rolled over and has at least 0.8 s left, so stopping now freezes a complete picture. */
typedef struct quiet {
    cluster_t *c;
    long long first_period;
} quiet_t;

static bool is_quiet(void *arg)
{
    quiet_t *q = arg;
    bson_t doc;
    bool ok = cluster_read_service_doc(q->c, SERVICE, &doc);
    long long started = doc_int(&doc, "data.rollover_started", -1);
    long long last = doc_int(&doc, "data.last_rollover", -2);
    bool draining = !doc_is_null(&doc, "draining");
    bson_destroy(&doc);
    int64_t now = realtime_ms();
    return ok && !draining && started == last && last == now / PERIOD_MS &&
           last - q->first_period + 1 >= MIN_PERIODS && now % PERIOD_MS < PERIOD_MS - 800 &&
           cluster_try_count(q->c, SERVICE, "{\"status\": {\"$ne\": \"succeeded\"}}") == 0;
}

/* Every task: one per (period, board), with its unique key, succeeded. */
typedef struct board_table {
    int tasks[MAX_PERIODS][BOARDS];
    int journaled[MAX_PERIODS][BOARDS];
    unsigned attempts_seen[MAX_PERIODS][BOARDS]; /* bit a: attempt a was journaled */
} board_table_t;

static void check_tasks(cluster_t *c, long long first, long long last, board_table_t *t)
{
    mongoc_collection_t *queue = mongoc_client_get_collection(c->client, c->db, "queue_" SERVICE);
    bson_t filter = BSON_INITIALIZER;
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(queue, &filter, NULL, NULL);
    const bson_t *doc;
    int64_t total = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
        total++;
        long long period = doc_int(doc, "data.period", -1);
        long long board = doc_int(doc, "data.board", -1);
        cluster_assert(c, period >= first && period <= last && board >= 0 && board < BOARDS,
                       "a task of period %lld, board %lld is outside periods %lld..%lld and "
                       "boards 0..%d",
                       period, board, first, last, BOARDS - 1);
        bson_iter_t it;
        char want[96];
        snprintf(want, sizeof want, "rollover:%lld:%lld", period, board);
        cluster_assert(c,
                       bson_iter_init_find(&it, doc, "unique_key") && BSON_ITER_HOLDS_UTF8(&it) &&
                           strcmp(bson_iter_utf8(&it, NULL), want) == 0,
                       "the task of period %lld, board %lld lacks unique_key '%s'", period, board,
                       want);
        cluster_assert(c,
                       bson_iter_init_find(&it, doc, "status") && BSON_ITER_HOLDS_UTF8(&it) &&
                           strcmp(bson_iter_utf8(&it, NULL), "succeeded") == 0,
                       "the task of period %lld, board %lld is not succeeded", period, board);
        t->tasks[period - first][board]++;
    }
    bson_error_t error;
    bool failed = mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
    mongoc_collection_destroy(queue);
    cr_assert_not(failed, "cannot read the tasks: %s", error.message);
    for (long long p = first; p <= last; p++)
        for (int b = 0; b < BOARDS; b++)
            cluster_assert(c, t->tasks[p - first][b] == 1,
                           "period %lld, board %d has %d tasks, expected exactly 1", p, b,
                           t->tasks[p - first][b]);
    cluster_assert(c, total == (last - first + 1) * BOARDS, "%lld tasks for %lld periods",
                   (long long)total, last - first + 1);
}

/* Every (period, board) journaled at least once; a repeat is always a later attempt. */
static void check_journal(cluster_t *c, long long first, long long last, board_table_t *t,
                          int64_t *reruns)
{
    char path[512];
    snprintf(path, sizeof path, "%s/journal.txt", c->dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open the journal %s", path);
    char line[256];
    *reruns = 0;
    while (fgets(line, sizeof line, f)) {
        long long period, board;
        char node[64];
        int attempt;
        cluster_assert(c, sscanf(line, "%lld %lld %63s %d", &period, &board, node, &attempt) == 4,
                       "malformed journal line: %s", line);
        cluster_assert(c, period >= first && period <= last && board >= 0 && board < BOARDS,
                       "journal line for a task that does not exist: %s", line);
        cluster_assert(c, attempt >= 1 && attempt < 32, "journal line with attempt %d: %s", attempt,
                       line);
        unsigned bit = 1u << attempt;
        cluster_assert(c, !(t->attempts_seen[period - first][board] & bit),
                       "period %lld, board %lld: attempt %d journaled twice", period, board,
                       attempt);
        t->attempts_seen[period - first][board] |= bit;
        if (t->journaled[period - first][board]++ > 0 || attempt > 1)
            (*reruns)++;
    }
    fclose(f);
    for (long long p = first; p <= last; p++)
        for (int b = 0; b < BOARDS; b++)
            cluster_assert(c, t->journaled[p - first][b] >= 1,
                           "period %lld, board %d was never journaled", p, b);
}

Test(cluster_leaderboard, three_primaries_killed_every_board_of_every_period_rolls_over_once)
{
    int64_t test_start = test_now_ms();
    char settings[512];
    snprintf(settings, sizeof settings,
             "workers = 4\n"
             "stall_timeout_ms = 1500\n"
             "boards = %d\n"
             "period_ms = %d\n"
             "work_ms = 40\n"
             "callback_delay_ms = %d\n"
             "journal = @DIR@/journal.txt",
             BOARDS, PERIOD_MS, CALLBACK_DELAY_MS);
    cluster_options_t options = {
        .tag = "leaderboard",
        .tick_ms = 200,
        .takeover_ms = 1500,
        .services = {{.name = SERVICE, .settings = settings, .handler = "cohort_leaderboard.so"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_start_nodes(c, 3);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");

    /* P0 begins as soon as there is a primary. */
    cluster_node_t *first = wait_node_logging(c, "begins: rolling over", 10000);
    cluster_assert(c, first != NULL, "no period began within 10 s");
    long long p0 = -1;
    cluster_log_scan(first, "begins: rolling over", NULL, parse_first_period, &p0);
    cluster_assert(c, p0 >= 0, "cannot read the first period from %s's log", first->id);

    /* ---- kill 1: the primary, right as period P0+1 begins ---- */
    long long p1 = p0 + 1;
    char begins[96];
    snprintf(begins, sizeof begins, "leaderboard: period %lld begins:", p1);
    cluster_node_t *victim1 = wait_node_logging(c, begins, PERIOD_MS + 5000);
    cluster_assert(c, victim1 != NULL, "period %lld did not begin in time", p1);
    int64_t kill1_at = test_now_ms();
    cluster_node_kill(victim1);
    /* Only the survivors can still finish boards, so these counts only grow from the kill. */
    int64_t p1_created = count_period(c, p1, NULL);
    int64_t p1_done = count_period(c, p1, "succeeded");
    fprintf(stderr,
            "leaderboard: killed primary %s as period %lld began: %lld/%d tasks created, "
            "%lld done\n",
            victim1->id, p1, (long long)p1_created, BOARDS, (long long)p1_done);
    cluster_assert(c, p1_done < BOARDS,
                   "kill 1 missed the rollover: all %d boards of period %lld were already done",
                   BOARDS, p1);

    cluster_takeover_t t1;
    cluster_assert(c, cluster_wait_takeover(c, SERVICE, victim1->id, kill1_at, 10000, &t1),
                   "no takeover within 10 s of killing %s", victim1->id);
    cluster_node_t *victim2 = cluster_node_by_id(c, t1.after.primary);
    cluster_assert(c, victim2 != NULL, "primary '%s' is not one of our nodes", t1.after.primary);
    /* Drained lines the new primary logged before now are not its own batches. */
    int drained_before = cluster_log_count(victim2, "| batch ", " drained (");
    cluster_node_start(victim1);

    /* ---- kill 2: the new primary, inside the callback of its first drained batch ---- */
    int64_t deadline = test_now_ms() + 3 * PERIOD_MS;
    while (cluster_log_count(victim2, "| batch ", " drained (") == drained_before &&
           test_now_ms() < deadline)
        test_sleep_ms(10);
    long long batch = -1;
    cluster_log_scan(victim2, "| batch ", " drained (", note_drained, &batch);
    cluster_assert(c, cluster_log_count(victim2, "| batch ", " drained (") > drained_before,
                   "%s drained no batch within %d ms of becoming primary", victim2->id,
                   3 * PERIOD_MS);
    int64_t drained_at = test_now_ms();
    /* The callback starts on the next tick and then sleeps 800 ms: aim into it. */
    test_sleep_ms(c->tick_ms + 100);
    int64_t kill2_at = test_now_ms();
    cluster_node_kill(victim2);
    char completed[64];
    snprintf(completed, sizeof completed, "| batch %lld completed: ", batch);
    bson_t doc;
    cluster_assert(c, cluster_read_service_doc(c, SERVICE, &doc), "cannot read the service");
    long long draining = doc_int(&doc, "draining.seq", 0);
    bson_destroy(&doc);
    fprintf(stderr,
            "leaderboard: killed primary %s %lld ms after it logged batch %lld drained (%lld ms "
            "after kill 1); draining = %lld\n",
            victim2->id, (long long)(kill2_at - drained_at), batch,
            (long long)(kill2_at - kill1_at), draining);
    cluster_assert(c, cluster_log_count(victim2, completed, NULL) == 0,
                   "kill 2 came too late: %s had already completed batch %lld", victim2->id, batch);
    cluster_assert(c, draining == batch,
                   "kill 2 missed the callback: batch %lld is no longer draining (draining = "
                   "%lld)",
                   batch, draining);

    cluster_takeover_t t2;
    cluster_assert(c, cluster_wait_takeover(c, SERVICE, victim2->id, kill2_at, 10000, &t2),
                   "no takeover within 10 s of killing %s", victim2->id);
    cluster_node_start(victim2);
    cluster_node_t *heir = cluster_node_by_id(c, t2.after.primary);
    cluster_assert(c, heir != NULL, "primary '%s' is not one of our nodes", t2.after.primary);
    cluster_assert(c, cluster_wait_log(heir, completed, NULL, 3 * PERIOD_MS),
                   "%s did not complete batch %lld after taking over", heir->id, batch);

    /* ---- kill 3: the primary while it runs boards of the next period ---- */
    long long p3 = doc_period_started(c) + 1;
    snprintf(begins, sizeof begins, "leaderboard: period %lld begins:", p3);
    cluster_assert(c, cluster_wait_log(heir, begins, NULL, 2 * PERIOD_MS),
                   "%s did not begin period %lld", heir->id, p3);
    char held_filter[160];
    snprintf(held_filter, sizeof held_filter,
             "{\"data.period\": %lld, \"status\": \"claimed\", \"claimed_by\": \"%s\"}", p3,
             heir->id);
    deadline = test_now_ms() + PERIOD_MS;
    while (cluster_try_count(c, SERVICE, held_filter) <= 0 && test_now_ms() < deadline)
        test_sleep_ms(5);
    int64_t kill3_at = test_now_ms();
    cluster_node_kill(heir);
    /* Nobody can reset these claims before a takeover: this count is what the kill left. */
    int64_t held = cluster_try_count(c, SERVICE, held_filter);
    fprintf(stderr, "leaderboard: killed primary %s while it held %lld claim(s) of period %lld\n",
            heir->id, (long long)held, p3);
    cluster_assert(c, held > 0,
                   "kill 3 missed: primary %s held no claim of period %lld when it was killed",
                   heir->id, p3);
    cluster_takeover_t t3;
    cluster_assert(c, cluster_wait_takeover(c, SERVICE, heir->id, kill3_at, 10000, &t3),
                   "no takeover within 10 s of killing %s", heir->id);
    cluster_node_start(heir);

    /* ---- run on to a quiet moment after at least MIN_PERIODS periods, then stop ---- */
    quiet_t q = {c, p0};
    cluster_assert(c, test_wait_until(is_quiet, &q, (MIN_PERIODS + 4) * PERIOD_MS),
                   "no quiet moment (no batch draining, all tasks succeeded, current period "
                   "rolled over) after %d periods",
                   MIN_PERIODS + 4);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_send_term(&c->nodes[i]);
    for (size_t i = 0; i < c->n_nodes; i++) {
        cluster_assert(c, cluster_node_wait_exit(&c->nodes[i], test_now_ms(), 10000) >= 0,
                       "%s did not exit within 10 s of SIGTERM", c->nodes[i].id);
        cluster_node_assert_clean_exit(&c->nodes[i]);
    }

    /* ---- what the cluster did ---- */
    cluster_assert(c, cluster_read_service_doc(c, SERVICE, &doc), "cannot read the service");
    long long last = doc_int(&doc, "data.last_rollover", -1);
    long long started = doc_int(&doc, "data.rollover_started", -1);
    long long batches_completed = doc_int(&doc, "batches_completed", -1);
    long long last_batch = doc_int(&doc, "last_batch.seq", -1);
    bool still_draining = !doc_is_null(&doc, "draining");
    bson_destroy(&doc);
    cluster_assert(c, last - p0 + 1 >= MIN_PERIODS && last - p0 < MAX_PERIODS,
                   "%lld periods rolled over (from %lld to %lld); expected %d to %d", last - p0 + 1,
                   p0, last, MIN_PERIODS, MAX_PERIODS);
    cluster_assert(c, started == last && !still_draining,
                   "stopped while busy: rollover_started %lld, last_rollover %lld, draining %d",
                   started, last, still_draining);

    board_table_t *table = calloc(1, sizeof *table);
    cr_assert_not_null(table, "out of memory");
    check_tasks(c, p0, last, table);
    int64_t reruns = 0;
    check_journal(c, p0, last, table, &reruns);
    free(table);
    char rerun_filter[96];
    snprintf(rerun_filter, sizeof rerun_filter,
             "{\"data.period\": %lld, \"attempts\": {\"$gte\": 2}}", p3);
    int64_t rerun_tasks = cluster_try_count(c, SERVICE, rerun_filter);
    cluster_assert(c, rerun_tasks >= held && reruns >= held,
                   "%lld claim(s) died with %s, but %lld task(s) of period %lld ran again and the "
                   "journal has %lld rerun(s)",
                   (long long)held, heir->id, (long long)rerun_tasks, p3, (long long)reruns);
    int64_t released = released_in_logs(c);
    cluster_assert(c, released >= held,
                   "%s died holding %lld claim(s), but the primaries released or reset only "
                   "%lld task(s)",
                   heir->id, (long long)held, (long long)released);

    completions_t cs = {.max_id = -1};
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_log_scan(&c->nodes[i], "| batch ", " completed: ", note_completion, &cs);
    for (size_t i = 0; i < cs.count; i++)
        cluster_assert(c, cs.times[i] == 1, "batch %lld completed %d times in the logs", cs.ids[i],
                       cs.times[i]);
    cluster_assert(c, (long long)cs.count == batches_completed,
                   "the logs complete %zu distinct batches, the services document counts %lld",
                   cs.count, batches_completed);
    cluster_assert(c, last_batch == cs.max_id, "last_batch.seq is %lld, the logs' last is %lld",
                   last_batch, cs.max_id);
    cluster_assert(c, cluster_log_count(heir, completed, NULL) == 1,
                   "batch %lld was not completed by %s, the primary after kill 2", batch, heir->id);

    const char *get[] = {"data", "get", SERVICE, "last_rollover", NULL};
    char *out = NULL;
    int rc = cluster_run_ctl_output(c, get, &out);
    cluster_assert(c, rc == 0, "cohortctl data get exited with %d", rc);
    cluster_assert(c, strtoll(out, NULL, 10) == last && last > 0,
                   "cohortctl data get last_rollover printed '%s', expected %lld", out, last);
    free(out);

    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);
    int resumed = cluster_log_count_all(c, "rollover tasks created", "already existed");
    fprintf(stderr,
            "leaderboard: periods %lld..%lld, %zu batches completed once each, %lld reruns in "
            "the journal, %d creation(s) resumed by a new primary, %lld ms\n",
            p0, last, cs.count, (long long)reruns, resumed,
            (long long)(test_now_ms() - test_start));
}

/* ---- a callback that outlasts takeover_ms ------------------------------------------------ */

#define SLOW_CALLBACK_MS 2500

typedef struct count_wait {
    cluster_t *c;
    const char *needle;
} count_wait_t;

static bool logged_anywhere(void *arg)
{
    count_wait_t *w = arg;
    return cluster_log_count_all(w->c, w->needle, NULL) > 0;
}

/*
 * on_tasks_completed runs on the primary's main thread, which also renews primacy. A
 * callback that takes longer than takeover_ms (here a 2.5 s callback_delay_ms against 1.5 s;
 * in production, iterating a batch of millions of tasks) must still complete, once: the
 * batch guarantee is "exactly once", not "only if the callback is quick". Without renewals
 * during the callback, another node takes over inside it, the completion is refused, the
 * new primary starts the callback again and loses primacy the same way, forever.
 */
Test(cluster_leaderboard, a_callback_longer_than_takeover_ms_completes_once)
{
    char settings[256];
    snprintf(settings, sizeof settings,
             "workers = 2\n"
             "stall_timeout_ms = 1500\n"
             "boards = 20\n"
             "period_ms = 600000\n"
             "work_ms = 1\n"
             "callback_delay_ms = %d",
             SLOW_CALLBACK_MS);
    cluster_options_t options = {
        .tag = "leaderboard_slow",
        .tick_ms = 200,
        .takeover_ms = 1500,
        .services = {{.name = SERVICE, .settings = settings, .handler = "cohort_leaderboard.so"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_start_nodes(c, 3);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");
    count_wait_t drained = {c, "| batch 1 drained ("};
    cluster_assert(c, test_wait_until(logged_anywhere, &drained, 10000),
                   "batch 1 (20 boards) did not drain within 10 s");

    /* Four callbacks' worth of time: a primary that keeps primacy needs one. */
    count_wait_t completed = {c, "| batch 1 completed: "};
    bool done = test_wait_until(logged_anywhere, &completed, 4 * SLOW_CALLBACK_MS);
    int refused = cluster_log_count_all(c, "| batch 1: primacy moved on", NULL);
    cluster_primacy_t p;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &p), "cannot read primacy");
    cluster_assert(c, done,
                   "batch 1 never completed in %d ms: on_tasks_completed takes %d ms, more than "
                   "takeover_ms (%lld ms), and primacy moved on inside it %d time(s) (epoch is "
                   "now %lld): the primary does not renew primacy while the callback runs",
                   4 * SLOW_CALLBACK_MS, SLOW_CALLBACK_MS, (long long)c->takeover_ms, refused,
                   (long long)p.epoch);
    cluster_assert(c, cluster_log_count_all(c, "| batch 1 completed: ", NULL) == 1,
                   "batch 1 completed more than once");
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + SLOW_CALLBACK_MS + 5000);
}
