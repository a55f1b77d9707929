/*
 * client.c - the store object: a libmongoc client pool, its URI defaults and the command
 * counters (see store.h).
 *
 * Every command any thread sends goes through this pool or a client of its own made here
 * (store_client_new: the change streams' long getMores), so the APM callbacks installed here
 * count them all; the counters are atomics, read without a lock by metrics and pings. The
 * URI's own timeouts win over the short defaults applied here.
 */
#include "store/internal.h"
#include "store/store.h"

#include "core/error.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static void on_command_started(const mongoc_apm_command_started_t *event)
{
    cohort_store_t *store = mongoc_apm_command_started_get_context(event);
    atomic_fetch_add_explicit(&store->commands, 1, memory_order_relaxed);
}

static void on_command_failed(const mongoc_apm_command_failed_t *event)
{
    cohort_store_t *store = mongoc_apm_command_failed_get_context(event);
    atomic_fetch_add_explicit(&store->command_errors, 1, memory_order_relaxed);
}

/* The callbacks that count every command into the store's counters (context: the store). */
static mongoc_apm_callbacks_t *counting_callbacks(void)
{
    mongoc_apm_callbacks_t *callbacks = mongoc_apm_callbacks_new();
    mongoc_apm_set_command_started_cb(callbacks, on_command_started);
    mongoc_apm_set_command_failed_cb(callbacks, on_command_failed);
    return callbacks;
}

static void default_option(mongoc_uri_t *uri, const char *option, int32_t value)
{
    if (!mongoc_uri_has_option(uri, option))
        mongoc_uri_set_option_as_int32(uri, option, value);
}

cohort_store_t *cohort_store_new(const char *uri_string, const char *database, const char *appname,
                                 bson_error_t *error)
{
    mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_string, error);
    if (!uri)
        return NULL;
    /* Fail fast when the database is away: a node retries on its next tick anyway. */
    default_option(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 2000);
    default_option(uri, MONGOC_URI_CONNECTTIMEOUTMS, 2000);
    default_option(uri, MONGOC_URI_SOCKETTIMEOUTMS, 15000);
    if (appname && !mongoc_uri_get_appname(uri))
        mongoc_uri_set_appname(uri, appname);

    cohort_store_t *store = calloc(1, sizeof *store);
    if (!store) {
        mongoc_uri_destroy(uri);
        cohort_error_nomem(error, "the store");
        return NULL;
    }
    store->uri = uri;
    store->database = strdup(database);
    if (!store->database) {
        cohort_store_destroy(store);
        cohort_error_nomem(error, "the store's database name");
        return NULL;
    }
    store->pool = mongoc_client_pool_new_with_error(uri, error);
    if (!store->pool) {
        cohort_store_destroy(store);
        return NULL;
    }
    mongoc_client_pool_set_error_api(store->pool, MONGOC_ERROR_API_VERSION_2);
    mongoc_apm_callbacks_t *callbacks = counting_callbacks();
    mongoc_client_pool_set_apm_callbacks(store->pool, callbacks, store);
    mongoc_apm_callbacks_destroy(callbacks);
    return store;
}

mongoc_client_t *store_client_new(cohort_store_t *store, int32_t min_socket_timeout_ms,
                                  bson_error_t *error)
{
    mongoc_uri_t *uri = mongoc_uri_copy(store->uri);
    if (!uri) {
        cohort_error_nomem(error, "a database client");
        return NULL;
    }
    int32_t socket_ms = mongoc_uri_get_option_as_int32(uri, MONGOC_URI_SOCKETTIMEOUTMS, 0);
    if (socket_ms > 0 && socket_ms < min_socket_timeout_ms) /* 0: no timeout at all */
        mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SOCKETTIMEOUTMS, min_socket_timeout_ms);
    mongoc_client_t *client = mongoc_client_new_from_uri_with_error(uri, error);
    mongoc_uri_destroy(uri);
    if (!client)
        return NULL;
    mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
    mongoc_apm_callbacks_t *callbacks = counting_callbacks();
    mongoc_client_set_apm_callbacks(client, callbacks, store);
    mongoc_apm_callbacks_destroy(callbacks);
    return client;
}

void cohort_store_destroy(cohort_store_t *store)
{
    if (!store)
        return;
    if (store->primacy_client)
        mongoc_client_pool_push(store->pool, store->primacy_client);
    if (store->pool)
        mongoc_client_pool_destroy(store->pool);
    mongoc_uri_destroy(store->uri);
    free(store->database);
    free(store);
}

mongoc_client_t *cohort_store_pop(cohort_store_t *store)
{
    return mongoc_client_pool_pop(store->pool);
}

void cohort_store_push(cohort_store_t *store, mongoc_client_t *client)
{
    if (client)
        mongoc_client_pool_push(store->pool, client);
}

mongoc_client_t *cohort_store_primacy_client(cohort_store_t *store)
{
    if (!store->primacy_client)
        store->primacy_client = mongoc_client_pool_pop(store->pool);
    return store->primacy_client;
}

cohort_store_stats_t cohort_store_stats(const cohort_store_t *store)
{
    cohort_store_t *m = (cohort_store_t *)store;
    return (cohort_store_stats_t){
        .commands = atomic_load(&m->commands),
        .command_errors = atomic_load(&m->command_errors),
        .claims_attempted = atomic_load(&m->claims_attempted),
        .claims_empty = atomic_load(&m->claims_empty),
        .claim_candidates_lost = atomic_load(&m->claim_candidates_lost),
    };
}
