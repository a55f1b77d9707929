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
#include <errno.h>
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
    OPT_FROM = 'F',
    OPT_TASK = 'S', /* a task option's flag (taskopts.h), told apart by name */
};

cli_option_t ctl_enqueue_options[CLI_MAX_OPTIONS + 1];

void ctl_enqueue_describe(void)
{
    static const cli_option_t own[] = {
        {"count", "N", OPT_COUNT, CLI_LONG_ONLY,
         "insert N tasks (1..100000000) with unordered bulk writes and print their number",
         NULL},
        {"data", "JSON", OPT_DATA, CLI_LONG_ONLY,
         "the tasks' data, a JSON object (default {}); @FILE reads it from FILE, - from stdin",
         NULL},
        {"from", "FILE", OPT_FROM, CLI_LONG_ONLY,
         "one task per line of FILE (- : stdin), each a JSON object as the HTTP API's POST "
         "body: data and task options; this command's options fill in what a line does not "
         "set. Every line is checked before any is inserted",
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
    ctl_progress_t progress;
    ctl_progress_start(&progress, "enqueue", count);
    for (; ok && i < count && !interrupted; i++) {
        ctl_progress_update(&progress, i);
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
    ctl_progress_end(&progress);
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
    ctl_progress_t progress;
    ctl_progress_start(&progress, "enqueue", count);
    while (ok && inserted < count && !interrupted) {
        int64_t chunk = count - inserted < ENQUEUE_CHUNK ? count - inserted : ENQUEUE_CHUNK;
        int64_t done = 0;
        ok = cohort_store_insert_tasks(ctl->store, ctl->client, service, task, chunk, &done,
                                       &error);
        inserted += done;
        ctl_progress_update(&progress, inserted);
    }
    ctl_progress_end(&progress);
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

/* ---- --data @FILE | -, and --from FILE ------------------------------------------------- */

#define TEXT_MAX (16 * 1024 * 1024) /* --data @FILE or -: over COHORT_DOC_BYTES_MAX of BSON */
#define FROM_CHUNK 1000             /* --from: tasks per bulk write */
#define FROM_CHUNK_BYTES (16 * 1024 * 1024) /* ... and their data's bytes, at most */

/* The whole of `path` ("-": stdin), NUL-terminated, at most TEXT_MAX bytes; NULL (message
 * printed, naming `what`) if it cannot be read. Caller frees. */
static char *read_text(const char *path, const char *what)
{
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cohortctl enqueue: %s: cannot read '%s': %s\n", what, path,
                strerror(errno));
        return NULL;
    }
    size_t len = 0, cap = 65536;
    char *text = malloc(cap + 1);
    size_t got;
    while (text && (got = fread(text + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap && cap <= TEXT_MAX) {
            char *bigger = realloc(text, cap * 2 + 1);
            if (!bigger)
                free(text);
            text = bigger;
            cap *= 2;
        }
    }
    bool failed = !text || ferror(f) || len > TEXT_MAX;
    if (failed)
        fprintf(stderr, "cohortctl enqueue: %s: '%s' %s\n", what, path,
                !text               ? "is too large for memory"
                : len > TEXT_MAX    ? "is over 16 MiB"
                                    : "cannot be read");
    if (!is_stdin)
        fclose(f);
    if (failed) {
        free(text);
        return NULL;
    }
    text[len] = '\0';
    return text;
}

/* --data's JSON: the argument itself, @FILE's contents, or - : stdin's (so that data over
 * the shell's argument limit can be given). Caller frees; NULL: message printed. */
static char *data_text(const char *arg)
{
    if (strcmp(arg, "-") == 0)
        return read_text("-", "--data -");
    if (arg[0] == '@')
        return read_text(arg + 1, "--data @FILE");
    char *copy = strdup(arg);
    if (!copy)
        fprintf(stderr, "cohortctl enqueue: out of memory\n");
    return copy;
}

/* One task of --from: its line's document, its options (the line's, then the command
 * line's for what the line does not set) parsed, its data (a view into the line). */
typedef struct from_task {
    bson_t line, options, data;
    bool has_data;
    cohort_task_options_t parsed;
} from_task_t;

static void from_task_destroy(from_task_t *t)
{
    bson_destroy(&t->line);
    bson_destroy(&t->options);
}

/* Parses a line of --from into `t` (destroy it whatever this returns): a JSON object whose
 * "data" is the task's data and whose other fields are task options, as the HTTP API's
 * POST .../tasks body; `defaults` are the command line's options. */
static bool parse_from_line(const char *text, const bson_t *defaults, from_task_t *t,
                            bson_error_t *error)
{
    bson_init(&t->options);
    t->has_data = false;
    if (!cohort_json_parse_doc(text, false, &t->line, error)) {
        bson_init(&t->line);
        return false;
    }
    bson_iter_t it;
    bson_iter_init(&it, &t->line);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "data") != 0) {
            bson_append_iter(&t->options, NULL, 0, &it);
            continue;
        }
        uint32_t len;
        const uint8_t *raw;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_set_error(error, 0, 0, "field 'data' must be a JSON object");
            return false;
        }
        bson_iter_document(&it, &len, &raw);
        t->has_data = bson_init_static(&t->data, raw, len);
    }
    bson_iter_init(&it, defaults);
    while (bson_iter_next(&it))
        if (!bson_has_field(&t->options, bson_iter_key(&it)))
            bson_append_iter(&t->options, NULL, 0, &it);
    return cohort_task_options_parse(&t->options, false, &t->parsed, error);
}

/* Reads `in` line by line; calls `each` for every line that is not blank. Stops at the first
 * false it returns (or at an interrupt). *line_no: the last line read. */
static bool each_line(FILE *in, bool (*each)(void *arg, const char *text), void *arg,
                      int64_t *line_no)
{
    char *buf = NULL;
    size_t cap = 0;
    bool ok = true;
    *line_no = 0;
    while (ok && !interrupted && getline(&buf, &cap, in) >= 0) {
        (*line_no)++;
        if (buf[strspn(buf, " \t\r\n")])
            ok = each(arg, buf);
    }
    free(buf);
    return ok;
}

typedef struct from_run {
    ctl_t *ctl;
    const char *service;
    const bson_t *defaults;
    const cohort_service_config_t *section;
    int64_t now_ms, batch;
    FILE *copy;          /* pass 1 of stdin: the lines kept for pass 2 */
    int64_t lines;       /* tasks in the file (pass 1) */
    int64_t created, coalesced, existing;
    from_task_t chunk[FROM_CHUNK];
    cohort_new_task_t tasks[FROM_CHUNK];
    size_t n;
    size_t bytes;
    ctl_progress_t progress;
    bson_error_t error;
} from_run_t;

/* Pass 1: every line must be a task, else nothing is inserted. */
static bool check_line(void *arg, const char *text)
{
    from_run_t *r = arg;
    from_task_t t;
    bool ok = parse_from_line(text, r->defaults, &t, &r->error);
    from_task_destroy(&t);
    if (ok && r->copy && fputs(text, r->copy) == EOF) {
        bson_set_error(&r->error, 0, 0, "cannot keep stdin in a temporary file");
        ok = false;
    }
    r->lines += ok;
    return ok;
}

/* Inserts the tasks gathered in r->chunk in one bulk write. */
static bool flush_chunk(from_run_t *r)
{
    int64_t done = 0;
    bool ok = cohort_store_insert_task_list(r->ctl->store, r->ctl->client, r->service, r->tasks,
                                            r->n, &done, &r->error);
    r->created += done;
    for (size_t i = 0; i < r->n; i++)
        from_task_destroy(&r->chunk[i]);
    r->n = 0;
    r->bytes = 0;
    ctl_progress_update(&r->progress, r->created + r->coalesced + r->existing);
    return ok;
}

/* Pass 2: a task with a coalesce or unique key is created alone (it may merge, or exist);
 * the others go in bulk writes of FROM_CHUNK. */
static bool insert_line(void *arg, const char *text)
{
    from_run_t *r = arg;
    from_task_t *t = &r->chunk[r->n];
    if (!parse_from_line(text, r->defaults, t, &r->error)) { /* changed since pass 1 */
        from_task_destroy(t);
        return false;
    }
    cohort_new_task_t *task = &r->tasks[r->n];
    *task = (cohort_new_task_t){.data = t->has_data ? &t->data : NULL,
                                .tracked = t->parsed.tracked,
                                .unique_key = t->parsed.unique_key,
                                .created_by = "cohortctl",
                                .now_ms = r->now_ms,
                                .batch = r->batch};
    cohort_task_options_apply(&t->parsed, r->section, task);
    if (!task->coalesce_key && !task->unique_key) {
        r->n++;
        r->bytes += t->line.len;
        return (r->n < FROM_CHUNK && r->bytes < FROM_CHUNK_BYTES) || flush_chunk(r);
    }
    bool exists = false, merged = false;
    bool ok = cohort_store_insert_task(r->ctl->store, r->ctl->client, r->service, task, NULL,
                                       &exists, &merged, &r->error);
    from_task_destroy(t);
    if (!ok && exists)
        r->existing++;
    else if (ok)
        *(merged ? &r->coalesced : &r->created) += 1;
    return ok || exists;
}

/* Opens --from's file ("-": stdin) for pass 1. */
static FILE *open_from(const char *path, from_run_t *r)
{
    if (strcmp(path, "-") != 0) {
        FILE *f = fopen(path, "r");
        if (!f)
            fprintf(stderr, "cohortctl enqueue: --from: cannot read '%s': %s\n", path,
                    strerror(errno));
        return f;
    }
    r->copy = tmpfile();
    if (!r->copy)
        fprintf(stderr, "cohortctl enqueue: --from -: no temporary file for stdin: %s\n",
                strerror(errno));
    return r->copy ? stdin : NULL;
}

/* --from FILE: every line checked first (a bad one is named and nothing is inserted), then
 * the tasks inserted with progress; prints how many were created (and coalesced or found
 * existing, with keys). */
static int enqueue_from(ctl_t *ctl, const char *service, const char *path,
                        const bson_t *defaults, bool create)
{
    from_run_t *r = calloc(1, sizeof *r);
    if (!r)
        return CTL_FAILED;
    *r = (from_run_t){.ctl = ctl, .service = service, .defaults = defaults, .batch = 1};
    FILE *in = open_from(path, r);
    int rc = CTL_USAGE;
    int64_t read_to = 0;
    if (!in)
        goto out;
    catch_interrupts();
    if (!each_line(in, check_line, r, &read_to) && !interrupted) {
        fprintf(stderr, "cohortctl enqueue: --from %s: line %lld: %s; nothing inserted\n", path,
                (long long)read_to, r->error.message);
        goto out;
    }
    rc = interrupted ? report_interrupt(0, r->lines) : CTL_FAILED;
    if (interrupted || !ctl_open_store(ctl) ||
        !cohort_store_server_time(ctl->store, ctl->client, &r->now_ms, &r->error))
        goto out;
    if ((rc = require_service(ctl, service, create)) != CTL_DONE)
        goto out;
    r->section = ctl->config ? cohort_config_find_service(ctl->config, service) : NULL;
    cohort_batch_state_t batches = {.open = 1};
    rc = CTL_FAILED;
    if (!cohort_store_batch_state(ctl->store, ctl->client, service, &batches, &r->error))
        goto out;
    r->batch = batches.open;
    FILE *again = r->copy ? r->copy : in;
    rewind(again);
    ctl_progress_start(&r->progress, "enqueue", r->lines);
    bool ok = each_line(again, insert_line, r, &read_to) && flush_chunk(r);
    ctl_progress_end(&r->progress);
    if (r->coalesced || r->existing)
        printf("created=%lld coalesced=%lld existing=%lld\n", (long long)r->created,
               (long long)r->coalesced, (long long)r->existing);
    else
        printf("%lld\n", (long long)r->created);
    fflush(stdout);
    int64_t done = r->created + r->coalesced + r->existing;
    if (!ok)
        fprintf(stderr, "cohortctl enqueue: --from %s: line %lld: %s\n", path,
                (long long)read_to, r->error.message);
    rc = !ok ? CTL_FAILED : interrupted ? report_interrupt(done, r->lines) : CTL_DONE;
out:
    for (size_t i = 0; i < r->n; i++)
        from_task_destroy(&r->chunk[i]);
    if (in && in != stdin)
        fclose(in);
    if (r->copy)
        fclose(r->copy);
    free(r);
    return rc;
}

/* enqueue SERVICE [--count N] [--data JSON] [--tracked] [--create] [scheduling flags] */
int cmd_enqueue(ctl_t *ctl, int argc, char **argv)
{
    struct option longopts[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, longopts);
    const char *service = NULL, *data_json = NULL, *from = NULL;
    char *data_owned = NULL; /* --data's text when read from a file or stdin */
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
        } else if (opt == OPT_FROM) {
            from = optarg;
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
    if (from && (data_json || count_given)) {
        fprintf(stderr, "cohortctl enqueue: --from takes each task's data and options from "
                        "its lines: not with --%s\n", data_json ? "data" : "count");
        goto out;
    }
    if (from) {
        rc = enqueue_from(ctl, service, from, &opts, create);
        goto out;
    }
    bson_t parsed, *data = NULL;
    data_owned = data_json ? data_text(data_json) : NULL;
    if (data_json && !data_owned)
        goto out;
    data_json = data_owned;
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
    free(data_owned);
    bson_destroy(&opts);
    return rc;
}

