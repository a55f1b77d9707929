/*
 * liveness.c - the node-wide bounds that follow the services' live takeover_ms
 * (src/node/liveness.h). The clock sample's round-trip bound must shrink when an operator
 * lowers takeover_ms in the database (cohortctl settings set), or a sample whose error is
 * larger than the live lease guard would be accepted (issue 15, item 3).
 */
#include <criterion/criterion.h>

#include "core/clock.h"
#include "node/primary/election.h"
#include "node/live_settings.h"
#include "node/liveness.h"

#define FILE_TAKEOVER_MS 10000
#define LIVE_TAKEOVER_MS 1000
#define SERVER_MS 1800000000000LL

static cohort_service_config_t configs[2] = {{.name = "a"}, {.name = "b"}};
static cohort_service_t services[2];

/* Both services start on the file's settings (takeover 10 s), as a new node does. */
static void setup(void)
{
    cohort_clock_reset();
    for (size_t i = 0; i < 2; i++) {
        cohort_service_t *s = &services[i];
        s->config = &configs[i];
        cohort_election_init(&s->election, configs[i].name, "n1", FILE_TAKEOVER_MS);
        cohort_settings_t file;
        cohort_settings_defaults(&file);
        file.takeover_ms = FILE_TAKEOVER_MS;
        file.tick_ms = 500;
        cohort_service_set_file_settings(s, &file);
    }
}

static void teardown(void)
{
    for (size_t i = 0; i < 2; i++)
        cohort_election_destroy(&services[i].election);
}

/* What `cohortctl settings set b takeover_ms 1000` leads to: the election reads the
 * document's settings, the tick applies them. */
static void set_live_takeover(cohort_service_t *s, int64_t takeover_ms)
{
    bson_reinit(&s->election.settings);
    BSON_APPEND_INT64(&s->election.settings, "takeover_ms", takeover_ms);
    cohort_live_settings_apply(s);
    cr_assert_eq(s->eff.takeover_ms, takeover_ms, "the live takeover_ms was not applied");
}

TestSuite(liveness, .init = setup, .fini = teardown);

Test(liveness, bounds_follow_the_file_until_a_live_change)
{
    cohort_service_t *list[] = {&services[0], &services[1]};
    cr_assert_eq(cohort_liveness_min_takeover_ms(list, 2, FILE_TAKEOVER_MS), FILE_TAKEOVER_MS);
    cr_assert_eq(cohort_liveness_max_clock_rtt_ms(list, 2, FILE_TAKEOVER_MS),
                 cohort_election_max_rtt_ms(FILE_TAKEOVER_MS));
    cr_assert_eq(cohort_liveness_min_takeover_ms(NULL, 0, 1234), 1234, "no services: fallback");
}

Test(liveness, a_slow_clock_sample_is_refused_after_takeover_is_lowered_live)
{
    cohort_service_t *list[] = {&services[0], &services[1]};
    int64_t rtt = 600; /* error 301 ms: inside the file's guard (2500 ms), not the live one */
    int64_t sent = cohort_clock_monotonic_ms();
    cr_assert(cohort_clock_sync(SERVER_MS, sent, sent + rtt,
                                cohort_liveness_max_clock_rtt_ms(list, 2, FILE_TAKEOVER_MS)),
              "a %lld ms round trip is fine while takeover_ms is 10 s", (long long)rtt);

    set_live_takeover(&services[1], LIVE_TAKEOVER_MS);
    cr_assert_eq(cohort_liveness_min_takeover_ms(list, 2, FILE_TAKEOVER_MS), LIVE_TAKEOVER_MS);
    int64_t max_rtt = cohort_liveness_max_clock_rtt_ms(list, 2, FILE_TAKEOVER_MS);
    cr_assert_eq(max_rtt, cohort_election_max_rtt_ms(LIVE_TAKEOVER_MS),
                 "the round-trip bound is %lld ms, want the live takeover's %lld ms",
                 (long long)max_rtt, (long long)cohort_election_max_rtt_ms(LIVE_TAKEOVER_MS));
    cr_assert_not(cohort_clock_sync(SERVER_MS + 1000, sent, sent + rtt, max_rtt),
                  "a %lld ms round trip was accepted against a live takeover_ms of %d ms",
                  (long long)rtt, LIVE_TAKEOVER_MS);
}
