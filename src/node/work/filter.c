/*
 * filter.c - what claims skip (see filter.h): the service's shared filter, refreshed by the
 * main thread every tick and by workers as they learn of busy groups, and each worker's own
 * copy of it. Every change of the shared filter moves filter_version, under the lock.
 */
#include "node/work/filter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "store/groups.h"

static void free_strings(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static char **copy_strings(char *const *v, size_t n)
{
    char **out = n ? calloc(n, sizeof *out) : NULL;
    for (size_t i = 0; out && i < n; i++)
        out[i] = strdup(v[i]);
    return out;
}

void cohort_filter_refresh(cohort_service_t *s, cohort_worker_filter_t *f)
{
    pthread_mutex_lock(&s->lock);
    if (f->version != s->filter_version) {
        free_strings(f->kinds, f->n_kinds);
        free_strings(f->groups, f->n_groups);
        f->kinds = copy_strings(s->stopped_kinds, s->n_stopped_kinds);
        f->n_kinds = f->kinds ? s->n_stopped_kinds : 0;
        f->groups = copy_strings(s->busy_groups, s->n_busy_groups);
        f->n_groups = f->groups ? s->n_busy_groups : 0;
        f->version = s->filter_version;
    }
    pthread_mutex_unlock(&s->lock);
}

void cohort_filter_note_busy_group(cohort_service_t *s, const char *group)
{
    pthread_mutex_lock(&s->lock);
    bool known = false;
    for (size_t i = 0; i < s->n_busy_groups && !known; i++)
        known = strcmp(s->busy_groups[i], group) == 0;
    if (!known && s->n_busy_groups < COHORT_MAX_BUSY_GROUPS) {
        char **grown = realloc(s->busy_groups, (s->n_busy_groups + 1) * sizeof *grown);
        char *name = strdup(group);
        if (grown && name) {
            s->busy_groups = grown;
            s->busy_groups[s->n_busy_groups++] = name;
            s->filter_version++;
        } else {
            if (grown)
                s->busy_groups = grown;
            free(name);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

void cohort_filter_forget_busy_group(cohort_service_t *s, const char *group)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_busy_groups; i++) {
        if (strcmp(s->busy_groups[i], group) != 0)
            continue;
        free(s->busy_groups[i]);
        s->busy_groups[i] = s->busy_groups[--s->n_busy_groups];
        s->filter_version++;
        break;
    }
    pthread_mutex_unlock(&s->lock);
}

void cohort_filter_apply_switches(cohort_service_t *s)
{
    bool all = false;
    char **kinds = NULL;
    size_t n = 0;
    char summary[512] = "";
    size_t used = 0;
    const bson_t *switches[2] = {&s->election.pause, &s->election.block};
    for (int i = 0; i < 2; i++) {
        bson_iter_t it;
        if (!bson_iter_init(&it, switches[i]))
            continue;
        while (bson_iter_next(&it)) {
            const char *kind = bson_iter_key(&it);
            const char *reason = NULL;
            bson_iter_t sub;
            if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) &&
                bson_iter_find(&sub, "reason") && BSON_ITER_HOLDS_UTF8(&sub))
                reason = bson_iter_utf8(&sub, NULL);
            if (used < sizeof summary)
                used += (size_t)snprintf(summary + used, sizeof summary - used, "%s%s %s%s%s",
                                         used ? "; " : "", i ? "blocked" : "paused",
                                         strcmp(kind, "*") == 0 ? "(all kinds)" : kind,
                                         reason ? ": " : "", reason ? reason : "");
            if (strcmp(kind, "*") == 0) {
                all = true;
                continue;
            }
            char **grown = realloc(kinds, (n + 1) * sizeof *grown);
            if (!grown)
                continue;
            kinds = grown;
            kinds[n] = strdup(kind);
            if (kinds[n])
                n++;
        }
    }
    if (strcmp(summary, s->switches_summary) != 0) {
        cohort_logf(COHORT_LOG_INFO, s->config->name, cohort_election_role(&s->election), 0, "%s",
                    summary[0] ? summary : "running: nothing paused or blocked");
        snprintf(s->switches_summary, sizeof s->switches_summary, "%s", summary);
    }
    pthread_mutex_lock(&s->lock);
    free_strings(s->stopped_kinds, s->n_stopped_kinds);
    s->stopped_kinds = kinds;
    s->n_stopped_kinds = n;
    s->stopped_all = all;
    s->filter_version++;
    pthread_mutex_unlock(&s->lock);
}

void cohort_filter_refresh_busy_groups(cohort_service_t *s, mongoc_client_t *client)
{
    if (!atomic_load(&s->uses_groups))
        return;
    char **groups = calloc(COHORT_MAX_BUSY_GROUPS, sizeof *groups);
    size_t n = 0;
    bson_error_t error;
    if (!groups)
        return;
    if (!cohort_store_busy_groups(s->store, client, s->config->name, groups,
                                  COHORT_MAX_BUSY_GROUPS, &n, &error)) {
        free(groups);
        return; /* keep what the workers learnt */
    }
    pthread_mutex_lock(&s->lock);
    free_strings(s->busy_groups, s->n_busy_groups);
    s->busy_groups = groups;
    s->n_busy_groups = n;
    s->filter_version++;
    pthread_mutex_unlock(&s->lock);
}

void cohort_filter_release(cohort_worker_filter_t *f)
{
    free_strings(f->kinds, f->n_kinds);
    free_strings(f->groups, f->n_groups);
    *f = (cohort_worker_filter_t){0};
}

void cohort_filter_clear(cohort_service_t *s)
{
    free_strings(s->stopped_kinds, s->n_stopped_kinds);
    free_strings(s->busy_groups, s->n_busy_groups);
    s->stopped_kinds = s->busy_groups = NULL;
    s->n_stopped_kinds = s->n_busy_groups = 0;
}
