/*
 * cohortd.c - the daemon's command line: run a node, or check a configuration.
 *
 *   cohortd -c cohort.ini                 run a node until SIGTERM/SIGINT
 *   cohortd --check-config -c cohort.ini  list every problem (with line numbers), exit 1 if any
 *   cohortd --print-settings=markdown     the configuration reference, from the settings table
 *                                         (docs/CONFIGURATION.md is this output)
 *
 * Hidden: `cohortd --worker -c FILE --service NAME --node-id ID` is a child worker process of
 * a node whose service runs with isolation = process (see isolate.h); the node starts it.
 */
#include <getopt.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/settings.h"
#include "node/check.h"
#include "node/isolate_child.h"
#include "core/log.h"
#include "node/node.h"

#ifndef COHORT_VERSION
#define COHORT_VERSION "0.0.0"
#endif

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: cohortd -c FILE            run a Cohort node\n"
            "       cohortd --check-config -c FILE\n"
            "                                 validate FILE (and load its handlers), list every\n"
            "                                 problem with its line number; exit 0 if none\n"
            "       cohortd --print-settings=markdown\n"
            "                                 print the configuration reference (every key,\n"
            "                                 its default, range and meaning)\n"
            "       cohortd --version | --help\n"
            "\n"
            "Environment: MONGODB_URI overrides [cluster] mongodb_uri.\n"
            "Signals: SIGTERM/SIGINT stop claiming, step down, let running tasks finish\n"
            "         within shutdown_grace_ms, then exit 0.\n");
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", no_argument, NULL, 'k'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {"worker", no_argument, NULL, 'W'},
        {"service", required_argument, NULL, 'S'},
        {"node-id", required_argument, NULL, 'N'},
        {"print-settings", required_argument, NULL, 'P'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL;
    bool check = false;
    bool worker = false;
    const char *worker_service = NULL, *worker_node = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, "c:h", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'k':
            check = true;
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
            if (strcmp(optarg, "markdown") != 0) {
                fprintf(stderr, "cohortd: --print-settings takes 'markdown'\n");
                return 2;
            }
            cohort_settings_print_markdown(stdout);
            return fflush(stdout) == 0 ? 0 : 1;
        case 'V':
            printf("cohortd %s (handler ABI %d, libmongoc %s)\n", COHORT_VERSION,
                   COHORT_HANDLER_ABI_VERSION, mongoc_get_version());
            return 0;
        case 'h':
            usage(stdout);
            return 0;
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
    if (!path) {
        fprintf(stderr, "cohortd: no configuration file (use -c FILE)\n");
        usage(stderr);
        return 2;
    }

    /* libmongoc's shared-memory counters are not used (commands are counted through APM),
     * and when /dev/shm is short it prints a warning at init, before any log handler, which
     * would break a JSON log stream. */
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
