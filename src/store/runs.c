/*
 * runs.c - the runs of a node_id in its `nodes` document: one process per node_id.
 *
 * Each process that runs a node registers a random run id, and every ping refreshes its
 * entry runs.<run id> = {host, pid, since, seen_at} (server times). Two live processes with
 * one node_id would otherwise share one document, one claim owner and one primacy, and swap
 * primacy every tick; with the entries each sees the other (see node/runs.h for what it does
 * then). An entry is removed by a clean shutdown and all of them by a run that starts once it
 * found none of them alive, so the document holds no more entries than live runs plus those
 * that died recently.
 *
 * This file only shapes and reads those entries (no I/O): nodes.c writes and reads the
 * documents, and calls go one way, nodes.c -> runs.c (tests/layers checks that runs.c
 * includes no header of database calls).
 */
#include "store/runs.h"

#include "store/doc.h"

#include <stdio.h>
#include <string.h>

void store_append_run(bson_t *set, const char *run_id, const char *host, int64_t pid,
                      int64_t since_ms)
{
    char key[64 + COHORT_RUN_ID_LEN];
    snprintf(key, sizeof key, "runs.%s.host", run_id);
    BSON_APPEND_UTF8(set, key, host);
    snprintf(key, sizeof key, "runs.%s.pid", run_id);
    BSON_APPEND_INT64(set, key, pid);
    snprintf(key, sizeof key, "runs.%s.since", run_id);
    BSON_APPEND_DATE_TIME(set, key, since_ms);
}

void store_append_run_seen(bson_t *current_date, const char *run_id)
{
    char key[64 + COHORT_RUN_ID_LEN];
    snprintf(key, sizeof key, "runs.%s.seen_at", run_id);
    BSON_APPEND_BOOL(current_date, key, true);
}

bool store_run_seen_at(const bson_t *doc, const char *run_id, int64_t *ms)
{
    char path[64 + COHORT_RUN_ID_LEN];
    snprintf(path, sizeof path, "runs.%s.seen_at", run_id);
    bson_iter_t it, found;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &found) ||
        !BSON_ITER_HOLDS_DATE_TIME(&found))
        return false;
    *ms = bson_iter_date_time(&found);
    return true;
}

/* One entry of `runs` into *run. */
static void read_run(const char *run_id, const bson_t *entry, cohort_node_run_t *run)
{
    memset(run, 0, sizeof *run);
    snprintf(run->run_id, sizeof run->run_id, "%s", run_id);
    bson_iter_t it;
    if (bson_iter_init_find(&it, entry, "host") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(run->host, sizeof run->host, "%s", bson_iter_utf8(&it, NULL));
    run->pid = store_int64_field(entry, "pid", 0);
    store_date_field(entry, "since", &run->since_ms);
    store_date_field(entry, "seen_at", &run->seen_at_ms);
}

void store_other_run(const bson_t *doc, const char *run_id, cohort_node_run_t *other)
{
    memset(other, 0, sizeof *other);
    /* Every ping and every heartbeat touch (node/heartbeat.c) refreshes the run's own
     * seen_at: the entries alone say which runs are alive. */
    bson_iter_t it, runs;
    if (!bson_iter_init_find(&it, doc, "runs") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &runs))
        return;
    while (bson_iter_next(&runs)) {
        const char *key = bson_iter_key(&runs);
        if (!BSON_ITER_HOLDS_DOCUMENT(&runs) || strcmp(key, run_id ? run_id : "") == 0)
            continue;
        uint32_t len;
        const uint8_t *data;
        bson_t entry;
        bson_iter_document(&runs, &len, &data);
        if (!bson_init_static(&entry, data, len))
            continue;
        cohort_node_run_t run;
        read_run(key, &entry, &run);
        if (!other->run_id[0] || run.seen_at_ms > other->seen_at_ms)
            *other = run;
    }
}
