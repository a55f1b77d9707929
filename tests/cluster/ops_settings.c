/*
 * ops_settings.c - live settings on real nodes: `cohortctl settings set noop takeover_ms X`
 * changes the takeover time of a running cluster without a restart.
 *
 * Three nodes with takeover_ms = 1500 in their config files, tick 200 ms.
 *   1. `settings set` takeover_ms 3500: every node logs "setting takeover_ms = 3500 (was
 *      1500; set in the database)" by its next tick (within a tick + SLACK_MS of the
 *      command's exit), the primary's next renewal declares lease_ms = 3500 in the services
 *      document, and `settings get` says "(set in the database)".
 *   2. Invalid values are refused with exit status 2 and a reason on stderr - out of range,
 *      takeover_ms <= tick_ms, stall_timeout_ms < 3 * tick_ms, not a number, an unknown key -
 *      and change nothing: the document's settings and every node's log stay as they were.
 *   3. kill -9 the primary: the next one takes over after about 3500 ms (at least 3500 minus
 *      the election guard on the server clock, at most 3500 + 2 ticks + slack from the kill),
 *      not after the file's 1500.
 *   4. `settings unset`: the two nodes left log "setting takeover_ms = 1500 (was 3500; the
 *      config file's value)", the lease returns to 1500, and killing the primary again gives a
 *      takeover after about 1500 ms.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "live"
#define FILE_TAKEOVER_MS 1500
#define LIVE_TAKEOVER_MS 3500
#define SLACK_MS 300

TestSuite(cluster_ops_settings, .fini = cluster_cleanup_all, .timeout = 120);

/* Runs `cohortctl -c <node 1's config> settings ARGS...` and returns its exit status; its
 * stdout goes to *out (caller frees) if out is not NULL. */
static int settings(cluster_t *c, const char *verb, const char *key, const char *value, char **out)
{
    const char *args[8] = {"-c", c->nodes[0].config_path, "settings", verb, SERVICE};
    size_t k = 5;
    if (key)
        args[k++] = key;
    if (value)
        args[k++] = value;
    args[k] = NULL;
    char *text = NULL;
    int rc = cluster_run_ctl_output(c, args, &text);
    if (out)
        *out = text;
    else
        free(text);
    return rc;
}

/* The cohortctl log (stderr of every cohortctl run), or "" if there is none; caller frees. */
static char *ctl_stderr(cluster_t *c)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cohortctl.log", c->dir);
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    cr_assert_not_null(mem, "out of memory");
    char buf[4096];
    size_t n;
    while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, mem);
    if (f)
        fclose(f);
    fclose(mem);
    return text;
}

/* lease_ms declared in the services document (0 if none). */
static int64_t declared_lease(cluster_t *c)
{
    bson_t doc;
    int64_t lease = 0;
    bson_iter_t it;
    if (cluster_read_service_doc(c, SERVICE, &doc) && bson_iter_init_find(&it, &doc, "lease_ms") &&
        BSON_ITER_HOLDS_NUMBER(&it))
        lease = bson_iter_as_int64(&it);
    bson_destroy(&doc);
    return lease;
}

/* The document's settings sub-document as canonical JSON; caller frees with bson_free. */
static char *doc_settings(cluster_t *c)
{
    bson_t doc, sub = BSON_INITIALIZER;
    bson_iter_t it;
    if (cluster_read_service_doc(c, SERVICE, &doc) && bson_iter_init_find(&it, &doc, "settings") &&
        BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&it, &len, &data);
        bson_t view;
        if (bson_init_static(&view, data, len))
            bson_concat(&sub, &view);
    }
    char *json = bson_as_canonical_extended_json(&sub, NULL);
    bson_destroy(&sub);
    bson_destroy(&doc);
    return json;
}

static bool wait_lease(cluster_t *c, int64_t lease, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        if (declared_lease(c) == lease)
            return true;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(20);
    }
}

/* Waits until every running node logged `line`; returns the time from `since` to the last
 * one seen, or -1 on timeout (naming the laggard in *laggard). */
static int64_t wait_all_logged(cluster_t *c, const char *line, int64_t since, int64_t timeout_ms,
                               const char **laggard)
{
    for (size_t i = 0; i < c->n_nodes; i++) {
        cluster_node_t *n = &c->nodes[i];
        if (n->pid <= 0)
            continue;
        int64_t left = since + timeout_ms - test_now_ms();
        if (!cluster_wait_log(n, line, NULL, left > 0 ? left : 0)) {
            *laggard = n->id;
            return -1;
        }
    }
    return test_now_ms() - since;
}

/* Kills the primary and measures the takeover; checks it against `takeover_ms`. */
static void kill_primary_and_measure(cluster_t *c, int64_t takeover_ms, int64_t *elapsed,
                                     int64_t *quiet)
{
    cluster_primacy_t old;
    cluster_assert(c, cluster_wait_primary(c, SERVICE, NULL, 5000, &old), "no primary");
    /* Kill right after a renewal, so the takeover time is close to takeover_ms. */
    int64_t seen = old.last_active_ms, deadline = test_now_ms() + 10 * c->tick_ms;
    while (old.last_active_ms == seen && test_now_ms() < deadline) {
        test_sleep_ms(5);
        cluster_assert(c, cluster_read_primacy(c, SERVICE, &old), "cannot read primacy");
    }
    cluster_node_t *victim = cluster_node_by_id(c, old.primary);
    cluster_assert(c, victim != NULL, "primary '%s' is not one of our nodes", old.primary);
    int64_t killed_at = test_now_ms();
    cluster_node_kill(victim);
    cluster_takeover_t t;
    int64_t bound = takeover_ms + 2 * c->tick_ms;
    cluster_assert(c, cluster_wait_takeover(c, SERVICE, old.primary, killed_at, bound + 10000, &t),
                   "no takeover within %lld ms of killing %s", (long long)(bound + 10000),
                   old.primary);
    *elapsed = t.elapsed_ms;
    *quiet = t.after.elected_at_ms - t.before.last_active_ms;
    fprintf(stderr,
            "ops_settings: killed %s (epoch %lld); %s took over after %lld ms (%lld ms after "
            "the last renewal on the server clock); live takeover_ms %lld, file %d\n",
            old.primary, (long long)old.epoch, t.after.primary, (long long)t.elapsed_ms,
            (long long)*quiet, (long long)takeover_ms, FILE_TAKEOVER_MS);
    cluster_assert(c, t.after.epoch > old.epoch, "the epoch did not grow");
    cluster_assert(c, t.elapsed_ms <= bound + SLACK_MS,
                   "takeover took %lld ms, more than takeover_ms %lld + 2 ticks (+%d)",
                   (long long)t.elapsed_ms, (long long)takeover_ms, SLACK_MS);
    cluster_assert(c, *quiet >= takeover_ms - takeover_ms / 4,
                   "%s took over %lld ms (server clock) after the last renewal, before "
                   "takeover_ms %lld minus the guard",
                   t.after.primary, (long long)*quiet, (long long)takeover_ms);
}

Test(cluster_ops_settings, live_takeover_ms_is_applied_by_every_node_and_used_by_takeovers)
{
    cluster_options_t options = {
        .tag = "ops_settings",
        .tick_ms = 200,
        .takeover_ms = FILE_TAKEOVER_MS,
        .services = {{.name = SERVICE}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t p;
    cluster_start_elected(c, 3, SERVICE, 5000, &p);
    cluster_assert(c, wait_lease(c, FILE_TAKEOVER_MS, 2000), "the primary declares lease %lld",
                   (long long)declared_lease(c));

    /* 1. set */
    char *out = NULL;
    char value[32];
    snprintf(value, sizeof value, "%d", LIVE_TAKEOVER_MS);
    int rc = settings(c, "set", "takeover_ms", value, &out);
    int64_t set_at = test_now_ms();
    cluster_assert(c, rc == 0, "settings set takeover_ms %s exited %d", value, rc);
    free(out);
    char applied[128];
    snprintf(applied, sizeof applied, "setting takeover_ms = %d (was %d; set in the database)",
             LIVE_TAKEOVER_MS, FILE_TAKEOVER_MS);
    const char *laggard = "";
    int64_t apply_ms = wait_all_logged(c, applied, set_at, c->tick_ms + SLACK_MS + 5000, &laggard);
    cluster_assert(c, apply_ms >= 0, "%s did not log '%s'", laggard, applied);
    cluster_assert(c, apply_ms <= c->tick_ms + SLACK_MS,
                   "the nodes took %lld ms to apply the setting; expected by their next tick "
                   "(%lld ms + %d)",
                   (long long)apply_ms, (long long)c->tick_ms, SLACK_MS);
    cluster_assert(c, wait_lease(c, LIVE_TAKEOVER_MS, 2 * c->tick_ms + SLACK_MS),
                   "the primary does not declare lease_ms = %d (declares %lld)", LIVE_TAKEOVER_MS,
                   (long long)declared_lease(c));
    rc = settings(c, "get", NULL, NULL, &out);
    cluster_assert(c, rc == 0 && strstr(out, value) && strstr(out, "(set in the database)"),
                   "settings get exited %d and says:\n%s", rc, out);
    free(out);
    fprintf(stderr, "ops_settings: takeover_ms %s applied by all 3 nodes within %lld ms\n", value,
            (long long)apply_ms);

    /* 2. invalid values change nothing */
    static const struct {
        const char *key, *value, *reason;
    } refused[] = {
        {"takeover_ms", "10", "out of range"},
        {"takeover_ms", "150", "must be greater than tick_ms (200)"},
        {"tick_ms", "4000", "must be greater than tick_ms (4000)"},
        {"stall_timeout_ms", "500", "must be at least 3 * tick_ms (600)"},
        {"takeover_ms", "soon", "is not a number"},
        {"takeover_msec", "2000", "is not a live setting"},
    };
    char *settings_before = doc_settings(c);
    int lines_before = cluster_log_count_all(c, "setting ", " = ");
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char *earlier = ctl_stderr(c);
        rc = settings(c, "set", refused[i].key, refused[i].value, NULL);
        char *err = ctl_stderr(c);
        /* Only what this command wrote. */
        bool explained = strlen(err) >= strlen(earlier) &&
                         strstr(err + strlen(earlier), refused[i].reason) != NULL;
        free(earlier);
        free(err);
        cluster_assert(c, rc == 2 && explained,
                       "settings set %s %s exited %d (expected 2) %s '%s' on stderr",
                       refused[i].key, refused[i].value, rc, explained ? "with" : "without",
                       refused[i].reason);
    }
    /* Every node has had two ticks to notice a change, had there been one. */
    int64_t renewed = 0, deadline = test_now_ms() + 5000;
    while (renewed < 2 && test_now_ms() < deadline) {
        int64_t seen = p.last_active_ms;
        cluster_assert(c, cluster_read_primacy(c, SERVICE, &p), "cannot read primacy");
        renewed += p.last_active_ms != seen;
        test_sleep_ms(20);
    }
    test_sleep_ms(2 * c->tick_ms);
    char *settings_after = doc_settings(c);
    cluster_assert(c, strcmp(settings_before, settings_after) == 0,
                   "refused commands changed the settings: %s -> %s", settings_before,
                   settings_after);
    bson_free(settings_before);
    bson_free(settings_after);
    int lines_after = cluster_log_count_all(c, "setting ", " = ");
    cluster_assert(c, lines_after == lines_before,
                   "the nodes logged %d new setting line(s) after refused commands",
                   lines_after - lines_before);
    cluster_assert(c, declared_lease(c) == LIVE_TAKEOVER_MS, "the lease changed to %lld",
                   (long long)declared_lease(c));

    /* 3. the takeover waits the live value, not the file's */
    int64_t live_elapsed, live_quiet;
    kill_primary_and_measure(c, LIVE_TAKEOVER_MS, &live_elapsed, &live_quiet);
    cluster_assert(c, live_elapsed > FILE_TAKEOVER_MS + 2 * c->tick_ms + SLACK_MS,
                   "the takeover took %lld ms: the file's takeover_ms (%d), not the live %d",
                   (long long)live_elapsed, FILE_TAKEOVER_MS, LIVE_TAKEOVER_MS);

    /* 4. unset: back to the file's value */
    rc = settings(c, "unset", "takeover_ms", NULL, &out);
    int64_t unset_at = test_now_ms();
    cluster_assert(c, rc == 0, "settings unset takeover_ms exited %d: %s", rc, out);
    free(out);
    char restored[128];
    snprintf(restored, sizeof restored,
             "setting takeover_ms = %d (was %d; the config file's value)", FILE_TAKEOVER_MS,
             LIVE_TAKEOVER_MS);
    apply_ms = wait_all_logged(c, restored, unset_at, c->tick_ms + SLACK_MS + 5000, &laggard);
    cluster_assert(c, apply_ms >= 0, "%s did not log '%s'", laggard, restored);
    cluster_assert(c, apply_ms <= c->tick_ms + SLACK_MS,
                   "the nodes took %lld ms to return to the file's value", (long long)apply_ms);
    cluster_assert(c, wait_lease(c, FILE_TAKEOVER_MS, 2 * c->tick_ms + SLACK_MS),
                   "the primary still declares lease_ms = %lld", (long long)declared_lease(c));
    rc = settings(c, "get", NULL, NULL, &out);
    cluster_assert(c,
                   rc == 0 && strstr(out, "takeover_ms") && !strstr(out, "(set in the database)"),
                   "settings get after unset exited %d and says:\n%s", rc, out);
    free(out);
    int64_t file_elapsed, file_quiet;
    kill_primary_and_measure(c, FILE_TAKEOVER_MS, &file_elapsed, &file_quiet);
    fprintf(stderr,
            "ops_settings: takeover with live %d ms: %lld ms (%lld on the server clock); after "
            "unset, with the file's %d ms: %lld ms (%lld)\n",
            LIVE_TAKEOVER_MS, (long long)live_elapsed, (long long)live_quiet, FILE_TAKEOVER_MS,
            (long long)file_elapsed, (long long)file_quiet);
    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
