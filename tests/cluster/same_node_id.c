/*
 * same_node_id.c - two processes with one node_id (issue 15, item 2). Before runs, they
 * swapped primacy every tick (a new epoch each time) and shared every claim, silently.
 *
 *  - A second process started while the first runs is refused at start-up: it exits
 *    non-zero with an error naming the node_id and the other run's host, pid and last
 *    check-in.
 *  - The same while the first process has only just started and is still preparing its
 *    services on a slow database (issue 22): its heartbeat thread keeps its run alive.
 *  - A clone the start-up check cannot see (the first process is stopped with SIGSTOP until
 *    its check-in is stale, then the clone starts, then the first resumes): both log an ERROR
 *    naming the clash every tick, the newer (the clone) stands back - it runs no task and
 *    takes no primacy - and the epoch stops moving. The clone's pings write only its own
 *    runs entry, so `cohortctl nodes --json` keeps showing n1's host and pid at the top
 *    level (it showed whichever pinged last), and shows the clash: both runs live, with
 *    both pids (issue 16 item 4).
 *  - The clone keeps standing back when the original stops checking in without ending (chaos
 *    run of 26eda68: the original in its database backoff for more than the liveness window,
 *    ~1.4 s): it may still run tasks under that node_id. Before, the clone logged "claiming
 *    again" and ran tasks beside it.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster.h"
#include "delay_proxy.h"
#include "support.h"

#define SERVICE "noop"
#define CLASH "is used by two live processes"

TestSuite(cluster_same_node_id, .fini = cluster_cleanup_all, .timeout = 240);

static cluster_t *start_cluster(const char *tag, cluster_primacy_t *primacy)
{
    cluster_options_t options = {
        .tag = tag,
        .services = {{.name = SERVICE, .settings = "workers = 2\njournal = @DIR@/journal.log"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_start_elected(c, 2, SERVICE, 10000, primacy);
    return c;
}

/* A third node whose config says node_id = n1, journaling to its own file. */
static cluster_node_t *add_clone(cluster_t *c)
{
    cluster_node_t *clone = cluster_add_node(c, NULL);
    cluster_node_config_set(clone, "node_id", "n1");
    char journal[512];
    snprintf(journal, sizeof journal, "%s/clone.log", c->dir);
    cluster_node_config_set(clone, "journal", journal);
    return clone;
}

Test(cluster_same_node_id, a_second_live_process_is_refused_at_start_up)
{
    cluster_primacy_t before;
    cluster_t *c = start_cluster("dupid", &before);
    cluster_node_t *first = &c->nodes[0];
    cluster_node_t *clone = add_clone(c);
    int64_t started = test_now_ms();
    cluster_node_start(clone);
    int64_t took = cluster_node_wait_exit(clone, started, 30000);
    cluster_assert(c, took >= 0, "the second process with node_id n1 is still running after 30 s");
    cluster_assert(c, WIFEXITED(clone->wait_status) && WEXITSTATUS(clone->wait_status) != 0,
                   "the second process exited with wait status 0x%x, want a non-zero exit",
                   clone->wait_status);
    char *line = cluster_log_find(clone, "node_id 'n1' is in use by another live process", NULL);
    cluster_assert(c, line, "the refusal does not name the node_id and the clash");
    char pid[32];
    snprintf(pid, sizeof pid, "pid %lld,", (long long)first->pid);
    cluster_assert(c, strstr(line, pid) && strstr(line, "on host ") && strstr(line, "last seen"),
                   "the refusal does not name the other run's host, %s and last check-in: %s", pid,
                   line);
    fprintf(stderr, "same_node_id: refused after %lld ms: %s\n", (long long)took, line);
    free(line);
    cluster_assert(c, cluster_log_count(first, CLASH, NULL) == 0, "the first process saw a clash");

    cluster_primacy_t after;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &after), "cannot read the primacy");
    cluster_assert(c, after.epoch == before.epoch, "the epoch moved from %lld to %lld",
                   (long long)before.epoch, (long long)after.epoch);
    for (size_t i = 0; i < 2; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

/* Waits until the nodes document of `node_id` was last written by process `pid`. */
static bool wait_pinged_by(cluster_t *c, const char *node_id, pid_t pid, int64_t timeout_ms)
{
    mongoc_collection_t *nodes = mongoc_client_get_collection(c->client, c->db, "nodes");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(node_id), "pid", BCON_INT64((int64_t)pid));
    int64_t deadline = test_now_ms() + timeout_ms;
    bool seen = false;
    while (!seen && test_now_ms() < deadline) {
        seen = mongoc_collection_count_documents(nodes, filter, NULL, NULL, NULL, NULL) > 0;
        if (!seen)
            test_sleep_ms(50);
    }
    bson_destroy(filter);
    mongoc_collection_destroy(nodes);
    return seen;
}

/* Waits until the node has logged `count` clash lines. */
static bool wait_clash_lines(cluster_node_t *n, int count, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    while (cluster_log_count(n, CLASH, NULL) < count) {
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(50);
    }
    return true;
}

/* What `cohortctl nodes --json` says of node `id`. */
typedef struct listed_node {
    int64_t pid, live_runs;
    bool clash;
    int64_t run_pids[4];
    size_t n_runs;
} listed_node_t;

static bool list_node(cluster_t *c, const char *id, listed_node_t *out)
{
    memset(out, 0, sizeof *out);
    bson_t one;
    bool found = cluster_ctl_node(c, id, &one);
    if (found) {
        out->pid = cluster_doc_number(&one, "pid");
        out->live_runs = cluster_doc_number(&one, "live_runs");
        bson_iter_t it, run;
        out->clash = bson_iter_init_find(&it, &one, "clash") && BSON_ITER_HOLDS_BOOL(&it) &&
                     bson_iter_bool(&it);
        if (bson_iter_init_find(&it, &one, "runs") && bson_iter_recurse(&it, &run))
            while (bson_iter_next(&run) && out->n_runs < 4) {
                bson_iter_t pid;
                if (bson_iter_recurse(&run, &pid) && bson_iter_find(&pid, "pid"))
                    out->run_pids[out->n_runs++] = bson_iter_as_int64(&pid);
            }
    }
    bson_destroy(&one);
    return found;
}

static bool has_run_pid(const listed_node_t *node, pid_t pid)
{
    for (size_t i = 0; i < node->n_runs; i++)
        if (node->run_pids[i] == (int64_t)pid)
            return true;
    return false;
}

/* Over several ticks, `cohortctl nodes --json` shows n1's process at the top and the clash. */
static void assert_nodes_show_the_clash(cluster_t *c, cluster_node_t *first, cluster_node_t *clone)
{
    for (int reading = 0; reading < 8; reading++) {
        listed_node_t n1;
        cluster_assert(c, list_node(c, "n1", &n1), "cohortctl nodes --json does not list n1");
        cluster_assert(c, n1.pid == (int64_t)first->pid,
                       "cohortctl nodes shows pid %lld for n1, not the working process's %lld "
                       "(the standing-back clone is %lld), reading %d",
                       (long long)n1.pid, (long long)first->pid, (long long)clone->pid, reading);
        cluster_assert(c, n1.clash && n1.live_runs == 2,
                       "cohortctl nodes --json shows no clash for n1 (clash %d, live_runs %lld)",
                       n1.clash, (long long)n1.live_runs);
        cluster_assert(c, has_run_pid(&n1, first->pid) && has_run_pid(&n1, clone->pid),
                       "cohortctl nodes --json does not list both processes' runs");
        test_sleep_ms(c->tick_ms);
    }
    const char *args[] = {"nodes", NULL};
    char *table = NULL;
    int rc = cluster_run_ctl_output(c, args, &table);
    cluster_assert(c, rc == 0 && strstr(table, "CLASH: 2 live processes use node_id n1"),
                   "cohortctl nodes shows no CLASH line for n1:\n%s", table);
    free(table);
}

/* Starts a clone of `first` (node_id n1) unseen by its start-up check: n1 stops checking in
 * until its check-in is stale (the clone waits that long), and resumes once the clone runs. */
static cluster_node_t *start_clone_unseen(cluster_t *c, cluster_node_t *first)
{
    cluster_node_pause(first);
    cluster_node_t *clone = add_clone(c);
    cluster_node_start(clone);
    cluster_assert(c, wait_pinged_by(c, "n1", clone->pid, 30000),
                   "the clone did not start (ping as n1) while n1 was stopped");
    cluster_node_resume(first);
    return clone;
}

Test(cluster_same_node_id, a_clone_started_later_stands_back_and_primacy_does_not_flap)
{
    cluster_primacy_t before;
    cluster_t *c = start_cluster("lateid", &before);
    cluster_node_t *first = &c->nodes[0];
    cluster_node_t *clone = start_clone_unseen(c, first);

    cluster_assert(c, wait_clash_lines(first, 3, 30000) && wait_clash_lines(clone, 3, 30000),
                   "the two processes with node_id n1 did not both log the clash (ERROR '" CLASH
                   "') within 30 s");
    cluster_assert(c, cluster_log_count(clone, CLASH, "this one started later and stands back"),
                   "the clone does not say it stands back");
    cluster_assert(c, cluster_log_count(first, CLASH, "the other started later"),
                   "n1 does not say the clone stands back");
    cluster_assert(c, cluster_log_count(first, CLASH, "ERROR") > 0, "the clash is not an ERROR");
    assert_nodes_show_the_clash(c, first, clone);

    cluster_primacy_t settled;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &settled), "cannot read the primacy");
    const char *enqueue[] = {"enqueue", SERVICE, "--count", "40", NULL};
    int rc = cluster_run_ctl(c, enqueue);
    cluster_assert(c, rc == 0, "cohortctl enqueue exited %d", rc);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 40, 30000),
                   "40 tasks did not succeed within 30 s of the clash");
    /* Ten more ticks of both processes under the clash. */
    int first_lines = cluster_log_count(first, CLASH, NULL);
    int clone_lines = cluster_log_count(clone, CLASH, NULL);
    cluster_assert(c,
                   wait_clash_lines(first, first_lines + 10, 30000) &&
                       wait_clash_lines(clone, clone_lines + 10, 30000),
                   "the clash stopped being logged every tick");
    cluster_primacy_t after;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &after), "cannot read the primacy");
    fprintf(stderr, "same_node_id: epoch %lld before, %lld once the clash was seen, %lld after\n",
            (long long)before.epoch, (long long)settled.epoch, (long long)after.epoch);
    cluster_assert(c, after.epoch == settled.epoch,
                   "primacy flapped under the clash: epoch %lld -> %lld", (long long)settled.epoch,
                   (long long)after.epoch);

    char path[512];
    snprintf(path, sizeof path, "%s/clone.log", c->dir);
    char *journal = test_try_read_file(path);
    cluster_assert(c, !journal || !journal[0], "the clone standing back ran tasks:\n%s", journal);
    free(journal);
    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);

    /* The clone goes; n1 is alone again and says so. */
    cluster_node_stop_ok(clone, c->shutdown_grace_ms + 5000);
    cluster_assert(c,
                   cluster_wait_log(first, "no other live process uses node_id 'n1'", NULL, 30000),
                   "n1 did not notice the clone had gone");
    for (size_t i = 0; i < 2; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

Test(cluster_same_node_id, a_clone_keeps_standing_back_while_the_original_is_silent)
{
    cluster_primacy_t before;
    cluster_t *c = start_cluster("silentid", &before);
    cluster_node_t *first = &c->nodes[0];
    cluster_node_t *clone = start_clone_unseen(c, first);
    cluster_assert(c, wait_clash_lines(clone, 3, 30000),
                   "the clone did not log the clash (ERROR '" CLASH "') within 30 s");

    /* n1 goes silent (as in a database outage) for 4 liveness windows, with work to claim. */
    cluster_node_pause(first);
    const char *enqueue[] = {"enqueue", SERVICE, "--count", "40", NULL};
    int rc = cluster_run_ctl(c, enqueue);
    cluster_assert(c, rc == 0, "cohortctl enqueue exited %d", rc);
    test_sleep_ms(4 * c->takeover_ms);
    cluster_node_resume(first);
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, 40, 30000),
                   "40 tasks did not succeed within 30 s");
    cluster_assert(c, cluster_log_count(clone, "claiming again", NULL) == 0,
                   "the clone claimed again while n1 was only silent");
    char path[512];
    snprintf(path, sizeof path, "%s/clone.log", c->dir);
    char *journal = test_try_read_file(path);
    cluster_assert(c, !journal || !journal[0], "the clone ran tasks beside n1:\n%s", journal);
    free(journal);
    cluster_assert(c, cluster_wait_log(clone, "keeps standing back", NULL, 10000),
                   "the clone did not say it keeps standing back while n1 is silent");
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}

/* Whether the nodes document of `node_id` has a run entry with a check-in (its first ping). */
static bool has_run_entry(cluster_t *c, const char *node_id)
{
    bson_t doc;
    char filter[160];
    snprintf(filter, sizeof filter, "{\"_id\": \"%s\"}", node_id);
    bool found = test_find_one(c->client, c->db, "nodes", filter, &doc);
    bool seen = false;
    bson_iter_t it, runs, entry;
    if (found && bson_iter_init_find(&it, &doc, "runs") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &runs))
        while (!seen && bson_iter_next(&runs))
            seen = BSON_ITER_HOLDS_DOCUMENT(&runs) && bson_iter_recurse(&runs, &entry) &&
                   bson_iter_find(&entry, "seen_at");
    if (found)
        bson_destroy(&doc);
    return seen;
}

/*
 * The original has only just started (issue 22, found by the chaos harness): its first ping
 * wrote its run entry, and its main thread is still preparing its service on a slow database
 * (every reply held back 600 ms by a proxy), so it does not ping again for seconds. A second
 * process with its node_id, started then, is still refused: the original's heartbeat thread
 * keeps its run entry fresh from registration on. Before, it touched only once the main
 * thread had ticked an election, the second process saw the entry go stale after 1.5 s, and
 * started.
 */
Test(cluster_same_node_id, a_second_process_is_refused_while_the_first_is_still_starting)
{
    cluster_options_t options = {
        .tag = "dupstart",
        .services = {{.name = SERVICE, .settings = "workers = 2\njournal = @DIR@/journal.log"},
                     {.name = "more1"},
                     {.name = "more2"},
                     {.name = "more3"},
                     {.name = "more4"}},
    };
    cluster_t *c = cluster_new(&options);
    char uri_env[128];
    delay_proxy_t *proxy = delay_proxy_in_front_of(c->uri, uri_env, sizeof uri_env);
    delay_proxy_set_reply_delay(proxy, 150);
    const char *env[] = {uri_env, NULL};
    cluster_node_t *first = cluster_add_node(c, env);
    cluster_node_start(first);
    int64_t deadline = test_now_ms() + 30000;
    while (!has_run_entry(c, "n1") && test_now_ms() < deadline)
        test_sleep_ms(20);
    cluster_assert(c, has_run_entry(c, "n1"), "n1 never registered its run");

    cluster_node_t *clone = add_clone(c);
    int64_t started = test_now_ms();
    cluster_node_start(clone);
    int64_t took = cluster_node_wait_exit(clone, started, 30000);
    cluster_assert(c, took >= 0,
                   "the second process with node_id n1 started and still runs "
                   "after 30 s, while the first was starting");
    cluster_assert(c, WIFEXITED(clone->wait_status) && WEXITSTATUS(clone->wait_status) != 0,
                   "the second process exited with wait status 0x%x, want a non-zero exit",
                   clone->wait_status);
    cluster_assert(c, cluster_log_count(clone, "is in use by another live process", NULL) == 1,
                   "the second process was not refused");
    fprintf(stderr, "same_node_id: refused after %lld ms while the first was starting\n",
            (long long)took);
    delay_proxy_set_reply_delay(proxy, 0);
    cluster_node_stop_ok(first, c->shutdown_grace_ms + 10000);
    delay_proxy_stop(proxy);
}
