/*
 * doc.c - reading numbers and dates out of documents and replies (see doc.h). Pure.
 */
#include "store/doc.h"

int64_t store_int64_field(const bson_t *doc, const char *dotted, int64_t fallback)
{
    bson_iter_t it, child;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, dotted, &child) &&
        BSON_ITER_HOLDS_NUMBER(&child))
        return bson_iter_as_int64(&child);
    return fallback;
}

bool store_date_field(const bson_t *doc, const char *key, int64_t *ms)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_DATE_TIME(&it)) {
        *ms = bson_iter_date_time(&it);
        return true;
    }
    return false;
}
