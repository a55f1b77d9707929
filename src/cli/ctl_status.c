/*
 * ctl_status.c - `cohortctl status [--json]`: per service, its primary (node, epoch, last
 * active), its task counts by status and what is paused or blocked.
 *
 * The services are the config file's (with -c) or every service document in the database,
 * walked one at a time: the table streams; the JSON is one document printed at the end.
 */
#include <stdio.h>
#include <string.h>

#include "cli/ctl.h"
#include "node/service_status.h"
#include "store/listing.h"

typedef struct status_run {
    ctl_t *ctl;
    bool json;
    int64_t server_now;
    bson_t *services; /* the JSON array being built */
    uint32_t n;
    bool reported; /* a service's failure was printed (else the listing failed) */
} status_run_t;

/* One service: an element of the JSON array (node/service_status.c builds it, as for the
 * HTTP API) and a line of the table with its switches. */
static bool status_one(void *user, const char *name, bson_error_t *error)
{
    status_run_t *run = user;
    bson_t svc;
    cohort_service_summary_t s;
    ctl_array_begin_document(run->services, &run->n, &svc);
    bool ok = cohort_service_status(run->ctl->store, run->ctl->client, name, run->server_now,
                                    &svc, &s, error);
    bson_append_document_end(run->services, &svc);
    if (!ok) {
        fprintf(stderr, "cohortctl: service '%s': %s\n", name, error->message);
        run->reported = true;
        return false;
    }
    if (!run->json) {
        char active[32] = "-";
        if (s.primary[0])
            snprintf(active, sizeof active, "%.1fs ago", (double)s.ago_ms / 1000.0);
        printf("%-20s %-32s %6lld %12s %9lld %9lld %10lld %9lld %10lld  %s\n", name,
               s.primary[0] ? s.primary : "(none)", (long long)s.epoch, active,
               (long long)s.counts.pending, (long long)s.counts.claimed,
               (long long)s.counts.succeeded, (long long)s.counts.failed,
               (long long)s.counts.timed_out, s.state);
        fputs(s.details, stdout);
    }
    return true;
}

int cmd_status(ctl_t *ctl, int argc, char **argv)
{
    static const struct option options[] = {{"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0}};
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
        printf("%-20s %-32s %6s %12s %9s %9s %10s %9s %10s  %s\n", "SERVICE", "PRIMARY", "EPOCH",
               "LAST ACTIVE", "PENDING", "CLAIMED", "SUCCEEDED", "FAILED", "TIMED_OUT", "STATE");
    bson_error_t error;
    bool ok = true;
    if (ctl->config) {
        for (size_t i = 0; ok && i < ctl->config->n_services; i++)
            ok = status_one(&run, ctl->config->services[i].name, &error);
    } else {
        ok = cohort_store_each_service(ctl->store, ctl->client, status_one, &run, &error);
    }
    bson_append_array_end(&out, &services);
    return ctl_finish_listing(&out, json, ok,
                              run.reported ? NULL : "cohortctl: cannot list services", &error);
}
