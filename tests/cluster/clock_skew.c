/*
 * clock_skew.c - nodes whose wall clocks are 5 minutes ahead and 5 minutes behind
 * (COHORT_TEST_CLOCK_SKEW_MS) never cause a second primary: over a few seconds of close
 * sampling each service keeps one primary and one epoch, each skewed node warns about its
 * clock, and a kill -9 of a primary still leads to exactly one takeover (epoch + 1) within
 * takeover_ms + 2 ticks.
 *
 * The node 5 minutes ahead starts first so it usually wins the first election: a primary
 * whose clock is off is the interesting case, since a node trusting its own clock would
 * then make last_active look stale (or fresh) to the others.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define SKEW_MS 300000
#define SAMPLE_MS 5000
#define SAMPLE_EVERY_MS 25
#define POLL_SLACK_MS 150

static const char *const services[] = {"svc_a", "svc_b"};

TestSuite(cluster_clock_skew, .fini = cluster_cleanup_all, .timeout = 120);

/* Samples both services for `duration_ms`: the primary and epoch never change from
 * `expected`. Returns the number of samples. */
static int sample_stable(cluster_t *c, const cluster_primacy_t expected[2], int64_t duration_ms)
{
    int64_t end = test_now_ms() + duration_ms;
    int samples = 0;
    while (test_now_ms() < end) {
        for (size_t s = 0; s < 2; s++) {
            cluster_primacy_t now;
            cluster_assert(c, cluster_read_primacy(c, services[s], &now),
                           "cannot read the services document of %s", services[s]);
            cluster_assert(
                c, strcmp(now.primary, expected[s].primary) == 0 && now.epoch == expected[s].epoch,
                "%s: primary %s epoch %lld became '%s' epoch %lld after %d samples", services[s],
                expected[s].primary, (long long)expected[s].epoch, now.primary,
                (long long)now.epoch, samples);
        }
        samples++;
        test_sleep_ms(SAMPLE_EVERY_MS);
    }
    return samples;
}

/* The node logs "clock is N ms <direction>" with N within 10 s of the skew. */
static void check_clock_warning(cluster_t *c, cluster_node_t *n, const char *direction)
{
    cluster_assert(c, cluster_wait_log(n, "clock is ", direction, 5000),
                   "%s does not warn that its clock is %s the server's", n->id, direction);
    char *line = cluster_log_find(n, "clock is ", direction);
    long long reported = strtoll(strstr(line, "clock is ") + strlen("clock is "), NULL, 10);
    cluster_assert(c, llabs(reported - SKEW_MS) < 10000, "%s reports a skew of %lld ms: %s", n->id,
                   reported, line);
    free(line);
}

Test(cluster_clock_skew, skewed_clocks_never_cause_a_second_primary)
{
    cluster_options_t options = {
        .tag = "clockskew",
        .services = {{.name = "svc_a"}, {.name = "svc_b"}},
    };
    cluster_t *c = cluster_new(&options);
    const char *ahead_env[] = {"COHORT_TEST_CLOCK_SKEW_MS=+300000", NULL};
    const char *behind_env[] = {"COHORT_TEST_CLOCK_SKEW_MS=-300000", NULL};
    cluster_node_t *ahead = cluster_add_node(c, ahead_env);
    cluster_node_t *behind = cluster_add_node(c, behind_env);
    cluster_node_t *plain = cluster_add_node(c, NULL);
    cluster_node_start(ahead);
    cluster_assert(c, cluster_wait_registered(c, 20000), "n1 did not register in 20 s");
    cluster_node_start(behind);
    cluster_node_start(plain);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");

    cluster_primacy_t first[2];
    for (size_t s = 0; s < 2; s++)
        cluster_assert(c, cluster_wait_primary(c, services[s], NULL, 5000, &first[s]),
                       "%s has no primary", services[s]);
    fprintf(stderr, "clock_skew: primaries %s (svc_a, epoch %lld), %s (svc_b, epoch %lld)\n",
            first[0].primary, (long long)first[0].epoch, first[1].primary,
            (long long)first[1].epoch);

    int samples = sample_stable(c, first, SAMPLE_MS);
    cr_assert_geq(samples, 20, "only %d samples in %d ms: the machine is too slow to judge",
                  samples, SAMPLE_MS);
    check_clock_warning(c, ahead, "ms ahead of");
    check_clock_warning(c, behind, "ms behind");
    cluster_assert(c, cluster_log_count(plain, "clock is ", NULL) == 0,
                   "%s warns about its clock although it is not skewed", plain->id);
    for (size_t s = 0; s < 2; s++) {
        char why[160];
        cluster_assert(c, cluster_epochs_unique(c, services[s], why, sizeof why), "%s: %s",
                       services[s], why);
    }

    /* Kill svc_a's primary: one takeover, within the bound, epoch + 1, for each service it
     * led. */
    cluster_node_t *victim = cluster_node_by_id(c, first[0].primary);
    cluster_assert(c, victim != NULL, "primary '%s' is not one of our nodes", first[0].primary);
    int64_t killed_at = test_now_ms();
    cluster_node_kill(victim);
    int64_t bound = c->takeover_ms + 2 * c->tick_ms;
    cluster_primacy_t after[2];
    for (size_t s = 0; s < 2; s++) {
        if (strcmp(first[s].primary, victim->id) != 0) {
            after[s] = first[s];
            continue;
        }
        cluster_takeover_t t;
        cluster_assert(
            c, cluster_wait_takeover(c, services[s], victim->id, killed_at, bound + 10000, &t),
            "%s: no takeover after killing %s", services[s], victim->id);
        fprintf(stderr, "clock_skew: %s: %s took over from %s after %lld ms (bound %lld)\n",
                services[s], t.after.primary, victim->id, (long long)t.elapsed_ms,
                (long long)bound);
        cluster_assert(c, t.elapsed_ms <= bound + POLL_SLACK_MS,
                       "%s: takeover took %lld ms, more than %lld ms (+%d)", services[s],
                       (long long)t.elapsed_ms, (long long)bound, POLL_SLACK_MS);
        int64_t quiet_ms = t.after.elected_at_ms - t.before.last_active_ms;
        cluster_assert(c, quiet_ms >= c->takeover_ms - c->takeover_ms / 4,
                       "%s: %s took over only %lld ms (server time) after the last renewal",
                       services[s], t.after.primary, (long long)quiet_ms);
        cluster_assert(c, t.after.epoch == first[s].epoch + 1,
                       "%s: epoch went from %lld to %lld in one takeover", services[s],
                       (long long)first[s].epoch, (long long)t.after.epoch);
        after[s] = t.after;
    }
    /* Only once: a few more ticks change nothing. */
    sample_stable(c, after, 5 * c->tick_ms);
    for (size_t s = 0; s < 2; s++) {
        char why[160];
        cluster_assert(c, cluster_epochs_unique(c, services[s], why, sizeof why), "%s: %s",
                       services[s], why);
    }
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].pid > 0)
            cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
