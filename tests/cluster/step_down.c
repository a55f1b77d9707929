/*
 * step_down.c - `cohortctl step-down SERVICE`: the primary gives its primacy up on request,
 * cleanly, while it keeps running.
 *
 * 3 nodes with takeover_ms = 10 s (so a move within half of it cannot be a takeover after
 * silence: the old primary never stops renewing), running 300 ms tasks. The command returns
 * 0 once another node is primary, under epoch E+1, well within takeover_ms / 2; the old
 * primary logs "stepped down from epoch E (asked by cohortctl ...)", is still running, is
 * recorded in stepped_down, and does not take the primacy straight back; the node that takes
 * over logs "became primary (epoch E+1, previous primary stepped down: OLD)". Every task
 * succeeds on its first attempt (nothing ran twice) and no epoch was announced twice. A
 * service with no primary is refused (exit 2) before any node runs.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "handover"
#define TASKS 40

TestSuite(cluster_step_down, .fini = cluster_cleanup_all, .timeout = 120);

/* The string at stepped_down.node_id of the service's document, into out. */
static void stepped_down_node(cluster_t *c, char *out, size_t len)
{
    bson_t doc;
    bson_iter_t it;
    out[0] = '\0';
    if (cluster_read_service_doc(c, SERVICE, &doc) && bson_iter_init(&it, &doc) &&
        bson_iter_find_descendant(&it, "stepped_down.node_id", &it) && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(out, len, "%s", bson_iter_utf8(&it, NULL));
    bson_destroy(&doc);
}

Test(cluster_step_down, the_primary_hands_over_within_a_few_ticks_and_no_task_runs_twice)
{
    cluster_options_t options = {
        .tag = "step_down",
        .tick_ms = 200,
        .takeover_ms = 10000,
        .services = {{.name = SERVICE, .settings = "workers = 2\nsleep_ms = 300"}},
    };
    cluster_t *c = cluster_new(&options);
    const char *create[] = {"enqueue", SERVICE, "--count", "40", "--create", NULL};
    cluster_assert(c, cluster_run_ctl(c, create) == 0, "cohortctl enqueue failed");
    const char *step_down[] = {"step-down", SERVICE, NULL};
    cluster_assert(c, cluster_run_ctl(c, step_down) == 2,
                   "step-down of a service without a primary was not refused with exit 2");

    cluster_primacy_t old;
    cluster_start_elected(c, 3, SERVICE, 10000, &old);
    /* Land the request in the primary's steady state, tasks running. */
    int64_t elected = old.last_active_ms, deadline = test_now_ms() + 10 * c->tick_ms;
    while (old.last_active_ms < elected + c->tick_ms && test_now_ms() < deadline) {
        test_sleep_ms(20);
        cluster_assert(c, cluster_read_primacy(c, SERVICE, &old), "cannot read primacy");
    }
    cluster_node_t *primary = cluster_node_by_id(c, old.primary);
    cluster_assert(c, primary != NULL, "primary '%s' is not one of our nodes", old.primary);

    int64_t asked_at = test_now_ms();
    char *out = NULL;
    int rc = cluster_run_ctl_output(c, step_down, &out);
    int64_t took = test_now_ms() - asked_at;
    cluster_primacy_t now;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &now), "cannot read primacy");
    fprintf(stderr, "step_down: %s (epoch %lld) asked; %s primary (epoch %lld) after %lld ms "
                    "(tick %lld ms, takeover %lld ms): %s",
            old.primary, (long long)old.epoch, now.primary, (long long)now.epoch,
            (long long)took, (long long)c->tick_ms, (long long)c->takeover_ms, out);
    cluster_assert(c, rc == 0, "cohortctl step-down exited %d: %s", rc, out);
    cluster_assert(c, strstr(out, "stepped down from epoch") != NULL, "it printed: %s", out);
    free(out);
    cluster_assert(c, now.primary[0] && strcmp(now.primary, old.primary) != 0,
                   "the primary is still '%s'", now.primary);
    cluster_assert(c, now.epoch == old.epoch + 1, "the new primary %s has epoch %lld, not %lld",
                   now.primary, (long long)now.epoch, (long long)old.epoch + 1);
    cluster_assert(c, took < c->takeover_ms / 2,
                   "the primacy moved after %lld ms: no faster than a takeover after silence",
                   (long long)took);
    char stepped[96];
    snprintf(stepped, sizeof stepped, "stepped down from epoch %lld (asked by cohortctl",
             (long long)old.epoch);
    cluster_assert(c, cluster_log_count(primary, stepped, NULL) == 1, "%s does not log '%s' once",
                   primary->id, stepped);
    cluster_assert(c, cluster_node_alive(primary), "%s exited", primary->id);
    /* The node that took over names the one that stepped down (not "previous primary: none"). */
    cluster_node_t *successor = cluster_node_by_id(c, now.primary);
    cluster_assert(c, successor != NULL, "primary '%s' is not one of our nodes", now.primary);
    char became[256];
    snprintf(became, sizeof became,
             "became primary (epoch %lld, previous primary stepped down: %s)", (long long)now.epoch,
             old.primary);
    cluster_assert(c, cluster_log_count(successor, became, NULL) == 1, "%s does not log '%s' once",
                   successor->id, became);
    char recorded[CLUSTER_ID_MAX];
    stepped_down_node(c, recorded, sizeof recorded);
    cluster_assert(c, strcmp(recorded, old.primary) == 0, "stepped_down.node_id is '%s'",
                   recorded);

    /* The old primary leaves the primacy alone, and every task runs once. */
    cluster_assert(c, cluster_wait_succeeded(c, SERVICE, TASKS, 30000),
                   "not all %d tasks succeeded", TASKS);
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &now), "cannot read primacy");
    cluster_assert(c, strcmp(now.primary, old.primary) != 0 && now.epoch == old.epoch + 1,
                   "the primacy moved again: %s, epoch %lld", now.primary, (long long)now.epoch);
    int64_t again = cluster_try_count(c, SERVICE, "{\"attempts\": {\"$ne\": 1}}");
    cluster_assert(c, again == 0, "%lld task(s) ran more than once", (long long)again);
    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
