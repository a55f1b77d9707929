/*
 * doc.h - reading numbers and dates out of documents and command replies: pure helpers the
 * files of src/store share (no I/O, no database call), so that document shaping (runs.c)
 * needs nothing that talks to the server.
 *
 * Hidden from the daemon's exported symbols like internal.h's helpers; the layers above do
 * not include it.
 */
#ifndef COHORT_STORE_DOC_H
#define COHORT_STORE_DOC_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#define STORE_INTERNAL __attribute__((visibility("hidden")))

/* The number at the dotted path, or `fallback` if there is none. */
STORE_INTERNAL int64_t store_int64_field(const bson_t *doc, const char *dotted,
                                         int64_t fallback);

/* The date at top-level `key` into *ms; false if it is missing or not a date. */
STORE_INTERNAL bool store_date_field(const bson_t *doc, const char *key, int64_t *ms);

#endif
