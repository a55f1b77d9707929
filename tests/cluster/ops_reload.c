/*
 * ops_reload.c - SIGHUP on real nodes: what may change live changes, what may not is refused
 * and the node runs on exactly as before.
 *
 * Two nodes (a primary and a secondary) host one noop service with workers = 1 and 600 ms
 * tasks; each batch of tasks below is sampled every 20 ms to find how many ran at once.
 *   1. Baseline: never more than one task at a time per node.
 *   2. workers = 4 and sleep_ms = 800 in both files, SIGHUP: each node logs "workers = 4 (was
 *      1)", "handler options reloaded" and "configuration reloaded from FILE (log_level
 *      INFO)"; 8 tasks then run 4 at a time on each node, for 800 ms each.
 *   3. A different handler path (a symlink to the same .so) and workers = 2, SIGHUP: both
 *      refuse ("reload refused: [service:...] handler changed (restart the node to change
 *      it); running configuration unchanged"), log no "workers = 2", keep their roles and
 *      epoch, and still run 8 tasks 4 at a time per node.
 *   4. A file with a bad value: "reload refused: 1 problem(s)"; fixed again: reloaded, with
 *      nothing to change.
 *   5. log_level = warn on the secondary: its reload still logs its summary ("configuration
 *      reloaded ... (log_level WARN)", at WARN); once in force (two pings later) it
 *      writes no INFO line - not even for a live setting change that the primary logs - and
 *      log_level = info brings them back ("configuration reloaded ... (log_level INFO)").
 * Primacy never moves, `cohortctl nodes` reports the 4 workers in force, and both nodes exit 0.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "hup"
#define SLEEP_MS 600
#define RELOADED_SLEEP_MS 800

TestSuite(cluster_ops_reload, .fini = cluster_cleanup_all, .timeout = 120);

/* The most tasks each node (indexed like c->nodes) and the cluster ran at once. */
typedef struct peaks {
    int64_t per_node[CLUSTER_MAX_NODES];
    int64_t total;
    int64_t min_run_ms; /* the shortest run in the batch's history */
} peaks_t;

static int64_t claimed_by(cluster_t *c, const char *node)
{
    char filter[160];
    snprintf(filter, sizeof filter, "{\"status\": \"claimed\", \"claimed_by\": \"%s\"}", node);
    return cluster_try_count(c, SERVICE, filter);
}

/* The shortest ended_at - started_at of the first runs of the tasks enqueued with data
 * {"step": step}; *runs counts the runs seen. */
static int64_t shortest_run(cluster_t *c, int step, int64_t *runs)
{
    mongoc_collection_t *queue = mongoc_client_get_collection(c->client, c->db, "queue_" SERVICE);
    bson_t *filter = BCON_NEW("data.step", BCON_INT32(step));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(queue, filter, NULL, NULL);
    const bson_t *doc;
    int64_t shortest = INT64_MAX;
    *runs = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it, started, ended;
        if (!bson_iter_init(&it, doc))
            continue;
        bson_iter_t again = it;
        if (bson_iter_find_descendant(&it, "history.0.started_at", &started) &&
            bson_iter_find_descendant(&again, "history.0.ended_at", &ended) &&
            BSON_ITER_HOLDS_DATE_TIME(&started) && BSON_ITER_HOLDS_DATE_TIME(&ended)) {
            int64_t run = bson_iter_date_time(&ended) - bson_iter_date_time(&started);
            (*runs)++;
            if (run < shortest)
                shortest = run;
        }
    }
    bson_error_t error;
    bool failed = mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
    bson_destroy(filter);
    mongoc_collection_destroy(queue);
    cluster_assert(c, !failed, "cannot read the tasks: %s", error.message);
    return shortest;
}

/* Enqueues `count` tasks with data {"step": step} and samples how many run at once until
 * they have all succeeded (`*succeeded` is the running total of succeeded tasks). */
static void run_batch(cluster_t *c, int step, int count, int64_t *succeeded, peaks_t *peaks)
{
    memset(peaks, 0, sizeof *peaks);
    char count_text[16], data[32];
    snprintf(count_text, sizeof count_text, "%d", count);
    snprintf(data, sizeof data, "{\"step\": %d}", step);
    const char *enqueue[] = {"enqueue", SERVICE, "--count", count_text, "--data", data, NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue failed");
    *succeeded += count;
    int64_t deadline = test_now_ms() + 20000;
    for (;;) {
        int64_t total = 0;
        for (size_t i = 0; i < c->n_nodes; i++) {
            int64_t n = claimed_by(c, c->nodes[i].id);
            total += n > 0 ? n : 0;
            if (n > peaks->per_node[i])
                peaks->per_node[i] = n;
        }
        if (total > peaks->total)
            peaks->total = total;
        if (cluster_try_count(c, SERVICE, "{\"status\": \"succeeded\"}") >= *succeeded)
            break;
        cluster_assert(c, test_now_ms() < deadline, "%d tasks did not succeed within 20 s", count);
        test_sleep_ms(20);
    }
    int64_t runs = 0;
    peaks->min_run_ms = shortest_run(c, step, &runs);
    cluster_assert(c, runs == count, "%lld of the %d tasks of step %d have a recorded run",
                   (long long)runs, count, step);
}

/* seen_at of the node's registry entry (server time), 0 if unknown. */
static int64_t seen_at(cluster_t *c, cluster_node_t *n)
{
    char filter[96];
    snprintf(filter, sizeof filter, "{\"_id\": \"%s\"}", n->id);
    bson_t doc;
    int64_t seen = 0;
    bson_iter_t it;
    if (test_find_one(c->client, c->db, "nodes", filter, &doc) &&
        bson_iter_init_find(&it, &doc, "seen_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        seen = bson_iter_date_time(&it);
    bson_destroy(&doc);
    return seen;
}

/* Waits until the node has pinged `count` more times: its main loop has gone round since. */
static bool wait_pings(cluster_t *c, cluster_node_t *n, int count, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms, last = seen_at(c, n);
    while (count > 0) {
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(20);
        int64_t now = seen_at(c, n);
        if (now != last) {
            count--;
            last = now;
        }
    }
    return true;
}

/* Waits until the node's log has more than `before` lines with `needle` (and `needle2`). */
static bool wait_more_lines(cluster_node_t *n, const char *needle, const char *needle2, int before,
                            int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        if (cluster_log_count(n, needle, needle2) > before)
            return true;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(20);
    }
}

/* `workers.SERVICE` of the node in `cohortctl nodes --json`, -1 if absent. */
static int64_t registry_workers(cluster_t *c, const char *id)
{
    const char *args[] = {"nodes", "--json", NULL};
    bson_t doc;
    int rc = cluster_run_ctl_json(c, args, &doc);
    cluster_assert(c, rc == 0, "cohortctl nodes --json exited %d (-2: not JSON)", rc);
    int64_t workers = -1;
    bson_iter_t it, list;
    if (bson_iter_init_find(&it, &doc, "nodes") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &list)) {
        while (bson_iter_next(&list)) {
            bson_iter_t one, field;
            if (!BSON_ITER_HOLDS_DOCUMENT(&list) || !bson_iter_recurse(&list, &one))
                continue;
            bson_iter_t id_it = one;
            if (!bson_iter_find(&id_it, "node_id") || !BSON_ITER_HOLDS_UTF8(&id_it) ||
                strcmp(bson_iter_utf8(&id_it, NULL), id) != 0)
                continue;
            if (bson_iter_find_descendant(&one, "workers." SERVICE, &field) &&
                BSON_ITER_HOLDS_NUMBER(&field))
                workers = bson_iter_as_int64(&field);
        }
    }
    bson_destroy(&doc);
    return workers;
}

static void reload_all(cluster_t *c)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_reload(&c->nodes[i]);
}

/* Asserts that every node logs `needle` (and `needle2`) more often than `before[i]` within
 * timeout_ms. */
static void assert_all_log(cluster_t *c, const int *before, const char *needle, const char *needle2,
                           int64_t timeout_ms)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_assert(c, wait_more_lines(&c->nodes[i], needle, needle2, before[i], timeout_ms),
                       "%s did not log '%s'%s%s within %lld ms of SIGHUP", c->nodes[i].id, needle,
                       needle2 ? " with " : "", needle2 ? needle2 : "", (long long)timeout_ms);
}

static void count_lines(cluster_t *c, const char *needle, int *out)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        out[i] = cluster_log_count(&c->nodes[i], needle, NULL);
}

Test(cluster_ops_reload, sighup_applies_live_changes_and_refuses_structural_ones)
{
    static char settings[256];
    snprintf(settings, sizeof settings, "workers = 1\nsleep_ms = %d\njournal = @DIR@/journal.txt",
             SLEEP_MS);
    cluster_options_t options = {
        .tag = "ops_reload",
        .tick_ms = 200,
        .takeover_ms = 1500,
        .services = {{.name = SERVICE, .settings = settings}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t first;
    cluster_start_elected(c, 2, SERVICE, 5000, &first);
    cluster_node_t *primary = cluster_node_by_id(c, first.primary);
    cluster_assert(c, primary != NULL, "primary '%s' is not one of our nodes", first.primary);
    cluster_node_t *secondary = primary == &c->nodes[0] ? &c->nodes[1] : &c->nodes[0];
    const int64_t reload_ms = 2000; /* SIGHUP is handled by the main loop at once */
    int64_t succeeded = 0;
    int before[CLUSTER_MAX_NODES], before2[CLUSTER_MAX_NODES], before3[CLUSTER_MAX_NODES];

    /* 1. baseline */
    peaks_t base;
    run_batch(c, 1, 4, &succeeded, &base);
    cluster_assert(c, base.per_node[0] <= 1 && base.per_node[1] <= 1,
                   "with workers = 1 the nodes ran %lld and %lld tasks at once",
                   (long long)base.per_node[0], (long long)base.per_node[1]);

    /* 2. live: workers and handler options */
    count_lines(c, "configuration reloaded from", before);
    for (size_t i = 0; i < c->n_nodes; i++) {
        char sleep[16];
        snprintf(sleep, sizeof sleep, "%d", RELOADED_SLEEP_MS);
        cluster_node_config_set(&c->nodes[i], "workers", "4");
        cluster_node_config_set(&c->nodes[i], "sleep_ms", sleep);
    }
    reload_all(c);
    assert_all_log(c, before, "configuration reloaded from", "(log_level INFO)", reload_ms);
    for (size_t i = 0; i < c->n_nodes; i++) {
        cluster_assert(c, cluster_log_count(&c->nodes[i], "workers = 4 (was 1)", NULL) == 1,
                       "%s did not log 'workers = 4 (was 1)' once", c->nodes[i].id);
        cluster_assert(c, cluster_log_count(&c->nodes[i], "handler options reloaded", NULL) == 1,
                       "%s did not log 'handler options reloaded' once", c->nodes[i].id);
    }
    peaks_t wide;
    run_batch(c, 2, 8, &succeeded, &wide);
    fprintf(stderr,
            "ops_reload: workers 1 -> 4 by SIGHUP: at most %lld and %lld tasks at once per node "
            "(%lld in all; before: %lld and %lld); shortest run %lld ms (sleep_ms %d -> %d)\n",
            (long long)wide.per_node[0], (long long)wide.per_node[1], (long long)wide.total,
            (long long)base.per_node[0], (long long)base.per_node[1], (long long)wide.min_run_ms,
            SLEEP_MS, RELOADED_SLEEP_MS);
    cluster_assert(c, wide.per_node[0] >= 3 && wide.per_node[1] >= 3 && wide.total >= 6,
                   "after workers = 4 the nodes ran at most %lld and %lld tasks at once",
                   (long long)wide.per_node[0], (long long)wide.per_node[1]);
    /* Runs are timed on two clocks (claim: server, end: the node's estimate of it), so
     * compare with the midpoint between the old and the new sleep. */
    cluster_assert(c, wide.min_run_ms >= (SLEEP_MS + RELOADED_SLEEP_MS) / 2,
                   "a task ran %lld ms: the reloaded sleep_ms = %d was not applied",
                   (long long)wide.min_run_ms, RELOADED_SLEEP_MS);

    /* 3. refused: a different handler path (same .so through a symlink), with workers = 2 */
    char link[512];
    snprintf(link, sizeof link, "%s/cohort_noop_link.so", c->dir);
    cluster_assert(c, symlink(test_build_path("handlers/cohort_noop.so"), link) == 0,
                   "cannot create %s", link);
    count_lines(c, "reload refused: [service:" SERVICE "] handler changed", before);
    count_lines(c, "configuration reloaded from", before2);
    count_lines(c, "| workers = ", before3);
    for (size_t i = 0; i < c->n_nodes; i++) {
        cluster_node_config_set(&c->nodes[i], "handler", link);
        cluster_node_config_set(&c->nodes[i], "workers", "2");
    }
    reload_all(c);
    assert_all_log(c, before, "reload refused: [service:" SERVICE "] handler changed",
                   "(restart the node to change it); running configuration unchanged", reload_ms);
    peaks_t kept;
    run_batch(c, 3, 8, &succeeded, &kept);
    for (size_t i = 0; i < c->n_nodes; i++) {
        cluster_node_t *n = &c->nodes[i];
        cluster_assert(c, cluster_node_alive(n), "%s died after a refused reload", n->id);
        cluster_assert(c, cluster_log_count(n, "configuration reloaded from", NULL) == before2[i],
                       "%s logged 'configuration reloaded' for a refused reload", n->id);
        cluster_assert(c, cluster_log_count(n, "| workers = ", NULL) == before3[i],
                       "%s changed its workers in a refused reload", n->id);
    }
    cluster_assert(c, kept.per_node[0] >= 3 && kept.per_node[1] >= 3,
                   "after a refused reload the nodes ran at most %lld and %lld tasks at once "
                   "(they should still run 4 workers)",
                   (long long)kept.per_node[0], (long long)kept.per_node[1]);
    cluster_primacy_t p;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &p), "cannot read primacy");
    cluster_assert(c, strcmp(p.primary, first.primary) == 0 && p.epoch == first.epoch,
                   "primacy moved from %s (epoch %lld) to %s (epoch %lld) across reloads",
                   first.primary, (long long)first.epoch, p.primary, (long long)p.epoch);

    /* 4. a file with problems, then fixed */
    count_lines(c, "reload refused: 1 problem(s)", before);
    for (size_t i = 0; i < c->n_nodes; i++) {
        cluster_node_config_set(&c->nodes[i], "handler",
                                test_build_path("handlers/cohort_noop.so"));
        cluster_node_config_set(&c->nodes[i], "workers", "many");
    }
    reload_all(c);
    assert_all_log(c, before, "reload refused: 1 problem(s)", "running configuration unchanged",
                   reload_ms);
    count_lines(c, "configuration reloaded from", before);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_config_set(&c->nodes[i], "workers", "4");
    reload_all(c);
    assert_all_log(c, before, "configuration reloaded from", NULL, reload_ms);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_assert(c, cluster_log_count(&c->nodes[i], "| workers = ", NULL) == before3[i],
                       "%s changed its workers though the file's value is the running one",
                       c->nodes[i].id);

    /* 5. log_level = warn on the secondary silences its INFO lines */
    cluster_node_config_set(secondary, "log_level", "warn");
    cluster_node_reload(secondary);
    /* The reload still says it happened, at the level it turns on (the first such line). */
    cluster_assert(c,
                   wait_more_lines(secondary, "configuration reloaded from", "(log_level WARN)",
                                   0, reload_ms),
                   "%s did not log its reload to log_level warn", secondary->id);
    cluster_assert(c, wait_pings(c, secondary, 2, 5000), "%s stopped pinging", secondary->id);
    int info_before = cluster_log_count(secondary, " INFO ", NULL);
    const char *set[] = {"-c",    c->nodes[0].config_path, "settings", "set",
                         SERVICE, "primary_task_count",    "7",        NULL};
    cluster_assert(c, cluster_run_ctl(c, set) == 0, "settings set primary_task_count 7 failed");
    const char *line = "setting primary_task_count = 7 (was 10; set in the database)";
    cluster_assert(c, cluster_wait_log(primary, line, NULL, 5000), "primary %s did not log '%s'",
                   primary->id, line);
    cluster_assert(c, wait_pings(c, secondary, 3, 5000), "%s stopped pinging", secondary->id);
    int info_after = cluster_log_count(secondary, " INFO ", NULL);
    cluster_assert(c, info_after == info_before && cluster_log_count(secondary, line, NULL) == 0,
                   "%s wrote %d INFO line(s) with log_level = warn", secondary->id,
                   info_after - info_before);
    int info_reloads =
        cluster_log_count(secondary, "configuration reloaded from", "(log_level INFO)");
    cluster_node_config_set(secondary, "log_level", "info");
    cluster_node_reload(secondary);
    cluster_assert(c,
                   wait_more_lines(secondary, "configuration reloaded from", "(log_level INFO)",
                                   info_reloads, reload_ms),
                   "%s did not log its reload back to log_level info", secondary->id);
    fprintf(stderr,
            "ops_reload: handler change and a bad file refused by both nodes, which kept 4 "
            "workers (at most %lld and %lld tasks at once) and their roles (%s primary, epoch "
            "%lld); log_level warn on %s: %d INFO lines while %s logged the setting change\n",
            (long long)kept.per_node[0], (long long)kept.per_node[1], primary->id,
            (long long)first.epoch, secondary->id, info_after - info_before, primary->id);

    cluster_assert(c, cluster_read_primacy(c, SERVICE, &p), "cannot read primacy");
    cluster_assert(c, strcmp(p.primary, first.primary) == 0 && p.epoch == first.epoch,
                   "primacy moved from %s (epoch %lld) to %s (epoch %lld) across reloads",
                   first.primary, (long long)first.epoch, p.primary, (long long)p.epoch);
    /* The registry reports the worker counts in force, not the start-up ones. */
    for (size_t i = 0; i < c->n_nodes; i++) {
        int64_t shown = registry_workers(c, c->nodes[i].id);
        cluster_assert(c, shown == 4,
                       "cohortctl nodes reports %lld workers for %s, which runs 4 since its "
                       "reload",
                       (long long)shown, c->nodes[i].id);
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
