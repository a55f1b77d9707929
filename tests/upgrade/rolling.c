/*
 * rolling.c - a rolling upgrade of a live cluster from the previous release (issue 25): three
 * nodes of the previous release's cohortd, under a steady stream of work, are replaced one at a
 * time by this build's, and nothing is lost, run twice or left without a primary.
 *
 * tests/upgrade/run.sh builds the previous release from the project's history and names it in
 * COHORT_UPGRADE_OLD. Every node, old and new, runs the previous release's noop handler
 * (build/handlers/cohort_noop.so of the old tree): a handler .so survives the upgrade.
 *
 * The work, on one fresh database:
 * - `stream`: one untracked task every 50 ms (primacy_sampler.c's thread, through the store
 *   as cohortctl does), and before each step a tracked batch of TRACKED tasks (`cohortctl
 *   enqueue --tracked`), whose completion callback (noop's completed_log) must run once;
 * - `long`: LONG tasks before each step that sleep SLEEP_MS, past stall_timeout_ms (their
 *   nodes check them in, so none may be reset as stalled);
 * - `beat`: a per-second schedule line (catch_up = all).
 * Each step stops one old node with SIGTERM (the primary of `stream` first: it steps down
 * and drains), starts this build's cohortd under the same node_id and config, and waits until
 * it has pinged. Then `cohortctl migrate` and `cohortctl upgrade finish` (this build's), and
 * the stream runs on until every node follows the new feature level (its `nodes` document's
 * level_in_use; the nodes re-read the level every 30 s), and 3 s more.
 *
 * Checked: every task of `stream` and `long` succeeded on its first attempt, and the noop
 * journals hold each exactly once (none lost, none run twice); the completed_log has one line
 * per batch and their succeeded counts add up to every tracked task; each second of the
 * schedule's ledger has exactly one task, run once; no "stalled" reset in any log; for each
 * service, sampled every 50 ms, no primary was absent, nor last_active left
 * unrefreshed, for more than 2 ticks (+ SLACK_MS). `upgrade finish` run while the last old
 * node is still live must refuse and name it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "primacy_sampler.h"
#include "schedule_ledger.h"
#include "support.h"

#define STREAM "stream"
#define LONG "long"
#define BEAT "beat"
#define TRACKED "10" /* tracked tasks per step */
#define N_TRACKED 10
#define LONG_PER_STEP "2"
#define N_LONG 2
#define SLEEP_MS 3500
#define STALL_MS 1000
/* Sampling (every CLUSTER_SAMPLE_MS) and this machine's scheduling under load: a clean
 * handover measured 400 ms here when quiet, 1,246-1,486 ms at load 4-10 with 500 ms ticks. */
#define SLACK_MS 700

TestSuite(upgrade_rolling, .fini = cluster_cleanup_all, .timeout = 300);

/* The previous release's build directory (tests/upgrade/run.sh). */
static const char *old_build(void)
{
    const char *old = getenv("COHORT_UPGRADE_OLD");
    cr_assert(old && *old, "COHORT_UPGRADE_OLD is not set: run this test through "
                           "tests/upgrade/run.sh (ctest -L upgrade), which builds the previous "
                           "release");
    return old;
}

/* A path in the previous release's build, which must exist (caller frees). */
static char *old_path(const char *relative)
{
    char *path = NULL;
    cr_assert(asprintf(&path, "%s/%s", old_build(), relative) > 0, "out of memory");
    cr_assert_eq(access(path, R_OK), 0, "%s is missing from the previous release's build", path);
    return path;
}

/* One step's work: a tracked batch of `stream` and a few long tasks. */
static void enqueue_step(cluster_t *c)
{
    const char *tracked[] = {"enqueue", STREAM, "--count", TRACKED, "--tracked", NULL};
    cluster_assert(c, cluster_run_ctl(c, tracked) == 0, "cohortctl enqueue --tracked failed");
    const char *lng[] = {"enqueue", LONG, "--count", LONG_PER_STEP, NULL};
    cluster_assert(c, cluster_run_ctl(c, lng) == 0, "cohortctl enqueue %s failed", LONG);
}

/* The old node to replace next: the primary of `stream` while it is old, else the first old
 * one. */
static cluster_node_t *next_old(cluster_t *c)
{
    cluster_primacy_t p;
    if (cluster_read_primacy(c, STREAM, &p)) {
        cluster_node_t *primary = cluster_node_by_id(c, p.primary);
        if (primary && primary->cohortd)
            return primary;
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].cohortd)
            return &c->nodes[i];
    return NULL;
}

/* The release node n publishes in its `nodes` document ("?" if none). */
static void node_version(cluster_t *c, cluster_node_t *n, char *out, size_t len)
{
    char filter[64];
    snprintf(filter, sizeof filter, "{\"_id\": \"%s\"}", n->id);
    bson_t doc;
    snprintf(out, len, "?");
    if (test_find_one(c->client, c->db, "nodes", filter, &doc))
        cluster_doc_utf8(&doc, "version", out, len);
    bson_destroy(&doc);
}

/* Polls until every node follows the feature level it knows (its `nodes` document's
 * level_in_use = feature_level): after `upgrade finish`, within the nodes' 30 s re-read. */
static bool wait_level_in_use(cluster_t *c, int64_t timeout_ms, int64_t *level)
{
    for (int64_t deadline = test_now_ms() + timeout_ms;; test_sleep_ms(200)) {
        size_t following = 0;
        for (size_t i = 0; i < c->n_nodes; i++) {
            char filter[64];
            snprintf(filter, sizeof filter, "{\"_id\": \"%s\"}", c->nodes[i].id);
            bson_t doc;
            if (test_find_one(c->client, c->db, "nodes", filter, &doc)) {
                *level = cluster_doc_number(&doc, "feature_level");
                following += *level > 0 && cluster_doc_number(&doc, "level_in_use") == *level;
            }
            bson_destroy(&doc);
        }
        if (following == c->n_nodes)
            return true;
        if (test_now_ms() >= deadline)
            return false;
    }
}

static void assert_primacy_held(cluster_t *c, const cluster_sampler_t *s)
{
    cluster_sampler_print(s, "upgrade");
    cluster_assert(c, s->read_errors == 0 || s->samples > 100 * s->read_errors,
                   "%s: %lld of %lld reads failed", s->service, (long long)s->read_errors,
                   (long long)s->samples);
    cluster_assert(c, s->enqueue_errors == 0, "%s: %lld enqueue(s) failed: %s", s->service,
                   (long long)s->enqueue_errors, s->enqueue_error);
    cluster_assert(c, s->max_vacant_ms <= 2 * c->tick_ms + SLACK_MS,
                   "%s had no primary for %lld ms, more than 2 ticks (%lld ms) + %d", s->service,
                   (long long)s->max_vacant_ms, (long long)(2 * c->tick_ms), SLACK_MS);
    cluster_assert(c, s->max_refresh_gap_ms <= 2 * c->tick_ms + SLACK_MS,
                   "%s: primacy was not refreshed for %lld ms (until epoch %lld), more than 2 "
                   "ticks (%lld ms) + %d",
                   s->service, (long long)s->max_refresh_gap_ms, (long long)s->gap_at_epoch,
                   (long long)(2 * c->tick_ms), SLACK_MS);
    cluster_assert(c, s->max_sample_interval_ms <= 4 * CLUSTER_SAMPLE_MS + SLACK_MS,
                   "%s: the sampler was starved (%lld ms between samples): gaps may be unseen",
                   s->service, (long long)s->max_sample_interval_ms);
}

/* Every task of `service` succeeded on attempt 1 and its journal holds each exactly once. */
static void assert_each_ran_once(cluster_t *c, const char *service, int64_t expected)
{
    cluster_assert(c, cluster_wait_succeeded(c, service, expected, 30000),
                   "%s: not all %lld tasks succeeded (none for 30 s) (%lld did)", service,
                   (long long)expected, (long long)cluster_count_status(c, service, "succeeded"));
    int64_t again = cluster_try_count(c, service, "{\"attempts\": {\"$ne\": 1}}");
    cluster_assert(c, again == 0, "%s: %lld task(s) were claimed more than once", service,
                   (long long)again);
    char journal[512];
    snprintf(journal, sizeof journal, "%s/%s.journal", c->dir, service);
    cluster_journal_report_t r;
    cluster_journal_check(c, service, journal, &r);
    cluster_assert(c,
                   r.tasks_in_db == expected && r.lines == expected && r.duplicates == 0 &&
                       r.missing == 0 && r.unknown == 0 && r.malformed == 0 &&
                       r.not_first_attempt == 0,
                   "%s journal: %lld lines for %lld tasks (%lld expected): %lld duplicate(s), "
                   "%lld missing, %lld unknown, %lld malformed, %lld not on attempt 1 (e.g. %s)",
                   service, (long long)r.lines, (long long)r.tasks_in_db, (long long)expected,
                   (long long)r.duplicates, (long long)r.missing, (long long)r.unknown,
                   (long long)r.malformed, (long long)r.not_first_attempt, r.example);
    char per_node[200] = "";
    for (size_t i = 0; i < r.n_nodes; i++)
        snprintf(per_node + strlen(per_node), sizeof per_node - strlen(per_node), " %s: %lld",
                 r.nodes[i], (long long)r.per_node[i]);
    fprintf(stderr, "upgrade: %s: all %lld tasks ran once; by node:%s\n", service,
            (long long)r.lines, per_node);
}

/* Sums the completed_log ("<batch> <succeeded> <failed> <iterated> <node> <at>"); false if a
 * batch id repeats (its callback ran twice) or a line is malformed (`why` says which). */
static bool read_completions(cluster_t *c, int64_t *lines, int64_t *succeeded, char *why,
                             size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/completed.txt", c->dir);
    char *text = test_try_read_file(path);
    *lines = *succeeded = 0;
    long long seen[256];
    bool ok = true;
    for (char *line = text; ok && line && *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        long long batch, good, bad, iterated;
        if (sscanf(line, "%lld %lld %lld %lld", &batch, &good, &bad, &iterated) != 4 || bad != 0 ||
            iterated != good || *lines >= 256) {
            snprintf(why, len, "unexpected completed_log line '%s'", line);
            ok = false;
        }
        for (int64_t i = 0; ok && i < *lines; i++)
            if (seen[i] == batch) {
                snprintf(why, len, "the callback of batch %lld ran twice", batch);
                ok = false;
            }
        if (ok) {
            seen[(*lines)++] = batch;
            *succeeded += good;
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
    return ok;
}

/* Runs this build's cohortctl with args; returns its exit status and, in *said (caller frees),
 * what it wrote to stdout and stderr (cohortctl.log's new part). */
static int ctl_said(cluster_t *c, const char *const *args, char **said)
{
    char log[512];
    snprintf(log, sizeof log, "%s/cohortctl.log", c->dir);
    char *before = test_try_read_file(log);
    size_t skip = before ? strlen(before) : 0;
    free(before);
    char *out = NULL;
    int rc = cluster_run_ctl_output(c, args, &out);
    char *after = test_try_read_file(log);
    const char *err = after && strlen(after) >= skip ? after + skip : "";
    cr_assert(asprintf(said, "%s%s", out, err) >= 0, "out of memory");
    free(after);
    free(out);
    fprintf(stderr, "upgrade: cohortctl %s%s%s: exit %d: %s", args[0], args[1] ? " " : "",
            args[1] ? args[1] : "", rc, *said);
    return rc;
}

Test(upgrade_rolling, three_old_nodes_replaced_by_new_lose_nothing_run_nothing_twice)
{
    int64_t started = test_now_ms();
    char *old_cohortd = old_path("build/cohortd");
    char *old_noop = old_path("build/handlers/cohort_noop.so");
    cluster_options_t options = {
        .tag = "upgrade",
        .tick_ms = 500,
        .takeover_ms = 3000,
        /* A drain waits for the 3.5 s long tasks; on a loaded 2-core machine an old node took
         * 5.5 s, past the default 5 s grace: the grace is what the drain is checked against. */
        .shutdown_grace_ms = 15000,
        .services =
            {
                {.name = STREAM,
                 .handler = old_noop,
                 .settings = "workers = 2\nsleep_ms = 20\njournal = @DIR@/" STREAM ".journal\n"
                             "completed_log = @DIR@/completed.txt"},
                {.name = LONG,
                 .handler = old_noop,
                 .settings = "workers = 2\nstall_timeout_ms = 2000\nsleep_ms = 3500\n" /* SLEEP_MS */
                             "journal = @DIR@/" LONG ".journal"},
                {.name = BEAT,
                 .handler = old_noop,
                 .settings = "journal = @DIR@/" BEAT ".journal\n"
                             "schedule.beat = * * * * * * ; kind=beat ; catch_up=all ; "
                             "catch_up_max=1000"},
            },
    };
    cluster_t *c = cluster_new(&options);
    for (int i = 0; i < 3; i++)
        cluster_add_node(c, NULL)->cohortd = old_cohortd;
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_start(&c->nodes[i]);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the old nodes did not register in 20 s");
    cluster_primacy_t p;
    cluster_assert(c, cluster_wait_primary(c, STREAM, NULL, 10000, &p), "no primary of stream");
    cluster_assert(c, cluster_wait_primary(c, BEAT, NULL, 10000, &p), "no primary of beat");
    ledger_state_t first;
    cluster_assert(c, ledger_wait_slot(c, BEAT, "beat", 0, 10000, &first),
                   "the schedule never started");

    cluster_sampler_t stream = {.service = STREAM, .enqueue = true, .created_by = "upgrade-test"};
    cluster_sampler_t beat = {.service = BEAT, .created_by = "upgrade-test"};
    cluster_sampler_t lng = {.service = LONG, .created_by = "upgrade-test"};
    cluster_sampler_start(c, &stream);
    cluster_sampler_start(c, &beat);
    cluster_sampler_start(c, &lng);

    int steps = 0;
    char order[256] = "", was[32], now[32];
    for (cluster_node_t *n; (n = next_old(c)) != NULL; steps++) {
        enqueue_step(c);
        test_sleep_ms(2000); /* the old cluster (then a mixed one) runs the step's work */
        bool last = true;
        for (size_t i = 0; i < c->n_nodes; i++)
            last &= &c->nodes[i] == n || !c->nodes[i].cohortd;
        if (last) {
            /* The last old node is live: `upgrade finish` refuses, naming it. */
            const char *finish[] = {"upgrade", "finish", NULL};
            char *said = NULL;
            int rc = ctl_said(c, finish, &said);
            cluster_assert(c, rc != 0 && strstr(said, n->id),
                           "cohortctl upgrade finish exited %d while old %s was live, saying: %s",
                           rc, n->id, said);
            free(said);
        }
        if (steps == 0) {
            int64_t by_old = cluster_count_status(c, STREAM, "succeeded");
            cluster_assert(c, by_old > 0, "the old nodes ran no task before the first step");
            fprintf(stderr, "upgrade: the old nodes alone ran %lld tasks\n", (long long)by_old);
        }
        cluster_read_primacy(c, STREAM, &p);
        node_version(c, n, was, sizeof was);
        int64_t took = cluster_node_stop_ok(n, c->shutdown_grace_ms + 5000);
        cluster_assert(c, took <= c->shutdown_grace_ms,
                       "old %s took %lld ms to drain and exit, more than shutdown_grace_ms", n->id,
                       (long long)took);
        n->cohortd = NULL; /* this build's */
        cluster_node_start(n);
        cluster_assert(c, cluster_wait_pinged_by_pid(c, n, 10000),
                       "the new %s did not register within 10 s", n->id);
        node_version(c, n, now, sizeof now);
        snprintf(order + strlen(order), sizeof order - strlen(order), "%s%s%s %s -> %s",
                 steps ? ", " : "", n->id, strcmp(p.primary, n->id) == 0 ? " (primary)" : "", was,
                 now);
    }
    /* Every node is new: the migrations, then the feature level, with this build's cohortctl
     * while the stream runs on. */
    const char *migrate[] = {"migrate", NULL}, *finish[] = {"upgrade", "finish", NULL};
    char *said = NULL;
    int rc = ctl_said(c, migrate, &said);
    cluster_assert(c, rc == 0, "cohortctl migrate exited %d: %s", rc, said);
    free(said);
    rc = ctl_said(c, finish, &said);
    cluster_assert(c, rc == 0, "cohortctl upgrade finish exited %d with every node new: %s", rc,
                   said);
    free(said);
    /* The stream runs on while the nodes take the new level up, and a little after. */
    int64_t level = 0, finished_at = test_now_ms();
    cluster_assert(c, wait_level_in_use(c, 45000, &level),
                   "the nodes do not all follow the feature level 45 s after upgrade finish");
    fprintf(stderr, "upgrade: every node follows feature level %lld after %lld ms\n",
            (long long)level, (long long)(test_now_ms() - finished_at));
    enqueue_step(c);
    test_sleep_ms(3000);
    cluster_sampler_stop(&stream);
    cluster_sampler_stop(&beat);
    cluster_sampler_stop(&lng);
    fprintf(stderr, "upgrade: replaced %s in %d steps\n", order, steps);
    cluster_assert(c, steps == 3, "%d steps", steps);
    assert_primacy_held(c, &stream);
    assert_primacy_held(c, &beat);
    assert_primacy_held(c, &lng);

    assert_each_ran_once(c, STREAM, stream.enqueued + (steps + 1) * N_TRACKED);
    assert_each_ran_once(c, LONG, (steps + 1) * N_LONG);

    /* Every tracked batch's callback ran once and saw all of its tasks. */
    int64_t lines = 0, done = 0;
    char why[200] = "";
    int64_t deadline = test_now_ms() + 30000;
    bool ok;
    while ((ok = read_completions(c, &lines, &done, why, sizeof why)) &&
           done < (steps + 1) * N_TRACKED && test_now_ms() < deadline)
        test_sleep_ms(100);
    cluster_assert(c, ok, "completed_log: %s", why);
    cluster_assert(c, done == (steps + 1) * N_TRACKED,
                   "the callbacks saw %lld succeeded tracked tasks in %lld batches, expected %d",
                   (long long)done, (long long)lines, (steps + 1) * N_TRACKED);
    bson_t doc;
    cluster_assert(c, cluster_read_service_doc(c, STREAM, &doc), "cannot read stream's document");
    int64_t completed = cluster_doc_number(&doc, "batches_completed");
    bson_destroy(&doc);
    cluster_assert(c, completed == lines, "batches_completed is %lld, the callback ran %lld times",
                   (long long)completed, (long long)lines);
    fprintf(stderr, "upgrade: %lld tracked tasks in %lld batches, each callback once\n",
            (long long)done, (long long)lines);

    /* Each second of the schedule has one task, which ran once. */
    ledger_state_t st;
    cluster_assert(c, ledger_read_state(c, BEAT, "beat", &st), "cannot read the schedule");
    ledger_t l;
    ledger_read(c, BEAT, "beat", first.last_slot, st.last_slot, &l);
    cluster_assert(c, ledger_explained(&l, 0, 0, why, sizeof why), "schedule ledger: %s", why);
    int64_t slots = l.n;
    ledger_free(&l);
    cluster_assert(c, slots >= 8, "only %lld slots of the schedule", (long long)slots);
    char beat_journal[512];
    snprintf(beat_journal, sizeof beat_journal, "%s/" BEAT ".journal", c->dir);
    cluster_journal_report_t r;
    cluster_journal_check(c, BEAT, beat_journal, &r);
    int64_t unrun = cluster_try_count(c, BEAT, "{\"status\": {\"$ne\": \"succeeded\"}}");
    cluster_assert(c,
                   r.duplicates == 0 && r.unknown == 0 && r.malformed == 0 &&
                       r.not_first_attempt == 0 && r.missing <= unrun,
                   "beat journal: %lld duplicate(s), %lld unknown, %lld malformed, %lld not on "
                   "attempt 1, %lld missing (%lld not succeeded yet) (e.g. %s)",
                   (long long)r.duplicates, (long long)r.unknown, (long long)r.malformed,
                   (long long)r.not_first_attempt, (long long)r.missing, (long long)unrun,
                   r.example);
    fprintf(stderr, "upgrade: schedule: %lld slots, one task each, each run once\n",
            (long long)slots);

    cluster_assert(c, cluster_log_count_all(c, "stalled", NULL) == 0,
                   "a long task was reset as stalled");
    for (int s = 0; s < 3; s++) {
        const char *service = s == 0 ? STREAM : s == 1 ? LONG : BEAT;
        cluster_assert(c, cluster_epochs_unique(c, service, why, sizeof why), "%s", why);
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
    fprintf(stderr, "upgrade: rolling upgrade checked in %lld ms\n",
            (long long)(test_now_ms() - started));
    free(old_noop);
    free(old_cohortd);
}
