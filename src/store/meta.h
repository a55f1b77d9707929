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
 * this build's release; two nodes doing so at once record it once. A schema document whose
 * version is not a positive integer is an error. False with `error` set if the database
 * failed. */
bool cohort_store_read_schema(cohort_store_t *store, mongoc_client_t *client, int64_t version,
                              const char *writer, cohort_schema_state_t *state,
                              bson_error_t *error);

#endif
