/*
 * api_json.h - building the JSON documents the HTTP API (and cohortctl) print, as BSON that
 * libbson renders as relaxed extended JSON: array elements, strings or null, times as
 * ISO-8601 UTC text, int64 values as decimal strings (JavaScript's numbers lose precision
 * past 2^53).
 */
#ifndef COHORT_API_JSON_H
#define COHORT_API_JSON_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

/* Begins the next element of an array being built ("0", "1", ...) as a document, counting
 * in *n; end it with bson_append_document_end(array, child). */
void cohort_json_array_begin_document(bson_t *array, uint32_t *n, bson_t *child);

/* Appends the next element of an array as a string, counting in *n. */
void cohort_json_array_append_utf8(bson_t *array, uint32_t *n, const char *text);

/* Appends `text` as a string, or null when it is NULL. */
void cohort_json_append_utf8_or_null(bson_t *doc, const char *key, const char *text);

/* Appends ms since the epoch as "2026-11-21T10:00:00.000Z", or null when ms is 0. */
void cohort_json_append_time(bson_t *doc, const char *key, int64_t ms);

/* Appends an int64 as its decimal text ("9007199254740993"). */
void cohort_json_append_int64_text(bson_t *doc, const char *key, int64_t value);

#endif
