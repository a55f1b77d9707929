/*
 * schema_meta.c - the schema document of a new database (src/store/meta.c): a database
 * holding only collections Cohort never creates is new (the node records the schema there),
 * one holding a queue is not (it keeps no schema document until a migration records one).
 * Judged on the collection names themselves, so it holds on a server that ignores
 * listCollections' filter (the embedded test server does) as on MongoDB.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "store/meta.h"
#include "support.h"

/* A fresh database with one document in `collection`, then cohort_store_read_schema() as a
 * starting node ("n1") would call it. */
static cohort_schema_state_t read_after(const char *collection)
{
    char *db = test_db_name("schema_meta");
    mongoc_client_t *client = test_client();
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, collection);
    bson_t *doc = BCON_NEW("x", BCON_INT32(1));
    bson_error_t error;
    cr_assert(mongoc_collection_insert_one(coll, doc, NULL, NULL, &error), "%s", error.message);
    bson_destroy(doc);
    mongoc_collection_destroy(coll);
    cohort_store_t *store = test_store_new(db);
    mongoc_client_t *pooled = cohort_store_pop(store);
    cohort_schema_state_t state;
    bool ok = cohort_store_read_schema(store, pooled, 3, "n1", &state, &error);
    cohort_store_push(store, pooled);
    cohort_store_destroy(store);
    test_drop_db(db);
    mongoc_client_destroy(client);
    free(db);
    cr_assert(ok, "%s", error.message);
    return state;
}

Test(schema_meta, a_database_of_foreign_collections_only_is_new)
{
    cohort_schema_state_t state = read_after("someone_elses");
    cr_assert(state.recorded && state.written && state.version == 3,
              "recorded %d, written %d, version %lld: taken for a database of Cohort's",
              state.recorded, state.written, (long long)state.version);
}

Test(schema_meta, a_database_holding_a_queue_is_an_old_one)
{
    cohort_schema_state_t state = read_after("queue_old");
    cr_assert(!state.recorded && !state.written && state.version == 1,
              "recorded %d, written %d, version %lld", state.recorded, state.written,
              (long long)state.version);
}
