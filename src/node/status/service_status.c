/*
 * service_status.c - one service's state for `cohortctl status --json` and GET
 * /api/v1/services (see service_status.h): two reads, the config document and the queue's
 * counts (node/status/counts_view.h: a snapshot on a big queue, else one measure).
 */
#include "node/status/service_status.h"

#include <stdio.h>
#include <string.h>

#include "core/status.h"
#include "core/timefmt.h"
#include "node/status/api_json.h"
#include "node/status/counts_view.h"
#include "node/status/service_settings.h"
#include "store/store.h"
#include "store/queries.h"
#include "store/queue_counts.h"
#include "store/services.h"

/* The fields of one switch's subdocument {reason, by, at}. */
static void read_switch(bson_iter_t *entry, cohort_switch_t *sw)
{
    bson_iter_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(entry) || !bson_iter_recurse(entry, &f))
        return;
    while (bson_iter_next(&f)) {
        const char *key = bson_iter_key(&f);
        if (strcmp(key, "reason") == 0 && BSON_ITER_HOLDS_UTF8(&f))
            sw->reason = bson_iter_utf8(&f, NULL);
        else if (strcmp(key, "by") == 0 && BSON_ITER_HOLDS_UTF8(&f))
            sw->by = bson_iter_utf8(&f, NULL);
        else if (strcmp(key, "at") == 0 && BSON_ITER_HOLDS_DATE_TIME(&f))
            sw->at_ms = bson_iter_date_time(&f);
    }
}

size_t cohort_each_switch(const bson_t *doc, void (*fn)(const cohort_switch_t *sw, void *user),
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
            cohort_switch_t sw = {.which = which[i], .kind = bson_iter_key(&kinds)};
            read_switch(&kinds, &sw);
            if (fn)
                fn(&sw, user);
            n++;
        }
    }
    return n;
}

void cohort_describe_switch(const cohort_switch_t *sw, char *buf, size_t len)
{
    bool all = strcmp(sw->kind, "*") == 0;
    snprintf(buf, len, "%s %s%s%s%s", strcmp(sw->which, "pause") == 0 ? "paused" : "blocked",
             all ? "(all kinds)" : "kind ", all ? "" : sw->kind, sw->reason ? ": " : "",
             sw->reason ? sw->reason : "");
}

/* The service's switches as they are gathered: the JSON arrays and the table's lines. */
typedef struct switch_state {
    bool paused_all, blocked_all, some_kinds;
    uint32_t n_paused, n_blocked; /* entries appended to the JSON arrays */
    bson_t *paused, *blocked;     /* JSON arrays being built */
    cohort_service_summary_t *summary;
} switch_state_t;

static void collect_switch(const cohort_switch_t *sw, void *user)
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
    bson_t one;
    cohort_json_array_begin_document(pause ? st->paused : st->blocked,
                                     pause ? &st->n_paused : &st->n_blocked, &one);
    BSON_APPEND_UTF8(&one, "kind", sw->kind);
    cohort_json_append_utf8_or_null(&one, "reason", sw->reason);
    cohort_json_append_utf8_or_null(&one, "by", sw->by);
    cohort_json_append_time(&one, "at", sw->at_ms);
    bson_append_document_end(pause ? st->paused : st->blocked, &one);

    char what[700], at[COHORT_TIME_TEXT_MAX] = "?";
    cohort_describe_switch(sw, what, sizeof what);
    if (sw->at_ms)
        cohort_time_format(sw->at_ms, at, sizeof at);
    char *details = st->summary->details;
    size_t used = strlen(details);
    snprintf(details + used, sizeof st->summary->details - used, "    %s (since %s by %s)\n",
             what, at, sw->by ? sw->by : "?");
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

static void append_primary(bson_t *svc, const cohort_service_summary_t *s)
{
    if (!s->primary[0]) {
        BSON_APPEND_NULL(svc, "primary");
        return;
    }
    bson_t p;
    BSON_APPEND_DOCUMENT_BEGIN(svc, "primary", &p);
    BSON_APPEND_UTF8(&p, "node_id", s->primary);
    BSON_APPEND_INT64(&p, "epoch", s->epoch);
    BSON_APPEND_INT64(&p, "last_active_ms_ago", s->ago_ms);
    bson_append_document_end(svc, &p);
}

static void append_counts(bson_t *svc, const cohort_status_counts_t *counts)
{
    bson_t c;
    BSON_APPEND_DOCUMENT_BEGIN(svc, "counts", &c);
    for (int i = 0; i < COHORT_STATUS_COUNT; i++)
        BSON_APPEND_INT64(&c, cohort_status_names[i],
                          cohort_status_count(counts, (cohort_task_status_t)i));
    bson_append_document_end(svc, &c);
}

/* The primary's fields of the config document into the summary. */
static void read_primary(const bson_t *doc, int64_t server_now_ms, cohort_service_summary_t *s)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "primary") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(s->primary, sizeof s->primary, "%s", bson_iter_utf8(&it, NULL));
    if (bson_iter_init_find(&it, doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it))
        s->epoch = bson_iter_as_int64(&it);
    int64_t last_active = 0;
    if (bson_iter_init_find(&it, doc, "last_active") && BSON_ITER_HOLDS_DATE_TIME(&it))
        last_active = bson_iter_date_time(&it);
    s->ago_ms = !last_active                    ? -1
                : server_now_ms > last_active ? server_now_ms - last_active
                                              : 0;
}

typedef struct problems {
    bson_t *list;
    uint32_t n;
    cohort_service_summary_t *summary;
} problems_t;

/* A live node that cannot apply the database's settings: into settings_problems and the
 * table's details, until it can (node/live_settings.h publishes it each ping). */
static void collect_problem(void *user, const cohort_node_settings_t *node)
{
    problems_t *p = user;
    if (!node->problem)
        return;
    bson_t one;
    cohort_json_array_begin_document(p->list, &p->n, &one);
    BSON_APPEND_UTF8(&one, "node_id", node->node_id);
    BSON_APPEND_UTF8(&one, "problem", node->problem);
    bson_append_document_end(p->list, &one);
    char *details = p->summary->details;
    size_t used = strlen(details);
    snprintf(details + used, sizeof p->summary->details - used,
             "    settings: node %s cannot apply the database's settings: %s\n", node->node_id,
             node->problem);
}

bool cohort_service_status(cohort_store_t *store, mongoc_client_t *client, const char *name,
                           int64_t server_now_ms, bson_t *svc, cohort_service_summary_t *summary,
                           bson_error_t *error)
{
    cohort_service_summary_t local;
    cohort_service_summary_t *s = summary ? summary : &local;
    memset(s, 0, sizeof *s);
    s->ago_ms = -1;
    bson_t doc, snap;
    if (!cohort_store_read_service(store, client, name, &doc, &s->found, error)) {
        bson_destroy(&doc);
        return false;
    }
    if (!cohort_counts_view_get(store, client, name, &snap, error)) {
        bson_destroy(&doc);
        bson_destroy(&snap);
        return false;
    }
    cohort_counts_status(&snap, &s->counts);
    if (s->found)
        read_primary(&doc, server_now_ms, s);
    BSON_APPEND_UTF8(svc, "name", name);
    BSON_APPEND_BOOL(svc, "service_document", s->found);
    append_primary(svc, s);
    append_counts(svc, &s->counts);
    cohort_counts_view_append_age(svc, "counts_", &snap);
    bson_destroy(&snap);
    bson_t paused = BSON_INITIALIZER, blocked = BSON_INITIALIZER;
    switch_state_t st = {.paused = &paused, .blocked = &blocked, .summary = s};
    if (s->found)
        cohort_each_switch(&doc, collect_switch, &st);
    BSON_APPEND_ARRAY(svc, "paused", &paused);
    BSON_APPEND_ARRAY(svc, "blocked", &blocked);
    s->state = s->found ? switch_state_name(&st) : "(no service document)";
    bson_destroy(&paused);
    bson_destroy(&blocked);
    bson_destroy(&doc);
    bson_t list = BSON_INITIALIZER;
    problems_t problems = {.list = &list, .summary = s};
    bool ok = cohort_service_settings_each_node(store, client, name, collect_problem, &problems,
                                                error);
    BSON_APPEND_ARRAY(svc, "settings_problems", &list);
    bson_destroy(&list);
    return ok;
}
