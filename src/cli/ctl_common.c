/*
 * ctl_common.c - helpers every cohortctl command uses: opening the store, reading fields of
 * documents, building and printing JSON, resetting getopt (see ctl.h).
 */
#include "cli/ctl.h"
#include "node/status/api_json.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "store/listing.h"
#include "store/store.h"
#include "store/nodes.h"
#include "store/services.h"

bool ctl_open_store(ctl_t *ctl)
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

bool ctl_reach_database(ctl_t *ctl, int64_t *server_ms)
{
    if (!ctl_open_store(ctl))
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

#define KNOWN_SHOWN 20 /* services named in an "unknown service" message */

static bool name_known(void *user, const char *name, bson_error_t *error)
{
    (void)error;
    size_t *n = user;
    if (*n < KNOWN_SHOWN)
        fprintf(stderr, "%s%s", *n ? ", " : "", name);
    (*n)++;
    return true;
}

/* Ends the "does not exist" message with the services that do. */
static void print_known_services(ctl_t *ctl)
{
    size_t n = 0;
    bson_error_t error;
    fputs("known services: ", stderr);
    bool ok = cohort_store_each_service(ctl->store, ctl->client, name_known, &n, &error);
    if (!ok)
        fprintf(stderr, "%s(cannot list them: %s)", n ? " " : "", error.message);
    else if (n == 0)
        fputs("none yet", stderr);
    else if (n > KNOWN_SHOWN)
        fprintf(stderr, " and %zu more (cohortctl status lists them)", n - KNOWN_SHOWN);
    fputc('\n', stderr);
}

int ctl_unknown_service(ctl_t *ctl, const char *service, const char *command)
{
    fprintf(stderr, "cohortctl %s: service '%s' does not exist (no node has run it yet: "
                    "check the name, or start a node that hosts it first)\n",
            command, service);
    print_known_services(ctl);
    return CTL_REFUSED;
}

typedef struct queue_seek {
    const char *name;
    bool found;
} queue_seek_t;

static bool seek_queue(void *user, const char *name, bson_error_t *error)
{
    (void)error;
    queue_seek_t *q = user;
    q->found = q->found || strcmp(q->name, name) == 0;
    return !q->found;
}

int ctl_check_queue(ctl_t *ctl, const char *service, const char *command)
{
    queue_seek_t q = {.name = service};
    bson_error_t error;
    bson_t doc;
    bool found = false;
    bool ok = cohort_store_read_service(ctl->store, ctl->client, service, &doc, &found, &error);
    bson_destroy(&doc);
    if (ok && !found)
        ok = cohort_store_each_queue(ctl->store, ctl->client, seek_queue, &q, &error);
    if (!ok) {
        fprintf(stderr, "cohortctl %s: cannot read service '%s': %s\n", command, service,
                error.message);
        return CTL_FAILED;
    }
    return found || q.found ? CTL_DONE : ctl_unknown_service(ctl, service, command);
}

int ctl_check_service(ctl_t *ctl, const char *service, const char *command)
{
    bson_t doc;
    bool found = false;
    bson_error_t error;
    bool ok = cohort_store_read_service(ctl->store, ctl->client, service, &doc, &found, &error);
    bson_destroy(&doc);
    if (!ok)
        fprintf(stderr, "cohortctl %s: cannot read service '%s': %s\n", command, service,
                error.message);
    if (!ok)
        return CTL_FAILED;
    return found ? CTL_DONE : ctl_unknown_service(ctl, service, command);
}

void ctl_longopts(const ctl_t *ctl, struct option out[CLI_MAX_OPTIONS + 1])
{
    cli_longopts(ctl->command->options, out);
}

void ctl_author(char *buf, size_t len)
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

void ctl_reset_getopt(void)
{
    optind = 0; /* glibc: 0 also re-reads the option string's flags */
    opterr = 0;
}

const char *ctl_bad_arg(char **argv)
{
    return argv[optind - 1];
}

bool ctl_json_only(ctl_t *ctl, int argc, char **argv, const char *command, bool *json)
{
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    int opt, given = 0;
    bool bad = false;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        bad |= opt != 'j';
        given++;
    }
    *json = given == 1 && !bad;
    if (bad || given > 1 || optind < argc) {
        fprintf(stderr, "cohortctl %s: unexpected argument '%s'\n", command,
                optind < argc ? argv[optind] : ctl_bad_arg(argv));
        return false;
    }
    return true;
}

bool ctl_parse_int(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end)
        return false;
    *out = v;
    return true;
}

bool ctl_doc_string(const bson_t *doc, const char *key, const char **out)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    *out = bson_iter_utf8(&it, NULL);
    return true;
}

int64_t ctl_doc_int(const bson_t *doc, const char *key, int64_t fallback)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_NUMBER(&it))
        return fallback;
    return bson_iter_as_int64(&it);
}

int64_t ctl_doc_date(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DATE_TIME(&it))
        return 0;
    return bson_iter_date_time(&it);
}

void ctl_append_utf8_or_null(bson_t *doc, const char *key, const char *text)
{
    cohort_json_append_utf8_or_null(doc, key, text);
}

void ctl_print_json(const bson_t *doc)
{
    char *text = bson_as_relaxed_extended_json(doc, NULL);
    printf("%s\n", text);
    bson_free(text);
}

int ctl_finish_listing(bson_t *out, bool json, bool ok, const char *failed,
                       const bson_error_t *error)
{
    if (!ok && failed)
        fprintf(stderr, "%s: %s\n", failed, error->message);
    else if (ok && json)
        ctl_print_json(out);
    bson_destroy(out);
    return ok ? CTL_DONE : CTL_FAILED;
}


void ctl_progress_start(ctl_progress_t *p, const char *command, int64_t total)
{
    *p = (ctl_progress_t){.command = command,
                          .total = total,
                          .tty = isatty(STDERR_FILENO),
                          .from = CTL_PROGRESS_FROM};
    const char *from = getenv("COHORTCTL_PROGRESS_FROM");
    int64_t v;
    if (from && ctl_parse_int(from, &v) && v >= 0)
        p->from = v;
}

void ctl_progress_update(ctl_progress_t *p, int64_t done)
{
    int64_t now = cohort_clock_monotonic_ms();
    bool long_one = p->total > p->from || done >= p->from;
    if (!p->tty || !long_one || now - p->last_ms < CTL_PROGRESS_EVERY_MS)
        return;
    p->last_ms = now;
    p->shown = true;
    if (p->total > 0)
        fprintf(stderr, "\r\033[Kcohortctl %s: %lld of %lld tasks, %d%%", p->command,
                (long long)done, (long long)p->total, (int)(done * 100 / p->total));
    else
        fprintf(stderr, "\r\033[Kcohortctl %s: %lld tasks so far", p->command, (long long)done);
    fflush(stderr);
}

void ctl_progress_end(ctl_progress_t *p)
{
    if (p->shown)
        fputs("\r\033[K", stderr);
    p->shown = false;
}
