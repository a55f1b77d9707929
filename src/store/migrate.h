/*
 * migrate.h - the database's online migrations (`cohortctl migrate`, `cohortctl upgrade
 * finish`; docs/OPERATING.md#upgrading, docs/SCHEMA.md#schema-versions).
 *
 * A migration brings the documents of a database written by an older release to the layout of
 * schema version `version`. Each one is:
 *   - additive: what it writes, the previous release reads as before, so nodes of that
 *     release keep running (and may restart) while it runs and after it;
 *   - idempotent and resumable: it selects only the documents it has not changed yet, so a
 *     run killed part way and run again finishes with the same result;
 *   - bounded: it reads `batch` ids at a time through a cursor and changes them with one
 *     updateMany, whatever the number of tasks;
 *   - recorded in cohort_meta as {_id: "migration:N", name, state: "running"|"done", by,
 *     release, started_at, finished_at, changed}.
 * A migration never raises the database's schema version: `upgrade finish` does, once every
 * live node serves it (store/meta.h).
 */
#ifndef COHORT_STORE_MIGRATE_H
#define COHORT_STORE_MIGRATE_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

typedef struct cohort_migration {
    int64_t version;     /* the schema version it brings the documents to */
    const char *name;    /* short, stable: recorded in cohort_meta */
    const char *summary; /* one line for `cohortctl schema` and --dry-run */
} cohort_migration_t;

/* This release's migrations, oldest first (static; *n receives the count). */
const cohort_migration_t *cohort_migrations(size_t *n);

/* The record of migration `version` into `doc` (initialised by the call; the caller destroys
 * it); *found false if it never ran. */
bool cohort_store_migration_record(cohort_store_t *store, mongoc_client_t *client,
                                   int64_t version, bson_t *doc, bool *found, bson_error_t *error);

/* Whether migration `version` is recorded as done. */
bool cohort_store_migration_done(cohort_store_t *store, mongoc_client_t *client, int64_t version,
                                 bool *done, bson_error_t *error);

/* Called after each batch: the collection it changed and the documents changed so far in the
 * whole run. */
typedef void (*cohort_migrate_progress_fn)(void *user, const char *collection, int64_t changed);

/* Runs `m` with `by` (borrowed: who runs it, e.g. "ops@host (cohortctl)") recorded, in
 * batches of `batch` documents; *changed receives the documents it changed. With `dry_run`
 * nothing is written: *changed is the number it would change. */
bool cohort_store_migrate(cohort_store_t *store, mongoc_client_t *client,
                          const cohort_migration_t *m, const char *by, bool dry_run, int64_t batch,
                          cohort_migrate_progress_fn progress, void *user, int64_t *changed,
                          bson_error_t *error);

#endif
