/*
 * node_status.c - one node document as the JSON object operators read (see node_status.h).
 */
#include "node/status/node_status.h"

#include <stdio.h>
#include <string.h>

#include "core/jsondoc.h"
#include "node/status/api_json.h"

static const char *str(const bson_t *doc, const char *key, const char *fallback)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it)
               ? bson_iter_utf8(&it, NULL)
               : fallback;
}

static int64_t num(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_NUMBER(&it)
               ? bson_iter_as_int64(&it)
               : 0;
}

static int64_t date(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_DATE_TIME(&it)
               ? bson_iter_date_time(&it)
               : 0;
}

/* Copies `key` of `doc` into `out` as it is, if present. */
static void copy_field(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key))
        bson_append_value(out, key, -1, bson_iter_value(&it));
}

/* Appends the document's runs to `runs` and the live ones to `clash`; returns how many are
 * live. */
static int list_runs(const bson_t *doc, int64_t now, int64_t lease, bson_t *runs, char *clash,
                     size_t len)
{
    bson_iter_t it, entries;
    int live = 0;
    uint32_t n = 0;
    clash[0] = '\0';
    if (!bson_iter_init_find(&it, doc, "runs") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &entries))
        return 0;
    while (bson_iter_next(&entries)) {
        bson_t entry;
        if (!cohort_iter_doc(&entries, &entry))
            continue;
        const char *host = str(&entry, "host", "");
        int64_t pid = num(&entry, "pid");
        int64_t ago = now - date(&entry, "seen_at");
        bool is_live = ago <= lease;
        live += is_live;
        bson_t one;
        cohort_json_array_begin_document(runs, &n, &one);
        BSON_APPEND_UTF8(&one, "run_id", bson_iter_key(&entries));
        BSON_APPEND_UTF8(&one, "host", host);
        BSON_APPEND_INT64(&one, "pid", pid);
        BSON_APPEND_INT64(&one, "last_seen_ms_ago", ago);
        BSON_APPEND_BOOL(&one, "live", is_live);
        bson_append_document_end(runs, &one);
        size_t used = strlen(clash);
        if (is_live)
            snprintf(clash + used, len - used, "%shost %s pid %lld (run %.8s, seen %.1fs ago)",
                     used ? "; " : "", host, (long long)pid, bson_iter_key(&entries),
                     (double)ago / 1000.0);
    }
    return live;
}

/* "service S cannot apply the database's settings: ...\n" for each service whose entry in
 * the node's `settings` has a problem (node/live_settings.h), into `buf`. */
static void settings_problems(const bson_t *doc, char *buf, size_t len)
{
    bson_iter_t it, services, entry;
    buf[0] = '\0';
    if (!bson_iter_init_find(&it, doc, "settings") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &services))
        return;
    while (bson_iter_next(&services)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&services) || !bson_iter_recurse(&services, &entry) ||
            !bson_iter_find(&entry, "problem") || !BSON_ITER_HOLDS_UTF8(&entry))
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "service %s cannot apply the database's settings: %s\n",
                 bson_iter_key(&services), bson_iter_utf8(&entry, NULL));
    }
}

void cohort_node_status(const bson_t *doc, int64_t now_ms, int64_t lease_ms, bson_t *one,
                        cohort_node_summary_t *summary)
{
    cohort_node_summary_t local;
    cohort_node_summary_t *s = summary ? summary : &local;
    memset(s, 0, sizeof *s);
    const char *kind = str(doc, "kind", "cohortd");
    s->id = str(doc, "_id", "");
    s->host = str(doc, "host", "");
    s->version = str(doc, "version", "");
    s->pid = num(doc, "pid");
    s->last_ping_ms_ago = now_ms - date(doc, "seen_at");
    bson_iter_t it;
    bool expired = bson_iter_init_find(&it, doc, "expired") && BSON_ITER_HOLDS_BOOL(&it) &&
                   bson_iter_bool(&it);
    /* An external worker (HTTP API) is live until the alive_until its last call set. */
    bool external = strcmp(kind, "external") == 0;
    if (external)
        s->host = "(external)";
    bool gone = external ? now_ms > date(doc, "alive_until") : s->last_ping_ms_ago > lease_ms;
    s->state = expired || gone ? "expired" : "live";

    BSON_APPEND_UTF8(one, "node_id", s->id);
    BSON_APPEND_UTF8(one, "kind", kind);
    BSON_APPEND_UTF8(one, "state", s->state);
    BSON_APPEND_UTF8(one, "host", s->host);
    BSON_APPEND_INT64(one, "pid", s->pid);
    BSON_APPEND_UTF8(one, "version", s->version);
    BSON_APPEND_INT64(one, "last_ping_ms_ago", s->last_ping_ms_ago);
    copy_field(doc, "services", one);
    copy_field(doc, "workers", one);
    copy_field(doc, "kinds", one); /* {service: [kinds its handler serves]}; none: all */
    bson_t runs;
    BSON_APPEND_ARRAY_BEGIN(one, "runs", &runs);
    s->live_runs = list_runs(doc, now_ms, lease_ms, &runs, s->clash, sizeof s->clash);
    bson_append_array_end(one, &runs);
    BSON_APPEND_INT32(one, "live_runs", s->live_runs);
    BSON_APPEND_BOOL(one, "clash", s->live_runs > 1);
    copy_field(doc, "settings", one);
    copy_field(doc, "db_rtt_p99_ms", one);
    copy_field(doc, "db_rtt_p50_ms", one);
    copy_field(doc, "clock_skew_ms", one);
    copy_field(doc, "release", one);
    copy_field(doc, "schema", one);
    settings_problems(doc, s->problems, sizeof s->problems);
}
