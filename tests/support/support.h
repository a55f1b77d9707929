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

int64_t test_now_ms(void);
void test_sleep_ms(int64_t ms);

#endif
