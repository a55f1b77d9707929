/*
 * election.c - three cohortd nodes hosting two services elect one primary per service
 * within a few ticks, and keep it: no flapping, no second "became primary", no epoch change.
 *
 * Primacy is per service: one node may lead both; each service is checked on its own.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "support.h"

#define N_NODES 3
#define SAMPLE_MS 3000
#define SAMPLE_EVERY_MS 50

static const char *const services[] = {"svc_a", "svc_b"};

TestSuite(cluster_election, .fini = cluster_cleanup_all, .timeout = 120);

/* Only the primary's log announces primacy of the service, exactly once. */
static void check_announcements(cluster_t *c, const char *service, const char *primary)
{
    char tag[64];
    snprintf(tag, sizeof tag, " service=%s ", service);
    for (size_t i = 0; i < c->n_nodes; i++) {
        cluster_node_t *n = &c->nodes[i];
        int announced = cluster_log_count(n, tag, "became primary");
        int expected = strcmp(n->id, primary) == 0 ? 1 : 0;
        cluster_assert(c, announced == expected,
                       "%s: node %s logged 'became primary' %d time(s), expected %d (primary "
                       "in the db: %s)",
                       service, n->id, announced, expected, primary);
    }
    char why[160];
    cluster_assert(c, cluster_epochs_unique(c, service, why, sizeof why), "%s: %s", service, why);
}

Test(cluster_election, one_stable_primary_per_service)
{
    cluster_options_t options = {
        .tag = "election",
        .services = {{.name = "svc_a"}, {.name = "svc_b"}},
    };
    cluster_t *c = cluster_new(&options);
    int64_t spawned = test_now_ms();
    cluster_start_nodes(c, N_NODES);
    cluster_assert(c, cluster_wait_registered(c, 20000),
                   "the nodes did not all register within 20 s");
    int64_t registered = test_now_ms();
    /* Each node says which handler it loaded, from where, under which ABI. */
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_assert(c,
                       cluster_log_count(&c->nodes[i], "handler 'noop' loaded from ",
                                         "cohort_noop.so (ABI version ") == 2,
                       "%s did not log loading the noop handler for both services",
                       c->nodes[i].id);

    /* A node tries to take primacy right after its first ping, so once all nodes are
     * registered a primary is at most a few ticks away. */
    cluster_primacy_t first[2];
    for (size_t s = 0; s < 2; s++) {
        bool elected = cluster_wait_primary(c, services[s], NULL, 3 * c->tick_ms, &first[s]);
        cluster_assert(c, elected, "%s has no primary %lld ms after all nodes registered",
                       services[s], (long long)(test_now_ms() - registered));
        cluster_assert(c, first[s].epoch >= 1, "%s: primary %s with epoch %lld", services[s],
                       first[s].primary, (long long)first[s].epoch);
        cluster_assert(c, cluster_node_by_id(c, first[s].primary) != NULL,
                       "%s: primary '%s' is not one of our nodes", services[s], first[s].primary);
    }
    fprintf(stderr,
            "election: primaries %s (svc_a, epoch %lld) and %s (svc_b, epoch %lld), %lld ms "
            "after spawning, %lld ms after all registered\n",
            first[0].primary, (long long)first[0].epoch, first[1].primary,
            (long long)first[1].epoch, (long long)(test_now_ms() - spawned),
            (long long)(test_now_ms() - registered));

    /* No flapping: the same primary and epoch at every sample. */
    int64_t end = test_now_ms() + SAMPLE_MS;
    int samples = 0;
    while (test_now_ms() < end) {
        for (size_t s = 0; s < 2; s++) {
            cluster_primacy_t now;
            cluster_assert(c, cluster_read_primacy(c, services[s], &now),
                           "cannot read the services document of %s", services[s]);
            cluster_assert(c, strcmp(now.primary, first[s].primary) == 0,
                           "%s: primary changed from %s to '%s' after %d samples", services[s],
                           first[s].primary, now.primary, samples);
            cluster_assert(c, now.epoch == first[s].epoch,
                           "%s: epoch changed from %lld to %lld after %d samples", services[s],
                           (long long)first[s].epoch, (long long)now.epoch, samples);
        }
        samples++;
        test_sleep_ms(SAMPLE_EVERY_MS);
    }
    cr_assert_geq(samples, 10, "only %d samples in %d ms: the machine is too slow to judge",
                  samples, SAMPLE_MS);

    for (size_t s = 0; s < 2; s++)
        check_announcements(c, services[s], first[s].primary);
    for (size_t i = 0; i < c->n_nodes; i++)
        cluster_node_stop_ok(&c->nodes[i], c->shutdown_grace_ms + 5000);
}
