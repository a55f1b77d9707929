/*
 * meta.h - the `cohort_meta` collection: facts about the database itself rather than about a
 * service. Today one document, {_id: "schema"}, records the database's schema version
 * (core/version.h, docs/SCHEMA.md): which layout its documents follow.
 *
 * A database written before schema versions existed has no such document; it counts as
 * version 1. The document is written only into a database that holds no Cohort data yet (a
 * node's first start): an existing database keeps its absence until an operator's migration
 * records it, so writing it is never a side effect of starting a node on live data.
 */
#ifndef COHORT_STORE_META_H
#define COHORT_STORE_META_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* The database's schema as read (and perhaps just recorded). */
typedef struct cohort_schema_state {
    int64_t version; /* the recorded version; 1 when no document records one */
    bool recorded;   /* a {_id: "schema"} document exists (read, or written by this call) */
    bool written;    /* recorded now (by this call or a node starting beside it): a new database */
} cohort_schema_state_t;

/* Reads the database's schema version into `state`. With no schema document and no Cohort
 * collection in the database (services, nodes, tokens, ui_sessions, history, audit,
 * queue_*), records `version` with `writer` (borrowed: who writes it, e.g. a node id) and
 * this build's release; two nodes doing so at once record it once. A NULL `writer` only
 * reads (a new database then reads as version 1, unrecorded). A schema document whose
 * version is not a positive integer is an error. False with `error` set if the database
 * failed. */
bool cohort_store_read_schema(cohort_store_t *store, mongoc_client_t *client, int64_t version,
                              const char *writer, cohort_schema_state_t *state,
                              bson_error_t *error);

/* The cluster's feature level (cohort_meta {_id: "features", level}): the newest behaviour
 * every node may use, raised by `cohortctl upgrade finish` once every live node knows it and
 * lowered by `cohortctl upgrade lower` before a downgrade. Without that document it is the
 * database's schema version (1 for a database of 0.2.0 or older; a new database starts at
 * this release's). */
bool cohort_store_read_level(cohort_store_t *store, mongoc_client_t *client, int64_t *level,
                             bson_error_t *error);

/* Commits the database to `level`: sets {_id: "schema"}.version and {_id: "features"}.level
 * together, with `by` (borrowed) and the server's time. The caller checks first that every
 * live node serves it (`cohortctl upgrade`). */
bool cohort_store_commit_level(cohort_store_t *store, mongoc_client_t *client, int64_t level,
                               const char *by, bson_error_t *error);

#endif
