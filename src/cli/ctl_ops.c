/*
 * ctl_ops.c - an operator's changes to tasks: `retry`, `cancel` and `delete`, of one task by
 * its id or of every task some filters select.
 *
 * This file parses and prints; the store does the work (store/store.h, operator.c): one
 * conditional write for an id, pages of COHORT_OPERATOR_PAGE ids for a selection, so memory
 * stays constant on any queue. Each prints how many tasks it changed (with --dry-run, how
 * many it would change, changing nothing). Exit status: 0 done; 2 bad usage, an unknown
 * service, or a refusal (no such task, a status the command does not apply to, named);
 * 1 a database failure.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/error.h"
#include "core/status.h"
#include "core/timefmt.h"

/* The usage of each command, for its errors (and for `cohortctl help`). */
#define CTL_RETRY_USAGE                                                                          \
    "cohortctl retry SERVICE ID [--dry-run]\n"                                                   \
    "       cohortctl retry SERVICE --status failed|timed_out|cancelled [--kind K] [--limit N] " \
    "[--dry-run]"
#define CTL_CANCEL_USAGE                                                                         \
    "cohortctl cancel SERVICE ID [--dry-run]\n"                                                  \
    "       cohortctl cancel SERVICE [--status pending] [--kind K] [--group G] [--limit N] "     \
    "[--dry-run]"
#define CTL_DELETE_USAGE                                                                         \
    "cohortctl delete SERVICE ID [--dry-run]\n"                                                  \
    "       cohortctl delete SERVICE --status succeeded|failed|timed_out|cancelled "             \
    "[--older-than DUR] [--limit N] [--dry-run]"

/* The filters, as flags; a command accepts those in its mask. */
enum {
    F_STATUS = 1 << 0,
    F_KIND = 1 << 1,
    F_GROUP = 1 << 2,
    F_LIMIT = 1 << 3,
    F_OLDER = 1 << 4,
};

typedef struct ops_command {
    const char *name;
    cohort_task_action_t action;
    int filters;                /* the F_* it accepts */
    const char *default_status; /* for a selection without --status (NULL: --status required) */
    const char *statuses;       /* the statuses it applies to, for messages */
    const char *usage;
} ops_command_t;

static const ops_command_t retry_command = {
    "retry", COHORT_ACTION_RETRY, F_STATUS | F_KIND | F_LIMIT, NULL,
    "failed, timed_out or cancelled", CTL_RETRY_USAGE};
static const ops_command_t cancel_command = {
    "cancel", COHORT_ACTION_CANCEL, F_STATUS | F_KIND | F_GROUP | F_LIMIT, "pending",
    "pending (a claimed task is running)", CTL_CANCEL_USAGE};
static const ops_command_t delete_command = {
    "delete", COHORT_ACTION_DELETE, F_STATUS | F_OLDER | F_LIMIT, NULL,
    "succeeded, failed, timed_out or cancelled (final)", CTL_DELETE_USAGE};

/* The command line, parsed. */
typedef struct ops_args {
    const char *service, *id; /* id NULL: a selection */
    const char *status;
    cohort_task_selection_t selection;
    int64_t older_than_ms; /* 0: no --older-than */
    int given;             /* the F_* given */
    bool dry_run;
} ops_args_t;

static int usage_error(const ops_command_t *cmd, const char *fmt, ...)
    BSON_GNUC_PRINTF(2, 3);

static int usage_error(const ops_command_t *cmd, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "cohortctl %s: ", cmd->name);
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\nusage: %s\n", cmd->usage);
    va_end(args);
    return CTL_USAGE;
}

/* One flag's value into `a`; CTL_DONE or CTL_USAGE (message printed). */
static int take_flag(const ops_command_t *cmd, int flag, const char *value, ops_args_t *a)
{
    if (a->given & flag)
        return usage_error(cmd, "a filter given twice ('%s')", value);
    a->given |= flag;
    switch (flag) {
    case F_STATUS:
        a->status = value;
        return CTL_DONE;
    case F_KIND:
    case F_GROUP:
        if (!cohort_config_valid_kind(value))
            return usage_error(cmd, "'%s' is not a valid kind or group (1-64 of A-Z a-z 0-9 _ -)",
                               value);
        *(flag == F_KIND ? &a->selection.kind : &a->selection.group) = value;
        return CTL_DONE;
    case F_LIMIT:
        if (!ctl_parse_int(value, &a->selection.limit) || a->selection.limit < 1)
            return usage_error(cmd, "--limit '%s' must be a whole number of at least 1", value);
        return CTL_DONE;
    case F_OLDER:
        if (!cohort_duration_parse(value, &a->older_than_ms) || a->older_than_ms <= 0)
            return usage_error(cmd, "--older-than '%s' must be a duration (30s, 5m, 2h, 7d)",
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
        return usage_error(cmd, "which tasks? give an ID or --status");
    if (!cohort_status_parse(status, &a->selection.status) ||
        !cohort_task_action_applies(cmd->action, a->selection.status))
        return usage_error(cmd, "refused: --status %s: %s applies to %s tasks only", status,
                           cmd->name, cmd->statuses);
    if (cmd->action == COHORT_ACTION_CANCEL && a->given == 0)
        return usage_error(cmd, "which tasks? give an ID, or --status pending (all of them), "
                                "--kind or --group");
    return CTL_DONE;
}

/* Parses argv into `a`; CTL_DONE, or CTL_USAGE with the message printed. */
static int parse_args(const ops_command_t *cmd, int argc, char **argv, ops_args_t *a)
{
    static const struct option options[] = {
        {"status", required_argument, NULL, F_STATUS}, {"kind", required_argument, NULL, F_KIND},
        {"group", required_argument, NULL, F_GROUP},   {"limit", required_argument, NULL, F_LIMIT},
        {"older-than", required_argument, NULL, F_OLDER}, {"dry-run", no_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    int opt, rc, index = 0;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", options, &index)) != -1) {
        if (opt == 'n')
            a->dry_run = true;
        else if (opt == '?' || opt == ':')
            return usage_error(cmd, "unexpected argument '%s'", ctl_bad_arg(argv));
        else if (!(cmd->filters & opt))
            return usage_error(cmd, "unexpected argument '--%s'", options[index].name);
        else if ((rc = take_flag(cmd, opt, optarg, a)) != CTL_DONE)
            return rc;
    }
    int operands = argc - optind;
    if (operands < 1 || operands > 2)
        return operands ? usage_error(cmd, "unexpected argument '%s'", argv[optind + 2])
                        : usage_error(cmd, "which SERVICE?");
    a->service = argv[optind];
    a->id = operands == 2 ? argv[optind + 1] : NULL;
    if (!cohort_config_valid_service_name(a->service))
        return usage_error(cmd, "'%s' is not a valid service name", a->service);
    if (a->id && a->given)
        return usage_error(cmd, "give a task ID or filters, not both");
    if (a->id && (strlen(a->id) != 24 || !bson_oid_is_valid(a->id, 24)))
        return usage_error(cmd, "'%s' is not a task id (24 hex digits)", a->id);
    return a->id ? CTL_DONE : check_status(cmd, a);
}

/* Runs a parsed command against the database. */
static int run(const ops_command_t *cmd, ctl_t *ctl, ops_args_t *a)
{
    int64_t server_ms = 0;
    if (!ctl_reach_database(ctl, &server_ms))
        return CTL_FAILED;
    bson_t doc;
    bool found = false;
    bson_error_t error;
    bool read = cohort_store_read_service(ctl->store, ctl->client, a->service, &doc, &found,
                                          &error);
    bson_destroy(&doc);
    if (!read) {
        fprintf(stderr, "cohortctl %s: cannot read service '%s': %s\n", cmd->name, a->service,
                error.message);
        return CTL_FAILED;
    }
    if (!found) {
        fprintf(stderr, "cohortctl %s: service '%s' does not exist\n", cmd->name, a->service);
        return CTL_USAGE;
    }
    char by[300];
    ctl_author(by, sizeof by);
    cohort_task_change_t change = {
        .action = cmd->action, .by = by, .now_ms = server_ms, .dry_run = a->dry_run};
    if (a->older_than_ms > 0)
        a->selection.finished_before_ms = server_ms - a->older_than_ms;
    int64_t changed = 1;
    bool ok = a->id ? cohort_store_change_task(ctl->store, ctl->client, a->service, &change,
                                               a->id, &error)
                    : cohort_store_change_tasks(ctl->store, ctl->client, a->service, &change,
                                                &a->selection, &changed, &error);
    if (!ok) {
        bool refused = error.domain == COHORT_DOMAIN_USAGE;
        fprintf(stderr, "cohortctl %s: %s%s\n", cmd->name, refused ? "refused: " : "",
                error.message);
        return refused ? CTL_USAGE : CTL_FAILED;
    }
    printf("%lld\n", (long long)changed);
    return CTL_DONE;
}

static int ops_main(const ops_command_t *cmd, ctl_t *ctl, int argc, char **argv)
{
    ops_args_t a = {0};
    int rc = parse_args(cmd, argc, argv, &a);
    return rc == CTL_DONE ? run(cmd, ctl, &a) : rc;
}

/* retry SERVICE ID | retry SERVICE --status failed|timed_out|cancelled [--kind K] [--limit N]:
 * back to pending and due now, attempts from 0, the history kept with a "retried" entry. */
int cmd_retry(ctl_t *ctl, int argc, char **argv)
{
    return ops_main(&retry_command, ctl, argc, argv);
}

/* cancel SERVICE ID | cancel SERVICE [--status pending] [--kind K] [--group G] [--limit N]:
 * pending tasks end cancelled (final); a claimed one is running and is refused. */
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
