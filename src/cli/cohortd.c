/*
 * cohortd.c - the daemon's command line: run a node, or check a configuration.
 *
 *   cohortd -c cohort.ini                 run a node until SIGTERM/SIGINT
 *   cohortd --check-config -c cohort.ini  list every problem (with line numbers), exit 1 if any
 *   cohortd --print-settings=markdown     the configuration reference, from the settings table
 *                                         (docs/CONFIGURATION.md is this output)
 *   cohortd --print-task-options=markdown the task options' reference, from their table
 *                                         (docs/API.md and docs/CLI.md hold this output)
 *   cohortd --print-man                   the man page cohortd(1), settings included
 *
 * `cohortd --worker -c FILE --service NAME --node-id ID` is a child worker process of a node
 * whose service runs with isolation = process (see isolate.h); the node starts it.
 * Every option is a row of `options` below, from which getopt_long()'s array, --help, the man
 * page and the bash completion are rendered (help.h).
 */
#include <getopt.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/help.h"
#include "core/config.h"
#include "core/settings.h"
#include "core/taskopts.h"
#include "core/timefmt.h"
#include "node/handler/check.h"
#include "node/handler/isolate_child.h"
#include "core/log.h"
#include "node/node.h"

#ifndef COHORT_VERSION
#define COHORT_VERSION "0.0.0"
#endif

static const cli_option_t options[] = {
    {"config", "FILE", 'c', CLI_SHORT, "the configuration file (INI; see SETTINGS)", NULL},
    {"check-config", NULL, 'k', CLI_LONG_ONLY,
     "validate FILE and load its handlers, list every problem with its line number; exit 0 if "
     "none, 1 otherwise",
     NULL},
    {"explain-schedules", NULL, 'X', CLI_LONG_ONLY,
     "with --check-config: print each schedule.ID line's next 3 fire times (UTC and the "
     "schedule's zone) after this machine's clock",
     NULL},
    {"print-settings", "FORMAT", 'P', CLI_LONG_ONLY,
     "print the configuration reference (every key, its default, range and meaning) as "
     "markdown, the only FORMAT; docs/CONFIGURATION.md is this output",
     "markdown"},
    {"print-task-options", "FORMAT", 'T', CLI_LONG_ONLY,
     "print the task options' reference (every option, its API field, cohortctl enqueue flag "
     "and value) as markdown, the only FORMAT; docs/API.md and docs/CLI.md hold this output",
     "markdown"},
    {"print-man", NULL, 'M', CLI_LONG_ONLY, "print this man page (roff) and exit", NULL},
    {"print-completion", NULL, 'B', CLI_LONG_ONLY, "print the bash completion script and exit",
     NULL},
    {"version", NULL, 'V', CLI_LONG_ONLY,
     "print the version, the handler ABI and libmongoc's version, and exit", NULL},
    {"help", NULL, 'h', CLI_SHORT, "print this help and exit", NULL},
    {"worker", NULL, 'W', CLI_LONG_ONLY,
     "run as a child worker process of a node whose service has isolation = process (with -c, "
     "--service and --node-id); the node starts it, do not run it by hand",
     NULL},
    {"service", "NAME", 'S', CLI_LONG_ONLY, "with --worker: the service it works for", NULL},
    {"node-id", "ID", 'N', CLI_LONG_ONLY, "with --worker: the node that started it", NULL},
    {NULL, NULL, 0, 0, NULL, NULL},
};

/* The man page's SETTINGS: every key of the settings table, with its meaning. */
static void man_settings(FILE *out)
{
    static const char *const titles[] = {"[cluster]", "[service:NAME]"};
    fputs(".SH SETTINGS\n", out);
    cli_man_text(out, "The file has a [cluster] section and one [service:NAME] section per "
                      "service. The full reference, with types, defaults and ranges, is "
                      "docs/CONFIGURATION.md (`cohortd --print-settings=markdown`).");
    for (int section = COHORT_SECTION_CLUSTER; section <= COHORT_SECTION_SERVICE; section++) {
        fprintf(out, ".SS %s\n", titles[section]);
        for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
            if ((int)r->section != section)
                continue;
            fputs(".TP\n.B ", out);
            cli_man_text(out, r->name);
            cli_man_text(out, r->doc);
        }
    }
}

static const cli_program_t program = {
    .name = "cohortd",
    .summary = "run a Cohort node",
    .synopsis = "-c FILE\n"
                "--check-config -c FILE\n"
                "--print-settings=markdown | --print-man | --print-completion\n"
                "--version | --help",
    .description =
        "A node of Cohort, a leader-elected cluster service on MongoDB. It hosts the services "
        "of its configuration file: on every tick it tries to become or stay each service's "
        "primary, and its workers claim tasks and run them through the service's handler.",
    .options = options,
    .sections = (const cli_section_t[]){
        {"ENVIRONMENT", "MONGODB_URI overrides [cluster] mongodb_uri."},
        {"SIGNALS", "SIGTERM, SIGINT: stop claiming, step down, let running tasks finish within "
                    "shutdown_grace_ms, then exit 0.\nSIGHUP: re-read the file (see "
                    "docs/OPERATING.md)."},
        {"EXIT STATUS", "0 done (or the file is good), 1 a problem (named), 2 bad usage."},
        {"SEE ALSO", "cohortctl(1); docs/CONFIGURATION.md, docs/OPERATING.md and "
                     "docs/HANDLERS.md in the source tree."},
        {NULL, NULL},
    },
    .man_extra = man_settings,
};

static void usage(FILE *out)
{
    cli_print_usage(out, &program);
}

/* --explain-schedules: each schedule's next fire times, so a person can see that the
 * expression and the zone mean what they meant. */
static void explain_schedules(const cohort_config_t *config)
{
    int64_t now = (int64_t)time(NULL) * 1000;
    for (size_t i = 0; i < config->n_services; i++) {
        const cohort_service_config_t *s = &config->services[i];
        for (size_t j = 0; j < s->n_schedules; j++) {
            const cohort_schedule_config_t *sc = &s->schedules[j];
            printf("%s line %d: [service:%s] schedule.%s = %s\n  zone %s, catch_up %s "
                   "(catch_up_max %lld); next:\n",
                   config->path ? config->path : "", sc->line, s->name, sc->id, sc->cron_text,
                   cohort_tz_name(sc->tz), cohort_catch_up_name(sc->catch_up),
                   (long long)sc->catch_up_max);
            int64_t t = now;
            for (int k = 0; k < 3; k++) {
                if (!cohort_cron_next(&sc->cron, sc->tz, t, &t)) {
                    printf("    (no more fire times within 30 years)\n");
                    break;
                }
                char utc[COHORT_TIME_TEXT_MAX], local[COHORT_TIME_TEXT_MAX];
                int32_t off = cohort_tz_offset(sc->tz, t / 1000);
                cohort_time_format(t + off * 1000LL, local, sizeof local);
                cohort_time_format(t, utc, sizeof utc);
                local[19] = '\0'; /* 2026-11-25T03:00:00 */
                int32_t a = off < 0 ? -off : off;
                printf("    %s   %s %c%02d:%02d %s\n", utc, local, off < 0 ? '-' : '+',
                       a / 3600, a / 60 % 60, cohort_tz_name(sc->tz));
            }
        }
    }
}

/* --print-settings=FORMAT and --print-task-options=FORMAT: `print` renders the reference for
 * `format`, which must be markdown. The exit status. */
static int print_markdown(const char *option, const char *format, void (*print)(FILE *out))
{
    if (strcmp(format, "markdown") != 0) {
        fprintf(stderr, "cohortd: %s takes 'markdown'\n", option);
        return 2;
    }
    print(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    struct option longopts[CLI_MAX_OPTIONS + 1];
    char shortopts[16];
    cli_longopts(options, longopts);
    cli_shortopts(options, "", shortopts, sizeof shortopts);
    const char *path = NULL;
    bool check = false, explain = false;
    bool worker = false;
    const char *worker_service = NULL, *worker_node = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'k':
            check = true;
            break;
        case 'X':
            explain = true;
            break;
        case 'W':
            worker = true;
            break;
        case 'S':
            worker_service = optarg;
            break;
        case 'N':
            worker_node = optarg;
            break;
        case 'P':
            return print_markdown("--print-settings", optarg, cohort_settings_print_markdown);
        case 'T':
            return print_markdown("--print-task-options", optarg,
                                  cohort_task_options_print_markdown);
        case 'V':
            printf("cohortd %s (handler ABI %d, libmongoc %s)\n", COHORT_VERSION,
                   COHORT_HANDLER_ABI_VERSION, mongoc_get_version());
            return 0;
        case 'h':
            cli_print_help(stdout, &program);
            return 0;
        case 'M':
            cli_print_man(stdout, &program);
            return fflush(stdout) == 0 ? 0 : 1;
        case 'B':
            cli_print_bash_completion(stdout, &program);
            return fflush(stdout) == 0 ? 0 : 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "cohortd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (explain && !check) {
        fprintf(stderr, "cohortd: --explain-schedules goes with --check-config\n");
        usage(stderr);
        return 2;
    }
    if (!path) {
        fprintf(stderr, "cohortd: no configuration file (use -c FILE)\n");
        usage(stderr);
        return 2;
    }

    /* libmongoc's shared-memory counters are not used (commands are counted through APM),
     * and when /dev/shm is short it prints a warning at init, before any log handler, which
     * would break a JSON log stream. Where libmongoc initialises itself in a constructor
     * (Debian's does) this comes too late, so deploy/ sets it in the environment as well. */
    setenv("MONGOC_DISABLE_SHM", "1", 0);
    cohort_log_route_mongoc();

    if (worker || worker_service || worker_node) {
        if (!worker || !worker_service || !worker_node || check) {
            fprintf(stderr, "cohortd: --worker needs -c FILE, --service NAME and --node-id ID "
                            "(a node starts it; do not run it by hand)\n");
            return 2;
        }
        mongoc_init();
        int rc = cohort_isolate_child_main(path, worker_service, worker_node);
        mongoc_cleanup();
        return rc;
    }

    mongoc_init();
    cohort_config_errors_t errors = {0};
    /* A check goes on past the file's problems to its handlers: every problem in one pass. */
    cohort_config_t *config = check ? cohort_config_check(path, &errors)
                                    : cohort_config_load(path, &errors);
    if (config && check)
        cohort_check_handlers(config, &errors);
    if (config && explain)
        explain_schedules(config);
    int rc;
    if (errors.count > 0 || errors.unrecorded > 0 || !config) {
        for (size_t i = 0; i < errors.count; i++)
            fprintf(stderr, "%s\n", errors.messages[i]);
        fprintf(stderr, "cohortd: %zu problem(s) in %s\n", errors.count + errors.unrecorded, path);
        rc = 1;
    } else if (check) {
        printf("%s: OK (%zu service(s))\n", path, config->n_services);
        rc = 0;
    } else {
        bool abandoned = false;
        rc = cohort_node_run(config, &abandoned);
        if (abandoned) {
            /* Worker threads are still inside handler code after the shutdown grace: exit
             * now, freeing nothing they might still touch (their claims were released). */
            fflush(NULL);
            _exit(rc);
        }
    }
    cohort_config_errors_clear(&errors);
    cohort_config_destroy(config);
    mongoc_cleanup();
    return rc;
}
