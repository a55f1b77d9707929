/*
 * metrics.c - the Prometheus exposition of a node's metrics, rendered from a fake set of
 * services (no database): every family is well-formed (the tests' strict parser, and
 * promtool when installed), counters come from the services' stats, the duration histogram
 * is cumulative with _count equal to +Inf, observations from many threads are all counted,
 * the queue gauge is shown only by a primary and only from its own epoch, and label values
 * are escaped. The strict parser is checked too: it must reject broken texts.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <mongoc/mongoc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "node/http/metrics.h"
#include "prometheus.h"
#include "node/service.h"
#include "store/store.h"

typedef struct fixture {
    cohort_service_t *services[2];
    cohort_store_t *store;
} fixture_t;

static fixture_t fx;

static cohort_service_t *fake_service(const char *name)
{
    cohort_service_t *s = calloc(1, sizeof *s);
    cohort_service_config_t *config = calloc(1, sizeof *config);
    cr_assert(s && config, "out of memory");
    config->name = strdup(name);
    s->config = config;
    s->node_id = "unit-node";
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    cohort_election_init(&s->election, config->name, s->node_id, 10000);
    return s;
}

static void free_service(cohort_service_t *s)
{
    cohort_election_destroy(&s->election);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    free(((cohort_service_config_t *)s->config)->name);
    free((cohort_service_config_t *)s->config);
    free(s);
}

/* Makes the service's election hold a lease under `epoch` for a minute. */
static void make_primary(cohort_service_t *s, int64_t epoch)
{
    s->election.primary = true;
    atomic_store(&s->election.epoch, epoch);
    atomic_store(&s->election.lease_until_ms, cohort_clock_monotonic_ms() + 60000);
}

static void setup(void)
{
    mongoc_init();
    bson_error_t error;
    /* Never connected: libmongoc connects on first use, and nothing here uses it. */
    fx.store = cohort_store_new("mongodb://127.0.0.1:9/", "unit", "unit", &error);
    cr_assert_not_null(fx.store, "%s", error.message);
    fx.services[0] = fake_service("alpha");
    fx.services[1] = fake_service("beta-2");
}

static void teardown(void)
{
    for (int i = 0; i < 2; i++)
        free_service(fx.services[i]);
    cohort_store_destroy(fx.store);
    mongoc_cleanup();
}

static char *render(const char *version, size_t n_services)
{
    cohort_metrics_source_t source = {.services = fx.services,
                                      .n_services = n_services,
                                      .store = fx.store,
                                      .started_at_ms = 1700000000123,
                                      .version = version};
    size_t len = 0;
    char *text = cohort_metrics_render(&source, &len);
    cr_assert_not_null(text, "render failed");
    cr_assert_eq(len, strlen(text));
    return text;
}

TestSuite(metrics, .init = setup, .fini = teardown);

Test(metrics, counters_come_from_the_service_stats)
{
    cohort_service_stats_t *st = &fx.services[0]->stats;
    atomic_store(&st->claimed, 50);
    atomic_store(&st->succeeded, 40);
    atomic_store(&st->failed, 3);
    atomic_store(&st->retried, 7);
    atomic_store(&st->stalled_reset, 2);
    atomic_store(&st->purged, 1000);
    atomic_store(&st->batches_completed, 4);
    atomic_store(&st->lost_claims, 1);
    atomic_store(&st->ext_claimed, 11);
    atomic_store(&st->ext_succeeded, 8);
    atomic_store(&st->ext_failed, 1);
    atomic_store(&st->ext_retried, 2);
    atomic_store(&st->ext_released, 3);
    atomic_store(&st->ext_lost, 4);
    atomic_store(&st->leases_expired, 6);
    atomic_store(&fx.services[0]->election.leader_changes, 5);
    atomic_store(&fx.services[1]->stats.claimed, 9);

    char *text = render("0.1.0", 2);
    prom_text_t m;
    prom_assert_valid(text, "the metrics", &m);
    static const struct {
        const char *series;
        double value;
    } expected[] = {
        {"cohort_tasks_claimed_total{service=\"alpha\"}", 50},
        {"cohort_tasks_succeeded_total{service=\"alpha\"}", 40},
        {"cohort_tasks_failed_total{service=\"alpha\"}", 3},
        {"cohort_tasks_retried_total{service=\"alpha\"}", 7},
        {"cohort_tasks_reset_total{service=\"alpha\"}", 2},
        {"cohort_tasks_purged_total{service=\"alpha\"}", 1000},
        {"cohort_batches_completed_total{service=\"alpha\"}", 4},
        {"cohort_claims_lost_total{service=\"alpha\"}", 1},
        {"cohort_leader_changes_total{service=\"alpha\"}", 5},
        {"cohort_external_claimed_total{service=\"alpha\"}", 11},
        {"cohort_external_succeeded_total{service=\"alpha\"}", 8},
        {"cohort_external_failed_total{service=\"alpha\"}", 1},
        {"cohort_external_retried_total{service=\"alpha\"}", 2},
        {"cohort_external_released_total{service=\"alpha\"}", 3},
        {"cohort_external_lost_total{service=\"alpha\"}", 4},
        {"cohort_leases_expired_total{service=\"alpha\"}", 6},
        {"cohort_external_claimed_total{service=\"beta-2\"}", 0},
        {"cohort_tasks_claimed_total{service=\"beta-2\"}", 9},
        {"cohort_tasks_succeeded_total{service=\"beta-2\"}", 0},
        {"cohort_db_commands_total", 0},
        {"cohort_db_command_errors_total", 0},
        {"cohort_node_start_time_seconds", 1700000000.123},
        {"cohort_build_info{version=\"0.1.0\"}", 1},
        {"cohort_tasks_running{service=\"alpha\"}", 0},
        {"cohort_tasks_timed_out_total{service=\"alpha\"}", 0},
        {"cohort_worker_slots_wedged{service=\"alpha\"}", 0},
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        double value;
        cr_assert(prom_get(&m, expected[i].series, &value), "%s is missing:\n%s",
                  expected[i].series, text);
        cr_assert_float_eq(value, expected[i].value, 1e-6, "%s = %g, want %g", expected[i].series,
                           value, expected[i].value);
    }
    static const char *const counters[] = {
        "cohort_tasks_claimed_total",     "cohort_tasks_succeeded_total",
        "cohort_tasks_failed_total",      "cohort_tasks_retried_total",
        "cohort_tasks_reset_total",       "cohort_tasks_purged_total",
        "cohort_batches_completed_total", "cohort_claims_lost_total",
        "cohort_leader_changes_total",    "cohort_db_commands_total",
        "cohort_tasks_timed_out_total",
        "cohort_db_command_errors_total", "cohort_external_claimed_total",
        "cohort_external_lost_total",     "cohort_leases_expired_total"};
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        cr_assert_str_eq(prom_type(&m, counters[i]), "counter", "%s", counters[i]);
    cr_assert_str_eq(prom_type(&m, "cohort_task_duration_seconds"), "histogram");
    cr_assert_str_eq(prom_type(&m, "cohort_primary"), "gauge");
    cr_assert_str_eq(prom_type(&m, "cohort_epoch"), "gauge");
    cr_assert_str_eq(prom_type(&m, "cohort_queue_tasks"), "gauge");
    cr_assert_str_eq(prom_type(&m, "cohort_worker_slots_wedged"), "gauge");
    cr_assert_str_eq(prom_type(&m, "cohort_node_start_time_seconds"), "gauge");
    cr_assert_str_eq(prom_type(&m, "cohort_build_info"), "gauge");
    prom_free(&m);
    free(text);
}

Test(metrics, histogram_buckets_are_cumulative_with_inclusive_bounds)
{
    cohort_histogram_t *h = &fx.services[0]->stats.task_duration;
    cohort_histogram_observe(h, -5);       /* a clock step: counts as 0 */
    cohort_histogram_observe(h, 0);        /* le 0.001 */
    cohort_histogram_observe(h, 1000);     /* exactly 1 ms: le 0.001 (bounds are inclusive) */
    cohort_histogram_observe(h, 1001);     /* le 0.005 */
    cohort_histogram_observe(h, 2000000);  /* 2 s: le 5 */
    cohort_histogram_observe(h, 61000000); /* 61 s: only +Inf */

    char *text = render("0.1.0", 2);
    prom_text_t m;
    prom_assert_valid(text, "the metrics", &m);
    static const struct {
        const char *le;
        double count;
    } buckets[] = {{"0.001", 3}, {"0.005", 4}, {"0.01", 4}, {"0.05", 4}, {"0.1", 4}, {"0.5", 4},
                   {"1", 4},     {"5", 5},     {"10", 5},   {"60", 5},   {"+Inf", 6}};
    for (size_t i = 0; i < sizeof buckets / sizeof buckets[0]; i++) {
        char series[160];
        snprintf(series, sizeof series,
                 "cohort_task_duration_seconds_bucket{le=\"%s\",service=\"alpha\"}", buckets[i].le);
        cr_assert_float_eq(prom_value(&m, series), buckets[i].count, 1e-9, "%s\n%s", series, text);
    }
    cr_assert_float_eq(prom_value(&m, "cohort_task_duration_seconds_count{service=\"alpha\"}"), 6,
                       1e-9);
    cr_assert_float_eq(prom_value(&m, "cohort_task_duration_seconds_sum{service=\"alpha\"}"),
                       63.002001, 1e-9);
    /* The other service's histogram is there, empty. */
    cr_assert_float_eq(prom_value(&m, "cohort_task_duration_seconds_count{service=\"beta-2\"}"), 0,
                       1e-9);
    cr_assert_eq(prom_count(&m, "cohort_task_duration_seconds_bucket"), 22);
    prom_free(&m);
    free(text);
}

#define OBSERVERS 4
#define OBSERVATIONS 20000

static void *observe_many(void *arg)
{
    cohort_histogram_t *h = arg;
    for (int i = 0; i < OBSERVATIONS; i++)
        cohort_histogram_observe(h, (i % 3) * 4000); /* 0, 4 ms, 8 ms */
    return NULL;
}

Test(metrics, observations_from_many_threads_are_all_counted)
{
    cohort_histogram_t *h = &fx.services[1]->stats.task_duration;
    pthread_t threads[OBSERVERS];
    for (int i = 0; i < OBSERVERS; i++)
        cr_assert_eq(pthread_create(&threads[i], NULL, observe_many, h), 0);
    for (int i = 0; i < OBSERVERS; i++)
        pthread_join(threads[i], NULL);

    char *text = render("0.1.0", 2);
    prom_text_t m;
    prom_assert_valid(text, "the metrics", &m);
    double total = OBSERVERS * OBSERVATIONS;
    cr_assert_float_eq(prom_value(&m, "cohort_task_duration_seconds_count{service=\"beta-2\"}"),
                       total, 1e-9);
    /* A third of the observations at each of 0, 4 and 8 ms (20000 = 3 * 6666 + 2). */
    double per_thread_us = 6667.0 * 0 + 6667.0 * 4000 + 6666.0 * 8000;
    cr_assert_float_eq(prom_value(&m, "cohort_task_duration_seconds_sum{service=\"beta-2\"}"),
                       OBSERVERS * per_thread_us / 1e6, 1e-6);
    cr_assert_float_eq(
        prom_value(&m, "cohort_task_duration_seconds_bucket{le=\"0.001\",service=\"beta-2\"}"),
        OBSERVERS * 6667.0, 1e-9);
    prom_free(&m);
    free(text);
}

Test(metrics, primacy_epoch_and_queue_are_shown_by_the_primary_only)
{
    make_primary(fx.services[0], 7);
    cohort_service_t *a = fx.services[0], *b = fx.services[1];
    const int64_t counts[6] = {11, 2, 300, 4, 6, 8};
    for (int i = 0; i < 6; i++) {
        atomic_store(&a->queue_counts[i], counts[i]);
        atomic_store(&b->queue_counts[i], 99);
    }
    atomic_store(&a->queue_epoch, 7);
    atomic_store(&b->queue_epoch, 3); /* counted while b was primary once: stale now */

    char *text = render("0.1.0", 2);
    prom_text_t m;
    prom_assert_valid(text, "the metrics", &m);
    cr_assert_float_eq(prom_value(&m, "cohort_primary{service=\"alpha\"}"), 1, 1e-9);
    cr_assert_float_eq(prom_value(&m, "cohort_primary{service=\"beta-2\"}"), 0, 1e-9);
    cr_assert_float_eq(prom_value(&m, "cohort_epoch{service=\"alpha\"}"), 7, 1e-9);
    cr_assert_float_eq(prom_value(&m, "cohort_epoch{service=\"beta-2\"}"), 0, 1e-9);
    static const char *const statuses[6] = {"pending", "claimed",   "succeeded",
                                            "failed",  "timed_out", "cancelled"};
    for (int i = 0; i < 6; i++) {
        char series[128];
        snprintf(series, sizeof series, "cohort_queue_tasks{service=\"alpha\",status=\"%s\"}",
                 statuses[i]);
        cr_assert_float_eq(prom_value(&m, series), (double)counts[i], 1e-9, "%s", series);
    }
    cr_assert_eq(prom_count(&m, "cohort_queue_tasks"), 6, "beta-2 is not primary:\n%s", text);
    prom_free(&m);
    free(text);

    /* A primary whose count predates its current epoch shows none either. */
    make_primary(b, 4);
    text = render("0.1.0", 2);
    prom_assert_valid(text, "the metrics", &m);
    cr_assert_eq(prom_count(&m, "cohort_queue_tasks"), 6, "a stale count was shown:\n%s", text);
    prom_free(&m);
    free(text);

    /* And once the lease ends, neither primacy nor the queue is claimed. */
    atomic_store(&a->election.lease_until_ms, cohort_clock_monotonic_ms() - 1);
    text = render("0.1.0", 2);
    prom_assert_valid(text, "the metrics", &m);
    cr_assert_float_eq(prom_value(&m, "cohort_primary{service=\"alpha\"}"), 0, 1e-9);
    cr_assert_eq(prom_count(&m, "cohort_queue_tasks"), 0);
    prom_free(&m);
    free(text);
}

Test(metrics, label_values_are_escaped)
{
    const char *version = "1.0 \"beta\"\\x\nnext";
    char *text = render(version, 2);
    prom_text_t m;
    prom_assert_valid(text, "the metrics", &m);
    cr_assert_float_eq(
        prom_value(&m, "cohort_build_info{version=\"1.0 \\\"beta\\\"\\\\x\\nnext\"}"), 1, 1e-9,
        "%s", text);
    prom_free(&m);
    free(text);
}

Test(metrics, a_node_without_services_still_renders_valid_text)
{
    char *text = render("0.1.0", 0);
    prom_text_t m;
    prom_assert_valid(text, "the metrics", &m);
    cr_assert_eq(prom_count(&m, "cohort_tasks_claimed_total"), 0);
    cr_assert_float_eq(prom_value(&m, "cohort_db_commands_total"), 0, 1e-9);
    prom_free(&m);
    free(text);
}

/* The checker itself: each of these texts breaks one rule and must be rejected. */
Test(metrics, the_strict_parser_rejects_broken_texts)
{
    static const struct {
        const char *why;
        const char *text;
    } bad[] = {
        {"no final newline", "# TYPE a gauge\na 1"},
        {"bad name", "# TYPE 1a gauge\n1a 1\n"},
        {"bad value", "# TYPE a gauge\na one\n"},
        {"bad escape", "# TYPE a gauge\na{x=\"\\t\"} 1\n"},
        {"unterminated label", "# TYPE a gauge\na{x=\"1} 1\n"},
        {"same series twice", "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n"},
        {"family split", "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x=\"2\"} 1\n"},
        {"TYPE after samples", "a 1\n# TYPE a gauge\n"},
        {"second TYPE", "# TYPE a gauge\n# TYPE a counter\na 1\n"},
        {"unknown type", "# TYPE a meter\na 1\n"},
        {"negative counter", "# TYPE a_total counter\na_total -1\n"},
        {"no +Inf bucket", "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"},
        {"not cumulative",
         "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"},
        {"count differs",
         "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n"},
        {"no _sum", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n"},
        {"le not increasing", "# TYPE h histogram\nh_bucket{le=\"5\"} 1\nh_bucket{le=\"1\"} "
                              "1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        prom_text_t m;
        char why[256] = "";
        cr_assert_not(prom_parse(bad[i].text, &m, why, sizeof why), "accepted (%s):\n%s",
                      bad[i].why, bad[i].text);
        prom_free(&m);
    }
    prom_text_t m;
    char why[256] = "";
    cr_assert(prom_parse("# HELP h A \\\\ help\\n text.\n# TYPE h histogram\n"
                         "h_bucket{le=\"1\",x=\"a\"} 1\nh_bucket{le=\"+Inf\",x=\"a\"} 2\n"
                         "h_sum{x=\"a\"} 3.5\nh_count{x=\"a\"} 2\n# a comment\n\nu 1 1700000000\n",
                         &m, why, sizeof why),
              "rejected a valid text: %s", why);
    cr_assert_eq(m.n_samples, 5);
    prom_free(&m);
}
