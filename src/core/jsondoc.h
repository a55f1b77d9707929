/*
 * jsondoc.h - the one gate for documents a user hands Cohort to store: a task's data, an
 * outcome's result, progress, a generic-data value, an API body. JSON text (the HTTP API,
 * `cohortctl --data`, `data set`, a schedule's `data=` in the config file) and BSON (the
 * handler ABI) pass the same rules, so every edge accepts and refuses the same input.
 *
 * Why a gate beyond libbson's JSON reader (1.23): it takes an integer of 2^64 or more
 * modulo 2^64 (18446744073709551621 becomes 5) while it refuses 2^63..2^64-1; it reads the
 * first JSON value and ignores whatever follows; and it keeps duplicate and empty keys, which
 * the database refuses (the local server drops the connection on a duplicate key). The
 * rules, each refusal naming the field ("field 'tasks[3].data.n': ..."):
 *   - exactly one JSON object, nothing but white space after it;
 *   - every integer within int64 (-2^63..2^63-1); fractions and exponents are doubles;
 *   - keys of a document: not empty, not starting with '$' (MongoDB refuses such a field in
 *     an update's value), each at most once; '.' is allowed (MongoDB 5.0+ stores it);
 *   - nesting at most `max_depth` levels (MongoDB stores at most 100 around it);
 *   - valid UTF-8 (BSON input; libbson checks JSON text itself).
 */
#ifndef COHORT_JSONDOC_H
#define COHORT_JSONDOC_H

#include <bson/bson.h>
#include <stdbool.h>
#include <sys/types.h>

/* A user's document (data, result, progress, a generic-data value) nests at most this many
 * levels, itself counted as 1, and is at most this many bytes as BSON: MongoDB keeps 100
 * levels and 16 MiB per document, and a task holds its data, result and progress at once. */
#define COHORT_DOC_DEPTH_MAX 64
#define COHORT_DOC_BYTES_MAX (8 * 1024 * 1024)

/* Parses `text` (`len` bytes; -1: NUL-terminated) as exactly one JSON object nesting at most
 * `max_depth` levels, whose keys follow the rules above at every level. On success `doc` is
 * initialised (the caller destroys it); on failure it is not, and `error` (domain
 * COHORT_DOMAIN_USAGE) names the field. A field's path starts at the object's keys ("data.n",
 * "tasks[3].priority"). */
bool cohort_json_parse_object(const char *text, ssize_t len, int max_depth, bson_t *doc,
                              bson_error_t *error);

/* cohort_json_parse_object() for a user's document itself (`cohortctl --data`, a schedule's
 * data=): at most COHORT_DOC_DEPTH_MAX levels and COHORT_DOC_BYTES_MAX bytes. With
 * `dollar_keys`, keys may start with '$' (a generic-data value: store/data.c writes it so
 * that MongoDB takes it as a value). */
bool cohort_json_parse_doc(const char *text, bool dollar_keys, bson_t *doc, bson_error_t *error);

/* Checks a BSON document (`where` names it in messages: "data", "tasks[3].data") against the
 * rules: keys, UTF-8, at most COHORT_DOC_DEPTH_MAX levels and COHORT_DOC_BYTES_MAX bytes. */
bool cohort_doc_check(const bson_t *doc, const char *where, bson_error_t *error);

/* The same for a generic-data value (cohort_set, cohort_data_cas): a document or an array is
 * checked as above except that keys may start with '$' (store/data.c writes such a value as
 * a value); any other value passes. */
bool cohort_value_check(const bson_value_t *value, const char *where, bson_error_t *error);

/* If `it` holds an embedded document (not an array), points `doc` at it and returns true: a
 * view into the iterated document, valid while it lives, never destroyed. False otherwise
 * (another type, or bytes libbson refuses). */
bool cohort_iter_doc(const bson_iter_t *it, bson_t *doc);

#endif
