/*
 * clock_skew.c - nodes whose wall clocks are 5 minutes ahead and 5 minutes behind
 * (COHORT_TEST_CLOCK_SKEW_MS) never cause a second primary: over a few seconds of close
 * sampling each service keeps one primary and one epoch, each skewed node warns about its
 * clock, and a kill -9 of a primary still leads to exactly one takeover (epoch + 1) within
 * takeover_ms + 2 ticks. A node restarted with a skewed clock stamps the release of its
 * earlier run's claims on the cluster clock, even when its first clock samples are unusable.
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
#include "delay_proxy.h"
#include "http_client.h"
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

/* Reads the `at` of the last history entry of task `id` (0 if none). */
static int64_t last_history_at(cluster_t *c, const char *service, const char *id, char *event,
                               size_t event_len)
{
    bson_t doc;
    cluster_assert(c, cluster_read_task(c, service, id, &doc), "task %s is gone", id);
    bson_iter_t it, history, entry;
    int64_t at = 0;
    event[0] = '\0';
    if (bson_iter_init_find(&it, &doc, "history") && bson_iter_recurse(&it, &history))
        while (bson_iter_next(&history))
            if (BSON_ITER_HOLDS_DOCUMENT(&history) && bson_iter_recurse(&history, &entry))
                while (bson_iter_next(&entry)) {
                    if (strcmp(bson_iter_key(&entry), "at") == 0 &&
                        BSON_ITER_HOLDS_DATE_TIME(&entry))
                        at = bson_iter_date_time(&entry);
                    else if (strcmp(bson_iter_key(&entry), "event") == 0 &&
                             BSON_ITER_HOLDS_UTF8(&entry))
                        snprintf(event, event_len, "%s", bson_iter_utf8(&entry, NULL));
                }
    bson_destroy(&doc);
    return at;
}

/*
 * A node restarted with a clock 5 minutes ahead releases the claims of its earlier run
 * (issue 22, the chaos harness's [4 clock]): the history entry of the release is stamped on
 * the cluster clock, not on the node's own. Its first clock samples are too slow to be used
 * (its database replies are held back by a proxy, past takeover_ms/8), so it must wait for
 * one that is: before the fix it released at once, at its own wall clock's time.
 */
Test(cluster_clock_skew, a_restarted_node_stamps_its_releases_on_the_cluster_clock)
{
    cluster_options_t options = {
        .tag = "clockrelease",
        .services = {{.name = "svc_a"}},
    };
    cluster_t *c = cluster_new(&options);
    /* A claim of an earlier run of n1 (killed): claimed, its check-in fresh. */
    char id[25];
    cluster_enqueue(c, "svc_a", NULL, NULL, id);
    mongoc_collection_t *queue = mongoc_client_get_collection(c->client, c->db, "queue_svc_a");
    bson_oid_t oid;
    bson_oid_init_from_string(&oid, id);
    int64_t now = cluster_server_ms(c);
    bson_t *filter = BCON_NEW("_id", BCON_OID(&oid));
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8("claimed"), "claimed_by",
                              BCON_UTF8("n1"), "attempts", BCON_INT32(1), "claimed_at",
                              BCON_DATE_TIME(now), "heartbeat_at", BCON_DATE_TIME(now), "}");
    bson_error_t error;
    bool ok = mongoc_collection_update_one(queue, filter, update, NULL, NULL, &error);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(queue);
    cluster_assert(c, ok, "cannot claim the task for n1: %s", error.message);

    char uri_env[128];
    delay_proxy_t *proxy = delay_proxy_in_front_of(c->uri, uri_env, sizeof uri_env);
    delay_proxy_set_reply_delay(proxy, c->takeover_ms / 8 + 200);
    const char *env[] = {uri_env, "COHORT_TEST_CLOCK_SKEW_MS=+300000", NULL};
    cluster_node_t *n = cluster_add_node(c, env);
    cluster_node_start(n);
    cluster_assert(c, cluster_wait_log(n, "clock sample ignored", NULL, 20000),
                   "n1 never pinged through the slow proxy");
    test_sleep_ms(1000);
    delay_proxy_set_reply_delay(proxy, 0);
    cluster_assert(c, cluster_wait_log(n, "released 1 task(s)", NULL, 20000),
                   "n1 never released its earlier run's claim");
    char event[32];
    int64_t at = last_history_at(c, "svc_a", id, event, sizeof event);
    int64_t server = cluster_server_ms(c);
    fprintf(stderr, "clock_skew: release stamped %lld ms from the server's clock\n",
            (long long)(at - server));
    cluster_assert(c, strcmp(event, "crashed") == 0, "the last history entry is '%s'", event);
    cluster_assert(c, llabs(at - server) < 30000,
                   "n1 (clock 5 minutes ahead) stamped the release %lld ms from the server's "
                   "clock: its own wall clock, not the cluster clock",
                   (long long)(at - server));
    cluster_node_stop_ok(n, 15000);
    delay_proxy_stop(proxy);
}

/*
 * The same node's HTTP API before its cluster clock is measured: a task enqueued through it
 * would be due at the node's own "now", 5 minutes late. It answers writes 503 until the clock
 * is measured; then the task it takes is due now on the server's clock.
 */
Test(cluster_clock_skew, the_api_writes_nothing_before_the_cluster_clock_is_measured)
{
    cluster_options_t options = {
        .tag = "clockapi",
        .services = {{.name = "svc_a"}},
    };
    cluster_t *c = cluster_new(&options);
    char uri_env[128];
    delay_proxy_t *proxy = delay_proxy_in_front_of(c->uri, uri_env, sizeof uri_env);
    delay_proxy_set_reply_delay(proxy, c->takeover_ms / 8 + 200);
    const char *env[] = {uri_env, "COHORT_TEST_CLOCK_SKEW_MS=+300000", NULL};
    /* The service exists (another node ran it): n1 is the one to enqueue through. */
    const char *enqueue[] = {"enqueue", "svc_a", "--create", NULL};
    cluster_assert(c, cluster_run_ctl(c, enqueue) == 0, "cohortctl enqueue failed");
    cluster_node_t *n = cluster_add_node(c, env);
    int port = cluster_node_listen(n, NULL);
    cluster_node_start(n);
    char *auth = cluster_api_auth(c, "all", "enqueue,read");
    cluster_assert(c, cluster_wait_log(n, "clock sample ignored", NULL, 20000),
                   "n1 never pinged through the slow proxy");

    http_response_t r;
    cluster_assert(c, http_request_with(port, "POST", "/api/v1/services/svc_a/tasks", auth,
                                        "{\"data\": {}}", 10000, &r),
                   "no answer to an enqueue");
    int before = r.status;
    char body[512];
    snprintf(body, sizeof body, "%s", r.body ? r.body : "");
    http_response_free(&r);
    int64_t written = cluster_try_count(c, "svc_a", "{}") - 1;
    cluster_assert(c, before == 503 && written == 0,
                   "before its clock was measured n1 answered an enqueue %d %s (%lld task(s) "
                   "written, due on its own clock)",
                   before, body, (long long)written);

    delay_proxy_set_reply_delay(proxy, 0);
    int64_t deadline = test_now_ms() + 20000;
    int status = 0;
    while (status != 201 && test_now_ms() < deadline) {
        test_sleep_ms(200);
        if (http_request_with(port, "POST", "/api/v1/services/svc_a/tasks", auth,
                              "{\"data\": {}}", 10000, &r)) {
            status = r.status;
            http_response_free(&r);
        }
    }
    cluster_assert(c, status == 201, "n1 never took an enqueue once its clock could be measured");
    char filter[128];
    snprintf(filter, sizeof filter, "{\"run_at\": {\"$gt\": {\"$date\": %lld}}}",
             (long long)(cluster_server_ms(c) + 30000));
    cluster_assert(c, cluster_try_count(c, "svc_a", filter) == 0,
                   "a task enqueued through n1 is due more than 30 s from now");
    cluster_node_stop_ok(n, 15000);
    delay_proxy_stop(proxy);
    free(auth);
}
