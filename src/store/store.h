/*
 * store.h - the store and its client pool (client.c): cohort_store_t, the one type every store
 * call takes, and the counters its commands feed. Every store header includes it.
 *
 * Collections (see docs/SCHEMA.md): `services` (one config document per service: primacy,
 * epoch, last_active), `nodes` (one document per node: identity and its last ping, server
 * time), `queue_<service>` (the service's tasks), and `history`, `tokens`, `ui_sessions`,
 * `audit`. Each store file has its header (store/<file>.h) with the calls it implements;
 * store/internal.h holds what they share and no other layer includes it. This header
 * has no store.c: client.c implements it (internal.h includes it, so a store.c would close a
 * circle of includes).
 *
 * A store owns a client pool; a thread pops a client for as long as it runs and passes it
 * to every call. Every call returns false and fills `error` (Cohort's one error type: the
 * driver's domain and code for a database failure) and none aborts. Strings and documents
 * passed in stay the caller's; what a call hands back is said at the call. Commands are
 * counted through libmongoc's APM callbacks.
 */
#ifndef COHORT_STORE_H
#define COHORT_STORE_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cohort_store cohort_store_t;

typedef struct cohort_store_stats {
    uint64_t commands;       /* commands started */
    uint64_t command_errors; /* commands that failed */
    /* Contention at the queue head (claims.c): claim attempts (a findAndModify, or one round
     * of a batch claim), those that claimed nothing, and a batch round's candidates another
     * claimer took between its find and its update. A findAndModify that loses its first
     * candidate to another claimer is retried inside the server, which these do not see. */
    uint64_t claims_attempted;
    uint64_t claims_empty;
    uint64_t claim_candidates_lost;
} cohort_store_stats_t;

/* Connects lazily (libmongoc connects on first use). Applies short default timeouts unless
 * the URI sets its own; copies what it keeps of its arguments. Returns NULL with `error` set
 * for a malformed URI or when out of memory. Destroy the store (NULL is fine) after every
 * client popped from it is pushed back. */
cohort_store_t *cohort_store_new(const char *uri, const char *database, const char *appname,
                                 bson_error_t *error);
void cohort_store_destroy(cohort_store_t *store);

/* A client for the calling thread; give it back with cohort_store_push(). */
mongoc_client_t *cohort_store_pop(cohort_store_t *store);
void cohort_store_push(cohort_store_t *store, mongoc_client_t *client);

/* The connection kept for primacy renewal alone (node/primary/lease.c's thread): a client of the
 * pool that nothing else uses, so a renewal never waits behind the tick's, the workers' or a
 * cursor's commands for a connection. Owned by the store: popped on the first call, pushed
 * back by cohort_store_destroy(). One thread at a time may use it. */
mongoc_client_t *cohort_store_primacy_client(cohort_store_t *store);

cohort_store_stats_t cohort_store_stats(const cohort_store_t *store);

#endif
