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
#include "core/timefmt.h"
#include "store/listing.h"

/* The service's state for `status`: running, paused, blocked or partly stopped (kinds). */
typedef struct switch_state {
    bool paused_all, blocked_all, some_kinds;
    uint32_t n_paused, n_blocked; /* entries appended to the JSON arrays */
    bson_t *paused, *blocked;     /* JSON arrays being built */
    char details[2048];           /* text: one indented line per switch */
} switch_state_t;

static void collect_switch(const ctl_switch_t *sw, void *user)
{
    switch_state_t *st = user;
    bool pause = strcmp(sw->which, "pause") == 0;
    bool all = strcmp(sw->kind, "*") == 0;
    if (all && pause)
        st->paused_all = true;
    else if (all)
        st->blocked_all = true;
    else
        st->some_kinds = true;
    char at[COHORT_TIME_TEXT_MAX];
    cohort_time_format(sw->at_ms, at, sizeof at);
    bson_t one;
    ctl_array_begin_document(pause ? st->paused : st->blocked,
                             pause ? &st->n_paused : &st->n_blocked, &one);
    BSON_APPEND_UTF8(&one, "kind", sw->kind);
    ctl_append_utf8_or_null(&one, "reason", sw->reason);
    ctl_append_utf8_or_null(&one, "by", sw->by);
    ctl_append_utf8_or_null(&one, "at", sw->at_ms ? at : NULL);
    bson_append_document_end(pause ? st->paused : st->blocked, &one);

    char what[700];
    ctl_describe_switch(sw, what, sizeof what);
    size_t used = strlen(st->details);
    snprintf(st->details + used, sizeof st->details - used, "    %s (since %s by %s)\n", what,
             sw->at_ms ? at : "?", sw->by ? sw->by : "?");
}

static const char *switch_state_name(const switch_state_t *st)
{
    if (st->blocked_all && st->paused_all)
        return "paused,blocked";
    if (st->blocked_all)
        return "blocked";
    if (st->paused_all)
        return "paused";
    return st->some_kinds ? "kinds-stopped" : "running";
}

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

/* The service's primary, as JSON and as the table's columns. */
static void append_primary(bson_t *svc, const char *primary, int64_t epoch, int64_t ago)
{
    if (!primary) {
        BSON_APPEND_NULL(svc, "primary");
        return;
    }
    bson_t p;
    BSON_APPEND_DOCUMENT_BEGIN(svc, "primary", &p);
    BSON_APPEND_UTF8(&p, "node_id", primary);
    BSON_APPEND_INT64(&p, "epoch", epoch);
    BSON_APPEND_INT64(&p, "last_active_ms_ago", ago);
    bson_append_document_end(svc, &p);
}

static void append_counts(bson_t *svc, const cohort_status_counts_t *counts)
{
    bson_t c;
    BSON_APPEND_DOCUMENT_BEGIN(svc, "counts", &c);
    for (int i = 0; i < COHORT_STATUS_COUNT; i++)
        BSON_APPEND_INT64(&c, cohort_status_names[i],
                          cohort_status_count(counts, (cohort_task_status_t)i));
    bson_append_document_end(svc, &c);
}

/* One service: a line of the table (and its switches), an element of the JSON array. */
static bool status_one(void *user, const char *name, bson_error_t *error)
{
    status_run_t *run = user;
    bson_t doc;
    bool found = false;
    cohort_status_counts_t counts;
    if (!cohort_store_read_service(run->ctl->store, run->ctl->client, name, &doc, &found,
                                   error) ||
        !cohort_store_count_tasks(run->ctl->store, run->ctl->client, name, &counts, error)) {
        bson_destroy(&doc);
        fprintf(stderr, "cohortctl: service '%s': %s\n", name, error->message);
        run->reported = true;
        return false;
    }
    if (run->orphans && (found || in_config(run->ctl, name) || total_tasks(&counts) == 0)) {
        bson_destroy(&doc);
        return true;
    }
    const char *primary = NULL;
    int64_t epoch = 0, last_active = 0;
    if (found) {
        ctl_doc_string(&doc, "primary", &primary);
        epoch = ctl_doc_int(&doc, "epoch", 0);
        last_active = ctl_doc_date(&doc, "last_active");
    }
    int64_t ago = last_active ? run->server_now - last_active : -1;
    if (ago < 0 && last_active)
        ago = 0;

    bson_t svc, paused = BSON_INITIALIZER, blocked = BSON_INITIALIZER;
    ctl_array_begin_document(run->services, &run->n, &svc);
    BSON_APPEND_UTF8(&svc, "name", name);
    BSON_APPEND_BOOL(&svc, "service_document", found);
    append_primary(&svc, primary, epoch, ago);
    append_counts(&svc, &counts);
    switch_state_t st = {.paused = &paused, .blocked = &blocked};
    if (found)
        ctl_each_switch(&doc, collect_switch, &st);
    BSON_APPEND_ARRAY(&svc, "paused", &paused);
    BSON_APPEND_ARRAY(&svc, "blocked", &blocked);
    bson_destroy(&paused);
    bson_destroy(&blocked);
    bson_append_document_end(run->services, &svc);

    if (!run->json) {
        char active[32] = "-";
        if (primary)
            snprintf(active, sizeof active, "%.1fs ago", (double)ago / 1000.0);
        printf("%-20s %-32s %6lld %12s %9lld %9lld %10lld %9lld %10lld %10lld  %s\n", name,
               primary ? primary : "(none)", (long long)epoch, active, (long long)counts.pending,
               (long long)counts.claimed, (long long)counts.succeeded, (long long)counts.failed,
               (long long)counts.timed_out, (long long)counts.cancelled,
               found ? switch_state_name(&st) : "(no service document)");
        fputs(st.details, stdout);
    }
    bson_destroy(&doc);
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
        printf("%-20s %-32s %6s %12s %9s %9s %10s %9s %10s %10s  %s\n", "SERVICE", "PRIMARY",
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
