/*
 * ctl_ops.c - an operator's changes to tasks: `retry`, `cancel` and `delete`, of one task by
 * its id or of every task some filters select.
 *
 * This file parses and prints; the store does the work (store/operator.h): one
 * conditional write for an id, pages of COHORT_OPERATOR_PAGE ids for a selection, so memory
 * stays constant on any queue. Each prints how many tasks it changed (with --dry-run, how
 * many it would change, changing nothing). Their synopses and options are rows of
 * ctl_commands.c. Exit status: 0 done; 2 bad usage (CTL_USAGE), an unknown service or a
 * refusal (CTL_REFUSED: no such task, a status the command does not apply to, named); 1 a
 * database failure.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/error.h"
#include "core/status.h"
#include "core/timefmt.h"
#include "store/operator.h"

/* The filters, as the values of their options in ctl_commands.c. */
enum {
    F_STATUS = 's',
    F_KIND = 'k',
    F_GROUP = 'g',
    F_LIMIT = 'l',
    F_OLDER = 'o',
    F_DRY_RUN = 'n',
};

typedef struct ops_command {
    const char *name;
    cohort_task_action_t action;
    const char *default_status; /* for a selection without --status (NULL: --status required) */
    const char *statuses;       /* the statuses it applies to, for messages */
} ops_command_t;

static const ops_command_t retry_command = {"retry", COHORT_ACTION_RETRY, NULL,
                                            "failed, timed_out or cancelled"};
static const ops_command_t cancel_command = {"cancel", COHORT_ACTION_CANCEL, "pending",
                                             "pending (a claimed task is running)"};
static const ops_command_t delete_command = {"delete", COHORT_ACTION_DELETE, NULL,
                                             "succeeded, failed, timed_out or cancelled (final)"};

/* The command line, parsed. */
typedef struct ops_args {
    const char *service, *id; /* id NULL: a selection */
    const char *status;
    cohort_task_selection_t selection;
    int64_t older_than_ms; /* 0: no --older-than */
    bool filtered;         /* a filter was given */
    bool dry_run;
} ops_args_t;

/* Prints "cohortctl COMMAND: message" and returns `rc`. */
static int say(const ops_command_t *cmd, int rc, const char *fmt, ...) BSON_GNUC_PRINTF(3, 4);

static int say(const ops_command_t *cmd, int rc, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "cohortctl %s: ", cmd->name);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    return rc;
}

/* One filter's value into `a`; CTL_DONE or CTL_USAGE (message printed). */
static int take_filter(const ops_command_t *cmd, int opt, const char *value, ops_args_t *a)
{
    a->filtered = true;
    switch (opt) {
    case F_STATUS:
        a->status = value;
        return CTL_DONE;
    case F_KIND:
    case F_GROUP:
        if (!cohort_config_valid_kind(value))
            return say(cmd, CTL_USAGE,
                       "'%s' is not a valid kind or group (1-64 of A-Z a-z 0-9 _ -)", value);
        *(opt == F_KIND ? &a->selection.kind : &a->selection.group) = value;
        return CTL_DONE;
    case F_LIMIT:
        if (!ctl_parse_int(value, &a->selection.limit) || a->selection.limit < 1)
            return say(cmd, CTL_USAGE, "--limit '%s' must be a whole number of at least 1",
                       value);
        return CTL_DONE;
    case F_OLDER:
        if (!cohort_duration_parse(value, &a->older_than_ms) || a->older_than_ms <= 0)
            return say(cmd, CTL_USAGE, "--older-than '%s' must be a duration (30s, 5m, 2h, 7d)",
                       value);
        return CTL_DONE;
    }
    return CTL_USAGE;
}

/* The selection's status: given, or the command's default; one the command applies to. */
static int check_status(const ops_command_t *cmd, ops_args_t *a)
{
    const char *status = a->status ? a->status : cmd->default_status;
    if (!status)
        return say(cmd, CTL_USAGE, "which tasks? give an ID or --status");
    if (!cohort_status_parse(status, &a->selection.status))
        return say(cmd, CTL_USAGE, "--status '%s' is not a status", status);
    if (!cohort_task_action_applies(cmd->action, a->selection.status))
        return say(cmd, CTL_REFUSED, "refused: --status %s: %s applies to %s tasks only", status,
                   cmd->name, cmd->statuses);
    if (cmd->action == COHORT_ACTION_CANCEL && !a->filtered)
        return say(cmd, CTL_USAGE, "which tasks? give an ID, or --status pending (all of them), "
                                   "--kind or --group");
    return CTL_DONE;
}

/* Parses argv into `a`; CTL_DONE, or CTL_USAGE / CTL_REFUSED with the message printed. */
static int parse_args(const ops_command_t *cmd, ctl_t *ctl, int argc, char **argv, ops_args_t *a)
{
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    int opt, rc;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (opt == F_DRY_RUN)
            a->dry_run = true;
        else if (opt == '?' || opt == ':')
            return say(cmd, CTL_USAGE, "unexpected argument '%s'", ctl_bad_arg(argv));
        else if ((rc = take_filter(cmd, opt, optarg, a)) != CTL_DONE)
            return rc;
    }
    int operands = argc - optind;
    if (operands < 1)
        return say(cmd, CTL_USAGE, "which SERVICE?");
    if (operands > 2)
        return say(cmd, CTL_USAGE, "unexpected argument '%s'", argv[optind + 2]);
    a->service = argv[optind];
    a->id = operands == 2 ? argv[optind + 1] : NULL;
    if (!cohort_config_valid_service_name(a->service))
        return say(cmd, CTL_USAGE, "'%s' is not a valid service name", a->service);
    if (a->id && a->filtered)
        return say(cmd, CTL_USAGE, "give a task ID or filters, not both");
    if (a->id && (strlen(a->id) != 24 || !bson_oid_is_valid(a->id, 24)))
        return say(cmd, CTL_USAGE, "'%s' is not a task id (24 hex digits)", a->id);
    return a->id ? CTL_DONE : check_status(cmd, a);
}

static void show_progress(void *arg, int64_t changed)
{
    ctl_progress_update(arg, changed);
}

/* Runs a parsed command against the database. */
static int run(const ops_command_t *cmd, ctl_t *ctl, ops_args_t *a)
{
    int64_t server_ms = 0;
    if (!ctl_reach_database(ctl, &server_ms))
        return CTL_FAILED;
    int rc = ctl_check_service(ctl, a->service, cmd->name);
    if (rc != CTL_DONE)
        return rc;
    char by[300];
    ctl_author(by, sizeof by);
    cohort_task_change_t change = {
        .action = cmd->action, .by = by, .now_ms = server_ms, .dry_run = a->dry_run};
    if (a->older_than_ms > 0)
        a->selection.finished_before_ms = server_ms - a->older_than_ms;
    int64_t changed = 1;
    bson_error_t error;
    ctl_progress_t progress;
    ctl_progress_start(&progress, cmd->name, 0);
    change.progress = show_progress;
    change.progress_arg = &progress;
    bool ok = a->id ? cohort_store_change_task(ctl->store, ctl->client, a->service, &change,
                                               a->id, &error)
                    : cohort_store_change_tasks(ctl->store, ctl->client, a->service, &change,
                                                &a->selection, &changed, &error);
    ctl_progress_end(&progress);
    bool requested = false;
    char claimer[129] = "";
    bson_error_t why;
    if (!ok && a->id && !a->dry_run && cmd->action == COHORT_ACTION_CANCEL &&
        error.domain == COHORT_DOMAIN_USAGE && error.code == COHORT_CODE_CONFLICT &&
        cohort_store_request_cancel(ctl->store, ctl->client, a->service, a->id, by, server_ms,
                                    &requested, claimer, sizeof claimer, &why) &&
        requested) {
        /* A running task: its claimer is asked to stop; nothing else changes now. */
        printf("0\n");
        return say(cmd, CTL_DONE,
                   "task %s is running (claimed by %s): cancel requested. An external worker "
                   "learns it from its next heartbeat; a node's handler runs on to its outcome",
                   a->id, claimer);
    }
    if (!ok && error.domain == COHORT_DOMAIN_USAGE)
        return say(cmd, CTL_REFUSED, "refused: %s", error.message);
    if (!ok)
        return say(cmd, CTL_FAILED, "%s", error.message);
    printf("%lld\n", (long long)changed);
    return CTL_DONE;
}

static int ops_main(const ops_command_t *cmd, ctl_t *ctl, int argc, char **argv)
{
    ops_args_t a = {0};
    int rc = parse_args(cmd, ctl, argc, argv, &a);
    return rc == CTL_DONE ? run(cmd, ctl, &a) : rc;
}

/* retry SERVICE ID | retry SERVICE --status failed|timed_out|cancelled [--kind K] [--limit N]:
 * back to pending and due now, attempts from 0, the history kept with a "retried" entry. */
int cmd_retry(ctl_t *ctl, int argc, char **argv)
{
    return ops_main(&retry_command, ctl, argc, argv);
}

/* cancel SERVICE ID | cancel SERVICE [--status pending] [--kind K] [--group G] [--limit N]:
 * pending tasks end cancelled (final); a claimed one (by id) is asked to stop: its
 * cancel_requested flag is set for its claimer's next heartbeat. */
int cmd_cancel(ctl_t *ctl, int argc, char **argv)
{
    return ops_main(&cancel_command, ctl, argc, argv);
}

/* delete SERVICE ID | delete SERVICE --status S [--older-than DUR] [--limit N]: tasks in a
 * final status only; tracked ones whose batch callback has not run yet stay. */
int cmd_delete(ctl_t *ctl, int argc, char **argv)
{
    return ops_main(&delete_command, ctl, argc, argv);
}
