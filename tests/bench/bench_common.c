/*
 * bench_common.c - helpers shared by the benchmark programs (see bench_common.h).
 */
#include "bench_common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *program = "bench";

void bench_set_program(const char *name)
{
    program = name;
}

void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

const char *bench_uri(void)
{
    const char *uri = getenv("MONGODB_URI");
    return uri && *uri ? uri : "mongodb://127.0.0.1:27017";
}

static void on_command_started(const mongoc_apm_command_started_t *event)
{
    bench_counter_t *counter = mongoc_apm_command_started_get_context(event);
    atomic_fetch_add_explicit(&counter->started, 1, memory_order_relaxed);
}

static void on_command_failed(const mongoc_apm_command_failed_t *event)
{
    bench_counter_t *counter = mongoc_apm_command_failed_get_context(event);
    atomic_fetch_add_explicit(&counter->failed, 1, memory_order_relaxed);
}

static mongoc_apm_callbacks_t *counting_callbacks(void)
{
    mongoc_apm_callbacks_t *callbacks = mongoc_apm_callbacks_new();
    mongoc_apm_set_command_started_cb(callbacks, on_command_started);
    mongoc_apm_set_command_failed_cb(callbacks, on_command_failed);
    return callbacks;
}

static mongoc_uri_t *parse_uri(void)
{
    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(bench_uri(), &error);
    if (!uri)
        bench_die("bad MONGODB_URI '%s': %s", bench_uri(), error.message);
    return uri;
}

mongoc_client_pool_t *bench_pool_new(bench_counter_t *counter)
{
    bson_error_t error;
    mongoc_uri_t *uri = parse_uri();
    mongoc_client_pool_t *pool = mongoc_client_pool_new_with_error(uri, &error);
    mongoc_uri_destroy(uri);
    if (!pool)
        bench_die("cannot create a client pool: %s", error.message);
    mongoc_client_pool_set_error_api(pool, MONGOC_ERROR_API_VERSION_2);
    mongoc_apm_callbacks_t *callbacks = counting_callbacks();
    mongoc_client_pool_set_apm_callbacks(pool, callbacks, counter);
    mongoc_apm_callbacks_destroy(callbacks);
    return pool;
}

mongoc_client_t *bench_client_new(bench_counter_t *counter)
{
    bson_error_t error;
    mongoc_uri_t *uri = parse_uri();
    mongoc_client_t *client = mongoc_client_new_from_uri_with_error(uri, &error);
    mongoc_uri_destroy(uri);
    if (!client)
        bench_die("cannot create a client: %s", error.message);
    mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
    mongoc_apm_callbacks_t *callbacks = counting_callbacks();
    mongoc_client_set_apm_callbacks(client, callbacks, counter);
    mongoc_apm_callbacks_destroy(callbacks);
    return client;
}

uint64_t bench_counter_started(bench_counter_t *counter)
{
    return atomic_load(&counter->started);
}

int64_t bench_realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t bench_date_field(const bson_t *doc, const char *key, const char *what)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DATE_TIME(&it))
        bench_die("%s has no date '%s'", what, key);
    return bson_iter_date_time(&it);
}

int64_t bench_server_offset_ms(mongoc_client_t *client)
{
    bson_t *cmd = BCON_NEW("isMaster", BCON_INT32(1));
    bson_t reply;
    bson_error_t error;
    int64_t sent = bench_realtime_ms();
    bool ok = mongoc_client_command_simple(client, "admin", cmd, NULL, &reply, &error);
    int64_t received = bench_realtime_ms();
    bson_destroy(cmd);
    if (!ok)
        bench_die("cannot reach the database at %s: %s", bench_uri(), error.message);
    int64_t server = bench_date_field(&reply, "localTime", "the isMaster reply");
    bson_destroy(&reply);
    return server - (sent + received) / 2;
}

int64_t bench_parse_int(const char *name, const char *text, int64_t min, int64_t max)
{
    char *end;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno || end == text || *end || value < min || value > max)
        bench_die("%s '%s' must be a whole number from %lld to %lld", name, text, (long long)min,
                  (long long)max);
    return value;
}

int64_t bench_count_status(mongoc_collection_t *coll, const char *status)
{
    bson_t *filter = BCON_NEW("status", BCON_UTF8(status));
    bson_error_t error;
    int64_t n = mongoc_collection_count_documents(coll, filter, NULL, NULL, NULL, &error);
    if (n < 0)
        bench_die("counting %s tasks in %s: %s", status, mongoc_collection_get_name(coll),
                  error.message);
    bson_destroy(filter);
    return n;
}

int64_t bench_extreme_date(mongoc_collection_t *coll, const char *key, int direction)
{
    /* Only the tasks that have the date: in a queue not drained, most have no claimed_at. */
    bson_t *filter = BCON_NEW(key, "{", "$type", BCON_UTF8("date"), "}");
    bson_t *opts = BCON_NEW("sort", "{", key, BCON_INT32(direction), "}", "limit", BCON_INT64(1),
                            "projection", "{", key, BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *doc;
    bson_error_t error;
    if (!mongoc_cursor_next(cursor, &doc)) {
        if (mongoc_cursor_error(cursor, &error))
            bench_die("reading %s: %s", key, error.message);
        bench_die("reading %s: no task in %s has it", key, mongoc_collection_get_name(coll));
    }
    int64_t ms = bench_date_field(doc, key, "a finished task");
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    return ms;
}
