/*
 * ctl_main.c - cohortctl, the operator's tool: its global options, its help and the
 * dispatch to one command file per group (ctl_status.c, ctl_enqueue.c, ctl_switches.c,
 * ctl_tasks.c, ctl_data.c, ctl_settings.c, ctl_nodes.c; shared helpers in ctl_common.c).
 *
 *   cohortctl [-c FILE] status [--json]
 *   cohortctl [-c FILE] enqueue SERVICE [--count N] [--data JSON] [--tracked] [scheduling flags]
 *   cohortctl [-c FILE] pause|resume SERVICE [--kind K]
 *   cohortctl [-c FILE] block SERVICE [--kind K] --reason TEXT | unblock SERVICE [--kind K]
 *   cohortctl [-c FILE] counts SERVICE [--by status|kind|group] [--json]
 *   cohortctl [-c FILE] tasks SERVICE [--status S] [--limit N] [--json]
 *   cohortctl [-c FILE] task SERVICE ID
 *   cohortctl [-c FILE] data get|set|unset SERVICE KEY [JSON]
 *   cohortctl [-c FILE] settings get|set|unset SERVICE [KEY [VALUE]]
 *   cohortctl [-c FILE] nodes [--json]
 *   cohortctl [-c FILE] tokens create NAME --scopes S,... | tokens list [--json] | revoke NAME
 *
 * The database comes from FILE's [cluster] section, or without -c from MONGODB_URI and
 * --database (default "cohort"). MONGODB_URI always wins over the file, as in cohortd.
 * Task options given to `enqueue` go through the same parser as cohort_task_create()'s
 * (taskopts.h), with the service's defaults from FILE when it has the service.
 * Exit status: 0 done, 1 failed (database, missing service or task), 2 bad usage.
 * Every command parses its own flags with getopt_long; options may follow the operands.
 */
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/config.h"
#include "core/log.h"
#include "store/store.h"

#ifndef COHORT_VERSION
#define COHORT_VERSION "0.0.0"
#endif

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: cohortctl [-c FILE | --database NAME] COMMAND ...\n"
            "\n"
            "Commands:\n"
            "  status [--json]      per service: primary (node, epoch, last active), task\n"
            "                       counts by status, and what is paused or blocked\n"
            "  enqueue SERVICE [--count N] [--data JSON] [--tracked] [options]\n"
            "                       insert N tasks (default 1) with the JSON document as data\n"
            "                       (default {}); tracked tasks join the service's open batch.\n"
            "                       Prints the id (without --count) or the number inserted.\n"
            "    --priority N         higher is claimed first (-1000000..1000000)\n"
            "    --delay DUR          not claimable before server now + DUR\n"
            "    --not-before TIME    not claimable before TIME\n"
            "    --not-after TIME     promoted (priority + not_after_boost) if pending at TIME\n"
            "    --deadline DUR       the same, DUR after the task is due\n"
            "    --timeout DUR        a run longer than DUR ends timed_out (never retried)\n"
            "    --kind K             the task's kind (1-64 of A-Z a-z 0-9 _ -)\n"
            "    --group G            no two tasks of group G run at the same time\n"
            "    --coalesce-key K     while a task with key K is pending, update it instead\n"
            "    --unique-key K       at most one task with key K ever exists\n"
            "                       With --coalesce-key or --unique-key, --count N creates one\n"
            "                       by one and prints created=N coalesced=N (existing=N).\n"
            "                       DUR: 250ms, 30s, 5m, 2h, 1d or a number of ms; TIME: ms\n"
            "                       since the epoch or UTC like 2026-11-21T10:00:00Z\n"
            "  pause SERVICE [--kind K] [--reason TEXT] | resume SERVICE [--kind K]\n"
            "                       the owner's switch: paused tasks stay pending, unclaimed\n"
            "  block SERVICE [--kind K] --reason TEXT | unblock SERVICE [--kind K]\n"
            "                       the operator's switch, shown with its reason; without\n"
            "                       --kind both apply to the whole service; nodes apply them\n"
            "                       by their next tick and let running tasks finish\n"
            "  counts SERVICE [--by status|kind|group] [--json]\n"
            "                       task counts by status (default), or kind or group x status\n"
            "  tasks SERVICE [--status S] [--limit N] [--json]\n"
            "                       tasks in claim order (default: any status, 50)\n"
            "  task SERVICE ID      one task's whole document as JSON\n"
            "  data get SERVICE KEY | data set SERVICE KEY JSON | data unset SERVICE KEY\n"
            "                       the service's generic data (any JSON value)\n"
            "  nodes [--json]       nodes seen in the last day: live or expired, last ping\n"
            "  tokens create NAME --scopes read,enqueue,operate,work,admin\n"
            "                       a token for the HTTP API, printed once (only its hash is\n"
            "                       stored); tokens list [--json]; tokens revoke NAME\n"
            "  settings get SERVICE | settings set SERVICE KEY VALUE | settings unset SERVICE KEY\n"
            "                       live settings (tick_ms, takeover_ms, primary_task_count,\n"
            "                       secondary_task_count, stall_timeout_ms, *_retention_ms):\n"
            "                       the database value wins over the config file while set\n"
            "\n"
            "The database is taken from FILE, or from MONGODB_URI (default\n"
            "mongodb://127.0.0.1:27017) and --database (default cohort).\n"
            "Exit status: 0 done, 1 failed, 2 bad usage.\n");
}

/* The commands, by the word that names them. */
static const struct command {
    const char *name;
    int (*run)(ctl_t *ctl, int argc, char **argv);
} commands[] = {
    {"status", cmd_status},     /* ctl_status.c */
    {"enqueue", cmd_enqueue},   /* ctl_enqueue.c */
    {"pause", cmd_switch},      /* ctl_switches.c */
    {"resume", cmd_switch},
    {"block", cmd_switch},
    {"unblock", cmd_switch},
    {"counts", cmd_counts},     /* ctl_tasks.c */
    {"tasks", cmd_tasks},
    {"task", cmd_task},
    {"data", cmd_data},         /* ctl_data.c */
    {"settings", cmd_settings}, /* ctl_settings.c */
    {"nodes", cmd_nodes},       /* ctl_nodes.c */
    {"tokens", cmd_tokens},     /* ctl_tokens.c */
};

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"database", required_argument, NULL, 'd'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL, *database = NULL;
    int opt;
    /* "+": stop at the command, whose own flags come after it */
    while ((opt = getopt_long(argc, argv, "+c:d:h", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'd':
            database = optarg;
            break;
        case 'V':
            printf("cohortctl %s\n", COHORT_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    setenv("MONGOC_DISABLE_SHM", "1", 0); /* see cohortd.c */
    cohort_log_route_mongoc();
    mongoc_init();
    ctl_t ctl = {0};
    int rc = CTL_USAGE;
    if (path) {
        cohort_config_errors_t errors = {0};
        ctl.config = cohort_config_load(path, &errors);
        for (size_t i = 0; i < errors.count; i++)
            fprintf(stderr, "%s\n", errors.messages[i]);
        cohort_config_errors_clear(&errors);
        if (!ctl.config)
            goto out;
        ctl.uri = ctl.config->mongodb_uri;
        ctl.database = database ? database : ctl.config->database;
    } else {
        const char *env = getenv("MONGODB_URI");
        ctl.uri = env && *env ? env : "mongodb://127.0.0.1:27017";
        ctl.database = database ? database : "cohort";
    }
    const char *command = argv[optind];
    size_t i = 0;
    while (i < sizeof commands / sizeof commands[0] && strcmp(command, commands[i].name) != 0)
        i++;
    if (i < sizeof commands / sizeof commands[0]) {
        rc = commands[i].run(&ctl, argc - optind, argv + optind);
    } else {
        fprintf(stderr, "cohortctl: unknown command '%s'\n", command);
        usage(stderr);
    }
out:
    if (ctl.store) {
        cohort_store_push(ctl.store, ctl.client);
        cohort_store_destroy(ctl.store);
    }
    cohort_config_destroy(ctl.config);
    mongoc_cleanup();
    return rc;
}
