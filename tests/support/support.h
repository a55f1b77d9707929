/*
 * support.h - helpers shared by the integration and cluster tests.
 *
 * Every test talks to the database named by MONGODB_URI (tests/run.sh starts the local
 * server and sets it) and works in a database of its own, so tests never see each other's
 * data and can run against a shared real MongoDB.
 */
#ifndef COHORT_TEST_SUPPORT_H
#define COHORT_TEST_SUPPORT_H

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdint.h>

/* MONGODB_URI; fails the test with a clear message if it is not set. */
const char *test_uri(void);

/* A fresh database name, "ct_<tag>_<pid>_<random>" (at most 63 characters). Caller frees. */
char *test_db_name(const char *tag);

/* A client of its own (caller destroys with mongoc_client_destroy). */
mongoc_client_t *test_client(void);

/* Drops the database (ignores errors). */
void test_drop_db(const char *db);

/* Path of a file in the build tree (e.g. "handlers/cohort_noop.so"); static buffer. */
const char *test_build_path(const char *relative);

/* A new empty temporary directory; caller frees the string. */
char *test_tmpdir(const char *tag);

/* Counts documents of db.collection matching the JSON filter (fails the test on error). */
int64_t test_count(mongoc_client_t *client, const char *db, const char *collection,
                   const char *filter_json);

/* Waits until predicate(arg) is true, polling every 20 ms, for at most timeout_ms.
 * Returns whether it became true. */
bool test_wait_until(bool (*predicate)(void *arg), void *arg, int64_t timeout_ms);

/* A whole file as a string; test_try_read_file returns NULL if it cannot be opened,
 * test_read_file fails the test. Caller frees. */
char *test_try_read_file(const char *path);
char *test_read_file(const char *path);

/* `text` with every `from` replaced by `to`. Caller frees. */
char *test_replace_all(const char *text, const char *from, const char *to);

int64_t test_now_ms(void);
void test_sleep_ms(int64_t ms);

/* ---- added for the unit and integration tests ------------------------------------------ */

#include "node/service.h"
#include "store/store.h"

/* A service section as the tests' in-process services use it: `name` on the handler at
 * `handler_path` (copied; free config.handler_path), 1000 primary claims per tick, one
 * worker, 5 attempts, 1 s retry base, a 30 min stall timeout and finished tasks kept.
 * Tests change what they need before creating the service. */
cohort_service_config_t test_service_config(const char *name, const char *handler_path);

/* cohort_service_new(), failing the test with the reason if it fails. */
cohort_service_t *test_service_new(const cohort_service_config_t *config, const char *node_id,
                                   int64_t takeover_ms, cohort_store_t *store,
                                   mongoc_client_t *client);

/* One tick of `service` as a node runs it (node.c): the read of its config document (which
 * the node makes once for all the services it does not lead), then cohort_service_tick(). */
void test_service_tick(cohort_service_t *service, mongoc_client_t *client);

/* One election round as a node runs it: the config document read, then the round. */
bool test_election_tick(cohort_election_t *election, cohort_store_t *store,
                        mongoc_client_t *client, bson_error_t *error);

/* What a program did: its exit status and everything it wrote. */
typedef struct test_run_result {
    int exit_code;  /* the exit status; -1 if it was killed by a signal or timed out */
    bool timed_out; /* it was still running after the timeout and was killed */
    char *out;      /* stdout, NUL-terminated */
    char *err;      /* stderr, NUL-terminated */
    int64_t elapsed_ms;
} test_run_result_t;

/* Runs the program argv[0] (a path) with arguments argv (NULL-terminated), stdin from
 * /dev/null, in this process's environment changed by `env` (may be NULL; NULL-terminated
 * entries "KEY=VALUE" set KEY, "KEY" alone unsets it). Kills it after timeout_ms. Fails the
 * test if it cannot be started. Free the result with test_run_result_free(). */
test_run_result_t test_run(const char *const argv[], const char *const env[], int64_t timeout_ms);
void test_run_result_free(test_run_result_t *result);

/* This process's environment changed by `env` (as for test_run(); may be NULL), for a child
 * about to be spawned. The array is malloc'd (free it); its strings are not copied, so `env`
 * and environ must outlive it. */
char **test_child_environment(const char *const env[]);

/* Writes `text` to dir/name and returns the path (caller frees). Fails the test on error. */
char *test_write_file(const char *dir, const char *name, const char *text);

/* A store on MONGODB_URI and database `db` (caller destroys). Fails the test on a bad URI. */
cohort_store_t *test_store_new(const char *db);

/* The fixture of the in-process integration tests: a fresh database named after `prefix`
 * (test_db_name()), a store on it with a client popped for the test, the cluster clock
 * synced, and `service`'s config document and indexes created. Fails the test on error. */
void test_service_db_open(const char *prefix, const char *service, char **db,
                          cohort_store_t **store, mongoc_client_t **client);

/* Undoes test_service_db_open() (safe after a failed or partial open): gives the client
 * back, destroys the store, drops the database and frees its name. */
void test_service_db_close(char **db, cohort_store_t **store, mongoc_client_t **client);

/* The value at a dotted path of doc: a number or date as int64 (INT64_MIN if absent or of
 * another type), a string (NULL if absent or not a string; points into doc), or whether
 * anything is there at all. */
int64_t test_doc_int(const bson_t *doc, const char *path);
const char *test_doc_str(const bson_t *doc, const char *path);
bool test_doc_has(const bson_t *doc, const char *path);

/* Copies `service`'s document into *doc (initialised by this call; destroy it). Fails the
 * test on error or if there is none. */
void test_read_service(cohort_store_t *store, mongoc_client_t *client, const char *service,
                       bson_t *doc);

/* Syncs the cluster clock from the server the way a node does (a node ping under the id
 * "test-clock"), retrying until a sample's round trip is at most max_rtt_ms. Fails the test
 * if no sample is accepted within 10 s. */
void test_sync_clock(cohort_store_t *store, mongoc_client_t *client, int64_t max_rtt_ms);

/* cohort_store_ensure_service(), then a config document it created is put back at epoch 0
 * (its creation floors the epoch at the server's clock), so that a test counts its epochs
 * from 1. */
bool test_ensure_service(cohort_store_t *store, mongoc_client_t *client, const char *service,
                         bson_error_t *error);

/* Copies into *doc (initialised by this call; destroy it) the first document of
 * db.collection matching the JSON filter; false if there is none. Fails the test on error. */
bool test_find_one(mongoc_client_t *client, const char *db, const char *collection,
                   const char *filter_json, bson_t *doc);

/* Sends this process's stderr (fd 2) to a temporary file until test_stderr_end(), which
 * restores it and returns what was written (caller frees). Not nestable. */
void test_stderr_begin(void);
char *test_stderr_end(void);

/* Path of the test handler built from tests/support/handlers/<name>.c; static buffer. Fails
 * the test if it is not built. */
const char *test_handler_path(const char *name);

/* ---- in-process services on the probe handler (tests/support/handlers/probe.c) --------- */

/* A node of an in-process test: its service section, room for four handler options that the
 * section's `options` may point at, and its service (NULL until the test creates it). */
typedef struct test_node {
    cohort_service_config_t config;
    cohort_option_t options[4];
    cohort_service_t *service;
} test_node_t;

/* The fixture of the integration tests that drive services on the probe handler (batches.c,
 * generic_data.c). The record's type is in handlers/probe.h, which those tests include. */
typedef struct test_probe_fixture {
    char *db;                     /* the test's database; owned */
    cohort_store_t *store;        /* owned */
    mongoc_client_t *client;      /* popped from store for the test thread */
    test_node_t nodes[2];         /* the test creates them; their services and handler paths
                                   * are freed at close */
    void *probe;                  /* dlopen() handle of the probe handler */
    struct probe_record *record;  /* the handler's record (inside it); valid until close */
} test_probe_fixture_t;

/* Opens the fixture: test_service_db_open() with the clock synced within
 * cohort_election_max_rtt_ms(takeover_ms) (what a node of that takeover accepts), then the
 * probe handler opened in this process (the services load the same object, so the handle keeps
 * the record alive and in reach) and reset: no calls recorded, no hooks. Fails the test on
 * error. */
void test_probe_fixture_open(test_probe_fixture_t *fx, const char *prefix, const char *service,
                             int64_t takeover_ms);

/* Destroys the nodes' services, closes the probe handler and the database (safe after a failed
 * or partial open), and zeroes *fx. */
void test_probe_fixture_close(test_probe_fixture_t *fx);

/* A function the probe handler exports (cast it to its probe_*_fn type); fails the test if
 * there is none. */
void *test_probe_symbol(const test_probe_fixture_t *fx, const char *name);

#endif
