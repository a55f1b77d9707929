/*
 * bench_common.h - what the benchmark programs (raw_loop, probe) share: the database URI,
 * a command counter on libmongoc's APM callbacks, clocks and fatal errors.
 *
 * The counter is the one Cohort's store uses (commands started, as seen by libmongoc's APM
 * "command started" event), so "commands per task" means the same thing for the raw loop,
 * the probe and the nodes. Handshakes and server monitoring are not commands in APM's sense
 * and are counted by none of them.
 */
#ifndef COHORT_BENCH_COMMON_H
#define COHORT_BENCH_COMMON_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct bench_counter {
    _Atomic uint64_t started;
    _Atomic uint64_t failed;
} bench_counter_t;

/* MONGODB_URI, or mongodb://127.0.0.1:27017 when it is unset or empty. */
const char *bench_uri(void);

/* A pool on bench_uri() whose commands are counted in `counter` (borrowed; must outlive the
 * pool). Exits with a message if the URI is malformed. Destroy with
 * mongoc_client_pool_destroy(). */
mongoc_client_pool_t *bench_pool_new(bench_counter_t *counter);

/* A single-threaded client on bench_uri(), counted in `counter` (borrowed). Exits with a
 * message if the URI is malformed. Destroy with mongoc_client_destroy(). */
mongoc_client_t *bench_client_new(bench_counter_t *counter);

uint64_t bench_counter_started(bench_counter_t *counter);

/* Wall clock, ms since the epoch (comparable with `date +%s%3N`). */
int64_t bench_realtime_ms(void);

/* The server's clock minus this host's, in ms, measured from the localTime of an isMaster
 * reply at the midpoint of its round trip. Exits with a message on a database error. */
int64_t bench_server_offset_ms(mongoc_client_t *client);

/* Prints "PROGRAM: message" to stderr and exits with status 1. */
void bench_die(const char *fmt, ...) BSON_GNUC_PRINTF(1, 2);

/* Sets the program name used by bench_die(). */
void bench_set_program(const char *name);

/* Parses a whole decimal number in [min, max] for option `name`, or dies. */
int64_t bench_parse_int(const char *name, const char *text, int64_t min, int64_t max);

/* Reads the date `key` of `doc` as ms since the epoch, or dies naming `what`. */
int64_t bench_date_field(const bson_t *doc, const char *key, const char *what);

/* Documents of `coll` whose status is `status`; dies on a database error. */
int64_t bench_count_status(mongoc_collection_t *coll, const char *status);

/* The smallest (direction 1) or largest (-1) date `key` over `coll`, in ms since the epoch
 * on the server's clock; dies if there is none. */
int64_t bench_extreme_date(mongoc_collection_t *coll, const char *key, int direction);

#endif
