/*
 * watch.h - change streams on the inserts into a service's queue (watch.c), each on a client of
 * its own.
 *
 * Conventions of every store call (store/store.h): false with `error` filled on failure,
 * nothing aborts, what is passed in stays the caller's, what comes back is said at the call.
 */
#ifndef COHORT_STORE_WATCH_H
#define COHORT_STORE_WATCH_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* A change stream on the inserts into one service's queue, on a client of its own (made
 * from the store's URI, its commands counted in the store's stats). One thread uses it. */
typedef struct cohort_store_watch cohort_store_watch_t;

/* Opens the stream on `service`'s queue: each getMore waits up to `await_ms` on the server
 * (maxAwaitTimeMS) and the client's socket timeout is raised above that. With `resume_after`
 * (may be NULL; copied), it starts after that resume token, so inserts made while no stream
 * was open are seen too. NULL with `error` set when the server refuses (change streams need a
 * replica set, or the local server's oplog) or cannot be reached. Close it with
 * cohort_store_watch_close(). */
cohort_store_watch_t *cohort_store_watch_open(cohort_store_t *store, const char *service,
                                              int64_t await_ms, const bson_t *resume_after,
                                              bson_error_t *error);

/* The stream's next insert: *inserted tells whether there was one. Without an event left
 * from the last batch it sends one getMore, which the server holds up to await_ms (the local
 * test server answers at once). False with `error` set when the stream broke (after the
 * driver's own single resume attempt): close it and open another. */
bool cohort_store_watch_next(cohort_store_watch_t *watch, bool *inserted, bson_error_t *error);

/* The stream's resume token, copied into `token` (initialised by the call); false (and
 * `token` empty) if it has none yet, or none worth resuming after: the queue was dropped or
 * renamed, which ends the stream (cohort_store_watch_next() said so with an error). */
bool cohort_store_watch_resume_token(cohort_store_watch_t *watch, bson_t *token);

/* Closes the stream (killCursors) and its client (NULL is fine). */
void cohort_store_watch_close(cohort_store_watch_t *watch);

#endif
