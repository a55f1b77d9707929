/*
 * ctl_status.c - `cohortctl status [--json]`: per service, its primary (node, epoch, last
 * active), its task counts by status and what is paused or blocked.
 *
 * The services are the config file's (with -c) or every service document in the database,
 * walked one at a time: the table streams; the JSON is one document printed at the end.
 * Then every queue with tasks but no service document (tasks enqueued by another program
 * into a name no node runs, which no node would ever claim), marked as such.
 */
#include <stdio.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/status.h"
#include "node/status/service_status.h"
#include "store/listing.h"
#include "store/queries.h"

typedef struct status_run {
    ctl_t *ctl;
    bool json;
    int64_t server_now;
    bson_t *services; /* the JSON array being built */
    uint32_t n;
    bool reported; /* a service's failure was printed (else the listing failed) */
    bool orphans;  /* list only queues with tasks but no service document */
} status_run_t;

static int64_t total_tasks(const cohort_status_counts_t *counts)
{
    int64_t total = 0;
    for (int i = 0; i < COHORT_STATUS_COUNT; i++)
        total += cohort_status_count(counts, (cohort_task_status_t)i);
    return total;
}

/* Whether `name` is a service of the -c file (listed already). */
static bool in_config(const ctl_t *ctl, const char *name)
{
    return ctl->config && cohort_config_find_service(ctl->config, name) != NULL;
}

/* One service: an element of the JSON array (node/status/service_status.c builds it, as for the
 * HTTP API) and a line of the table with its switches. */
static bool status_one(void *user, const char *name, bson_error_t *error)
{
    status_run_t *run = user;
    bson_t svc = BSON_INITIALIZER;
    cohort_service_summary_t s;
    if (!cohort_service_status(run->ctl->store, run->ctl->client, name, run->server_now, &svc,
                               &s, error)) {
        bson_destroy(&svc);
        fprintf(stderr, "cohortctl: service '%s': %s\n", name, error->message);
        run->reported = true;
        return false;
    }
    if (run->orphans && (s.found || in_config(run->ctl, name) || total_tasks(&s.counts) == 0)) {
        bson_destroy(&svc);
        return true;
    }
    /* A big queue's counts come from its primary's last measure: the table says how old. */
    bson_iter_t it;
    int64_t age_ms = bson_iter_init_find(&it, &svc, "counts_age_ms") ? bson_iter_as_int64(&it) : 0;
    char key[16];
    const char *k;
    bson_uint32_to_string(run->n++, &k, key, sizeof key);
    BSON_APPEND_DOCUMENT(run->services, k, &svc);
    bson_destroy(&svc);
    if (!run->json) {
        char active[32] = "-";
        if (s.primary[0])
            snprintf(active, sizeof active, "%.1fs ago", (double)s.ago_ms / 1000.0);
        printf("%-20s %-32s %13lld %12s %9lld %9lld %10lld %9lld %10lld %10lld  %s\n", name,
               s.primary[0] ? s.primary : "(none)", (long long)s.epoch, active,
               (long long)s.counts.pending, (long long)s.counts.claimed,
               (long long)s.counts.succeeded, (long long)s.counts.failed,
               (long long)s.counts.timed_out, (long long)s.counts.cancelled, s.state);
        if (age_ms >= 1000)
            printf("  counts: as of %.0f s ago (the primary's last measure of a big queue)\n",
                   (double)age_ms / 1000.0);
        fputs(s.details, stdout);
    }
    return true;
}

int cmd_status(ctl_t *ctl, int argc, char **argv)
{
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    bool json = false;
    int opt;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (opt != 'j') {
            fprintf(stderr, "cohortctl status: unknown argument '%s'\n", ctl_bad_arg(argv));
            return CTL_USAGE;
        }
        json = true;
    }
    if (optind < argc) {
        fprintf(stderr, "cohortctl status: unknown argument '%s'\n", argv[optind]);
        return CTL_USAGE;
    }
    status_run_t run = {.ctl = ctl, .json = json};
    if (!ctl_reach_database(ctl, &run.server_now))
        return CTL_FAILED;

    bson_t out = BSON_INITIALIZER, services;
    BSON_APPEND_ARRAY_BEGIN(&out, "services", &services);
    run.services = &services;
    if (!json)
        printf("%-20s %-32s %13s %12s %9s %9s %10s %9s %10s %10s  %s\n", "SERVICE", "PRIMARY",
               "EPOCH", "LAST ACTIVE", "PENDING", "CLAIMED", "SUCCEEDED", "FAILED", "TIMED_OUT",
               "CANCELLED", "STATE");
    bson_error_t error;
    bool ok = true;
    if (ctl->config) {
        for (size_t i = 0; ok && i < ctl->config->n_services; i++)
            ok = status_one(&run, ctl->config->services[i].name, &error);
    } else {
        ok = cohort_store_each_service(ctl->store, ctl->client, status_one, &run, &error);
    }
    run.orphans = true;
    if (ok)
        ok = cohort_store_each_queue(ctl->store, ctl->client, status_one, &run, &error);
    bson_append_array_end(&out, &services);
    return ctl_finish_listing(&out, json, ok,
                              run.reported ? NULL : "cohortctl: cannot list services", &error);
}
