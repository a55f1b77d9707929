/*
 * ctl_settings.c - `cohortctl settings get|set|unset SERVICE [KEY [VALUE]]`: a service's
 * live settings (tick_ms, takeover_ms, worker counts, stall timeout, retentions).
 *
 * A value set here lives in the service's config document and wins over every node's
 * config file until it is unset; nodes apply it by their next tick. A change is checked
 * against the other settings as they will be (the file's, or the defaults, overridden by
 * the database's), so that takeover_ms > tick_ms and the like hold after it too
 * (node/service_settings.c, shared with the HTTP API's .../settings).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "node/service_settings.h"

/* settings set KEY VALUE (`set`) or unset KEY (value -1): checks the settings as they will
 * be, then writes. The message says what happened; returns the exit status. */
static int change_setting(ctl_t *ctl, const char *service, const char *verb, const char *key,
                          bool set, int64_t value, const cohort_settings_t *eff)
{
    cohort_settings_t next = *eff;
    cohort_service_settings_change(ctl->config, service, &next, key, set, value);
    bson_error_t error;
    bool found = false;
    if (!cohort_settings_validate(&next, &error)) {
        fprintf(stderr, "cohortctl settings %s: refused: %s\n", verb, error.message);
        return CTL_USAGE;
    }
    if (!cohort_store_set_setting(ctl->store, ctl->client, service, key, value, &found,
                                  &error)) {
        fprintf(stderr, "cohortctl settings %s: %s\n", verb, error.message);
        return CTL_FAILED;
    }
    if (set)
        printf("%s.%s = %lld (every node applies it by its next tick)\n", service, key,
               (long long)value);
    else
        printf("%s.%s unset (back to each node's config file)\n", service, key);
    return CTL_DONE;
}

/* cohortctl settings get SERVICE | set SERVICE KEY VALUE | unset SERVICE KEY */
int cmd_settings(ctl_t *ctl, int argc, char **argv)
{
    struct option none[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, none);
    ctl_reset_getopt();
    /* "+": operands only, so that a value such as -5 reaches the range check. */
    bool options = getopt_long(argc, argv, "+:", none, NULL) != -1;
    argc -= optind;
    argv += optind;
    const char *verb = argc > 0 ? argv[0] : "";
    int want = strcmp(verb, "get") == 0     ? 2
               : strcmp(verb, "set") == 0   ? 4
               : strcmp(verb, "unset") == 0 ? 3
                                            : -1;
    if (options || want < 0 || argc != want) {
        fprintf(stderr, "cohortctl settings: get SERVICE, set SERVICE KEY VALUE or unset "
                        "SERVICE KEY; keys: tick_ms takeover_ms primary_task_count "
                        "secondary_task_count stall_timeout_ms succeeded_retention_ms "
                        "failed_retention_ms\n");
        return CTL_USAGE;
    }
    const char *service = argv[1];
    if (!cohort_config_valid_service_name(service)) {
        fprintf(stderr, "cohortctl settings: '%s' is not a valid service name\n", service);
        return CTL_USAGE;
    }
    bson_error_t why;
    int64_t value = -1;
    if (want >= 3) {
        cohort_settings_t probe = {0};
        if (!cohort_settings_field(&probe, argv[2])) {
            cohort_settings_validate_value(argv[2], 0, &why);
            fprintf(stderr, "cohortctl settings: %s\n", why.message);
            return CTL_USAGE;
        }
    }
    if (want == 4) {
        int64_t v;
        if (!ctl_parse_int(argv[3], &v)) {
            fprintf(stderr, "cohortctl settings set: %s = '%s' is not a number\n", argv[2],
                    argv[3]);
            return CTL_USAGE;
        }
        if (!cohort_settings_validate_value(argv[2], v, &why)) {
            fprintf(stderr, "cohortctl settings set: refused: %s\n", why.message);
            return CTL_USAGE;
        }
        value = v;
    }
    if (!ctl_open_store(ctl))
        return CTL_FAILED;
    cohort_settings_t eff;
    bson_t in_db;
    bool found = false;
    bson_error_t error;
    if (!cohort_service_settings_read(ctl->store, ctl->client, ctl->config, service, &eff,
                                      &in_db, &found, &error)) {
        fprintf(stderr, "cohortctl settings: %s\n", error.message);
        bson_destroy(&in_db);
        return CTL_FAILED;
    }
    int rc = CTL_DONE;
    if (!found) {
        rc = ctl_unknown_service(ctl, service, "settings");
    } else if (want == 2) {
        for (size_t i = 0; cohort_setting_names[i]; i++) {
            bson_iter_t it;
            bool set = bson_iter_init_find(&it, &in_db, cohort_setting_names[i]);
            printf("%-24s %14lld  %s\n", cohort_setting_names[i],
                   (long long)*cohort_settings_field(&eff, cohort_setting_names[i]),
                   set ? "(set in the database)" : ctl->config ? "(config file)" : "(default)");
        }
    } else {
        rc = change_setting(ctl, service, verb, argv[2], want == 4, value, &eff);
    }
    bson_destroy(&in_db);
    return rc;
}

