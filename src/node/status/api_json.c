/*
 * api_json.c - helpers for the JSON documents Cohort prints (see api_json.h).
 */
#include "node/status/api_json.h"

#include <inttypes.h>
#include <stdio.h>

#include "core/timefmt.h"

void cohort_json_array_begin_document(bson_t *array, uint32_t *n, bson_t *child)
{
    char buf[16];
    const char *key;
    size_t len = bson_uint32_to_string((*n)++, &key, buf, sizeof buf);
    bson_append_document_begin(array, key, (int)len, child);
}

void cohort_json_array_append_utf8(bson_t *array, uint32_t *n, const char *text)
{
    char buf[16];
    const char *key;
    size_t len = bson_uint32_to_string((*n)++, &key, buf, sizeof buf);
    bson_append_utf8(array, key, (int)len, text, -1);
}

void cohort_json_append_utf8_or_null(bson_t *doc, const char *key, const char *text)
{
    if (text)
        BSON_APPEND_UTF8(doc, key, text);
    else
        BSON_APPEND_NULL(doc, key);
}

void cohort_json_append_time(bson_t *doc, const char *key, int64_t ms)
{
    char text[COHORT_TIME_TEXT_MAX];
    if (ms)
        cohort_time_format(ms, text, sizeof text);
    cohort_json_append_utf8_or_null(doc, key, ms ? text : NULL);
}

void cohort_json_append_int64_text(bson_t *doc, const char *key, int64_t value)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, value);
    BSON_APPEND_UTF8(doc, key, text);
}
