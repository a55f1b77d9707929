/*
 * runs.h - the runs of a node_id in its `nodes` document, one process per node_id: what a
 * run is, and the shaping and reading of its entry runs.<id> (runs.c), pure document work
 * with no I/O. nodes.c does the writes and reads (store/nodes.h), and calls go one way:
 * nodes.c -> runs.c. tests/layers checks that runs.c includes no header of database calls.
 *
 * The store_* helpers are for nodes.c alone (hidden, like store/internal.h's); the layers
 * above use the type.
 */
#ifndef COHORT_STORE_RUNS_H
#define COHORT_STORE_RUNS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/doc.h" /* STORE_INTERNAL */

#define COHORT_RUN_ID_LEN 32 /* a run id: 128 random bits in hex */

/* One run (process) of a node_id, as its document records it (runs.c reads it). */
typedef struct cohort_node_run {
    char run_id[COHORT_RUN_ID_LEN + 1]; /* "": none */
    char host[256];
    int64_t pid;
    int64_t since_ms;   /* server time at which it started */
    int64_t seen_at_ms; /* server time of its last ping (or heartbeat touch) */
} cohort_node_run_t;

/* Appends the run's entry to a ping's $set (runs.<run_id>.host, .pid, .since). */
STORE_INTERNAL void store_append_run(bson_t *set, const char *run_id, const char *host,
                                     int64_t pid, int64_t since_ms);

/* Appends runs.<run_id>.seen_at to a ping's or touch's $currentDate. */
STORE_INTERNAL void store_append_run_seen(bson_t *current_date, const char *run_id);

/* The date runs.<run_id>.seen_at of the node document `doc` into *ms; false if none. */
STORE_INTERNAL bool store_run_seen_at(const bson_t *doc, const char *run_id, int64_t *ms);

/* The freshest run in the node document `doc` other than `run_id` (run_id "" if none). */
STORE_INTERNAL void store_other_run(const bson_t *doc, const char *run_id,
                                    cohort_node_run_t *other);

#endif
