/*
 * live_settings.c - merging the file's and the database's live settings (see
 * live_settings.h). Main thread only: workers read the budget the tick derives from `eff`.
 */
#include "node/live_settings.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"

/* The one writer of what is in effect, the election's lease length included. */
static void put_in_effect(cohort_service_t *s, const cohort_settings_t *settings)
{
    s->eff = *settings;
    s->election.takeover_ms = settings->takeover_ms;
    s->election.tick_ms = settings->tick_ms;
}

void cohort_service_set_file_settings(cohort_service_t *s, const cohort_settings_t *file)
{
    s->file = *file;
    put_in_effect(s, file);
}

void cohort_service_reload_file_settings(cohort_service_t *s, const cohort_settings_t *file)
{
    s->file = *file;
}

void cohort_live_settings_apply(cohort_service_t *s)
{
    cohort_settings_t next = s->file;
    cohort_settings_overlay(&next, &s->election.settings);
    bson_error_t why;
    if (!cohort_settings_validate(&next, &why)) {
        if (strcmp(why.message, s->settings_problem) != 0) {
            snprintf(s->settings_problem, sizeof s->settings_problem, "%s", why.message);
            cohort_logf(COHORT_LOG_WARN, s->config->name, cohort_election_role(&s->election), 0,
                        "ignoring the settings in the database: %s", why.message);
        }
        return;
    }
    s->settings_problem[0] = '\0';
    for (size_t i = 0; cohort_setting_names[i]; i++) {
        const char *key = cohort_setting_names[i];
        int64_t was = *cohort_settings_field(&s->eff, key);
        int64_t now = *cohort_settings_field(&next, key);
        if (was != now)
            cohort_logf(COHORT_LOG_INFO, s->config->name, cohort_election_role(&s->election), 0,
                        "setting %s = %lld (was %lld; %s)", key, (long long)now, (long long)was,
                        now == *cohort_settings_field(&s->file, key) ? "the config file's value"
                                                                     : "set in the database");
    }
    put_in_effect(s, &next);
}

void cohort_live_settings_publish(const cohort_service_t *s, bson_t *doc)
{
    bson_t one;
    BSON_APPEND_DOCUMENT_BEGIN(doc, s->config->name, &one);
    cohort_settings_append(&one, "file", &s->file);
    cohort_settings_append(&one, "effective", &s->eff);
    if (s->settings_problem[0])
        BSON_APPEND_UTF8(&one, "problem", s->settings_problem);
    bson_append_document_end(doc, &one);
}
