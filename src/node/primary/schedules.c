/*
 * schedules.c - the primary's round of recurring tasks (see schedules.h).
 *
 * Per schedule and tick: read its state (one read of the config document serves every
 * schedule of the service), find the slots in (last slot, now], decide which run (catch_up,
 * pause), create their tasks in slot order through cohort_task_create() with the slot's
 * unique key, then record the last settled slot in one fenced compare-and-set. A slot is
 * "missed" if it came due before this node's primacy began (elected_at: no primary ran
 * then); slots that came due while this node was primary always run.
 */
#include "node/primary/schedules.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/timefmt.h"
#include "node/handler/context.h"
#include "store/schedules.h"
#include "store/services.h"

#define COUNT_CAP 100000 /* slots counted one by one at most (for the skipped count) */

typedef struct round {
    cohort_service_t *s;
    mongoc_client_t *client;
    int64_t epoch;
    const cohort_schedule_config_t *sc;
    char series[320];
} round_t;

static void say(const round_t *r, cohort_log_level_t level, const char *fmt, ...)
    COHORT_PRINTF(3, 4);
static void say(const round_t *r, cohort_log_level_t level, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cohort_logf(level, r->s->config->name, "primary", r->epoch, "schedule %s: %s", r->sc->id,
                msg);
}

/* Slots in (after, until], counted up to COUNT_CAP. */
static int64_t count_slots(const cohort_schedule_config_t *sc, int64_t after, int64_t until)
{
    int64_t n = 0, t = after, next;
    while (n < COUNT_CAP && cohort_cron_next(&sc->cron, sc->tz, t, &next) && next <= until) {
        n++;
        t = next;
    }
    return n;
}

/* Creates the task of `slot`. *existed: another creation of the slot got there first (a
 * predecessor, or a second primary of an instant); *oid names the task either way when it
 * can be found. False if the task may not exist: not primary any more, or the database. */
static bool create_slot(round_t *r, int64_t slot, bson_oid_t *oid, bool *has_oid, bool *existed)
{
    char key[COHORT_SCHEDULE_KEY_MAX];
    cohort_schedule_slot_key(r->sc->id, slot, key, sizeof key);
    /* The schedule's task options, untracked unless it says `tracked=true` (a handler's
     * cohort_task_create() defaults to tracked). */
    bson_t opts = BSON_INITIALIZER;
    bson_iter_t it;
    if (bson_iter_init(&it, r->sc->options))
        while (bson_iter_next(&it))
            bson_append_iter(&opts, NULL, 0, &it);
    if (!bson_has_field(r->sc->options, "tracked"))
        BSON_APPEND_BOOL(&opts, "tracked", false);
    BSON_APPEND_UTF8(&opts, "unique_key", key);
    cohort_ctx_t ctx;
    cohort_ctx_init(&ctx, r->s, r->client, true);
    cohort_error_t error;
    char id[25];
    bool ok = cohort_task_create(&ctx, r->sc->data, &opts, id, &error);
    bson_destroy(&opts);
    *existed = !ok && error.code == COHORT_ERROR_EXISTS;
    *has_oid = false;
    if (ok) {
        bson_oid_init_from_string(oid, id);
        *has_oid = true;
        return true;
    }
    if (!*existed) {
        say(r, COHORT_LOG_WARN, "slot %s not created (retried next tick): %s", key + 9,
            error.message);
        return false;
    }
    bson_error_t why;
    bool found = false;
    if (cohort_store_find_unique_task(r->s->store, r->client, r->s->config->name, key, oid,
                                      &found, &why))
        *has_oid = found;
    return true;
}

static void record(round_t *r, cohort_schedule_record_t *rec)
{
    bson_error_t error;
    bool applied = false;
    if (!cohort_store_record_schedule(r->s->store, r->client, r->s->config->name,
                                      r->s->node_id, r->epoch, rec, &applied, &error))
        say(r, COHORT_LOG_WARN, "last slot not recorded (retried next tick): %s",
            error.message);
    else if (!applied)
        say(r, COHORT_LOG_INFO,
            "last slot not recorded: primacy or the schedule's state moved on meanwhile");
}

static void run_schedule(round_t *r, const bson_t *doc, int64_t now)
{
    const cohort_schedule_config_t *sc = r->sc;
    cohort_schedule_state_t st;
    cohort_store_schedule_state(doc, sc->id, &st);
    cohort_schedule_series(sc, r->series, sizeof r->series);
    cohort_schedule_record_t rec = {.id = sc->id, .series = r->series,
                                    .from_found = st.found && !st.damaged,
                                    .from_slot_ms = st.last_slot_ms};
    char when[COHORT_TIME_TEXT_MAX];
    int64_t next;
    if (!st.found || st.damaged || strcmp(st.series, r->series) != 0) {
        /* A new schedule, new times, or a state edited out of shape: slots start after now. */
        rec.to_slot_ms = now;
        record(r, &rec);
        bool any = cohort_cron_next(&sc->cron, sc->tz, now, &next);
        cohort_time_format(any ? next : -1, when, sizeof when);
        say(r, st.damaged && st.found ? COHORT_LOG_WARN : COHORT_LOG_INFO, "%s '%s': first slot %s",
            !st.found     ? "new,"
            : st.damaged ? "its state has no date as last_slot (edited by hand?): restarted as"
                         : "times changed to",
            r->series, when);
        return;
    }
    int64_t last = st.last_slot_ms;
    if (!cohort_cron_next(&sc->cron, sc->tz, last, &next) || next > now)
        return; /* nothing due */
    if (st.paused) {
        int64_t latest = last;
        cohort_cron_prev(&sc->cron, sc->tz, last, now, &latest);
        rec.to_slot_ms = latest;
        rec.skipped = count_slots(sc, last, latest);
        record(r, &rec);
        return;
    }

    /* Missed slots: due in (last, since], before this primacy began. */
    int64_t since = r->s->schedules_since_ms < now ? r->s->schedules_since_ms : now;
    int64_t keep = sc->catch_up == COHORT_CATCH_UP_NONE     ? 0
                   : sc->catch_up == COHORT_CATCH_UP_LATEST ? 1
                                                            : sc->catch_up_max;
    int64_t kept[COHORT_CATCH_UP_MAX_LIMIT];
    int64_t n_kept = 0, missed = 0, latest_skipped = 0;
    if (next <= since) {
        missed = count_slots(sc, last, since);
        int64_t at = since, slot;
        while (n_kept < keep && cohort_cron_prev(&sc->cron, sc->tz, last, at, &slot)) {
            kept[n_kept++] = slot;
            at = slot - 1;
        }
        /* The newest slot skipped: just before the oldest kept (or the newest missed). */
        int64_t before = n_kept ? kept[n_kept - 1] - 1 : since;
        if (missed > n_kept)
            cohort_cron_prev(&sc->cron, sc->tz, last, before, &latest_skipped);
    }
    rec.skipped = missed > n_kept ? missed - n_kept : 0;
    rec.to_slot_ms = latest_skipped > last ? latest_skipped : last;
    if (rec.skipped > 0) {
        cohort_time_format(latest_skipped, when, sizeof when);
        say(r, COHORT_LOG_WARN,
            "%s%lld slot(s) missed while no primary ran skipped (catch_up = %s), the last %s; "
            "%lld missed slot(s) run",
            missed >= COUNT_CAP ? "at least " : "", (long long)rec.skipped,
            cohort_catch_up_name(sc->catch_up), when, (long long)n_kept);
    }

    /* Run the kept missed slots (oldest first), then the slots due since this primacy. */
    int64_t done = 0;
    bool failed = false;
    for (int64_t i = n_kept - 1; i >= 0 && !failed; i--) {
        bson_oid_t oid;
        bool has_oid, existed;
        if (!create_slot(r, kept[i], &oid, &has_oid, &existed)) {
            failed = true;
            break;
        }
        rec.to_slot_ms = kept[i];
        rec.created += !existed;
        rec.existed += existed;
        if (has_oid) {
            bson_oid_copy(&oid, &st.last_task);
            rec.last_task = &st.last_task;
            rec.last_task_slot_ms = kept[i];
        }
        done++;
    }
    int64_t t = rec.to_slot_ms > since ? rec.to_slot_ms : since;
    if (t < last)
        t = last;
    int64_t slot;
    while (!failed && done < COHORT_SCHEDULE_SLOTS_PER_TICK &&
           cohort_cron_next(&sc->cron, sc->tz, t, &slot) && slot <= now) {
        bson_oid_t oid;
        bool has_oid, existed;
        if (!create_slot(r, slot, &oid, &has_oid, &existed))
            break;
        rec.to_slot_ms = slot;
        rec.created += !existed;
        rec.existed += existed;
        if (has_oid) {
            bson_oid_copy(&oid, &st.last_task);
            rec.last_task = &st.last_task;
            rec.last_task_slot_ms = slot;
        }
        done++;
        t = slot;
    }
    if (rec.to_slot_ms > last)
        record(r, &rec);
    if (rec.existed > 0)
        say(r, COHORT_LOG_INFO, "%lld slot(s) found already created (by an earlier primary)",
            (long long)rec.existed);
}

void cohort_schedules_tick(cohort_service_t *s, mongoc_client_t *client, int64_t epoch)
{
    if (s->n_schedules == 0)
        return;
    bson_t doc;
    bool found = false;
    bson_error_t error;
    if (!cohort_store_read_service(s->store, client, s->config->name, &doc, &found, &error)) {
        cohort_logf(COHORT_LOG_WARN, s->config->name, "primary", epoch,
                    "schedules: cannot read their state (retried next tick): %s", error.message);
        bson_destroy(&doc);
        return;
    }
    /* The document names the epoch and when it began (elected_at, server time): slots due
     * before then were missed by every primary. Another epoch there: primacy moved on. */
    bson_iter_t it;
    int64_t doc_epoch = bson_iter_init_find(&it, &doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it)
                            ? bson_iter_as_int64(&it)
                            : 0;
    if (found && doc_epoch != epoch) {
        bson_destroy(&doc);
        return;
    }
    if (epoch != s->schedules_epoch) {
        s->schedules_epoch = epoch;
        s->schedules_since_ms =
            bson_iter_init_find(&it, &doc, "elected_at") && BSON_ITER_HOLDS_DATE_TIME(&it)
                ? bson_iter_date_time(&it)
                : cohort_clock_cluster_ms();
    }
    int64_t now = cohort_clock_cluster_ms();
    for (size_t i = 0; found && i < s->n_schedules; i++) {
        if (!cohort_election_has_lease(&s->election))
            break;
        round_t r = {.s = s, .client = client, .epoch = epoch, .sc = &s->schedules[i]};
        run_schedule(&r, &doc, now);
    }
    bson_destroy(&doc);
}

void cohort_schedules_reload(cohort_service_t *s, const cohort_service_config_t *config)
{
    for (size_t i = 0; i < config->n_schedules; i++) {
        const cohort_schedule_config_t *now = &config->schedules[i], *was = NULL;
        for (size_t j = 0; j < s->n_schedules; j++)
            if (strcmp(s->schedules[j].id, now->id) == 0)
                was = &s->schedules[j];
        if (!was || strcmp(was->spec, now->spec) != 0)
            cohort_logf(COHORT_LOG_INFO, s->config->name, NULL, 0, "schedule %s %s: %s",
                        now->id, was ? "changed" : "added", now->spec);
    }
    for (size_t j = 0; j < s->n_schedules; j++) {
        bool kept = false;
        for (size_t i = 0; i < config->n_schedules; i++)
            kept |= strcmp(s->schedules[j].id, config->schedules[i].id) == 0;
        if (!kept)
            cohort_logf(COHORT_LOG_INFO, s->config->name, NULL, 0,
                        "schedule %s removed (its state stays in the config document)",
                        s->schedules[j].id);
    }
    s->schedules = config->schedules;
    s->n_schedules = config->n_schedules;
}
