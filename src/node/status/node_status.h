/*
 * node_status.h - one node's state (live or expired, last ping, services, workers, runs) as
 * one JSON object: shared by `cohortctl nodes --json` and `GET /api/v1/nodes`, so both say
 * the same thing about the same document.
 *
 * A node is live while its last ping is younger than `lease_ms` (the longest takeover a
 * primary declared); an external worker until the alive_until its last call set. Times are
 * the server's (`now_ms`).
 */
#ifndef COHORT_NODE_STATUS_H
#define COHORT_NODE_STATUS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cohort_node_summary {
    const char *id, *host, *version, *state; /* views into the document (or static text) */
    int64_t pid, last_ping_ms_ago;
    int live_runs;
    char clash[1024]; /* the live runs, "host H pid P (run R, seen Ns ago); ..." */
    /* "service S cannot apply the database's settings: REASON\n" per service, or "" */
    char problems[1024];
} cohort_node_summary_t;

/* Appends the node's fields (node_id, kind, state, host, pid, version, last_ping_ms_ago,
 * services, workers, runs, live_runs, clash; as published: settings, db_rtt_p99_ms,
 * db_rtt_p50_ms, clock_skew_ms, release, schema) to `one`, and fills `summary` (may be NULL)
 * for a table. `doc` must outlive the summary. */
void cohort_node_status(const bson_t *doc, int64_t now_ms, int64_t lease_ms, bson_t *one,
                        cohort_node_summary_t *summary);

#endif
