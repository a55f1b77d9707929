/*
 * doctor.h - the database side of `cohortctl doctor` (src/cli/ctl_doctor.c): what the server
 * is and does where Cohort depends on it. Each call asks one thing and reports what it found;
 * judging it (ok, warn, fail) is the command's.
 *
 * Ownership: strings and documents passed in stay the caller's; every out-structure is the
 * caller's and filled in full. Each call returns false with `error` set only when the
 * database could not be asked at all; a feature the server lacks (explain, change streams,
 * getDefaultRWConcern) is a finding, said in the structure, not an error.
 */
#ifndef COHORT_STORE_DOCTOR_H
#define COHORT_STORE_DOCTOR_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

typedef struct cohort_doctor_server {
    char version[64];   /* buildInfo's version */
    char topology[160]; /* "replica set rs0 (3 members)", "sharded (mongos)", ... */
    bool embedded;      /* mongo-java-server: buildInfo without gitVersion */
    bool replica_set, sharded;
    char write_concern[160]; /* "w: majority (URI), none set (server default)" */
    char read_concern[160];
    bool unacknowledged;  /* the client's write concern is w: 0 */
    bool majority_writes; /* w: majority, the URI's or else the server's default */
} cohort_doctor_server_t;

/* buildInfo, hello (isMaster on a server without it) and getDefaultRWConcern. */
bool cohort_doctor_server(cohort_store_t *store, mongoc_client_t *client,
                          cohort_doctor_server_t *out, bson_error_t *error);

typedef struct cohort_doctor_stream {
    bool opened;       /* a change stream opened on the services collection */
    char why[512];     /* if not: the server's message */
    int64_t waited_ms; /* how long one empty getMore with maxAwaitTimeMS took */
} cohort_doctor_stream_t;

/* Opens a change stream on `services` with maxAwaitTimeMS = `max_await_ms` and times one
 * getMore that has nothing to return: MongoDB holds it for max_await_ms. */
bool cohort_doctor_change_stream(cohort_store_t *store, mongoc_client_t *client,
                                 int64_t max_await_ms, cohort_doctor_stream_t *out,
                                 bson_error_t *error);

/* The names of the queue indexes (store/indexes.h) that `service`'s queue lacks, or has with
 * other keys, comma-separated into `missing` ("" if none). */
bool cohort_doctor_missing_indexes(cohort_store_t *store, mongoc_client_t *client,
                                   const char *service, char *missing, size_t len,
                                   bson_error_t *error);

typedef struct cohort_doctor_plan {
    bool explained;  /* false: the server does not explain (why says so) */
    bool index_scan; /* an IXSCAN, COUNT_SCAN or DISTINCT_SCAN in the winning plan */
    bool collection_scan, in_memory_sort;
    char stages[160]; /* the winning plan's stages, outermost first: "LIMIT < FETCH < IXSCAN" */
    char why[512];    /* if not explained: the server's message */
} cohort_doctor_plan_t;

/* The winning plan of the claim query ({status: pending, run_at <= now} in claim order, limit
 * 1) on `service`'s queue. */
bool cohort_doctor_explain_claim(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, int64_t now_ms, cohort_doctor_plan_t *out,
                                 bson_error_t *error);

/* The winning plan of the count by status (store_count_by_status's aggregation). */
bool cohort_doctor_explain_count(cohort_store_t *store, mongoc_client_t *client,
                                 const char *service, cohort_doctor_plan_t *out,
                                 bson_error_t *error);

/* Tasks of `service` claimed by a node that has not checked in since `cutoff_ms` (server
 * time): what the stalled-task reset should have released (the same filter). */
bool cohort_doctor_stale_claims(cohort_store_t *store, mongoc_client_t *client, const char *service,
                                int64_t cutoff_ms, int64_t *count, bson_error_t *error);

/* Claimed tasks of `service` whose external worker's lease ended before `now_ms`. */
bool cohort_doctor_expired_leases(cohort_store_t *store, mongoc_client_t *client,
                                  const char *service, int64_t now_ms, int64_t *count,
                                  bson_error_t *error);

#endif
