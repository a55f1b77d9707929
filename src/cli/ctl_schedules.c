/*
 * ctl_schedules.c - `cohortctl schedules SERVICE [--json]` and `cohortctl schedules
 * pause|resume SERVICE ID`: a service's recurring tasks as the primary keeps them.
 *
 * The listing is node/status/schedule_status.c's document (the API's GET .../schedules shows the
 * same): per schedule its times (cron expression and zone), the last slot the primary
 * settled, the next slot after it (due now if already past the server's clock), the task it
 * created last with that task's status, and how many slots it created, found already
 * created, and skipped. With -c, the file's schedules that no primary has run yet are listed
 * too, and those the file no longer has are marked. Times are the server's.
 *
 * Pausing is a switch in the schedule's state: the primary skips (and counts) the slots of a
 * paused schedule instead of creating them, so resuming starts at the next slot, never with
 * a burst of the paused ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/jsondoc.h"
#include "core/schedule.h"
#include "node/status/schedule_status.h"
#include "store/schedules.h"

static const char *text_of(const bson_t *doc, const char *dotted, const char *fallback)
{
    bson_iter_t it, child;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, dotted, &child) &&
        BSON_ITER_HOLDS_UTF8(&child))
        return bson_iter_utf8(&child, NULL);
    return fallback;
}

static bool bool_of(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_BOOL(&it) &&
           bson_iter_bool(&it);
}

/* One schedule of the built document as a table row and its detail line. */
static void print_row(const bson_t *one)
{
    printf("%-20s %-11s %-24s %-24s%s %-24s %-10s %s\n", text_of(one, "id", "?"),
           text_of(one, "state", "?"), text_of(one, "last_slot", "-"),
           text_of(one, "next_slot", "-"), bool_of(one, "due") ? "*" : " ",
           text_of(one, "last_task.id", "-"), text_of(one, "last_task.status", "-"),
           text_of(one, "last_task.slot", "-"));
    const char *catch_up = text_of(one, "catch_up", NULL);
    bson_iter_t it;
    bool not_in_file = bson_iter_init_find(&it, one, "in_file") && !bson_iter_bool(&it);
    printf("%-20s %s; created %lld, already created %lld, skipped %lld%s%s%s\n", "",
           text_of(one, "series", ""), (long long)ctl_doc_int(one, "created", 0),
           (long long)ctl_doc_int(one, "existed", 0), (long long)ctl_doc_int(one, "skipped", 0),
           catch_up ? "; catch_up " : "", catch_up ? catch_up : "",
           not_in_file ? "; not in the config file any more" : "");
}

static int list(ctl_t *ctl, const char *service, bool json)
{
    int64_t now = 0;
    if (!ctl_reach_database(ctl, &now))
        return CTL_FAILED;
    const cohort_service_config_t *file =
        ctl->config ? cohort_config_find_service(ctl->config, service) : NULL;
    bson_t out = BSON_INITIALIZER;
    bool found = false;
    bson_error_t error;
    if (!cohort_schedule_status(ctl->store, ctl->client, service, file, now, &out, &found,
                                &error)) {
        bson_destroy(&out);
        fprintf(stderr, "cohortctl schedules: %s\n", error.message);
        return CTL_FAILED;
    }
    if (!found) {
        bson_destroy(&out);
        return ctl_unknown_service(ctl, service, "schedules");
    }
    if (json)
        return ctl_finish_listing(&out, true, true, NULL, NULL);
    printf("%-20s %-11s %-24s %-24s  %-24s %-10s %s\n", "SCHEDULE", "STATE", "LAST SLOT",
           "NEXT SLOT (*: due)", "LAST TASK", "STATUS", "ITS SLOT");
    bson_iter_t it, list;
    int rows = 0;
    if (bson_iter_init_find(&it, &out, "schedules") && bson_iter_recurse(&it, &list)) {
        bson_t one;
        while (bson_iter_next(&list)) {
            if (cohort_iter_doc(&list, &one)) {
                print_row(&one);
                rows++;
            }
        }
    }
    if (rows == 0)
        printf("(no schedules: no primary has run a schedule.ID line of '%s' yet)\n", service);
    return ctl_finish_listing(&out, false, true, NULL, NULL);
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
