/*
 * ctl_switches.c - `cohortctl pause|resume|block|unblock SERVICE [--kind K] [--reason TEXT]`:
 * the owner's switch (pause) and the operator's (block), per service or per kind.
 *
 * A switch lives in the service's config document as pause.<kind> / block.<kind> = {reason,
 * by, at} ("*": every kind); nodes read it by their next tick and let running tasks finish.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "node/status/service_status.h"
#include "store/services.h"

typedef struct switch_search {
    const char *which, *kind; /* the switch being changed */
    bool found;               /* it is set now */
    char others[1024];        /* the other switches that stay set */
} switch_search_t;

static void search_switch(const cohort_switch_t *sw, void *user)
{
    switch_search_t *s = user;
    if (strcmp(sw->which, s->which) == 0 && strcmp(sw->kind, s->kind) == 0) {
        s->found = true;
        return;
    }
    char what[700];
    cohort_describe_switch(sw, what, sizeof what);
    size_t used = strlen(s->others);
    snprintf(s->others + used, sizeof s->others - used, "%s%s", used ? "; " : "", what);
}

/* Prints what the command refused (main adds its usage line). */
static int switch_usage(const char *command, const char *arg)
{
    fprintf(stderr, "cohortctl %s: unexpected argument '%s'\n", command, arg);
    return CTL_USAGE;
}

/* What one pause|resume|block|unblock command asks. */
typedef struct switch_args {
    const char *command; /* as typed */
    const char *which;   /* "pause" or "block" */
    bool on;             /* set (pause, block) or clear (resume, unblock) */
    const char *service, *kind, *reason; /* kind, reason: NULL if not given */
} switch_args_t;

/* Reads and checks the command line; CTL_DONE, or CTL_USAGE with the message printed. */
static int parse_switch_args(const ctl_t *ctl, int argc, char **argv, switch_args_t *a)
{
    /* Clearing a switch takes no reason: --reason is then an unknown option. */
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    const char *command = a->command = argv[0];
    bool on = a->on = strcmp(command, "pause") == 0 || strcmp(command, "block") == 0;
    bool is_block = strcmp(command, "block") == 0 || strcmp(command, "unblock") == 0;
    a->which = is_block ? "block" : "pause";
    int opt;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (opt == 'k' && !a->kind)
            a->kind = optarg;
        else if (opt == 'r' && !a->reason)
            a->reason = optarg;
        else
            return switch_usage(command, opt == 'k'   ? "--kind"
                                         : opt == 'r' ? "--reason"
                                                      : ctl_bad_arg(argv));
    }
    if (optind + 1 < argc)
        return switch_usage(command, argv[optind + 1]);
    a->service = optind < argc ? argv[optind] : NULL;
    if (!a->service) {
        fprintf(stderr, "cohortctl %s: which SERVICE?\n", command);
        return CTL_USAGE;
    }
    if (!cohort_config_valid_service_name(a->service)) {
        fprintf(stderr, "cohortctl %s: '%s' is not a valid service name\n", command,
                a->service);
        return CTL_USAGE;
    }
    if (a->kind && !cohort_config_valid_kind(a->kind)) {
        fprintf(stderr, "cohortctl %s: --kind '%s' must be 1-64 of [A-Za-z0-9_-]\n", command,
                a->kind);
        return CTL_USAGE;
    }
    if (is_block && on && (!a->reason || !a->reason[strspn(a->reason, " \t")])) {
        fprintf(stderr, "cohortctl block: --reason TEXT is required (say why, for whoever "
                        "unblocks it)\n");
        return CTL_USAGE;
    }
    if (a->reason && strlen(a->reason) > 1000) {
        fprintf(stderr, "cohortctl %s: --reason is longer than 1000 bytes\n", command);
        return CTL_USAGE;
    }
    return CTL_DONE;
}

/* Reads the service's switches: whether it exists, whether this switch is set, which
 * others are. False (message printed) if the database failed. */
static bool find_switches(ctl_t *ctl, const switch_args_t *a, bool *found,
                          switch_search_t *search)
{
    bson_error_t error;
    bson_t doc;
    if (!cohort_store_read_service(ctl->store, ctl->client, a->service, &doc, found, &error)) {
        fprintf(stderr, "cohortctl %s: cannot reach the database: %s\n", a->command,
                error.message);
        bson_destroy(&doc);
        return false;
    }
    if (*found)
        cohort_each_switch(&doc, search_switch, search);
    bson_destroy(&doc);
    return true;
}

/* pause|resume SERVICE [--kind K] [--reason TEXT], block|unblock likewise: pause and block
 * set their switch, resume and unblock clear it. */
int cmd_switch(ctl_t *ctl, int argc, char **argv)
{
    switch_args_t a = {0};
    int rc = parse_switch_args(ctl, argc, argv, &a);
    if (rc != CTL_DONE)
        return rc;
    if (!ctl_reach_database(ctl, NULL))
        return CTL_FAILED;
    bool found = false, is_block = strcmp(a.which, "block") == 0;
    switch_search_t search = {.which = a.which, .kind = a.kind ? a.kind : "*"};
    if (!find_switches(ctl, &a, &found, &search))
        return CTL_FAILED;
    char what[96];
    if (a.kind)
        snprintf(what, sizeof what, "kind %s", a.kind);
    else
        snprintf(what, sizeof what, "(all kinds)");
    char by[300];
    ctl_author(by, sizeof by);
    bson_error_t error;
    if (!found) {
        rc = ctl_unknown_service(ctl, a.service, a.command);
    } else if (!a.on && !search.found) {
        printf("%s %s was not %s: nothing to do\n", a.service, what,
               is_block ? "blocked" : "paused");
    } else if (!cohort_store_set_switch(ctl->store, ctl->client, a.service, a.which,
                                        a.kind ? a.kind : "*", a.on, a.reason, by, &found,
                                        &error)) {
        fprintf(stderr, "cohortctl %s: %s\n", a.command, error.message);
        rc = CTL_FAILED;
    } else if (!found) {
        rc = ctl_unknown_service(ctl, a.service, a.command);
    } else if (a.on) {
        printf("%s %s %s%s%s%s; nodes stop claiming those tasks by their next tick, running "
               "tasks finish\n",
               is_block ? "blocked" : "paused", a.service, what, a.reason ? " (reason: " : "",
               a.reason ? a.reason : "", a.reason ? ")" : "");
    } else {
        printf("%s %s %s: its tasks are claimable again by the nodes' next tick\n",
               is_block ? "unblocked" : "resumed", a.service, what);
    }
    if (rc == CTL_DONE && search.others[0])
        printf("still set: %s\n", search.others);
    return rc;
}
