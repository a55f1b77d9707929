/*
 * ctl_tasks.c - reading a service's queue: `counts SERVICE [--by status|kind|group]
 * [--json]`, `tasks SERVICE [--status S] [--limit N] [--json]` and `task SERVICE ID`.
 *
 * Tables stream row by row as the store hands them over, so memory stays constant; JSON is
 * built as one document and printed by libbson at the end, so it holds every row (counts by
 * kind or group: one row per value; tasks: at most --limit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/status.h"
#include "core/timefmt.h"
#include "node/status/api_json.h"
#include "store/listing.h"
#include "store/queries.h"

/* The operands of counts and tasks: exactly one SERVICE, valid. False (message printed) if
 * not. */
static bool one_service(const char *command, int argc, char **argv, const char **service)
{
    if (optind + 1 < argc) {
        fprintf(stderr, "cohortctl %s: unexpected argument '%s'\n", command, argv[optind + 1]);
        return false;
    }
    *service = optind < argc ? argv[optind] : NULL;
    if (!*service || !cohort_config_valid_service_name(*service)) {
        fprintf(stderr, "cohortctl %s: %s%s%s\n", command, *service ? "'" : "which SERVICE?",
                *service ? *service : "", *service ? "' is not a valid service name" : "");
        return false;
    }
    return true;
}

/* ---- counts ----------------------------------------------------------------------------- */

/* The table of `counts --by kind|group`: the rows arrive sorted by value, so each row is
 * complete when the next value starts. */
typedef struct count_table {
    const char *field;
    bson_t *rows; /* JSON: the array being built; NULL: print a table */
    bool have_row;
    char *value; /* the row's value, NULL: tasks without the field */
    int64_t n[COHORT_STATUS_COUNT], total;
    uint32_t n_rows;
} count_table_t;

static void flush_count_row(count_table_t *t)
{
    if (!t->have_row)
        return;
    if (t->rows) {
        bson_t row;
        cohort_json_array_begin_document(t->rows, &t->n_rows, &row);
        ctl_append_utf8_or_null(&row, t->field, t->value);
        for (size_t i = 0; i < COHORT_STATUS_COUNT; i++)
            BSON_APPEND_INT64(&row, cohort_status_names[i], t->n[i]);
        BSON_APPEND_INT64(&row, "total", t->total);
        bson_append_document_end(t->rows, &row);
    } else {
        printf("%-24s", t->value ? t->value : "(none)");
        for (size_t i = 0; i < COHORT_STATUS_COUNT; i++)
            printf(" %10lld", (long long)t->n[i]);
        printf(" %10lld\n", (long long)t->total);
    }
    free(t->value);
    t->value = NULL;
    t->have_row = false;
    memset(t->n, 0, sizeof t->n);
    t->total = 0;
}

static void count_row(void *user, const char *value, const char *status, int64_t n)
{
    count_table_t *t = user;
    bool same = t->have_row && ((!value && !t->value) ||
                                (value && t->value && strcmp(value, t->value) == 0));
    if (!same) {
        flush_count_row(t);
        t->value = value ? strdup(value) : NULL;
        t->have_row = true;
    }
    cohort_task_status_t known;
    if (cohort_status_parse(status, &known))
        t->n[known] += n;
    t->total += n;
}

static void print_status_header(const char *first)
{
    printf("%-24s", first);
    for (size_t i = 0; i < COHORT_STATUS_COUNT; i++) {
        const char *name = cohort_status_names[i];
        char upper[16];
        size_t j = 0;
        for (; name[j] && j < sizeof upper - 1; j++)
            upper[j] = (char)(name[j] - (name[j] >= 'a' && name[j] <= 'z' ? 32 : 0));
        upper[j] = '\0';
        printf(" %10s", upper);
    }
    printf(" %10s\n", "TOTAL");
}

static int counts_by_status(ctl_t *ctl, const char *service, bool json)
{
    int64_t n[COHORT_STATUS_COUNT];
    bson_error_t error;
    if (!cohort_store_count_statuses(ctl->store, ctl->client, service, cohort_status_names,
                                     COHORT_STATUS_COUNT, n, &error)) {
        fprintf(stderr, "cohortctl counts: cannot count: %s\n", error.message);
        return CTL_FAILED;
    }
    int64_t total = 0;
    for (size_t i = 0; i < COHORT_STATUS_COUNT; i++)
        total += n[i];
    if (json) {
        bson_t out = BSON_INITIALIZER, counts;
        BSON_APPEND_UTF8(&out, "service", service);
        BSON_APPEND_UTF8(&out, "by", "status");
        BSON_APPEND_DOCUMENT_BEGIN(&out, "counts", &counts);
        for (size_t i = 0; i < COHORT_STATUS_COUNT; i++)
            BSON_APPEND_INT64(&counts, cohort_status_names[i], n[i]);
        bson_append_document_end(&out, &counts);
        ctl_print_json(&out);
        bson_destroy(&out);
    } else {
        printf("%-12s %12s\n", "STATUS", "TASKS");
        for (size_t i = 0; i < COHORT_STATUS_COUNT; i++)
            printf("%-12s %12lld\n", cohort_status_names[i], (long long)n[i]);
        printf("%-12s %12lld\n", "total", (long long)total);
    }
    return CTL_DONE;
}

/* counts --by kind|group: one aggregation, its rows streamed into the table. */
static int counts_by_field(ctl_t *ctl, const char *service, const char *by, bool json)
{
    bson_t out = BSON_INITIALIZER, rows;
    BSON_APPEND_UTF8(&out, "service", service);
    BSON_APPEND_UTF8(&out, "by", by);
    BSON_APPEND_ARRAY_BEGIN(&out, "rows", &rows);
    count_table_t table = {.field = by, .rows = json ? &rows : NULL};
    if (!json)
        print_status_header(strcmp(by, "kind") == 0 ? "KIND" : "GROUP");
    bson_error_t error;
    bool ok = cohort_store_count_by(ctl->store, ctl->client, service, by, count_row, &table,
                                    &error);
    flush_count_row(&table);
    bson_append_array_end(&out, &rows);
    return ctl_finish_listing(&out, json, ok, "cohortctl counts: cannot count", &error);
}

/* counts SERVICE [--by status|kind|group] [--json] */
int cmd_counts(ctl_t *ctl, int argc, char **argv)
{
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    const char *service = NULL, *by = "status";
    bool json = false;
    int opt;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (opt == 'b') {
            by = optarg;
        } else if (opt == 'j') {
            json = true;
        } else {
            fprintf(stderr, "cohortctl counts: unexpected argument '%s'\n", ctl_bad_arg(argv));
            return CTL_USAGE;
        }
    }
    if (!one_service("counts", argc, argv, &service))
        return CTL_USAGE;
    if (strcmp(by, "status") != 0 && strcmp(by, "kind") != 0 && strcmp(by, "group") != 0) {
        fprintf(stderr, "cohortctl counts: --by '%s' must be status, kind or group\n", by);
        return CTL_USAGE;
    }
    if (!ctl_reach_database(ctl, NULL))
        return CTL_FAILED;
    int known = ctl_check_queue(ctl, service, "counts");
    if (known != CTL_DONE)
        return known;
    if (strcmp(by, "status") == 0)
        return counts_by_status(ctl, service, json);
    return counts_by_field(ctl, service, by, json);
}

/* ---- tasks and task --------------------------------------------------------------------- */

typedef struct task_list {
    bson_t *tasks; /* JSON: the array being built; NULL: print a table */
    uint32_t n;
} task_list_t;

/* One task of `tasks`: a line of the table, or an element of the JSON array. */
static bool list_task(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    task_list_t *list = user;
    char id[25] = "?", run_at[COHORT_TIME_TEXT_MAX] = "-";
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it))
        bson_oid_to_string(bson_iter_oid(&it), id);
    const char *status = "?", *kind = NULL, *group = NULL, *last_error = NULL;
    ctl_doc_string(doc, "status", &status);
    ctl_doc_string(doc, "last_error", &last_error);
    ctl_doc_string(doc, "kind", &kind);
    ctl_doc_string(doc, "group", &group);
    int64_t priority = ctl_doc_int(doc, "priority", 0);
    int64_t base = ctl_doc_int(doc, "base_priority", priority);
    int64_t attempts = ctl_doc_int(doc, "attempts", 0);
    int64_t due = ctl_doc_date(doc, "run_at");
    if (due)
        cohort_time_format(due, run_at, sizeof run_at);
    if (list->tasks) {
        bson_t one;
        cohort_json_array_begin_document(list->tasks, &list->n, &one);
        BSON_APPEND_UTF8(&one, "id", id);
        BSON_APPEND_UTF8(&one, "status", status);
        BSON_APPEND_INT64(&one, "priority", priority);
        BSON_APPEND_INT64(&one, "base_priority", base);
        ctl_append_utf8_or_null(&one, "kind", kind);
        ctl_append_utf8_or_null(&one, "group", group);
        ctl_append_utf8_or_null(&one, "run_at", due ? run_at : NULL);
        BSON_APPEND_INT64(&one, "attempts", attempts);
        ctl_append_utf8_or_null(&one, "last_error", last_error);
        bson_append_document_end(list->tasks, &one);
        return true;
    }
    char prio[48];
    if (base != priority)
        snprintf(prio, sizeof prio, "%lld (base %lld)", (long long)priority, (long long)base);
    else
        snprintf(prio, sizeof prio, "%lld", (long long)priority);
    /* The last error goes last, whole: it is the one column of free text. */
    printf("%-24s %-9s %-18s %8lld %-24s %-16s %-16s %s\n", id, status, prio, (long long)attempts,
           run_at, kind ? kind : "-", group ? group : "-", last_error ? last_error : "-");
    return true;
}

/* tasks SERVICE [--status S] [--limit N] [--json] */
int cmd_tasks(ctl_t *ctl, int argc, char **argv)
{
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    const char *service = NULL, *status = NULL;
    int64_t limit = 50;
    bool json = false;
    int opt;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (opt == 's' && !status) {
            status = optarg;
            cohort_task_status_t known;
            if (!cohort_status_parse(status, &known)) {
                fprintf(stderr, "cohortctl tasks: --status '%s' must be pending, claimed, "
                                "succeeded, failed, timed_out or cancelled\n", status);
                return CTL_USAGE;
            }
        } else if (opt == 'l') {
            if (!ctl_parse_int(optarg, &limit) || limit < 1 || limit > 1000000) {
                fprintf(stderr, "cohortctl tasks: --limit '%s' must be 1..1000000\n", optarg);
                return CTL_USAGE;
            }
        } else if (opt == 'j') {
            json = true;
        } else {
            fprintf(stderr, "cohortctl tasks: unexpected argument '%s'\n",
                    opt == 's' ? "--status" : ctl_bad_arg(argv));
            return CTL_USAGE;
        }
    }
    if (!one_service("tasks", argc, argv, &service))
        return CTL_USAGE;
    if (!ctl_reach_database(ctl, NULL))
        return CTL_FAILED;
    int known = ctl_check_queue(ctl, service, "tasks");
    if (known != CTL_DONE)
        return known;
    bson_t out = BSON_INITIALIZER, tasks;
    BSON_APPEND_UTF8(&out, "service", service);
    BSON_APPEND_ARRAY_BEGIN(&out, "tasks", &tasks);
    task_list_t list = {.tasks = json ? &tasks : NULL};
    if (!json)
        printf("%-24s %-9s %-18s %8s %-24s %-16s %-16s %s\n", "ID", "STATUS", "PRIORITY",
               "ATTEMPTS", "RUN_AT", "KIND", "GROUP", "LAST_ERROR");
    bson_error_t error;
    bool ok = cohort_store_each_task(ctl->store, ctl->client, service, status, limit, list_task,
                                     &list, &error);
    bson_append_array_end(&out, &tasks);
    return ctl_finish_listing(&out, json, ok, "cohortctl tasks: cannot list tasks", &error);
}

/* task SERVICE ID: the whole task document as relaxed JSON. */
int cmd_task(ctl_t *ctl, int argc, char **argv)
{
    struct option none[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, none);
    ctl_reset_getopt();
    /* "+": operands only; an option before them is a usage error. */
    if (getopt_long(argc, argv, "+:", none, NULL) != -1 || argc - optind != 2) {
        fprintf(stderr, "cohortctl task: SERVICE and ID, and nothing else\n");
        return CTL_USAGE;
    }
    const char *service = argv[optind], *id = argv[optind + 1];
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl task: '%s' is not a valid service name\n", service);
        return CTL_USAGE;
    }
    if (strlen(id) != 24 || !bson_oid_is_valid(id, 24)) {
        fprintf(stderr, "cohortctl task: '%s' is not a task id (24 hex digits)\n", id);
        return CTL_USAGE;
    }
    if (!ctl_reach_database(ctl, NULL))
        return CTL_FAILED;
    int known = ctl_check_queue(ctl, service, "task");
    if (known != CTL_DONE)
        return known;
    bson_t doc;
    bool found = false;
    bson_error_t error;
    int rc = CTL_DONE;
    if (!cohort_store_read_task(ctl->store, ctl->client, service, id, &doc, &found, &error)) {
        fprintf(stderr, "cohortctl task: cannot read the task: %s\n", error.message);
        rc = CTL_FAILED;
    } else if (!found) {
        fprintf(stderr, "cohortctl task: no task %s in service '%s'\n", id, service);
        rc = CTL_FAILED;
    } else {
        ctl_print_json(&doc);
    }
    bson_destroy(&doc);
    return rc;
}
