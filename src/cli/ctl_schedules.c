/*
 * ctl_schedules.c - `cohortctl schedules SERVICE [--json]` and `cohortctl schedules
 * pause|resume SERVICE ID`: a service's recurring tasks as the primary keeps them.
 *
 * The listing reads the service's config document once: per schedule its times (cron
 * expression and zone), the last slot the primary settled, the next slot after it (due now
 * if that is already past the server's clock), the task it created last with that task's
 * status, and how many slots it created, found already created, and skipped. With -c, the
 * file's schedules that no primary has run yet are listed too, and those the file no longer
 * has are marked. Times are the server's.
 *
 * Pausing is a switch in the schedule's state: the primary skips (and counts) the slots of a
 * paused schedule instead of creating them, so resuming starts at the next slot, never with
 * a burst of the paused ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/cron.h"
#include "core/schedule.h"
#include "core/timefmt.h"

typedef struct listing {
    ctl_t *ctl;
    const char *service;
    const cohort_service_config_t *file; /* with -c and the service in it; else NULL */
    int64_t now;
    bool json;
    bson_t *array;
    uint32_t n;
} listing_t;

/* The next slot after `after` of a series "CRON @ ZONE", into *next; false if unreadable. */
static bool next_of_series(const char *series, int64_t after, int64_t *next)
{
    const char *at = strstr(series, " @ ");
    if (!at)
        return false;
    char cron_text[256];
    snprintf(cron_text, sizeof cron_text, "%.*s", (int)(at - series), series);
    cohort_cron_t cron;
    bson_error_t error;
    cohort_tz_t *tz = cohort_tz_load(at + 3, &error);
    bool ok = tz && cohort_cron_parse(cron_text, &cron, &error) &&
              cohort_cron_next(&cron, tz, after, next);
    cohort_tz_destroy(tz);
    return ok;
}

static void print_time(char *buf, size_t len, int64_t ms)
{
    if (ms <= 0)
        snprintf(buf, len, "-");
    else
        cohort_time_format(ms, buf, len);
}

/* The status of the task `oid`, or "deleted" if it is gone (purged). */
static void task_status(listing_t *l, const bson_oid_t *oid, char *buf, size_t len)
{
    char id[25];
    bson_oid_to_string(oid, id);
    bson_t doc;
    bool found = false;
    bson_error_t error;
    const char *status = "?";
    snprintf(buf, len, "?");
    if (cohort_store_read_task(l->ctl->store, l->ctl->client, l->service, id, &doc, &found,
                               &error)) {
        if (!found)
            snprintf(buf, len, "deleted");
        else if (ctl_doc_string(&doc, "status", &status))
            snprintf(buf, len, "%s", status);
    }
    bson_destroy(&doc);
}

static const cohort_schedule_config_t *in_file(const listing_t *l, const char *id)
{
    for (size_t i = 0; l->file && i < l->file->n_schedules; i++)
        if (strcmp(l->file->schedules[i].id, id) == 0)
            return &l->file->schedules[i];
    return NULL;
}

/* One schedule: a table row (and its detail line) or a JSON element. */
static void show(listing_t *l, const char *id, const cohort_schedule_state_t *st)
{
    const cohort_schedule_config_t *sc = in_file(l, id);
    char series[320] = "";
    if (st->found)
        snprintf(series, sizeof series, "%s", st->series);
    else if (sc)
        cohort_schedule_series(sc, series, sizeof series);
    int64_t next = 0;
    bool has_next = st->found && next_of_series(series, st->last_slot_ms, &next);
    if (!st->found && sc && !cohort_cron_next(&sc->cron, sc->tz, l->now, &next))
        next = 0;
    char status[32] = "-", task_id[25] = "-";
    if (st->has_last_task) {
        task_status(l, &st->last_task, status, sizeof status);
        bson_oid_to_string(&st->last_task, task_id);
    }
    const char *state = !st->found ? "not started" : st->paused ? "paused" : "active";
    bool due = has_next && next <= l->now && !st->paused;
    if (l->json) {
        bson_t one, task;
        ctl_array_begin_document(l->array, &l->n, &one);
        BSON_APPEND_UTF8(&one, "id", id);
        BSON_APPEND_UTF8(&one, "state", state);
        BSON_APPEND_UTF8(&one, "series", series);
        ctl_append_utf8_or_null(&one, "spec", sc ? sc->spec : NULL);
        if (l->file)
            BSON_APPEND_BOOL(&one, "in_file", sc != NULL);
        if (sc)
            BSON_APPEND_UTF8(&one, "catch_up", cohort_catch_up_name(sc->catch_up));
        if (st->found)
            BSON_APPEND_DATE_TIME(&one, "last_slot", st->last_slot_ms);
        else
            BSON_APPEND_NULL(&one, "last_slot");
        if (next > 0)
            BSON_APPEND_DATE_TIME(&one, "next_slot", next);
        else
            BSON_APPEND_NULL(&one, "next_slot");
        BSON_APPEND_BOOL(&one, "due", due);
        if (st->has_last_task) {
            BSON_APPEND_DOCUMENT_BEGIN(&one, "last_task", &task);
            BSON_APPEND_UTF8(&task, "id", task_id);
            BSON_APPEND_DATE_TIME(&task, "slot", st->last_task_slot_ms);
            BSON_APPEND_UTF8(&task, "status", status);
            bson_append_document_end(&one, &task);
        } else {
            BSON_APPEND_NULL(&one, "last_task");
        }
        BSON_APPEND_INT64(&one, "created", st->created);
        BSON_APPEND_INT64(&one, "existed", st->existed);
        BSON_APPEND_INT64(&one, "skipped", st->skipped);
        BSON_APPEND_INT64(&one, "last_epoch", st->last_epoch);
        bson_append_document_end(l->array, &one);
        return;
    }
    char last[COHORT_TIME_TEXT_MAX], nxt[COHORT_TIME_TEXT_MAX], slot[COHORT_TIME_TEXT_MAX];
    print_time(last, sizeof last, st->found ? st->last_slot_ms : 0);
    print_time(nxt, sizeof nxt, next);
    print_time(slot, sizeof slot, st->has_last_task ? st->last_task_slot_ms : 0);
    printf("%-20s %-11s %-24s %-24s%s %-24s %-10s %s\n", id, state, last, nxt, due ? "*" : " ",
           task_id, status, slot);
    printf("%-20s %s; created %lld, already created %lld, skipped %lld%s%s\n", "", series,
           (long long)st->created, (long long)st->existed, (long long)st->skipped,
           l->file && !sc ? "; not in the config file any more" : "",
           sc && sc->catch_up != COHORT_CATCH_UP_LATEST
               ? (sc->catch_up == COHORT_CATCH_UP_NONE ? "; catch_up none" : "; catch_up all")
               : "");
}

static int list(ctl_t *ctl, const char *service, bool json)
{
    int64_t now = 0;
    if (!ctl_reach_database(ctl, &now))
        return CTL_FAILED;
    bson_t doc;
    bool found = false;
    bson_error_t error;
    if (!cohort_store_read_service(ctl->store, ctl->client, service, &doc, &found, &error)) {
        fprintf(stderr, "cohortctl schedules: %s\n", error.message);
        bson_destroy(&doc);
        return CTL_FAILED;
    }
    if (!found) {
        bson_destroy(&doc);
        return ctl_unknown_service(ctl, service, "schedules");
    }
    bson_t out = BSON_INITIALIZER, array;
    listing_t l = {.ctl = ctl, .service = service, .now = now, .json = json, .array = &array};
    l.file = ctl->config ? cohort_config_find_service(ctl->config, service) : NULL;
    BSON_APPEND_UTF8(&out, "service", service);
    BSON_APPEND_DATE_TIME(&out, "now", now);
    BSON_APPEND_ARRAY_BEGIN(&out, "schedules", &array);
    if (!json)
        printf("%-20s %-11s %-24s %-24s  %-24s %-10s %s\n", "SCHEDULE", "STATE", "LAST SLOT",
               "NEXT SLOT (*: due)", "LAST TASK", "STATUS", "ITS SLOT");
    bson_iter_t it, child;
    if (bson_iter_init_find(&it, &doc, "schedules") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &child)) {
        while (bson_iter_next(&child)) {
            cohort_schedule_state_t st;
            cohort_store_schedule_state(&doc, bson_iter_key(&child), &st);
            if (st.found)
                show(&l, bson_iter_key(&child), &st);
        }
    }
    for (size_t i = 0; l.file && i < l.file->n_schedules; i++) {
        cohort_schedule_state_t st;
        cohort_store_schedule_state(&doc, l.file->schedules[i].id, &st);
        if (!st.found)
            show(&l, l.file->schedules[i].id, &st);
    }
    bson_append_array_end(&out, &array);
    if (!json && l.n == 0 && !bson_has_field(&doc, "schedules"))
        printf("(no schedules: no primary has run a schedule.ID line of '%s' yet)\n", service);
    bson_destroy(&doc);
    return ctl_finish_listing(&out, json, true, NULL, NULL);
}

static int pause_or_resume(ctl_t *ctl, const char *verb, const char *service, const char *id)
{
    if (!cohort_schedule_valid_id(id)) {
        fprintf(stderr, "cohortctl schedules %s: '%s' is not a schedule id (1-64 of "
                        "[A-Za-z0-9_-])\n", verb, id);
        return CTL_USAGE;
    }
    if (!ctl_open_store(ctl))
        return CTL_FAILED;
    int rc = ctl_check_service(ctl, service, "schedules");
    if (rc != CTL_DONE)
        return rc;
    bool found = false;
    bson_error_t error;
    bool paused = strcmp(verb, "pause") == 0;
    if (!cohort_store_pause_schedule(ctl->store, ctl->client, service, id, paused, &found,
                                     &error)) {
        fprintf(stderr, "cohortctl schedules %s: %s\n", verb, error.message);
        return CTL_FAILED;
    }
    if (!found) {
        fprintf(stderr,
                "cohortctl schedules %s: service '%s' has no schedule '%s' (not in its "
                "config, or no primary has run it yet: `cohortctl schedules %s` lists them)\n",
                verb, service, id, service);
        return CTL_REFUSED;
    }
    printf(paused ? "%s schedule %s paused: its slots are skipped from the primary's next "
                    "tick on\n"
                  : "%s schedule %s resumed: it runs from its next slot on (the slots "
                    "skipped while paused stay skipped)\n",
           service, id);
    return CTL_DONE;
}

/* cohortctl schedules SERVICE [--json] | schedules pause|resume SERVICE ID */
int cmd_schedules(ctl_t *ctl, int argc, char **argv)
{
    struct option longopts[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, longopts);
    ctl_reset_getopt();
    bool json = false;
    int c;
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        if (c == 'j') {
            json = true;
        } else {
            fprintf(stderr, "cohortctl schedules: unknown option '%s'\n", ctl_bad_arg(argv));
            return CTL_USAGE;
        }
    }
    argc -= optind;
    argv += optind;
    bool verb = argc >= 1 && (strcmp(argv[0], "pause") == 0 || strcmp(argv[0], "resume") == 0);
    if (verb && argc == 3 && !json)
        return cohort_config_valid_service_name(argv[1])
                   ? pause_or_resume(ctl, argv[0], argv[1], argv[2])
                   : (fprintf(stderr, "cohortctl schedules: '%s' is not a valid service name\n",
                              argv[1]),
                      CTL_USAGE);
    if (verb || argc != 1) {
        fprintf(stderr, "cohortctl schedules: SERVICE [--json], or pause|resume SERVICE ID\n");
        return CTL_USAGE;
    }
    if (!cohort_config_valid_service_name(argv[0])) {
        fprintf(stderr, "cohortctl schedules: '%s' is not a valid service name\n", argv[0]);
        return CTL_USAGE;
    }
    if (!ctl_open_store(ctl))
        return CTL_FAILED;
    return list(ctl, argv[0], json);
}
