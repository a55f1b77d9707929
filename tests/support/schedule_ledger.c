/*
 * schedule_ledger.c - reads recurring tasks' state and slot ledgers for the cluster tests
 * (see schedule_ledger.h).
 */
#include "schedule_ledger.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timefmt.h"
#include "support.h"

static int64_t doc_int(const bson_t *doc, const char *dotted)
{
    bson_iter_t it, child;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, dotted, &child) &&
        BSON_ITER_HOLDS_NUMBER(&child))
        return bson_iter_as_int64(&child);
    return 0;
}

bool ledger_read_state(cluster_t *c, const char *service, const char *id, ledger_state_t *out)
{
    memset(out, 0, sizeof *out);
    mongoc_collection_t *services = mongoc_client_get_collection(c->client, c->db, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(services, filter, NULL, NULL);
    const bson_t *doc;
    bool ok = false;
    if (mongoc_cursor_next(cursor, &doc)) {
        ok = true;
        char path[128];
        bson_iter_t it, child;
        snprintf(path, sizeof path, "schedules.%s.last_slot", id);
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &child) &&
            BSON_ITER_HOLDS_DATE_TIME(&child)) {
            out->found = true;
            out->last_slot = bson_iter_date_time(&child);
        }
        snprintf(path, sizeof path, "schedules.%s.created", id);
        out->created = doc_int(doc, path);
        snprintf(path, sizeof path, "schedules.%s.existed", id);
        out->existed = doc_int(doc, path);
        snprintf(path, sizeof path, "schedules.%s.skipped", id);
        out->skipped = doc_int(doc, path);
    }
    mongoc_cursor_destroy(cursor);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    return ok;
}

bool ledger_wait_slot(cluster_t *c, const char *service, const char *id, int64_t at,
                      int64_t timeout_ms, ledger_state_t *out)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    do {
        if (ledger_read_state(c, service, id, out) && out->found && out->last_slot >= at)
            return true;
        test_sleep_ms(100);
    } while (test_now_ms() < deadline);
    return false;
}

void ledger_read(cluster_t *c, const char *service, const char *id, int64_t from, int64_t to,
                 ledger_t *l)
{
    memset(l, 0, sizeof *l);
    l->from = from / 1000 * 1000;
    l->to = to / 1000 * 1000;
    l->n = (l->to - l->from) / 1000;
    l->tasks = calloc((size_t)(l->n > 0 ? l->n : 1), sizeof *l->tasks);
    char prefix[96];
    int len = snprintf(prefix, sizeof prefix, "schedule:%s:", id);
    char name[96];
    snprintf(name, sizeof name, "queue_%s", service);
    mongoc_collection_t *tasks = mongoc_client_get_collection(c->client, c->db, name);
    bson_t *filter = BCON_NEW("unique_key", "{", "$exists", BCON_BOOL(true), "}");
    bson_t *opts = BCON_NEW("projection", "{", "unique_key", BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, filter, opts, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (!bson_iter_init_find(&it, doc, "unique_key") || !BSON_ITER_HOLDS_UTF8(&it))
            continue;
        const char *key = bson_iter_utf8(&it, NULL);
        if (strncmp(key, prefix, (size_t)len) != 0)
            continue;
        int64_t slot;
        if (!cohort_time_parse(key + len, &slot) || slot % 1000 != 0) {
            l->malformed++;
            continue;
        }
        if (slot <= l->from)
            l->before++;
        else if (slot > l->to)
            l->after++;
        else
            l->tasks[(slot - l->from) / 1000 - 1]++;
    }
    bson_error_t error;
    cr_assert_not(mongoc_cursor_error(cursor, &error), "reading the ledger: %s",
                  error.message);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(tasks);
}

void ledger_free(ledger_t *l)
{
    free(l->tasks);
    l->tasks = NULL;
}

bool ledger_explained(const ledger_t *l, int64_t skipped, int64_t predone, char *why,
                      size_t len)
{
    for (int64_t i = 0; i < l->n; i++) {
        int want = i < skipped ? 0 : 1;
        if (l->tasks[i] != want && !(i < predone && l->tasks[i] == 1)) {
            char when[COHORT_TIME_TEXT_MAX];
            cohort_time_format(l->from + (i + 1) * 1000, when, sizeof when);
            snprintf(why, len, "slot %s (%lld of %lld) has %d task(s), expected %d (%lld "
                     "skipped first)", when, (long long)(i + 1), (long long)l->n, l->tasks[i],
                     want, (long long)skipped);
            return false;
        }
    }
    if (l->malformed) {
        snprintf(why, len, "%lld task(s) with a malformed slot key", (long long)l->malformed);
        return false;
    }
    return true;
}
