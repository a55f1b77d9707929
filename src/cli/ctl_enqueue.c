/*
 * ctl_enqueue.c - `cohortctl enqueue SERVICE [--count N] [--data JSON] [--tracked] [--create]
 * [flags]`: inserts tasks as cohort_task_create() would.
 *
 * Its flags other than --count, --data and --create are the rows of the task options table
 * (taskopts.h): each sets one task option and is checked alone by the shared parser, so a
 * refusal names the flag; then the whole set is checked together, with
 * the service's defaults from the config file when it has the service. Tasks are due "now"
 * on the server's clock. Tasks go only into a service a node has run (or --create made):
 * elsewhere no node would ever claim them and `status` would not show them, and unique and
 * coalesce keys would lack the queue's indexes.
 *
 * SIGINT and SIGTERM during --count N stop the inserts between two bulk writes, so the count
 * printed is exactly what went in.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/jsondoc.h"
#include "core/taskopts.h"
#include "core/timefmt.h"
#include "store/batches.h"
#include "store/insert.h"
#include "store/nodes.h"
#include "store/services.h"

/* The values getopt_long() returns for enqueue's options. */
enum {
    OPT_COUNT = 'n',
    OPT_DATA = 'D',
    OPT_CREATE = 'C',
    OPT_TASK = 'S', /* a task option's flag (taskopts.h), told apart by name */
};

cli_option_t ctl_enqueue_options[CLI_MAX_OPTIONS + 1];

void ctl_enqueue_describe(void)
{
    static const cli_option_t own[] = {
        {"count", "N", OPT_COUNT, CLI_LONG_ONLY,
         "insert N tasks (1..100000000) with unordered bulk writes and print their number",
         NULL},
        {"data", "JSON", OPT_DATA, CLI_LONG_ONLY, "the tasks' data, a JSON object (default {})",
         NULL},
        {"create", NULL, OPT_CREATE, CLI_LONG_ONLY,
         "create the service (its config document and queue indexes, as a node does at "
         "start-up) if no node has run it yet",
         NULL},
    };
    size_t n = 0;
    for (; n < sizeof own / sizeof own[0]; n++)
        ctl_enqueue_options[n] = own[n];
    for (const cohort_task_option_t *r = cohort_task_option_table; r->name; r++)
        ctl_enqueue_options[n++] =
            (cli_option_t){r->flag, r->arg, OPT_TASK, CLI_LONG_ONLY, r->doc, NULL};
    ctl_enqueue_options[n] = (cli_option_t){NULL, NULL, 0, 0, NULL, NULL};
}

/* The task option whose flag is `name` (a long option without "--"), or NULL. */
static const cohort_task_option_t *find_enqueue_flag(const char *name)
{
    for (const cohort_task_option_t *r = cohort_task_option_table; r->name; r++)
        if (strcmp(r->flag, name) == 0)
            return r;
    return NULL;
}

/* Tasks per bulk write of --count N: an interruption waits for at most one. */
#define ENQUEUE_CHUNK 1000

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* From here on SIGINT and SIGTERM only set `interrupted`; the loops check it. */
static void catch_interrupts(void)
{
    struct sigaction sa = {.sa_handler = on_interrupt, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* After an interrupted --count N: how far it got, on stderr (the count is on stdout). */
static int report_interrupt(int64_t done, int64_t count)
{
    fprintf(stderr, "cohortctl enqueue: interrupted after %lld of %lld tasks\n",
            (long long)done, (long long)count);
    return CTL_INTERRUPTED;
}

/* Appends the flag's value to `opts` as its task option and checks it alone with the shared
 * parser, so that a refusal names the flag. False (message printed) if it is bad. */
static bool add_enqueue_flag(const cohort_task_option_t *r, const char *value, bson_t *opts)
{
    int64_t number = 0;
    bool ok = true;
    const char *expect = "";
    switch (r->type) {
    case COHORT_TASK_OPTION_INT:
        ok = ctl_parse_int(value, &number);
        expect = "an integer";
        break;
    case COHORT_TASK_OPTION_DURATION:
        ok = cohort_duration_parse(value, &number);
        expect = "a duration like 250ms, 30s, 5m, 2h, 1d or a number of ms";
        break;
    case COHORT_TASK_OPTION_TIME:
        ok = cohort_time_parse(value, &number);
        expect = "ms since the epoch or a UTC time like 2026-11-21T10:00:00Z";
        break;
    default:
        break;
    }
    if (!ok) {
        fprintf(stderr, "cohortctl enqueue: --%s '%s' must be %s\n", r->flag, value, expect);
        return false;
    }
    bson_t one = BSON_INITIALIZER;
    if (r->type == COHORT_TASK_OPTION_BOOL)
        BSON_APPEND_BOOL(&one, r->name, true);
    else if (r->type == COHORT_TASK_OPTION_STRING || r->type == COHORT_TASK_OPTION_KIND)
        BSON_APPEND_UTF8(&one, r->name, value);
    else
        BSON_APPEND_INT64(&one, r->name, number);
    cohort_task_options_t parsed;
    bson_error_t why;
    ok = cohort_task_options_parse(&one, false, &parsed, &why);
    if (ok)
        bson_concat(opts, &one);
    else
        fprintf(stderr, "cohortctl enqueue: --%s '%s': %s\n", r->flag, value, why.message);
    bson_destroy(&one);
    return ok;
}

/* The parser's message about the options document, with the flags that set the options it
 * names ("... (--delay sets delay_ms, --not-before sets not_before)"). */
static void print_options_refusal(const char *why)
{
    fprintf(stderr, "cohortctl enqueue: %s", why);
    const char *sep = " (";
    for (const cohort_task_option_t *r = cohort_task_option_table; r->name; r++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", r->name);
        if (strstr(why, quoted)) {
            fprintf(stderr, "%s--%s sets %s", sep, r->flag, r->name);
            sep = ", ";
        }
    }
    fprintf(stderr, "%s\n", sep[0] == ',' ? ")" : "");
}

/* Creates the tasks one at a time (each may coalesce or exist already) and prints the
 * counts. */
static int enqueue_one_by_one(ctl_t *ctl, const char *service, const cohort_new_task_t *task,
                              int64_t count)
{
    int64_t created = 0, merged = 0, existing = 0, i = 0;
    bson_error_t error;
    bool ok = true;
    for (; ok && i < count && !interrupted; i++) {
        bool exists = false, coalesced = false;
        ok = cohort_store_insert_task(ctl->store, ctl->client, service, task, NULL, &exists,
                                      &coalesced, &error);
        if (!ok && exists) {
            existing++;
            ok = true;
        } else if (ok) {
            *(coalesced ? &merged : &created) += 1;
        }
    }
    if (task->coalesce_key)
        printf("created=%lld coalesced=%lld\n", (long long)created, (long long)merged);
    else
        printf("created=%lld existing=%lld\n", (long long)created, (long long)existing);
    if (!ok)
        fprintf(stderr, "cohortctl enqueue: %s\n", error.message);
    if (ok && i < count)
        return report_interrupt(i, count);
    return ok ? CTL_DONE : CTL_FAILED;
}

/* Inserts `count` tasks in bulk writes and prints how many went in. */
static int enqueue_bulk(ctl_t *ctl, const char *service, const cohort_new_task_t *task,
                        int64_t count)
{
    int64_t inserted = 0;
    bson_error_t error;
    bool ok = true;
    while (ok && inserted < count && !interrupted) {
        int64_t chunk = count - inserted < ENQUEUE_CHUNK ? count - inserted : ENQUEUE_CHUNK;
        int64_t done = 0;
        ok = cohort_store_insert_tasks(ctl->store, ctl->client, service, task, chunk, &done,
                                       &error);
        inserted += done;
    }
    printf("%lld\n", (long long)inserted);
    fflush(stdout);
    if (!ok)
        fprintf(stderr, "cohortctl enqueue: %s\n", error.message);
    if (ok && inserted < count)
        return report_interrupt(inserted, count);
    return ok ? CTL_DONE : CTL_FAILED;
}

/* Creates one task and prints its id. */
static bool enqueue_single(ctl_t *ctl, const char *service, const cohort_new_task_t *task)
{
    bson_oid_t oid;
    bool exists = false, coalesced = false;
    bson_error_t error;
    if (!cohort_store_insert_task(ctl->store, ctl->client, service, task, &oid, &exists,
                                  &coalesced, &error)) {
        if (exists)
            fprintf(stderr,
                    "cohortctl enqueue: not created: a task with unique key '%s' exists "
                    "already\n",
                    task->unique_key);
        else
            fprintf(stderr, "cohortctl enqueue: %s\n", error.message);
        return false;
    }
    char id[25];
    bson_oid_to_string(&oid, id);
    printf("%s\n", id);
    if (coalesced)
        fprintf(stderr,
                "cohortctl enqueue: coalesced: pending task %s (coalesce key '%s') took the "
                "new data\n",
                id, task->coalesce_key);
    return true;
}

/* Makes sure the service exists: creates it (as a node does at start-up) with `create` or
 * when the -c file hosts it (its nodes will run it), otherwise refuses an unknown one. A
 * status. */
static int require_service(ctl_t *ctl, const char *service, bool create)
{
    create |= ctl->config && cohort_config_find_service(ctl->config, service);
    if (!create) {
        int rc = ctl_check_service(ctl, service, "enqueue");
        if (rc == CTL_REFUSED)
            fprintf(stderr, "cohortctl enqueue: nothing inserted; --create makes the service "
                            "first, as a node does at start-up\n");
        return rc;
    }
    bson_error_t error;
    if (!cohort_store_ensure_service(ctl->store, ctl->client, service, &error)) {
        fprintf(stderr, "cohortctl enqueue: cannot create service '%s': %s\n", service,
                error.message);
        return CTL_FAILED;
    }
    return CTL_DONE;
}

/* Inserts the tasks with the parsed options: one, its id printed (count 0), or `count`, their
 * number printed. A status (message printed). */
static int enqueue_tasks(ctl_t *ctl, const char *service, const cohort_task_options_t *options,
                         const bson_t *data, int64_t count, bool create)
{
    if (!ctl_open_store(ctl))
        return CTL_FAILED;
    bson_error_t error;
    int64_t server_now = 0;
    /* Tasks are due "now" on the server's clock, not this machine's. */
    if (!cohort_store_server_time(ctl->store, ctl->client, &server_now, &error)) {
        fprintf(stderr, "cohortctl: cannot reach the database: %s\n", error.message);
        return CTL_FAILED;
    }
    int rc = require_service(ctl, service, create);
    if (rc != CTL_DONE)
        return rc;
    cohort_new_task_t task = {.data = data,
                              .tracked = options->tracked,
                              .unique_key = options->unique_key,
                              .created_by = "cohortctl",
                              .now_ms = server_now};
    /* The service's defaults (per kind) when the file has the service; else built-in. */
    const cohort_service_config_t *section =
        ctl->config ? cohort_config_find_service(ctl->config, service) : NULL;
    cohort_task_options_apply(options, section, &task);
    cohort_batch_state_t batches = {.open = 1};
    if (task.tracked &&
        !cohort_store_batch_state(ctl->store, ctl->client, service, &batches, &error)) {
        fprintf(stderr, "cohortctl enqueue: %s\n", error.message);
        return CTL_FAILED;
    }
    task.batch = batches.open;
    if (count == 0)
        return enqueue_single(ctl, service, &task) ? CTL_DONE : CTL_FAILED;
    catch_interrupts();
    if (task.coalesce_key || task.unique_key)
        return enqueue_one_by_one(ctl, service, &task, count);
    return enqueue_bulk(ctl, service, &task, count);
}

/* enqueue SERVICE [--count N] [--data JSON] [--tracked] [--create] [scheduling flags] */
int cmd_enqueue(ctl_t *ctl, int argc, char **argv)
{
    struct option longopts[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, longopts);
    const char *service = NULL, *data_json = NULL;
    int64_t count = 1;
    bool count_given = false, create = false, given[COHORT_TASK_OPTIONS_MAX] = {false};
    bson_t opts = BSON_INITIALIZER;
    int rc = CTL_USAGE;
    int opt, index = 0;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", longopts, &index)) != -1) {
        const cohort_task_option_t *flag =
            opt == OPT_TASK ? find_enqueue_flag(longopts[index].name) : NULL;
        if (flag) {
            size_t f = (size_t)(flag - cohort_task_option_table);
            if (given[f] && flag->type == COHORT_TASK_OPTION_BOOL)
                continue; /* --tracked twice is --tracked */
            if (given[f]) {
                fprintf(stderr, "cohortctl enqueue: --%s given twice\n", flag->flag);
                goto out;
            }
            given[f] = true;
            if (!add_enqueue_flag(flag, optarg, &opts))
                goto out;
        } else if (opt == OPT_COUNT) {
            if (!ctl_parse_int(optarg, &count) || count < 1 || count > 100000000) {
                fprintf(stderr, "cohortctl enqueue: --count '%s' must be 1..100000000\n",
                        optarg);
                goto out;
            }
            count_given = true;
        } else if (opt == OPT_DATA) {
            data_json = optarg;
        } else if (opt == OPT_CREATE) {
            create = true;
        } else if (opt == ':') {
            fprintf(stderr, "cohortctl enqueue: %s needs a value\n", ctl_bad_arg(argv));
            goto out;
        } else {
            fprintf(stderr, "cohortctl enqueue: unexpected argument '%s'\n", ctl_bad_arg(argv));
            goto out;
        }
    }
    if (optind < argc)
        service = argv[optind];
    if (optind + 1 < argc) {
        fprintf(stderr, "cohortctl enqueue: unexpected argument '%s'\n", argv[optind + 1]);
        goto out;
    }
    if (!service) {
        fprintf(stderr, "cohortctl enqueue: which SERVICE?\n");
        goto out;
    }
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl enqueue: '%s' is not a valid service name\n", service);
        goto out;
    }
    /* The same parser as cohort_task_create()'s: what it refuses, cohortctl refuses. */
    cohort_task_options_t options;
    bson_error_t why;
    if (!cohort_task_options_parse(&opts, false, &options, &why)) {
        print_options_refusal(why.message);
        goto out;
    }
    bson_t parsed, *data = NULL;
    if (data_json) {
        if (data_json[strspn(data_json, " \t\r\n")] != '{') {
            fprintf(stderr, "cohortctl enqueue: --data must be a JSON object, like '{\"k\": 1}'\n");
            goto out;
        }
        bson_error_t error;
        if (!cohort_json_parse_doc(data_json, false, &parsed, &error)) {
            fprintf(stderr, "cohortctl enqueue: --data is not a JSON object Cohort can store: %s\n", error.message);
            goto out;
        }
        data = &parsed;
    }
    rc = enqueue_tasks(ctl, service, &options, data, count_given ? count : 0, create);
    bson_destroy(data);
out:
    bson_destroy(&opts);
    return rc;
}

