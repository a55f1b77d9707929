/*
 * ctl_main.c - cohortctl, the operator's tool: its global options, its help, and the dispatch
 * to one command file per group (ctl_status.c, ctl_enqueue.c, ctl_switches.c, ctl_tasks.c,
 * ctl_data.c, ctl_settings.c, ctl_nodes.c; shared helpers in ctl_common.c). The commands and
 * every option are rows of ctl_commands.c, from which the help, the man page and the bash
 * completion are rendered (help.h).
 *
 * The database comes from FILE's [cluster] section, or without -c from MONGODB_URI and
 * --database (default "cohort"). MONGODB_URI always wins over the file, as in cohortd.
 * Task options given to `enqueue` go through the same parser as cohort_task_create()'s
 * (taskopts.h), with the service's defaults from FILE when it has the service.
 * Exit status: 0 done, 1 failed (database, missing task), 2 bad usage, 130 interrupted.
 * Every command parses its own flags with getopt_long; options may follow the operands.
 * An operator action (pause, retry, settings set...) that reached the database is recorded in
 * the audit as the API's are (store/audit.h): who USER@HOST, via "cohortctl", its words.
 */
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/config.h"
#include "core/log.h"
#include "store/audit.h"
#include "store/nodes.h"
#include "store/store.h"

#ifndef COHORT_VERSION
#define COHORT_VERSION "0.0.0"
#endif

#define AUDIT_WORDS_MAX 32 /* the words of a command the audit records */

/* Whether `argv` (the command and its operands) changes state: what the audit records. */
static bool is_operator_action(int argc, char **argv)
{
    static const char *const always[] = {"pause",     "resume",  "block",   "unblock", "retry",
                                         "cancel",    "delete",  "step-down", "migrate",
                                         "upgrade",   NULL};
    for (int i = 0; always[i]; i++)
        if (strcmp(argv[0], always[i]) == 0)
            return true;
    if (argc < 2)
        return false;
    const char *sub = argv[1];
    if (strcmp(argv[0], "settings") == 0)
        return strcmp(sub, "set") == 0 || strcmp(sub, "unset") == 0;
    if (strcmp(argv[0], "schedules") == 0)
        return strcmp(sub, "pause") == 0 || strcmp(sub, "resume") == 0;
    return false;
}

/* The audit entry of a cohortctl action that reached the database (`argc`, `argv`: the command
and its operands as typed, saved before the command's getopt_long permuted them): {who: USER@HOST, via:
 * "cohortctl", method: "cohortctl", path: its words (at most 400 bytes), service, status: the
 * exit status[, error]}. A failure to record is said on stderr and changes no exit status. */
static void audit_action(ctl_t *ctl, int argc, char **argv, int rc)
{
    if (!ctl->store || rc == CTL_USAGE || !is_operator_action(argc, argv))
        return;
    char by[300], words[401] = "";
    ctl_author(by, sizeof by);
    size_t used = 0;
    for (int i = 0; i < argc && used < sizeof words - 1; i++)
        used += (size_t)snprintf(words + used, sizeof words - used, "%s%s", i ? " " : "",
                                 argv[i]);
    bson_t entry = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&entry, "who", strncmp(by, "cohortctl ", 10) == 0 ? by + 10 : by);
    BSON_APPEND_UTF8(&entry, "via", "cohortctl");
    BSON_APPEND_UTF8(&entry, "method", "cohortctl");
    BSON_APPEND_UTF8(&entry, "path", words);
    /* The SERVICE operand: the first (the second after settings' and schedules' verb); none
     * for the cluster-wide migrate and upgrade, or when an option came first. */
    bool verb = strcmp(argv[0], "settings") == 0 || strcmp(argv[0], "schedules") == 0;
    bool cluster = strcmp(argv[0], "migrate") == 0 || strcmp(argv[0], "upgrade") == 0;
    const char *service = cluster || argc <= (verb ? 2 : 1) ? NULL : argv[verb ? 2 : 1];
    if (service && service[0] != '-')
        BSON_APPEND_UTF8(&entry, "service", service);
    BSON_APPEND_INT32(&entry, "status", rc == CTL_REFUSED ? CTL_USAGE : rc); /* as exited */
    if (rc != CTL_DONE)
        BSON_APPEND_UTF8(&entry, "error", "failed");
    int64_t now = 0;
    bson_error_t error;
    if (!cohort_store_server_time(ctl->store, ctl->client, &now, &error) ||
        !cohort_store_audit(ctl->store, ctl->client, &entry, now, &error))
        fprintf(stderr, "cohortctl: cannot record the action in the audit: %s\n",
                error.message);
    bson_destroy(&entry);
}

/* `help [COMMAND]`: everything, or one command. Needs no database. */
int cmd_help(ctl_t *ctl, int argc, char **argv)
{
    (void)ctl;
    if (argc > 2) {
        fprintf(stderr, "usage: cohortctl help [COMMAND]\n");
        return CTL_USAGE;
    }
    if (argc < 2) {
        cli_print_help(stdout, &ctl_program);
        return CTL_DONE;
    }
    const cli_command_t *command = cli_find_command(&ctl_program, argv[1]);
    if (!command) {
        fprintf(stderr, "cohortctl help: unknown command '%s'\n", argv[1]);
        cli_print_usage(stderr, &ctl_program);
        return CTL_USAGE;
    }
    cli_print_command_help(stdout, &ctl_program, command);
    return CTL_DONE;
}

/* True if the command's arguments ask for its help: --help before any "--". */
static bool wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0)
            return true;
    return false;
}

/* The options that print something and exit: 0 on success, -1 for none of them. */
static int print_and_exit(int opt)
{
    switch (opt) {
    case 'V':
        cli_print_version(stdout, &ctl_program);
        break;
    case 'h':
        cli_print_help(stdout, &ctl_program);
        break;
    case 'M':
        cli_print_man(stdout, &ctl_program);
        break;
    case 'B':
        cli_print_bash_completion(stdout, &ctl_program);
        break;
    default:
        return -1;
    }
    return fflush(stdout) == 0 ? CTL_DONE : CTL_FAILED;
}

int main(int argc, char **argv)
{
    ctl_enqueue_describe();
    struct option options[CLI_MAX_OPTIONS + 1];
    char shortopts[32];
    cli_longopts(ctl_program.options, options);
    /* "+": stop at the command, whose own flags come after it */
    cli_shortopts(ctl_program.options, "+", shortopts, sizeof shortopts);
    const char *path = NULL, *database = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, shortopts, options, NULL)) != -1) {
        if (opt == 'c') {
            path = optarg;
        } else if (opt == 'd') {
            database = optarg;
        } else {
            int rc = print_and_exit(opt);
            if (rc < 0)
                cli_print_usage(stderr, &ctl_program);
            return rc < 0 ? CTL_USAGE : rc;
        }
    }
    if (optind >= argc) {
        cli_print_usage(stderr, &ctl_program);
        return CTL_USAGE;
    }
    const cli_command_t *command = cli_find_command(&ctl_program, argv[optind]);
    if (!command) {
        fprintf(stderr, "cohortctl: unknown command '%s' (`cohortctl help` lists them)\n",
                argv[optind]);
        cli_print_usage(stderr, &ctl_program);
        return CTL_USAGE;
    }
    if (wants_help(argc - optind, argv + optind)) {
        cli_print_command_help(stdout, &ctl_program, command);
        return CTL_DONE;
    }
    setenv("MONGOC_DISABLE_SHM", "1", 0); /* see cohortd.c */
    cohort_log_route_mongoc();
    mongoc_init();
    ctl_t ctl = {.command = command};
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
    char *typed[AUDIT_WORDS_MAX]; /* the words as typed: getopt_long permutes argv */
    int ntyped = argc - optind < AUDIT_WORDS_MAX ? argc - optind : AUDIT_WORDS_MAX;
    memcpy(typed, argv + optind, (size_t)ntyped * sizeof *typed);
    rc = command->run(&ctl, argc - optind, argv + optind);
    audit_action(&ctl, ntyped, typed, rc);
    if (rc == CTL_USAGE)
        fprintf(stderr, "usage: cohortctl %s %s\n", command->name, command->synopsis);
    else if (rc == CTL_REFUSED)
        rc = CTL_USAGE;
out:
    if (ctl.store) {
        cohort_store_push(ctl.store, ctl.client);
        cohort_store_destroy(ctl.store);
    }
    cohort_config_destroy(ctl.config);
    mongoc_cleanup();
    return rc;
}
