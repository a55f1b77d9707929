/*
 * ctl_settings.c - `cohortctl settings get|set|unset SERVICE [KEY [VALUE]] [--force]`: a
 * service's live settings (tick_ms, takeover_ms, worker counts, stall timeout, retentions).
 *
 * A value set here lives in the service's config document and wins over every node's
 * config file until it is unset; nodes apply it by their next tick. A change is checked
 * against the other settings as they will be (the file's, or the defaults, overridden by
 * the database's), so that takeover_ms > tick_ms and the like hold after it too, and then
 * against each live node's own values as its node document publishes them: a node whose
 * file would make the result invalid, or whose measured database round trip makes the new
 * takeover unsafe (unless --force), refuses it by name (node/status/service_settings.c, shared with
 * the HTTP API's .../settings). `get` lists the nodes that run other values.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "node/status/service_settings.h"
#include "store/services.h"

/* settings set KEY VALUE (`set`) or unset KEY (value -1): checks the settings as they will
 * be, here and on every live node, then writes. The message says what happened; returns the
 * exit status. */
static int change_setting(ctl_t *ctl, const char *service, const char *verb, const char *key,
                          bool set, int64_t value, const cohort_settings_t *eff,
                          const bson_t *in_db, bool force)
{
    cohort_settings_t next = *eff;
    cohort_service_settings_change(ctl->config, service, &next, key, set, value);
    bson_error_t error;
    bool found = false;
    if (!cohort_settings_validate(&next, &error)) {
        fprintf(stderr, "cohortctl settings %s: refused: %s\n", verb, error.message);
        return CTL_USAGE;
    }
    bson_t next_db;
    char refusal[768];
    cohort_service_settings_next_db(in_db, key, set, value, &next_db);
    bool checked = cohort_service_settings_check_nodes(ctl->store, ctl->client, service,
                                                       &next_db, force, refusal,
                                                       sizeof refusal, &error);
    bson_destroy(&next_db);
    if (!checked) {
        fprintf(stderr, "cohortctl settings %s: cannot read the nodes: %s\n", verb,
                error.message);
        return CTL_FAILED;
    }
    if (refusal[0]) {
        fprintf(stderr, "cohortctl settings %s: refused: %s\n", verb, refusal);
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

/* settings get: a node whose values differ from the table's, or that cannot apply them. */
static void print_node_values(void *user, const cohort_node_settings_t *node)
{
    const cohort_settings_t *shown = user;
    cohort_settings_t eff = node->effective, want = *shown;
    for (size_t i = 0; node->published && cohort_setting_names[i]; i++) {
        const char *key = cohort_setting_names[i];
        int64_t v = *cohort_settings_field(&eff, key);
        if (v != *cohort_settings_field(&want, key))
            printf("  node %-19s %-24s %14lld\n", node->node_id, key, (long long)v);
    }
    if (node->problem)
        printf("  node %s cannot apply the database's settings: %s\n", node->node_id,
               node->problem);
}

static int get_settings(ctl_t *ctl, const char *service, const cohort_settings_t *eff,
                        const bson_t *in_db)
{
    for (size_t i = 0; cohort_setting_names[i]; i++) {
        bson_iter_t it;
        bool set = bson_iter_init_find(&it, in_db, cohort_setting_names[i]);
        cohort_settings_t copy = *eff;
        printf("%-24s %14lld  %s\n", cohort_setting_names[i],
               (long long)*cohort_settings_field(&copy, cohort_setting_names[i]),
               set ? "(set in the database)" : ctl->config ? "(config file)" : "(default)");
    }
    bson_error_t error;
    cohort_settings_t shown = *eff;
    if (!cohort_service_settings_each_node(ctl->store, ctl->client, service, print_node_values,
                                           &shown, &error)) {
        fprintf(stderr, "cohortctl settings: cannot read the nodes: %s\n", error.message);
        return CTL_FAILED;
    }
    return CTL_DONE;
}

/* Takes every "--force" out of argv (it may come after the verb): true if there was one. */
static bool take_force(int *argc, char **argv)
{
    bool force = false;
    int kept = 0;
    for (int i = 0; i < *argc; i++) {
        if (strcmp(argv[i], "--force") == 0)
            force = true;
        else
            argv[kept++] = argv[i];
    }
    *argc = kept;
    return force;
}

/* cohortctl settings get SERVICE | set SERVICE KEY VALUE | unset SERVICE KEY */
int cmd_settings(ctl_t *ctl, int argc, char **argv)
{
    struct option none[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, none);
    ctl_reset_getopt();
    bool force = take_force(&argc, argv);
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
                        "SERVICE KEY (--force: past the round-trip check); keys: tick_ms "
                        "takeover_ms primary_task_count secondary_task_count stall_timeout_ms "
                        "succeeded_retention_ms failed_retention_ms\n");
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
        /* The file's parser: a duration takes the same units there and here ("5s"). */
        if (!cohort_setting_parse_number(cohort_setting_find_live(argv[2]), argv[3], &v, &why)) {
            fprintf(stderr, "cohortctl settings set: %s\n", why.message);
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
        rc = get_settings(ctl, service, &eff, &in_db);
    } else {
        rc = change_setting(ctl, service, verb, argv[2], want == 4, value, &eff, &in_db, force);
    }
    bson_destroy(&in_db);
    return rc;
}

