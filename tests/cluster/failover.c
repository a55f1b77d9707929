/*
 * failover.c - kill -9 a service's primary: another node takes over within
 * takeover_ms + 2 * tick_ms, under a strictly higher epoch, and not before the dead
 * primary's last renewal is takeover_ms old on the server's clock.
 *
 * Why takeover_ms + 2 ticks: the dead primary renewed last_active at most one tick before the
 * kill, the others may take over once it is takeover_ms old, and they look once per tick.
 * The time is measured from the kill to the first database read showing the new primary, so
 * it also carries up to one poll interval (20 ms) plus one read; POLL_SLACK_MS allows for
 * that and for scheduling noise on a loaded 2-core machine.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SERVICE "noop"
#define POLL_SLACK_MS 150

TestSuite(cluster_failover, .fini = cluster_cleanup_all, .timeout = 120);

Test(cluster_failover, kill_9_primary_is_replaced_within_the_bound)
{
    cluster_options_t options = {
        .tag = "failover",
        .services = {{.name = SERVICE}},
    };
    cluster_t *c = cluster_new(&options);
    cluster_primacy_t old;
    cluster_start_elected(c, 3, SERVICE, 5000, &old);
    /* Let the primary renew a few times, so the kill lands in its steady state. */
    int64_t elected = old.last_active_ms;
    int64_t settle_deadline = test_now_ms() + 10 * c->tick_ms;
    while (old.last_active_ms < elected + 2 * c->tick_ms && test_now_ms() < settle_deadline) {
        test_sleep_ms(20);
        cluster_assert(c, cluster_read_primacy(c, SERVICE, &old), "cannot read primacy");
    }
    cluster_node_t *victim = cluster_node_by_id(c, old.primary);
    cluster_assert(c, victim != NULL, "primary '%s' is not one of our nodes", old.primary);

    int64_t killed_at = test_now_ms();
    cluster_node_kill(victim);

    int64_t bound = c->takeover_ms + 2 * c->tick_ms;
    cluster_takeover_t t;
    bool taken = cluster_wait_takeover(c, SERVICE, old.primary, killed_at, bound + 10000, &t);
    cluster_assert(c, taken, "no takeover within %lld ms of killing %s", (long long)(bound + 10000),
                   old.primary);
    int64_t quiet_ms = t.after.elected_at_ms - t.before.last_active_ms;
    fprintf(stderr,
            "failover: %s (epoch %lld) killed; %s took over with epoch %lld after %lld ms "
            "(bound %lld + %d ms poll slack); on the server clock %lld ms after the last "
            "renewal\n",
            old.primary, (long long)old.epoch, t.after.primary, (long long)t.after.epoch,
            (long long)t.elapsed_ms, (long long)bound, POLL_SLACK_MS, (long long)quiet_ms);

    cluster_assert(c, t.after.epoch > old.epoch, "new epoch %lld is not above the old %lld",
                   (long long)t.after.epoch, (long long)old.epoch);
    cluster_assert(c, t.elapsed_ms <= bound + POLL_SLACK_MS,
                   "takeover took %lld ms, more than takeover_ms + 2 ticks = %lld ms (+%d)",
                   (long long)t.elapsed_ms, (long long)bound, POLL_SLACK_MS);
    /* Not too early either: the takeover's cutoff is on the cluster clock, whose error is
     * kept below the election guard (takeover_ms / 4). */
    cluster_assert(c, quiet_ms >= c->takeover_ms - c->takeover_ms / 4,
                   "%s took over only %lld ms (server time) after %s last renewed", t.after.primary,
                   (long long)quiet_ms, old.primary);

    cluster_node_t *heir = cluster_node_by_id(c, t.after.primary);
    cluster_assert(c, heir != NULL, "new primary '%s' is not one of our nodes", t.after.primary);
    cluster_assert(c, cluster_wait_log(heir, "became primary", NULL, 2000),
                   "%s does not log 'became primary'", heir->id);
    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, SERVICE, why, sizeof why), "%s", why);

    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
