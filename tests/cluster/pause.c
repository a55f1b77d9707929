/*
 * pause.c - a primary frozen with SIGSTOP for 2.5 x takeover_ms is replaced, and once
 * resumed it notices ("lost primacy of epoch E") without ever acting under epoch E again.
 *
 * The service's primary generates 2 tasks per tick (noop generate_per_tick), each stamped
 * with the epoch it was created under. Fencing means the number of epoch-E tasks is final
 * as soon as another node holds a newer epoch: it must not grow after SIGCONT, and none of
 * them may have been created after the new epoch began. Across the whole run no epoch is
 * announced by two nodes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "gen"
#define POLL_SLACK_MS 150

TestSuite(cluster_pause, .fini = cluster_cleanup_all, .timeout = 120);

static int64_t count_epoch(cluster_t *c, int64_t epoch)
{
    char filter[64];
    snprintf(filter, sizeof filter, "{\"epoch\": %lld}", (long long)epoch);
    int64_t n = cluster_try_count(c, SERVICE, filter);
    cluster_assert(c, n >= 0, "cannot count the tasks of epoch %lld", (long long)epoch);
    return n;
}

/* Tasks of `epoch` created (by the creator's cluster clock) at or after `since_ms`. */
static int64_t count_epoch_since(cluster_t *c, int64_t epoch, int64_t since_ms)
{
    char filter[160];
    snprintf(filter, sizeof filter,
             "{\"epoch\": %lld, \"created_at\": {\"$gte\": {\"$date\": {\"$numberLong\": "
             "\"%lld\"}}}}",
             (long long)epoch, (long long)since_ms);
    int64_t n = cluster_try_count(c, SERVICE, filter);
    cluster_assert(c, n >= 0, "cannot count the late tasks of epoch %lld", (long long)epoch);
    return n;
}

static void sleep_until(int64_t when_ms)
{
    int64_t now = test_now_ms();
    if (when_ms > now)
        test_sleep_ms(when_ms - now);
}

Test(cluster_pause, stopped_primary_is_fenced_after_takeover)
{
    cluster_options_t options = {
        .tag = "pause",
        .services = {{.name = SERVICE, .settings = "generate_per_tick = 2"}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t old;
    cluster_start_elected(c, 3, SERVICE, 5000, &old);
    cluster_node_t *victim = cluster_node_by_id(c, old.primary);
    cluster_assert(c, victim != NULL, "primary '%s' is not one of our nodes", old.primary);
    /* The primary is generating under its epoch. */
    int64_t deadline = test_now_ms() + 5000;
    while (count_epoch(c, old.epoch) < 6 && test_now_ms() < deadline)
        test_sleep_ms(20);
    cluster_assert(c, count_epoch(c, old.epoch) >= 6,
                   "primary %s created fewer than 6 tasks under epoch %lld in 5 s", old.primary,
                   (long long)old.epoch);

    /* Freeze it at a random point of its tick, sometimes inside primary_work. */
    srand((unsigned)getpid() ^ (unsigned)test_now_ms());
    test_sleep_ms(rand() % c->tick_ms);
    int64_t paused_at = test_now_ms();
    cluster_node_pause(victim);
    cluster_takeover_t t;
    int64_t bound = c->takeover_ms + 2 * c->tick_ms;
    bool taken = cluster_wait_takeover(c, SERVICE, old.primary, paused_at, bound + 10000, &t);
    cluster_assert(c, taken, "no takeover while %s was stopped", old.primary);
    int64_t old_tasks = count_epoch(c, old.epoch);
    fprintf(stderr,
            "pause: %s (epoch %lld) stopped; %s took over with epoch %lld after %lld ms; "
            "%lld tasks of epoch %lld\n",
            old.primary, (long long)old.epoch, t.after.primary, (long long)t.after.epoch,
            (long long)t.elapsed_ms, (long long)old_tasks, (long long)old.epoch);
    cluster_assert(c, t.after.epoch > old.epoch, "new epoch %lld is not above the old %lld",
                   (long long)t.after.epoch, (long long)old.epoch);
    cluster_assert(c, t.elapsed_ms <= bound + POLL_SLACK_MS,
                   "takeover took %lld ms, more than takeover_ms + 2 ticks = %lld ms (+%d)",
                   (long long)t.elapsed_ms, (long long)bound, POLL_SLACK_MS);

    /* Keep it frozen well past the takeover, then let it run. */
    sleep_until(paused_at + c->takeover_ms * 5 / 2);
    int64_t resumed_at = test_now_ms();
    cluster_node_resume(victim);

    char lost[64];
    snprintf(lost, sizeof lost, "lost primacy of epoch %lld", (long long)old.epoch);
    cluster_assert(c, cluster_wait_log(victim, lost, NULL, 5000),
                   "%s resumed but did not log '%s' within 5 s", victim->id, lost);
    sleep_until(resumed_at + 1000);

    int64_t old_tasks_after = count_epoch(c, old.epoch);
    int64_t late = count_epoch_since(c, old.epoch, t.after.elected_at_ms);
    fprintf(stderr,
            "pause: %lld tasks of epoch %lld 1 s after SIGCONT; %lld created after "
            "epoch %lld began\n",
            (long long)old_tasks_after, (long long)old.epoch, (long long)late,
            (long long)t.after.epoch);
    cluster_assert(c, old_tasks_after == old_tasks,
                   "%s created %lld task(s) under its old epoch %lld after losing primacy",
                   victim->id, (long long)(old_tasks_after - old_tasks), (long long)old.epoch);
    cluster_assert(c, late == 0, "%lld task(s) of epoch %lld were created after epoch %lld began",
                   (long long)late, (long long)old.epoch, (long long)t.after.epoch);

    /* The new primary kept its primacy and works under its own epoch. */
    cluster_primacy_t now;
    cluster_assert(c, cluster_read_primacy(c, SERVICE, &now), "cannot read primacy");
    cluster_assert(c, strcmp(now.primary, t.after.primary) == 0 && now.epoch == t.after.epoch,
                   "after SIGCONT the primary is %s (epoch %lld), expected %s (epoch %lld)",
                   now.primary, (long long)now.epoch, t.after.primary, (long long)t.after.epoch);
    cluster_assert(c, count_epoch(c, t.after.epoch) > 0, "%s created no tasks under epoch %lld",
                   t.after.primary, (long long)t.after.epoch);

    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
