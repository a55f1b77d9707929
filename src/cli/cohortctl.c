/*
 * cohortctl.c - the operator's tool: inspect services, enqueue tasks, pause and block.
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
 *
 * The database comes from FILE's [cluster] section, or without -c from MONGODB_URI and
 * --database (default "cohort"). MONGODB_URI always wins over the file, as in cohortd.
 * Task options given to `enqueue` go through the same parser as cohort_task_create()'s
 * (taskopts.h), with the service's defaults from FILE when it has the service.
 * Exit status: 0 done, 1 failed (database, missing service or task), 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "store/store.h"
#include "core/taskopts.h"

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
            "  settings get SERVICE | settings set SERVICE KEY VALUE | settings unset SERVICE KEY\n"
            "                       live settings (tick_ms, takeover_ms, primary_task_count,\n"
            "                       secondary_task_count, stall_timeout_ms, *_retention_ms):\n"
            "                       the database value wins over the config file while set\n"
            "\n"
            "The database is taken from FILE, or from MONGODB_URI (default\n"
            "mongodb://127.0.0.1:27017) and --database (default cohort).\n"
            "Exit status: 0 done, 1 failed, 2 bad usage.\n");
}

typedef struct ctl {
    cohort_config_t *config; /* NULL without -c */
    const char *uri;
    const char *database;
    cohort_store_t *store;
    mongoc_client_t *client;
} ctl_t;

static bool open_store(ctl_t *ctl)
{
    bson_error_t error;
    ctl->store = cohort_store_new(ctl->uri, ctl->database, "cohortctl", &error);
    if (!ctl->store) {
        fprintf(stderr, "cohortctl: invalid MongoDB URI: %s\n", error.message);
        return false;
    }
    ctl->client = cohort_store_pop(ctl->store);
    return true;
}

/* open_store() and a first round trip, so that an unreachable database is reported as
 * such; *server_ms (may be NULL) receives the server's time. */
static bool reach_database(ctl_t *ctl, int64_t *server_ms)
{
    if (!open_store(ctl))
        return false;
    int64_t now;
    bson_error_t error;
    if (!cohort_store_server_time(ctl->store, ctl->client, server_ms ? server_ms : &now,
                                  &error)) {
        fprintf(stderr, "cohortctl: cannot reach the database: %s\n", error.message);
        return false;
    }
    return true;
}

/* True if the service has its config document; otherwise says so (as `command`). */
static bool service_exists(ctl_t *ctl, const char *service, const char *command)
{
    bson_t doc;
    bool found = false;
    bson_error_t error;
    bool ok = cohort_store_read_service(ctl->store, ctl->client, service, &doc, &found, &error);
    bson_destroy(&doc);
    if (!ok)
        fprintf(stderr, "cohortctl %s: cannot read service '%s': %s\n", command, service,
                error.message);
    else if (!found)
        fprintf(stderr, "cohortctl %s: service '%s' does not exist (no node has run it yet: "
                        "check the name, or start a node that hosts it first)\n",
                command, service);
    return ok && found;
}

/* Services to report: the config's, or every service document in the database. */
static bool list_services(ctl_t *ctl, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    if (ctl->config) {
        *names = calloc(ctl->config->n_services, sizeof **names);
        for (size_t i = 0; i < ctl->config->n_services; i++)
            (*names)[(*count)++] = strdup(ctl->config->services[i].name);
        return true;
    }
    mongoc_collection_t *coll =
        mongoc_client_get_collection(ctl->client, ctl->database, "services");
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}", "sort", "{", "_id",
                            BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, &filter, opts, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it)) {
            char **grown = realloc(*names, (*count + 1) * sizeof *grown);
            if (!grown)
                break;
            *names = grown;
            (*names)[(*count)++] = strdup(bson_iter_utf8(&it, NULL));
        }
    }
    bson_error_t error;
    bool ok = !mongoc_cursor_error(cursor, &error);
    if (!ok)
        fprintf(stderr, "cohortctl: cannot list services: %s\n", error.message);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    mongoc_collection_destroy(coll);
    return ok;
}

/* ---- durations and times ---------------------------------------------------------------- */

/* "250ms", "30s", "5m", "2h", "1d" or a bare number of ms. */
static bool parse_duration(const char *text, int64_t *ms)
{
    if (text[0] < '0' || text[0] > '9')
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno)
        return false;
    static const struct {
        const char *suffix;
        int64_t ms;
    } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (v > INT64_MAX / 4 / units[i].ms)
                return false;
            *ms = v * units[i].ms;
            return true;
        }
    }
    return false;
}

/* Reads exactly `n` digits. */
static bool read_digits(const char **p, int n, int *out)
{
    *out = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (**p < '0' || **p > '9')
            return false;
        *out = *out * 10 + (**p - '0');
    }
    return true;
}

static bool read_char(const char **p, char c)
{
    if (**p != c)
        return false;
    (*p)++;
    return true;
}

/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* ms since the epoch, or YYYY-MM-DDTHH:MM:SS[.fff]Z (UTC). */
static bool parse_time(const char *text, int64_t *ms)
{
    if (text[0] >= '0' && text[0] <= '9' && strspn(text, "0123456789") == strlen(text)) {
        errno = 0;
        *ms = strtoll(text, NULL, 10);
        return errno == 0;
    }
    const char *p = text;
    int y, mo, d, h, mi, s, frac = 0;
    if (!read_digits(&p, 4, &y) || !read_char(&p, '-') || !read_digits(&p, 2, &mo) ||
        !read_char(&p, '-') || !read_digits(&p, 2, &d) || !read_char(&p, 'T') ||
        !read_digits(&p, 2, &h) || !read_char(&p, ':') || !read_digits(&p, 2, &mi) ||
        !read_char(&p, ':') || !read_digits(&p, 2, &s))
        return false;
    if (*p == '.') {
        p++;
        int n = 0;
        for (; *p >= '0' && *p <= '9'; p++, n++)
            if (n < 3)
                frac = frac * 10 + (*p - '0');
        if (n == 0)
            return false;
        for (; n < 3; n++)
            frac *= 10;
    }
    if (strcmp(p, "Z") != 0 || y < 1970 || mo < 1 || mo > 12 || d < 1 ||
        d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 59)
        return false;
    *ms = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000LL + s * 1000LL + frac;
    return true;
}

/* 2026-11-21T10:00:00.000Z */
static void format_time(int64_t ms, char *buf, size_t len)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    if (ms < 0 || !gmtime_r(&secs, &tm)) {
        snprintf(buf, len, "-");
        return;
    }
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03dZ", date, (int)(ms % 1000));
}

static bool doc_string(const bson_t *doc, const char *key, const char **out)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    *out = bson_iter_utf8(&it, NULL);
    return true;
}

static int64_t doc_int(const bson_t *doc, const char *key, int64_t fallback)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_NUMBER(&it))
        return fallback;
    return bson_iter_as_int64(&it);
}

static int64_t doc_date(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DATE_TIME(&it))
        return 0;
    return bson_iter_date_time(&it);
}

/* Prints a document as relaxed extended JSON (and a newline). */
static void print_json(const bson_t *doc)
{
    char *text = bson_as_relaxed_extended_json(doc, NULL);
    printf("%s\n", text);
    bson_free(text);
}

/* ---- pause and block switches ----------------------------------------------------------- */

/* One switch of a service's config document: `which` ("pause"/"block") for `kind`. */
typedef struct ctl_switch {
    const char *which, *kind;
    const char *reason, *by; /* NULL if unset */
    int64_t at_ms;           /* 0 if unset */
} ctl_switch_t;

/* Calls `fn` for every switch set in the config document `doc`; returns how many. */
static size_t each_switch(const bson_t *doc, void (*fn)(const ctl_switch_t *sw, void *user),
                          void *user)
{
    static const char *const which[] = {"pause", "block"};
    size_t n = 0;
    for (int i = 0; i < 2; i++) {
        bson_iter_t it, kinds;
        if (!bson_iter_init_find(&it, doc, which[i]) || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
            !bson_iter_recurse(&it, &kinds))
            continue;
        while (bson_iter_next(&kinds)) {
            ctl_switch_t sw = {.which = which[i], .kind = bson_iter_key(&kinds)};
            bson_iter_t f;
            if (BSON_ITER_HOLDS_DOCUMENT(&kinds) && bson_iter_recurse(&kinds, &f)) {
                while (bson_iter_next(&f)) {
                    if (strcmp(bson_iter_key(&f), "reason") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                        sw.reason = bson_iter_utf8(&f, NULL);
                    else if (strcmp(bson_iter_key(&f), "by") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                        sw.by = bson_iter_utf8(&f, NULL);
                    else if (strcmp(bson_iter_key(&f), "at") == 0 &&
                             BSON_ITER_HOLDS_DATE_TIME(&f))
                        sw.at_ms = bson_iter_date_time(&f);
                }
            }
            if (fn)
                fn(&sw, user);
            n++;
        }
    }
    return n;
}

/* "paused (all kinds)" / "blocked kind render: disk full" */
static void describe_switch(const ctl_switch_t *sw, char *buf, size_t len)
{
    bool all = strcmp(sw->kind, "*") == 0;
    snprintf(buf, len, "%s %s%s%s%s", strcmp(sw->which, "pause") == 0 ? "paused" : "blocked",
             all ? "(all kinds)" : "kind ", all ? "" : sw->kind, sw->reason ? ": " : "",
             sw->reason ? sw->reason : "");
}

/* The service's state for `status`: running, paused, blocked or partly stopped (kinds). */
typedef struct switch_state {
    bool paused_all, blocked_all, some_kinds;
    uint32_t n_paused, n_blocked; /* entries appended to the JSON arrays */
    bson_t *paused, *blocked;     /* JSON arrays being built; NULL for text */
    char details[2048];           /* text: one indented line per switch */
} switch_state_t;

static void collect_switch(const ctl_switch_t *sw, void *user)
{
    switch_state_t *st = user;
    bool pause = strcmp(sw->which, "pause") == 0;
    bool all = strcmp(sw->kind, "*") == 0;
    if (all && pause)
        st->paused_all = true;
    else if (all)
        st->blocked_all = true;
    else
        st->some_kinds = true;
    bson_t *array = pause ? st->paused : st->blocked;
    if (array) {
        char key[16], at[40];
        const char *k;
        bson_uint32_to_string(pause ? st->n_paused++ : st->n_blocked++, &k, key, sizeof key);
        bson_t one;
        BSON_APPEND_DOCUMENT_BEGIN(array, k, &one);
        BSON_APPEND_UTF8(&one, "kind", sw->kind);
        if (sw->reason)
            BSON_APPEND_UTF8(&one, "reason", sw->reason);
        else
            BSON_APPEND_NULL(&one, "reason");
        if (sw->by)
            BSON_APPEND_UTF8(&one, "by", sw->by);
        else
            BSON_APPEND_NULL(&one, "by");
        format_time(sw->at_ms, at, sizeof at);
        if (sw->at_ms)
            BSON_APPEND_UTF8(&one, "at", at);
        else
            BSON_APPEND_NULL(&one, "at");
        bson_append_document_end(array, &one);
    }
    char what[700], at[40];
    describe_switch(sw, what, sizeof what);
    format_time(sw->at_ms, at, sizeof at);
    size_t used = strlen(st->details);
    snprintf(st->details + used, sizeof st->details - used, "    %s (since %s by %s)\n", what,
             sw->at_ms ? at : "?", sw->by ? sw->by : "?");
}

static const char *switch_state_name(const switch_state_t *st)
{
    if (st->blocked_all && st->paused_all)
        return "paused,blocked";
    if (st->blocked_all)
        return "blocked";
    if (st->paused_all)
        return "paused";
    return st->some_kinds ? "kinds-stopped" : "running";
}

/* ---- status ----------------------------------------------------------------------------- */

static int cmd_status(ctl_t *ctl, int argc, char **argv)
{
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else {
            fprintf(stderr, "cohortctl status: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!open_store(ctl))
        return 1;
    bson_error_t error;
    int64_t server_now;
    if (!cohort_store_server_time(ctl->store, ctl->client, &server_now, &error)) {
        fprintf(stderr, "cohortctl: cannot reach the database: %s\n", error.message);
        return 1;
    }
    char **names;
    size_t count;
    if (!list_services(ctl, &names, &count))
        return 1;

    bson_t out = BSON_INITIALIZER, services;
    BSON_APPEND_ARRAY_BEGIN(&out, "services", &services);
    if (!json)
        printf("%-20s %-32s %6s %12s %9s %9s %10s %9s %10s  %s\n", "SERVICE", "PRIMARY", "EPOCH",
               "LAST ACTIVE", "PENDING", "CLAIMED", "SUCCEEDED", "FAILED", "TIMED_OUT", "STATE");
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        bson_t doc;
        bool found = false;
        cohort_status_counts_t counts;
        if (!cohort_store_read_service(ctl->store, ctl->client, names[i], &doc, &found, &error) ||
            !cohort_store_count_tasks(ctl->store, ctl->client, names[i], &counts, &error)) {
            fprintf(stderr, "cohortctl: service '%s': %s\n", names[i], error.message);
            bson_destroy(&doc);
            rc = 1;
            break;
        }
        const char *primary = NULL;
        int64_t epoch = 0, last_active = 0;
        if (found) {
            doc_string(&doc, "primary", &primary);
            epoch = doc_int(&doc, "epoch", 0);
            last_active = doc_date(&doc, "last_active");
        }
        int64_t ago = last_active ? server_now - last_active : -1;
        if (ago < 0 && last_active)
            ago = 0;

        char key[16];
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
        bson_t svc, p, c, paused, blocked;
        BSON_APPEND_DOCUMENT_BEGIN(&services, k, &svc);
        BSON_APPEND_UTF8(&svc, "name", names[i]);
        if (primary) {
            BSON_APPEND_DOCUMENT_BEGIN(&svc, "primary", &p);
            BSON_APPEND_UTF8(&p, "node_id", primary);
            BSON_APPEND_INT64(&p, "epoch", epoch);
            BSON_APPEND_INT64(&p, "last_active_ms_ago", ago);
            bson_append_document_end(&svc, &p);
        } else {
            BSON_APPEND_NULL(&svc, "primary");
        }
        BSON_APPEND_DOCUMENT_BEGIN(&svc, "counts", &c);
        BSON_APPEND_INT64(&c, "pending", counts.pending);
        BSON_APPEND_INT64(&c, "claimed", counts.claimed);
        BSON_APPEND_INT64(&c, "succeeded", counts.succeeded);
        BSON_APPEND_INT64(&c, "failed", counts.failed);
        BSON_APPEND_INT64(&c, "timed_out", counts.timed_out);
        bson_append_document_end(&svc, &c);
        /* Two arrays built side by side: the switches go into "paused" and "blocked". */
        bson_t switches_paused = BSON_INITIALIZER, switches_blocked = BSON_INITIALIZER;
        switch_state_t st = {.paused = &switches_paused, .blocked = &switches_blocked};
        if (found)
            each_switch(&doc, collect_switch, &st);
        BSON_APPEND_ARRAY_BEGIN(&svc, "paused", &paused);
        bson_concat(&paused, &switches_paused);
        bson_append_array_end(&svc, &paused);
        BSON_APPEND_ARRAY_BEGIN(&svc, "blocked", &blocked);
        bson_concat(&blocked, &switches_blocked);
        bson_append_array_end(&svc, &blocked);
        bson_destroy(&switches_paused);
        bson_destroy(&switches_blocked);
        bson_append_document_end(&services, &svc);

        if (!json) {
            char active[32] = "-";
            if (primary)
                snprintf(active, sizeof active, "%.1fs ago", (double)ago / 1000.0);
            printf("%-20s %-32s %6lld %12s %9lld %9lld %10lld %9lld %10lld  %s\n", names[i],
                   primary ? primary : "(none)", (long long)epoch, active,
                   (long long)counts.pending, (long long)counts.claimed,
                   (long long)counts.succeeded, (long long)counts.failed,
                   (long long)counts.timed_out, switch_state_name(&st));
            fputs(st.details, stdout);
        }
        bson_destroy(&doc);
    }
    bson_append_array_end(&out, &services);
    if (json && rc == 0)
        print_json(&out);
    bson_destroy(&out);
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* ---- enqueue ---------------------------------------------------------------------------- */

typedef enum flag_type { FLAG_INT, FLAG_DURATION, FLAG_TIME, FLAG_STRING } flag_type_t;

/* The scheduling flags of `enqueue` and the task option each one sets. */
static const struct enqueue_flag {
    const char *flag;
    const char *option;
    flag_type_t type;
} enqueue_flags[] = {
    {"--priority", "priority", FLAG_INT},
    {"--delay", "delay_ms", FLAG_DURATION},
    {"--not-before", "not_before", FLAG_TIME},
    {"--not-after", "not_after", FLAG_TIME},
    {"--deadline", "not_after_ms", FLAG_DURATION},
    {"--timeout", "task_timeout_ms", FLAG_DURATION},
    {"--kind", "kind", FLAG_STRING},
    {"--group", "group", FLAG_STRING},
    {"--coalesce-key", "coalesce_key", FLAG_STRING},
    {"--unique-key", "unique_key", FLAG_STRING},
};
#define N_ENQUEUE_FLAGS (sizeof enqueue_flags / sizeof enqueue_flags[0])

/* Appends the flag's value to `opts` as its task option and checks it alone with the shared
 * parser, so that a refusal names the flag. False (message printed) if it is bad. */
static bool add_enqueue_flag(const struct enqueue_flag *f, const char *value, bson_t *opts)
{
    int64_t number = 0;
    bool ok = true;
    const char *expect = "";
    switch (f->type) {
    case FLAG_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        ok = !errno && end != value && !*end;
        number = v;
        expect = "an integer";
        break;
    }
    case FLAG_DURATION:
        ok = parse_duration(value, &number);
        expect = "a duration like 250ms, 30s, 5m, 2h, 1d or a number of ms";
        break;
    case FLAG_TIME:
        ok = parse_time(value, &number);
        expect = "ms since the epoch or a UTC time like 2026-11-21T10:00:00Z";
        break;
    case FLAG_STRING:
        break;
    }
    if (!ok) {
        fprintf(stderr, "cohortctl enqueue: %s '%s' must be %s\n", f->flag, value, expect);
        return false;
    }
    bson_t one = BSON_INITIALIZER;
    if (f->type == FLAG_STRING)
        BSON_APPEND_UTF8(&one, f->option, value);
    else
        BSON_APPEND_INT64(&one, f->option, number);
    cohort_task_options_t parsed;
    char why[512];
    ok = cohort_task_options_parse(&one, false, &parsed, why, sizeof why);
    if (ok)
        bson_concat(opts, &one);
    else
        fprintf(stderr, "cohortctl enqueue: %s '%s': %s\n", f->flag, value, why);
    bson_destroy(&one);
    return ok;
}

/* The parser's message about the options document, with the flags that set the options it
 * names ("... (--delay sets delay_ms, --not-before sets not_before)"). */
static void print_options_refusal(const char *why)
{
    fprintf(stderr, "cohortctl enqueue: %s", why);
    const char *sep = " (";
    for (size_t i = 0; i < N_ENQUEUE_FLAGS; i++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", enqueue_flags[i].option);
        if (strstr(why, quoted)) {
            fprintf(stderr, "%s%s sets %s", sep, enqueue_flags[i].flag, enqueue_flags[i].option);
            sep = ", ";
        }
    }
    fprintf(stderr, "%s\n", sep[0] == ',' ? ")" : "");
}

/* Creates the tasks one at a time (each may coalesce or exist already) and prints the
 * counts. */
static bool enqueue_one_by_one(ctl_t *ctl, const char *service, const cohort_new_task_t *task,
                               int64_t count)
{
    int64_t created = 0, merged = 0, existing = 0;
    bson_error_t error;
    bool ok = true;
    for (int64_t i = 0; ok && i < count; i++) {
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
    return ok;
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

static int cmd_enqueue(ctl_t *ctl, int argc, char **argv)
{
    const char *service = NULL, *data_json = NULL;
    int64_t count = 1;
    bool count_given = false, given[N_ENQUEUE_FLAGS] = {false};
    bson_t opts = BSON_INITIALIZER;
    int rc = 2;
    for (int i = 0; i < argc; i++) {
        size_t f = 0;
        while (f < N_ENQUEUE_FLAGS && strcmp(argv[i], enqueue_flags[f].flag) != 0)
            f++;
        if (f < N_ENQUEUE_FLAGS) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cohortctl enqueue: %s needs a value\n", argv[i]);
                goto out;
            }
            if (given[f]) {
                fprintf(stderr, "cohortctl enqueue: %s given twice\n", argv[i]);
                goto out;
            }
            given[f] = true;
            if (!add_enqueue_flag(&enqueue_flags[f], argv[i + 1], &opts))
                goto out;
            i++;
        } else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            count = strtoll(argv[++i], &end, 10);
            if (errno || *end || count < 1 || count > 100000000) {
                fprintf(stderr, "cohortctl enqueue: --count '%s' must be 1..100000000\n",
                        argv[i]);
                goto out;
            }
            count_given = true;
        } else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            data_json = argv[++i];
        } else if (strcmp(argv[i], "--tracked") == 0) {
            BSON_APPEND_BOOL(&opts, "tracked", true);
        } else if (argv[i][0] != '-' && !service) {
            service = argv[i];
        } else {
            fprintf(stderr, "cohortctl enqueue: unexpected argument '%s'\n", argv[i]);
            goto out;
        }
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
    char why[512];
    if (!cohort_task_options_parse(&opts, false, &options, why, sizeof why)) {
        print_options_refusal(why);
        goto out;
    }
    bson_t *data = NULL;
    if (data_json) {
        if (data_json[strspn(data_json, " \t\r\n")] != '{') {
            fprintf(stderr, "cohortctl enqueue: --data must be a JSON object, like '{\"k\": 1}'\n");
            goto out;
        }
        bson_error_t error;
        data = bson_new_from_json((const uint8_t *)data_json, -1, &error);
        if (!data) {
            fprintf(stderr, "cohortctl enqueue: --data is not a JSON object: %s\n",
                    error.message);
            goto out;
        }
    }
    rc = 1;
    if (open_store(ctl)) {
        bson_error_t error;
        int64_t server_now = 0;
        /* Tasks are due "now" on the server's clock, not this machine's. */
        if (!cohort_store_server_time(ctl->store, ctl->client, &server_now, &error)) {
            fprintf(stderr, "cohortctl: cannot reach the database: %s\n", error.message);
            bson_destroy(data);
            goto out;
        }
        /* Keys are unique through the queue's indexes, which a node creates when it first
         * runs the service: without them a second task with the key would go in. */
        if ((options.unique_key || options.coalesce_key) &&
            !service_exists(ctl, service, "enqueue")) {
            bson_destroy(data);
            goto out;
        }
        cohort_new_task_t task = {.data = data,
                                  .tracked = options.tracked,
                                  .unique_key = options.unique_key,
                                  .created_by = "cohortctl",
                                  .now_ms = server_now};
        /* The service's defaults (per kind) when the file has the service; else built-in. */
        const cohort_service_config_t *section =
            ctl->config ? cohort_config_find_service(ctl->config, service) : NULL;
        cohort_task_options_apply(&options, section, &task);
        cohort_batch_state_t batches = {.open = 1};
        if (task.tracked &&
            !cohort_store_batch_state(ctl->store, ctl->client, service, &batches, &error)) {
            fprintf(stderr, "cohortctl enqueue: %s\n", error.message);
            bson_destroy(data);
            goto out;
        }
        task.batch = batches.open;
        if (count_given && (task.coalesce_key || task.unique_key)) {
            rc = enqueue_one_by_one(ctl, service, &task, count) ? 0 : 1;
        } else if (!count_given) {
            rc = enqueue_single(ctl, service, &task) ? 0 : 1;
        } else {
            int64_t inserted = 0;
            bool ok = cohort_store_insert_tasks(ctl->store, ctl->client, service, &task, count,
                                                &inserted, &error);
            printf("%lld\n", (long long)inserted);
            rc = ok ? 0 : 1;
            if (!ok)
                fprintf(stderr, "cohortctl enqueue: %s\n", error.message);
        }
    }
    bson_destroy(data);
out:
    bson_destroy(&opts);
    return rc;
}

/* cohortctl data get SERVICE KEY | data set SERVICE KEY JSON | data unset SERVICE KEY */
static int cmd_data(ctl_t *ctl, int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[0], "set") == 0 ? argc != 4 : argc != 3) ||
        (strcmp(argv[0], "get") != 0 && strcmp(argv[0], "set") != 0 &&
         strcmp(argv[0], "unset") != 0)) {
        fprintf(stderr, "usage: cohortctl data get SERVICE KEY\n"
                        "       cohortctl data set SERVICE KEY JSON   (any JSON value)\n"
                        "       cohortctl data unset SERVICE KEY\n");
        return 2;
    }
    const char *verb = argv[0], *service = argv[1], *key = argv[2];
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl data: '%s' is not a valid service name\n", service);
        return 2;
    }
    if (!*key || strlen(key) > 64 || strpbrk(key, ".$")) {
        fprintf(stderr, "cohortctl data: key '%s' is invalid (1-64 characters, no '.' or '$')\n",
                key);
        return 2;
    }
    bson_t *wrapper = NULL;
    bson_iter_t value;
    if (strcmp(verb, "set") == 0) {
        /* Any JSON value: parse it as the value of a one-key document. */
        char *json = NULL;
        if (asprintf(&json, "{\"v\": %s}", argv[3]) < 0)
            return 1;
        bson_error_t error;
        wrapper = bson_new_from_json((const uint8_t *)json, -1, &error);
        free(json);
        if (!wrapper || !bson_iter_init_find(&value, wrapper, "v")) {
            fprintf(stderr, "cohortctl data set: '%s' is not a JSON value: %s\n", argv[3],
                    wrapper ? "empty" : error.message);
            bson_destroy(wrapper);
            return 2;
        }
    }
    if (!open_store(ctl)) {
        bson_destroy(wrapper);
        return 1;
    }
    bson_error_t error;
    int rc = 0;
    if (strcmp(verb, "get") == 0) {
        bson_value_t v;
        bool found = false;
        if (!cohort_store_get_data(ctl->store, ctl->client, service, key, &v, &found, &error)) {
            fprintf(stderr, "cohortctl data get: %s\n", error.message);
            rc = 1;
        } else if (!found) {
            bson_t doc;
            bool exists = true;
            cohort_store_read_service(ctl->store, ctl->client, service, &doc, &exists, &error);
            bson_destroy(&doc);
            if (!exists)
                fprintf(stderr, "cohortctl data get: service '%s' does not exist (start a node "
                                "that hosts it first)\n",
                        service);
            else
                fprintf(stderr, "cohortctl data get: '%s' is not set for service '%s'\n", key,
                        service);
            rc = 1;
        } else {
            bson_t doc = BSON_INITIALIZER;
            bson_append_value(&doc, "v", 1, &v);
            char *text = bson_as_relaxed_extended_json(&doc, NULL);
            /* Print only the value: strip '{ "v" : ' and ' }'. */
            size_t len = strlen(text);
            printf("%.*s\n", (int)(len - 10), text + 8);
            bson_free(text);
            bson_destroy(&doc);
            bson_value_destroy(&v);
        }
    } else {
        bool applied = false;
        const bson_value_t *v = wrapper ? bson_iter_value(&value) : NULL;
        if (v && v->value_type == BSON_TYPE_NULL)
            v = NULL; /* as in cohort_set(): storing null removes the key */
        if (!cohort_store_set_data(ctl->store, ctl->client, service, key, v, NULL, 0, &applied,
                                   &error)) {
            fprintf(stderr, "cohortctl data %s: %s\n", verb, error.message);
            rc = 1;
        } else if (!applied) {
            fprintf(stderr, "cohortctl data %s: service '%s' does not exist (start a node that "
                            "hosts it first)\n",
                    verb, service);
            rc = 1;
        }
    }
    bson_destroy(wrapper);
    return rc;
}

/* The longest lease_ms any service's primary declared, 0 if none (or on error). */
static int64_t longest_declared_lease(ctl_t *ctl)
{
    mongoc_collection_t *services =
        mongoc_client_get_collection(ctl->client, ctl->database, "services");
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("projection", "{", "lease_ms", BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(services, &filter, opts, NULL);
    int64_t longest = 0;
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "lease_ms") && BSON_ITER_HOLDS_NUMBER(&it) &&
            bson_iter_as_int64(&it) > longest)
            longest = bson_iter_as_int64(&it);
    }
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    mongoc_collection_destroy(services);
    return longest;
}

/* cohortctl nodes [--json]: nodes seen in the last day, live or expired. */
static int cmd_nodes(ctl_t *ctl, int argc, char **argv)
{
    bool json = argc == 1 && strcmp(argv[0], "--json") == 0;
    if (argc > 1 || (argc == 1 && !json)) {
        fprintf(stderr, "usage: cohortctl nodes [--json]\n");
        return 2;
    }
    if (!open_store(ctl))
        return 1;
    bson_error_t error;
    int64_t now;
    if (!cohort_store_server_time(ctl->store, ctl->client, &now, &error)) {
        fprintf(stderr, "cohortctl: cannot reach the database: %s\n", error.message);
        return 1;
    }
    /* A node is live while its last ping is younger than the takeover time: the longest
     * lease a primary declared (primaries expire nodes by their service's), else the file's. */
    int64_t lease = ctl->config ? ctl->config->takeover_ms : 10000;
    int64_t declared = longest_declared_lease(ctl);
    if (declared > 0)
        lease = declared;
    mongoc_collection_t *nodes =
        mongoc_client_get_collection(ctl->client, ctl->database, "nodes");
    bson_t *filter = BCON_NEW("seen_at", "{", "$gte", BCON_DATE_TIME(now - 86400000), "}");
    bson_t *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}", "projection", "{", "stats",
                            BCON_INT32(0), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(nodes, filter, opts, NULL);
    bson_t out = BSON_INITIALIZER, list;
    BSON_APPEND_ARRAY_BEGIN(&out, "nodes", &list);
    if (!json)
        printf("%-32s %-8s %-20s %8s %-8s %10s  %s\n", "NODE", "STATE", "HOST", "PID", "VERSION",
               "LAST PING", "SERVICES");
    const bson_t *doc;
    uint32_t i = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        const char *id = "", *host = "", *version = "";
        int64_t pid = 0, seen = 0;
        bool expired = false;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it))
            id = bson_iter_utf8(&it, NULL);
        if (bson_iter_init_find(&it, doc, "host") && BSON_ITER_HOLDS_UTF8(&it))
            host = bson_iter_utf8(&it, NULL);
        if (bson_iter_init_find(&it, doc, "version") && BSON_ITER_HOLDS_UTF8(&it))
            version = bson_iter_utf8(&it, NULL);
        if (bson_iter_init_find(&it, doc, "pid") && BSON_ITER_HOLDS_NUMBER(&it))
            pid = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, doc, "seen_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
            seen = bson_iter_date_time(&it);
        if (bson_iter_init_find(&it, doc, "expired") && BSON_ITER_HOLDS_BOOL(&it))
            expired = bson_iter_bool(&it);
        int64_t ago = now - seen;
        const char *state = expired || ago > lease ? "expired" : "live";
        char services[512] = "";
        bson_iter_t arr;
        if (bson_iter_init_find(&it, doc, "services") && BSON_ITER_HOLDS_ARRAY(&it) &&
            bson_iter_recurse(&it, &arr)) {
            while (bson_iter_next(&arr))
                if (BSON_ITER_HOLDS_UTF8(&arr))
                    snprintf(services + strlen(services), sizeof services - strlen(services),
                             "%s%s", services[0] ? "," : "", bson_iter_utf8(&arr, NULL));
        }
        char key[16];
        const char *k;
        bson_uint32_to_string(i++, &k, key, sizeof key);
        bson_t one;
        BSON_APPEND_DOCUMENT_BEGIN(&list, k, &one);
        BSON_APPEND_UTF8(&one, "node_id", id);
        BSON_APPEND_UTF8(&one, "state", state);
        BSON_APPEND_UTF8(&one, "host", host);
        BSON_APPEND_INT64(&one, "pid", pid);
        BSON_APPEND_UTF8(&one, "version", version);
        BSON_APPEND_INT64(&one, "last_ping_ms_ago", ago);
        if (bson_iter_init_find(&it, doc, "services"))
            bson_append_value(&one, "services", -1, bson_iter_value(&it));
        if (bson_iter_init_find(&it, doc, "workers"))
            bson_append_value(&one, "workers", -1, bson_iter_value(&it));
        bson_append_document_end(&list, &one);
        if (!json)
            printf("%-32s %-8s %-20s %8lld %-8s %9.1fs  %s\n", id, state, host, (long long)pid,
                   version, (double)ago / 1000.0, services);
    }
    bson_append_array_end(&out, &list);
    int rc = 0;
    if (mongoc_cursor_error(cursor, &error)) {
        fprintf(stderr, "cohortctl nodes: %s\n", error.message);
        rc = 1;
    } else if (json) {
        char *text = bson_as_relaxed_extended_json(&out, NULL);
        printf("%s\n", text);
        bson_free(text);
    }
    bson_destroy(&out);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(nodes);
    return rc;
}

/* The service's live settings as the nodes will see them: the config file's (with -c; the
 * built-in defaults otherwise) overridden by the config document's. */
static bool effective_settings(ctl_t *ctl, const char *service, cohort_settings_t *eff,
                               bson_t *doc_settings, bool *found)
{
    const cohort_service_config_t *sc =
        ctl->config ? cohort_config_find_service(ctl->config, service) : NULL;
    if (sc) {
        cohort_settings_from_config(ctl->config, sc, eff);
    } else {
        *eff = (cohort_settings_t){.tick_ms = ctl->config ? ctl->config->tick_ms : 1000,
                                   .takeover_ms = ctl->config ? ctl->config->takeover_ms : 10000,
                                   .primary_task_count = 10,
                                   .secondary_task_count = 0,
                                   .stall_timeout_ms = 1800000,
                                   .succeeded_retention_ms = 7LL * 86400000,
                                   .failed_retention_ms = 7LL * 86400000};
    }
    bson_t doc;
    bson_error_t error;
    bson_init(doc_settings);
    if (!cohort_store_read_service(ctl->store, ctl->client, service, &doc, found, &error)) {
        fprintf(stderr, "cohortctl settings: %s\n", error.message);
        bson_destroy(&doc);
        return false;
    }
    bson_iter_t it, child;
    /* Without the file, the values the primary declared are the best defaults. */
    if (*found && !sc) {
        if (bson_iter_init_find(&it, &doc, "tick_ms") && BSON_ITER_HOLDS_NUMBER(&it))
            eff->tick_ms = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, &doc, "lease_ms") && BSON_ITER_HOLDS_NUMBER(&it))
            eff->takeover_ms = bson_iter_as_int64(&it);
    }
    if (*found && bson_iter_init_find(&it, &doc, "settings") &&
        BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &child)) {
        while (bson_iter_next(&child)) {
            int64_t *field = cohort_settings_field(eff, bson_iter_key(&child));
            if (field && BSON_ITER_HOLDS_NUMBER(&child)) {
                *field = bson_iter_as_int64(&child);
                BSON_APPEND_INT64(doc_settings, bson_iter_key(&child), *field);
            }
        }
    }
    bson_destroy(&doc);
    return true;
}

/* cohortctl settings get SERVICE | set SERVICE KEY VALUE | unset SERVICE KEY */
static int cmd_settings(ctl_t *ctl, int argc, char **argv)
{
    const char *verb = argc > 0 ? argv[0] : "";
    int want = strcmp(verb, "get") == 0 ? 2 : strcmp(verb, "set") == 0 ? 4 : strcmp(verb, "unset") == 0 ? 3 : -1;
    if (want < 0 || argc != want) {
        fprintf(stderr, "usage: cohortctl settings get SERVICE\n"
                        "       cohortctl settings set SERVICE KEY VALUE\n"
                        "       cohortctl settings unset SERVICE KEY\n"
                        "keys: tick_ms takeover_ms primary_task_count secondary_task_count\n"
                        "      stall_timeout_ms succeeded_retention_ms failed_retention_ms\n");
        return 2;
    }
    const char *service = argv[1];
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl settings: '%s' is not a valid service name\n", service);
        return 2;
    }
    char why[512];
    int64_t value = -1;
    if (want >= 3) {
        cohort_settings_t probe = {0};
        if (!cohort_settings_field(&probe, argv[2])) {
            cohort_settings_check_value(argv[2], 0, why, sizeof why);
            fprintf(stderr, "cohortctl settings: %s\n", why);
            return 2;
        }
    }
    if (want == 4) {
        char *end;
        errno = 0;
        long long v = strtoll(argv[3], &end, 10);
        if (errno || end == argv[3] || *end) {
            fprintf(stderr, "cohortctl settings set: %s = '%s' is not a number\n", argv[2],
                    argv[3]);
            return 2;
        }
        if (!cohort_settings_check_value(argv[2], v, why, sizeof why)) {
            fprintf(stderr, "cohortctl settings set: refused: %s\n", why);
            return 2;
        }
        value = v;
    }
    if (!open_store(ctl))
        return 1;
    cohort_settings_t eff;
    bson_t in_db;
    bool found = false;
    if (!effective_settings(ctl, service, &eff, &in_db, &found)) {
        bson_destroy(&in_db);
        return 1;
    }
    int rc = 0;
    if (!found) {
        fprintf(stderr, "cohortctl settings: service '%s' does not exist (start a node that "
                        "hosts it first)\n", service);
        rc = 1;
    } else if (want == 2) {
        for (size_t i = 0; cohort_setting_names[i]; i++) {
            bson_iter_t it;
            bool set = bson_iter_init_find(&it, &in_db, cohort_setting_names[i]);
            printf("%-24s %14lld  %s\n", cohort_setting_names[i],
                   (long long)*cohort_settings_field(&eff, cohort_setting_names[i]),
                   set ? "(set in the database)" : ctl->config ? "(config file)" : "(default)");
        }
    } else {
        cohort_settings_t next = eff;
        if (want == 4)
            *cohort_settings_field(&next, argv[2]) = value;
        else if (ctl->config && cohort_config_find_service(ctl->config, service)) {
            cohort_settings_t file;
            cohort_settings_from_config(ctl->config,
                                        cohort_config_find_service(ctl->config, service), &file);
            *cohort_settings_field(&next, argv[2]) = *cohort_settings_field(&file, argv[2]);
        }
        bson_error_t error;
        if (!cohort_settings_check(&next, why, sizeof why)) {
            fprintf(stderr, "cohortctl settings %s: refused: %s\n", verb, why);
            rc = 2;
        } else if (!cohort_store_set_setting(ctl->store, ctl->client, service, argv[2], value,
                                             &found, &error)) {
            fprintf(stderr, "cohortctl settings %s: %s\n", verb, error.message);
            rc = 1;
        } else if (want == 4) {
            printf("%s.%s = %lld (every node applies it by its next tick)\n", service, argv[2],
                   (long long)value);
        } else {
            printf("%s.%s unset (back to each node's config file)\n", service, argv[2]);
        }
    }
    bson_destroy(&in_db);
    return rc;
}

/* ---- pause, resume, block, unblock ------------------------------------------------------ */

/* Who set a switch: "cohortctl USER@HOST". */
static void switch_author(char *buf, size_t len)
{
    char host[256] = "?";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    const char *user = getenv("USER");
    struct passwd *pw = user && *user ? NULL : getpwuid(geteuid());
    if (pw)
        user = pw->pw_name;
    snprintf(buf, len, "cohortctl %s@%s", user && *user ? user : "?", host);
}

typedef struct switch_search {
    const char *which, *kind; /* the switch being changed */
    bool found;               /* it is set now */
    char others[1024];        /* the other switches that stay set */
} switch_search_t;

static void search_switch(const ctl_switch_t *sw, void *user)
{
    switch_search_t *s = user;
    if (strcmp(sw->which, s->which) == 0 && strcmp(sw->kind, s->kind) == 0) {
        s->found = true;
        return;
    }
    char what[700];
    describe_switch(sw, what, sizeof what);
    size_t used = strlen(s->others);
    snprintf(s->others + used, sizeof s->others - used, "%s%s", used ? "; " : "", what);
}

/* pause|resume SERVICE [--kind K] [--reason TEXT], block|unblock likewise: `which` is
 * "pause" or "block", `on` sets it. */
static int cmd_switch(ctl_t *ctl, const char *command, const char *which, bool on, int argc,
                      char **argv)
{
    const char *service = NULL, *kind = NULL, *reason = NULL;
    bool is_block = strcmp(which, "block") == 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--kind") == 0 && i + 1 < argc && !kind) {
            kind = argv[++i];
        } else if (strcmp(argv[i], "--reason") == 0 && i + 1 < argc && on && !reason) {
            reason = argv[++i];
        } else if (argv[i][0] != '-' && !service) {
            service = argv[i];
        } else {
            fprintf(stderr, "cohortctl %s: unexpected argument '%s'\n", command, argv[i]);
            fprintf(stderr, "usage: cohortctl %s SERVICE [--kind K]%s\n", command,
                    !on ? "" : is_block ? " --reason TEXT" : " [--reason TEXT]");
            return 2;
        }
    }
    if (!service) {
        fprintf(stderr, "cohortctl %s: which SERVICE?\n", command);
        return 2;
    }
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl %s: '%s' is not a valid service name\n", command, service);
        return 2;
    }
    if (kind && !cohort_config_valid_kind(kind)) {
        fprintf(stderr, "cohortctl %s: --kind '%s' must be 1-64 of [A-Za-z0-9_-]\n", command,
                kind);
        return 2;
    }
    if (is_block && on && (!reason || !reason[strspn(reason, " \t")])) {
        fprintf(stderr, "cohortctl block: --reason TEXT is required (say why, for whoever "
                        "unblocks it)\n");
        return 2;
    }
    if (reason && strlen(reason) > 1000) {
        fprintf(stderr, "cohortctl %s: --reason is longer than 1000 bytes\n", command);
        return 2;
    }
    if (!reach_database(ctl, NULL))
        return 1;
    bson_error_t error;
    bson_t doc;
    bool found = false;
    if (!cohort_store_read_service(ctl->store, ctl->client, service, &doc, &found, &error)) {
        fprintf(stderr, "cohortctl %s: cannot reach the database: %s\n", command,
                error.message);
        bson_destroy(&doc);
        return 1;
    }
    switch_search_t search = {.which = which, .kind = kind ? kind : "*"};
    if (found)
        each_switch(&doc, search_switch, &search);
    bson_destroy(&doc);
    char what[96];
    if (kind)
        snprintf(what, sizeof what, "kind %s", kind);
    else
        snprintf(what, sizeof what, "(all kinds)");
    int rc = 0;
    char by[300];
    switch_author(by, sizeof by);
    if (!found) {
        fprintf(stderr, "cohortctl %s: service '%s' does not exist (no node has run it yet: "
                        "check the name)\n", command, service);
        rc = 1;
    } else if (!on && !search.found) {
        printf("%s %s was not %s: nothing to do\n", service, what,
               is_block ? "blocked" : "paused");
    } else if (!cohort_store_set_switch(ctl->store, ctl->client, service, which, kind ? kind : "*",
                                        on, reason, by, &found, &error)) {
        fprintf(stderr, "cohortctl %s: %s\n", command, error.message);
        rc = 1;
    } else if (!found) {
        fprintf(stderr, "cohortctl %s: service '%s' does not exist\n", command, service);
        rc = 1;
    } else if (on) {
        printf("%s %s %s%s%s%s; nodes stop claiming those tasks by their next tick, running "
               "tasks finish\n",
               is_block ? "blocked" : "paused", service, what, reason ? " (reason: " : "",
               reason ? reason : "", reason ? ")" : "");
    } else {
        printf("%s %s %s: its tasks are claimable again by the nodes' next tick\n",
               is_block ? "unblocked" : "resumed", service, what);
    }
    if (rc == 0 && search.others[0])
        printf("still set: %s\n", search.others);
    return rc;
}

/* ---- counts ----------------------------------------------------------------------------- */

static const char *const task_statuses[] = {"pending", "claimed", "succeeded", "failed",
                                            "timed_out"};
#define N_STATUSES (sizeof task_statuses / sizeof task_statuses[0])

static bool known_status(const char *status)
{
    for (size_t i = 0; i < N_STATUSES; i++)
        if (strcmp(status, task_statuses[i]) == 0)
            return true;
    return false;
}

/* One row of `counts --by kind|group`: the rows arrive sorted by value, so each row is
 * printed when the next value starts and memory stays constant. */
typedef struct count_table {
    const char *field;
    bool json;
    bool have_row;
    char *value; /* the row's value, NULL: tasks without the field */
    int64_t n[N_STATUSES], total;
    uint64_t rows;
} count_table_t;

static void flush_count_row(count_table_t *t)
{
    if (!t->have_row)
        return;
    if (t->json) {
        bson_t row = BSON_INITIALIZER;
        if (t->value)
            BSON_APPEND_UTF8(&row, t->field, t->value);
        else
            BSON_APPEND_NULL(&row, t->field);
        for (size_t i = 0; i < N_STATUSES; i++)
            BSON_APPEND_INT64(&row, task_statuses[i], t->n[i]);
        BSON_APPEND_INT64(&row, "total", t->total);
        char *text = bson_as_relaxed_extended_json(&row, NULL);
        printf("%s%s", t->rows ? ", " : "", text);
        bson_free(text);
        bson_destroy(&row);
    } else {
        printf("%-24s", t->value ? t->value : "(none)");
        for (size_t i = 0; i < N_STATUSES; i++)
            printf(" %10lld", (long long)t->n[i]);
        printf(" %10lld\n", (long long)t->total);
    }
    t->rows++;
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
    for (size_t i = 0; i < N_STATUSES; i++)
        if (strcmp(status, task_statuses[i]) == 0)
            t->n[i] += n;
    t->total += n;
}

static void print_status_header(const char *first)
{
    char upper[16];
    printf("%-24s", first);
    for (size_t i = 0; i < N_STATUSES; i++) {
        size_t j = 0;
        for (; task_statuses[i][j] && j < sizeof upper - 1; j++)
            upper[j] = (char)(task_statuses[i][j] - (task_statuses[i][j] >= 'a' &&
                                                     task_statuses[i][j] <= 'z' ? 32 : 0));
        upper[j] = '\0';
        printf(" %10s", upper);
    }
    printf(" %10s\n", "TOTAL");
}

static int counts_by_status(ctl_t *ctl, const char *service, bool json)
{
    int64_t n[N_STATUSES];
    bson_error_t error;
    if (!cohort_store_count_statuses(ctl->store, ctl->client, service, task_statuses, N_STATUSES,
                                     n, &error)) {
        fprintf(stderr, "cohortctl counts: cannot count: %s\n", error.message);
        return 1;
    }
    int64_t total = 0;
    for (size_t i = 0; i < N_STATUSES; i++)
        total += n[i];
    if (json) {
        bson_t out = BSON_INITIALIZER, counts;
        BSON_APPEND_UTF8(&out, "service", service);
        BSON_APPEND_UTF8(&out, "by", "status");
        BSON_APPEND_DOCUMENT_BEGIN(&out, "counts", &counts);
        for (size_t i = 0; i < N_STATUSES; i++)
            BSON_APPEND_INT64(&counts, task_statuses[i], n[i]);
        bson_append_document_end(&out, &counts);
        print_json(&out);
        bson_destroy(&out);
    } else {
        printf("%-12s %12s\n", "STATUS", "TASKS");
        for (size_t i = 0; i < N_STATUSES; i++)
            printf("%-12s %12lld\n", task_statuses[i], (long long)n[i]);
        printf("%-12s %12lld\n", "total", (long long)total);
    }
    return 0;
}

/* counts SERVICE [--by status|kind|group] [--json] */
static int cmd_counts(ctl_t *ctl, int argc, char **argv)
{
    const char *service = NULL, *by = "status";
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--by") == 0 && i + 1 < argc) {
            by = argv[++i];
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (argv[i][0] != '-' && !service) {
            service = argv[i];
        } else {
            fprintf(stderr, "cohortctl counts: unexpected argument '%s'\n"
                            "usage: cohortctl counts SERVICE [--by status|kind|group] [--json]\n",
                    argv[i]);
            return 2;
        }
    }
    if (!service || !cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl counts: %s%s%s\n", service ? "'" : "which SERVICE?",
                service ? service : "", service ? "' is not a valid service name" : "");
        return 2;
    }
    if (strcmp(by, "status") != 0 && strcmp(by, "kind") != 0 && strcmp(by, "group") != 0) {
        fprintf(stderr, "cohortctl counts: --by '%s' must be status, kind or group\n", by);
        return 2;
    }
    if (!reach_database(ctl, NULL))
        return 1;
    if (strcmp(by, "status") == 0)
        return counts_by_status(ctl, service, json);
    count_table_t table = {.field = by, .json = json};
    if (json)
        printf("{ \"service\" : \"%s\", \"by\" : \"%s\", \"rows\" : [ ", service, by);
    else
        print_status_header(strcmp(by, "kind") == 0 ? "KIND" : "GROUP");
    bson_error_t error;
    bool ok = cohort_store_count_by(ctl->store, ctl->client, service, by, count_row, &table,
                                    &error);
    flush_count_row(&table);
    if (json)
        printf(" ] }\n");
    if (!ok) {
        fprintf(stderr, "cohortctl counts: cannot count: %s\n", error.message);
        return 1;
    }
    return 0;
}

/* ---- tasks and task --------------------------------------------------------------------- */

/* One task of `tasks`: a line of the table, or an element of the JSON array. */
static void print_task_line(const bson_t *doc, bool json, bool first)
{
    char id[25] = "?", run_at[40] = "-";
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it))
        bson_oid_to_string(bson_iter_oid(&it), id);
    const char *status = "?", *kind = NULL, *group = NULL;
    doc_string(doc, "status", &status);
    doc_string(doc, "kind", &kind);
    doc_string(doc, "group", &group);
    int64_t priority = doc_int(doc, "priority", 0);
    int64_t base = doc_int(doc, "base_priority", priority);
    int64_t attempts = doc_int(doc, "attempts", 0);
    int64_t due = doc_date(doc, "run_at");
    if (due)
        format_time(due, run_at, sizeof run_at);
    if (json) {
        bson_t one = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&one, "id", id);
        BSON_APPEND_UTF8(&one, "status", status);
        BSON_APPEND_INT64(&one, "priority", priority);
        BSON_APPEND_INT64(&one, "base_priority", base);
        if (kind)
            BSON_APPEND_UTF8(&one, "kind", kind);
        else
            BSON_APPEND_NULL(&one, "kind");
        if (group)
            BSON_APPEND_UTF8(&one, "group", group);
        else
            BSON_APPEND_NULL(&one, "group");
        if (due)
            BSON_APPEND_UTF8(&one, "run_at", run_at);
        else
            BSON_APPEND_NULL(&one, "run_at");
        BSON_APPEND_INT64(&one, "attempts", attempts);
        char *text = bson_as_relaxed_extended_json(&one, NULL);
        printf("%s%s", first ? "" : ", ", text);
        bson_free(text);
        bson_destroy(&one);
        return;
    }
    char prio[48];
    if (base != priority)
        snprintf(prio, sizeof prio, "%lld (base %lld)", (long long)priority, (long long)base);
    else
        snprintf(prio, sizeof prio, "%lld", (long long)priority);
    printf("%-24s %-9s %-18s %8lld %-24s %-16s %s\n", id, status, prio, (long long)attempts,
           run_at, kind ? kind : "-", group ? group : "-");
}

/* tasks SERVICE [--status S] [--limit N] [--json] */
static int cmd_tasks(ctl_t *ctl, int argc, char **argv)
{
    const char *service = NULL, *status = NULL;
    int64_t limit = 50;
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--status") == 0 && i + 1 < argc && !status) {
            status = argv[++i];
            if (!known_status(status)) {
                fprintf(stderr, "cohortctl tasks: --status '%s' must be pending, claimed, "
                                "succeeded, failed or timed_out\n", status);
                return 2;
            }
        } else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            limit = strtoll(argv[++i], &end, 10);
            if (errno || end == argv[i] || *end || limit < 1 || limit > 1000000) {
                fprintf(stderr, "cohortctl tasks: --limit '%s' must be 1..1000000\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (argv[i][0] != '-' && !service) {
            service = argv[i];
        } else {
            fprintf(stderr, "cohortctl tasks: unexpected argument '%s'\n"
                            "usage: cohortctl tasks SERVICE [--status S] [--limit N] [--json]\n",
                    argv[i]);
            return 2;
        }
    }
    if (!service || !cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl tasks: %s%s%s\n", service ? "'" : "which SERVICE?",
                service ? service : "", service ? "' is not a valid service name" : "");
        return 2;
    }
    if (!reach_database(ctl, NULL))
        return 1;
    mongoc_cursor_t *cursor =
        cohort_store_list_tasks(ctl->store, ctl->client, service, status, limit);
    if (json)
        printf("{ \"service\" : \"%s\", \"tasks\" : [ ", service);
    else
        printf("%-24s %-9s %-18s %8s %-24s %-16s %s\n", "ID", "STATUS", "PRIORITY", "ATTEMPTS",
               "RUN_AT", "KIND", "GROUP");
    const bson_t *doc;
    bool first = true;
    while (mongoc_cursor_next(cursor, &doc)) {
        print_task_line(doc, json, first);
        first = false;
    }
    if (json)
        printf(" ] }\n");
    bson_error_t error;
    int rc = 0;
    if (mongoc_cursor_error(cursor, &error)) {
        fprintf(stderr, "cohortctl tasks: cannot list tasks: %s\n", error.message);
        rc = 1;
    }
    mongoc_cursor_destroy(cursor);
    return rc;
}

/* task SERVICE ID: the whole task document as relaxed JSON. */
static int cmd_task(ctl_t *ctl, int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cohortctl task SERVICE ID\n");
        return 2;
    }
    const char *service = argv[0], *id = argv[1];
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl task: '%s' is not a valid service name\n", service);
        return 2;
    }
    if (strlen(id) != 24 || !bson_oid_is_valid(id, 24)) {
        fprintf(stderr, "cohortctl task: '%s' is not a task id (24 hex digits)\n", id);
        return 2;
    }
    if (!reach_database(ctl, NULL))
        return 1;
    bson_t doc;
    bool found = false;
    bson_error_t error;
    int rc = 0;
    if (!cohort_store_read_task(ctl->store, ctl->client, service, id, &doc, &found, &error)) {
        fprintf(stderr, "cohortctl task: cannot read the task: %s\n", error.message);
        rc = 1;
    } else if (!found) {
        fprintf(stderr, "cohortctl task: no task %s in service '%s'\n", id, service);
        rc = 1;
    } else {
        print_json(&doc);
    }
    bson_destroy(&doc);
    return rc;
}

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
    int rc = 2;
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
    if (strcmp(command, "status") == 0) {
        rc = cmd_status(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "enqueue") == 0) {
        rc = cmd_enqueue(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "data") == 0) {
        rc = cmd_data(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "nodes") == 0) {
        rc = cmd_nodes(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "settings") == 0) {
        rc = cmd_settings(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "pause") == 0 || strcmp(command, "resume") == 0) {
        rc = cmd_switch(&ctl, command, "pause", command[0] == 'p', argc - optind - 1,
                        argv + optind + 1);
    } else if (strcmp(command, "block") == 0 || strcmp(command, "unblock") == 0) {
        rc = cmd_switch(&ctl, command, "block", command[0] == 'b', argc - optind - 1,
                        argv + optind + 1);
    } else if (strcmp(command, "counts") == 0) {
        rc = cmd_counts(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "tasks") == 0) {
        rc = cmd_tasks(&ctl, argc - optind - 1, argv + optind + 1);
    } else if (strcmp(command, "task") == 0) {
        rc = cmd_task(&ctl, argc - optind - 1, argv + optind + 1);
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
