/*
 * election.c - claiming and renewing primacy (see election.h for the lease argument).
 *
 * A primary renews with a filter on {primary: me, epoch: E}; failing that it is no longer
 * primary, whatever it believed. Anyone may then try the takeover findAndModify, whose
 * filter is the seed's three conditions (primary null, primary me, last_active older than
 * takeover_ms) and which always starts a new epoch.
 *
 * The lease's end is written by two threads (the main thread's round, the lease thread's
 * renewals), so it only moves through extend_lease(): forward, never back, and never out of
 * 0 (lost or stepped down) except by the main thread, which owns the role.
 */
#include "node/primary/election.h"

#include "core/config.h"

#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "node/primary/spread.h"
#include "store/batches.h"
#include "store/store.h"
#include "store/primacy.h"
#include "store/services.h"

void cohort_election_init(cohort_election_t *e, const char *service, const char *node_id,
                          int64_t takeover_ms)
{
    e->service = service;
    e->node_id = node_id;
    e->takeover_ms = takeover_ms;
    e->primary = false;
    e->document_missing = false;
    e->highest_epoch = 0;
    e->queue_due = true;
    e->due_hint = -1;
    e->node_primacies = NULL;
    e->vacant_since_ms = 0;
    atomic_store(&e->epoch, 0);
    atomic_store(&e->lease_until_ms, 0);
    atomic_store(&e->alive_until_ms, 0);
    atomic_store(&e->leader_changes, 0);
    bson_init(&e->settings);
    bson_init(&e->pause);
    bson_init(&e->block);
}

void cohort_election_destroy(cohort_election_t *e)
{
    bson_destroy(&e->settings);
    bson_destroy(&e->pause);
    bson_destroy(&e->block);
}

/* Copies the sub-document `key` of `doc` into `out` (empty if none). */
static void keep_subdocument(bson_t *out, const bson_t *doc, const char *key)
{
    bson_iter_t it;
    bson_reinit(out);
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&it, &len, &data);
        bson_t sub;
        if (bson_init_static(&sub, data, len))
            bson_concat(out, &sub);
    }
}

/* Keeps copies of the document's live settings and its pause and block switches. */
static void keep_settings(cohort_election_t *e, const bson_t *doc)
{
    keep_subdocument(&e->settings, doc, "settings");
    keep_subdocument(&e->pause, doc, "pause");
    keep_subdocument(&e->block, doc, "block");
}

int64_t cohort_election_guard_ms(int64_t takeover_ms)
{
    return takeover_ms / 4;
}

int64_t cohort_election_max_rtt_ms(int64_t takeover_ms)
{
    /* A sample's error is at most rtt/2 + 1 ms; two nodes' errors add up. Keep their sum
     * at half the guard. */
    int64_t max_rtt = cohort_election_guard_ms(takeover_ms) / 2;
    return max_rtt < 2 ? 2 : max_rtt;
}

int64_t cohort_election_min_takeover_ms(cohort_election_t *const *elections, size_t n,
                                        int64_t fallback)
{
    int64_t smallest = fallback;
    for (size_t i = 0; i < n; i++) {
        int64_t takeover = atomic_load(&elections[i]->takeover_ms);
        if (i == 0 || takeover < smallest)
            smallest = takeover;
    }
    return smallest;
}

/* The lease a renewal or takeover sent now would grant, on the monotonic clock. */
static int64_t lease_ms(const cohort_election_t *e)
{
    int64_t takeover = atomic_load(&((cohort_election_t *)e)->takeover_ms);
    return takeover - cohort_election_guard_ms(takeover);
}

/* Moves the lease's end forward to `until`. A lease at 0 was lost or given up: only the main
 * thread (`revive`), whose renewal just succeeded, may start it again. */
static void extend_lease(cohort_election_t *e, int64_t until, bool revive)
{
    int64_t current = atomic_load(&e->lease_until_ms);
    while (current < until && (current > 0 || revive))
        if (atomic_compare_exchange_weak(&e->lease_until_ms, &current, until))
            return;
}

void cohort_election_note_alive(cohort_election_t *e)
{
    atomic_store(&e->alive_until_ms, cohort_clock_monotonic_ms() + 10 * e->takeover_ms);
}

bool cohort_election_main_alive(const cohort_election_t *e)
{
    return cohort_clock_monotonic_ms() < atomic_load(&((cohort_election_t *)e)->alive_until_ms);
}

int64_t cohort_election_renew_due_ms(const cohort_election_t *e)
{
    cohort_election_t *m = (cohort_election_t *)e;
    int64_t until = atomic_load(&m->lease_until_ms);
    if (atomic_load(&m->epoch) <= 0 || until <= 0 || !cohort_election_main_alive(e))
        return 0;
    return until - lease_ms(e) / 2;
}

bool cohort_election_renew(cohort_election_t *e, cohort_store_t *store, mongoc_client_t *client,
                           cohort_renewal_t *out, bson_error_t *error)
{
    *out = (cohort_renewal_t){.epoch = atomic_load(&e->epoch),
                              .lease_until_ms = atomic_load(&e->lease_until_ms)};
    if (out->epoch <= 0 || out->lease_until_ms <= 0)
        return true;
    int64_t lease = lease_ms(e);
    out->sent_ms = cohort_clock_monotonic_ms();
    bool ok = cohort_store_renew_lease(store, client, e->service, e->node_id, out->epoch,
                                       e->takeover_ms, e->tick_ms, -1, &out->renewed, NULL,
                                       error);
    out->received_ms = cohort_clock_monotonic_ms();
    if (!ok)
        return false;
    if (atomic_load(&e->epoch) != out->epoch)
        return true; /* the main thread lost or gave up this epoch meanwhile */
    if (out->renewed) {
        extend_lease(e, out->sent_ms + lease, false);
    } else {
        /* Another node took over (or an operator cleared it): stop acting now. */
        int64_t seen = out->lease_until_ms;
        atomic_compare_exchange_strong(&e->lease_until_ms, &seen, 0);
    }
    return true;
}

/* Clears this node's primacy (lease, epoch, the node's count of primacies) and counts the
 * change. Returns the epoch it held. Main thread. */
static int64_t clear_primacy(cohort_election_t *e)
{
    int64_t epoch = atomic_load(&e->epoch);
    atomic_store(&e->lease_until_ms, 0);
    atomic_store(&e->epoch, 0);
    e->primary = false;
    atomic_fetch_add(&e->leader_changes, 1);
    cohort_spread_count(e->node_primacies, -1);
    return epoch;
}

static void lose(cohort_election_t *e, const char *why)
{
    int64_t epoch = clear_primacy(e);
    cohort_logf(COHORT_LOG_WARN, e->service, "secondary", epoch,
                "lost primacy of epoch %lld: %s", (long long)epoch, why);
}

/* Gives primacy up: stops acting first (the lease and epoch to 0, so nothing primary-only
 * starts on this node any more), then clears it in the database, fenced on the epoch: only
 * then may another node take over. `asked_by`: who requested it (NULL: a shutdown). */
static void step_down(cohort_election_t *e, cohort_store_t *store, mongoc_client_t *client,
                      const char *asked_by)
{
    if (!e->primary)
        return;
    int64_t epoch = clear_primacy(e);
    bson_error_t error;
    if (cohort_store_step_down(store, client, e->service, e->node_id, epoch, asked_by, &error))
        cohort_logf(COHORT_LOG_INFO, e->service, "secondary", epoch,
                    "stepped down from epoch %lld%s%s%s", (long long)epoch,
                    asked_by ? " (asked by " : "", asked_by ? asked_by : "", asked_by ? ")" : "");
    else
        cohort_logf(COHORT_LOG_WARN, e->service, "secondary", epoch,
                    "could not step down (primacy will time out instead): %s", error.message);
}

void cohort_election_step_down(cohort_election_t *e, cohort_store_t *store,
                               mongoc_client_t *client)
{
    step_down(e, store, client, NULL);
}

/* Who asked this primary to step down under `epoch` (`cohortctl step-down` writes step_down
 * {epoch, by} into the config document), copied into `by`; false if nobody did. */
static bool step_down_asked(const bson_t *doc, int64_t epoch, char *by, size_t len)
{
    bson_iter_t it, field;
    if (!bson_iter_init_find(&it, doc, "step_down") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &field) || !bson_iter_find(&field, "epoch") ||
        !BSON_ITER_HOLDS_NUMBER(&field) || bson_iter_as_int64(&field) != epoch)
        return false;
    snprintf(by, len, "an operator");
    if (bson_iter_recurse(&it, &field) && bson_iter_find(&field, "by") &&
        BSON_ITER_HOLDS_UTF8(&field))
        snprintf(by, len, "%s", bson_iter_utf8(&field, NULL));
    return true;
}

/* Whether this node stepped down on request from the document's current epoch less than
 * `wait` ms ago (cluster clock): it leaves the primacy to the others for that long, else it
 * would take it straight back. Alone, it takes it again once `wait` has passed. */
static bool stepped_down_recently(const cohort_election_t *e, const bson_t *doc, int64_t now,
                                  int64_t wait)
{
    bson_iter_t it, field;
    if (!bson_iter_init_find(&it, doc, "stepped_down") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    int64_t epoch = -1, at = 0;
    bool me = false;
    bson_iter_recurse(&it, &field);
    while (bson_iter_next(&field)) {
        const char *key = bson_iter_key(&field);
        if (strcmp(key, "node_id") == 0 && BSON_ITER_HOLDS_UTF8(&field))
            me = strcmp(bson_iter_utf8(&field, NULL), e->node_id) == 0;
        else if (strcmp(key, "epoch") == 0 && BSON_ITER_HOLDS_NUMBER(&field))
            epoch = bson_iter_as_int64(&field);
        else if (strcmp(key, "at") == 0 && BSON_ITER_HOLDS_DATE_TIME(&field))
            at = bson_iter_date_time(&field);
    }
    int64_t current = -2;
    if (bson_iter_init_find(&it, doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it))
        current = bson_iter_as_int64(&it);
    return me && epoch == current && at > now - wait;
}

/* The queue_due hint of a config document: true unless it says false. */
static bool read_queue_due(const bson_t *doc)
{
    bson_iter_t it;
    return !bson_iter_init_find(&it, doc, "queue_due") || !BSON_ITER_HOLDS_BOOL(&it) ||
           bson_iter_bool(&it);
}

/* A secondary's look at the config document `doc` (found): learn its settings and, if its
 * primary is gone, take the lease. `sent` is when the round started (monotonic). */
static bool consider(cohort_election_t *e, cohort_store_t *store, mongoc_client_t *client,
                     const bson_t *doc, int64_t sent, bson_error_t *error)
{
    keep_settings(e, doc);
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it) &&
        bson_iter_as_int64(&it) > e->highest_epoch)
        e->highest_epoch = bson_iter_as_int64(&it);
    const char *primary = NULL;
    if (bson_iter_init_find(&it, doc, "primary") && BSON_ITER_HOLDS_UTF8(&it))
        primary = bson_iter_utf8(&it, NULL);
    /* The lease the primary declared. A value edited by hand into nonsense (a string, 0, a
     * negative or an absurd number) is not waited for: this node's own takeover_ms applies,
     * and the takeover does not filter on it (last_active still fences a live primary). */
    int64_t declared = 0, seen = 0;
    if (bson_iter_init_find(&it, doc, "lease_ms")) {
        int64_t v = BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it)
                        ? bson_iter_as_int64(&it)
                        : 0;
        if (v > 0 && v <= COHORT_TAKEOVER_MS_MAX)
            declared = seen = v;
        else
            seen = -1;
    }
    int64_t last_active = 0;
    if (bson_iter_init_find(&it, doc, "last_active") && BSON_ITER_HOLDS_DATE_TIME(&it))
        last_active = bson_iter_date_time(&it);
    /* The primary's hint holds while it renews; a silent primary's is a guess: look. */
    int64_t now = cohort_clock_cluster_ms();
    e->queue_due = read_queue_due(doc) || last_active < now - 2 * atomic_load(&e->tick_ms);
    /* Documents written before leases were declared: this node's own takeover_ms. */
    int64_t wait = declared > 0 ? declared : e->takeover_ms;
    int64_t cutoff = now - wait;
    if (stepped_down_recently(e, doc, now, wait))
        return true; /* left to the others for a while (cohortctl step-down) */
    bool vacant = !primary || strcmp(primary, e->node_id) == 0 || last_active < cutoff;
    if (cohort_spread_defer(e->node_primacies, vacant, &e->vacant_since_ms, sent, e->tick_ms))
        return true; /* not vacant, or left a while to a node that leads fewer (spread.h) */

    cohort_takeover_t result;
    if (!cohort_store_take_lease(store, client, e->service, e->node_id, cutoff, seen,
                                 e->takeover_ms, &result, error))
        return false;
    if (!result.taken)
        return true;
    /* Publish the epoch before the lease so a reader never sees a lease without it. */
    atomic_store(&e->epoch, result.epoch);
    atomic_store(&e->lease_until_ms, sent + lease_ms(e));
    e->primary = true;
    e->vacant_since_ms = 0;
    cohort_spread_count(e->node_primacies, 1);
    e->batches = result.batches;
    if (result.epoch > e->highest_epoch)
        e->highest_epoch = result.epoch;
    atomic_fetch_add(&e->leader_changes, 1);
    if (result.stepped_down)
        cohort_logf(COHORT_LOG_INFO, e->service, "primary", result.epoch,
                    "became primary (epoch %lld, previous primary stepped down%s%s)",
                    (long long)result.epoch, result.previous[0] ? ": " : "", result.previous);
    else
        cohort_logf(COHORT_LOG_INFO, e->service, "primary", result.epoch,
                    "became primary (epoch %lld, previous primary: %s)", (long long)result.epoch,
                    result.previous[0] ? result.previous : "none");
    return true;
}

bool cohort_election_tick(cohort_election_t *e, cohort_store_t *store, mongoc_client_t *client,
                          const bson_t *doc, bson_error_t *error)
{
    cohort_election_note_alive(e);
    int64_t sent = cohort_clock_monotonic_ms();
    bool just_lost = false;

    if (e->primary) {
        bool renewed = false;
        bson_t renewed_doc;
        if (!cohort_store_renew_lease(store, client, e->service, e->node_id,
                                      atomic_load(&e->epoch), e->takeover_ms, e->tick_ms,
                                      e->due_hint, &renewed, &renewed_doc, error)) {
            bson_destroy(&renewed_doc);
            return false;
        }
        if (renewed) {
            extend_lease(e, sent + lease_ms(e), true);
            cohort_store_parse_batch_state(&renewed_doc, &e->batches);
            keep_settings(e, &renewed_doc);
            char by[160];
            bool asked = step_down_asked(&renewed_doc, atomic_load(&e->epoch), by, sizeof by);
            bson_destroy(&renewed_doc);
            if (asked)
                step_down(e, store, client, by);
            return true;
        }
        bson_destroy(&renewed_doc);
        lose(e, "another node took over or an operator cleared it");
        just_lost = true;
    }

    if (!cohort_clock_synced())
        return true; /* no trustworthy cluster time yet: no takeover */

    bson_t own;
    bool found;
    if (doc) {
        found = !bson_empty(doc);
    } else if (just_lost) {
        /* Not in the node's read (it was primary then): read it now. */
        if (!cohort_store_read_service(store, client, e->service, &own, &found, error)) {
            bson_destroy(&own);
            return false;
        }
        doc = &own;
    } else {
        return true; /* no read this tick (node.c): nothing new to act on */
    }
    e->document_missing = !found;
    bool ok = !found || consider(e, store, client, doc, sent, error);
    if (doc == &own)
        bson_destroy(&own);
    return ok;
}

bool cohort_election_has_lease(const cohort_election_t *e)
{
    return cohort_election_epoch(e) > 0;
}

int64_t cohort_election_epoch(const cohort_election_t *e)
{
    int64_t epoch = atomic_load(&((cohort_election_t *)e)->epoch);
    int64_t until = atomic_load(&((cohort_election_t *)e)->lease_until_ms);
    if (epoch <= 0 || until <= 0 || cohort_clock_monotonic_ms() >= until)
        return 0;
    return epoch;
}

const char *cohort_election_role(const cohort_election_t *e)
{
    return cohort_election_has_lease(e) ? "primary" : "secondary";
}
