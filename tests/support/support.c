/*
 * support.c - test helpers (see support.h).
 */
#include "support.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *test_uri(void)
{
    const char *uri = getenv("MONGODB_URI");
    if (!uri || !*uri)
        cr_assert_fail("MONGODB_URI is not set: run the tests with tests/run.sh, which starts "
                       "the local database, or point MONGODB_URI at a MongoDB server");
    return uri;
}

char *test_db_name(const char *tag)
{
    static unsigned counter;
    char *name = NULL;
    unsigned rnd = (unsigned)(test_now_ms() ^ ((int64_t)getpid() << 16)) + counter++ * 7919u;
    if (asprintf(&name, "ct_%.24s_%ld_%x", tag, (long)getpid(), rnd & 0xfffffu) < 0)
        cr_assert_fail("out of memory");
    return name;
}

mongoc_client_t *test_client(void)
{
    static bool initialised;
    if (!initialised) {
        mongoc_init();
        initialised = true;
    }
    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(test_uri(), &error);
    cr_assert_not_null(uri, "bad MONGODB_URI: %s", error.message);
    mongoc_client_t *client = mongoc_client_new_from_uri_with_error(uri, &error);
    mongoc_uri_destroy(uri);
    cr_assert_not_null(client, "cannot create a client: %s", error.message);
    mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
    return client;
}

void test_drop_db(const char *db)
{
    mongoc_client_t *client = test_client();
    mongoc_database_t *database = mongoc_client_get_database(client, db);
    mongoc_database_drop(database, NULL);
    mongoc_database_destroy(database);
    mongoc_client_destroy(client);
}

const char *test_build_path(const char *relative)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", COHORT_BUILD_DIR, relative);
    return path;
}

char *test_tmpdir(const char *tag)
{
    char *templ = NULL;
    const char *base = getenv("TMPDIR");
    if (asprintf(&templ, "%s/cohort-%s-XXXXXX", base && *base ? base : "/tmp", tag) < 0)
        cr_assert_fail("out of memory");
    cr_assert_not_null(mkdtemp(templ), "mkdtemp failed");
    return templ;
}

int64_t test_count(mongoc_client_t *client, const char *db, const char *collection,
                   const char *filter_json)
{
    bson_error_t error;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &error);
    cr_assert_not_null(filter, "bad filter %s: %s", filter_json, error.message);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, collection);
    int64_t n = mongoc_collection_count_documents(coll, filter, NULL, NULL, NULL, &error);
    mongoc_collection_destroy(coll);
    bson_destroy(filter);
    cr_assert_geq(n, 0, "count on %s.%s failed: %s", db, collection, error.message);
    return n;
}

int64_t test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void test_sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

bool test_wait_until(bool (*predicate)(void *arg), void *arg, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        if (predicate(arg))
            return true;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(20);
    }
}
