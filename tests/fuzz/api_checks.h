/*
 * api_checks.h - the checks the API fuzz targets share (api_checks.c): each runs one of the
 * API's parsers (node/http/api_parse.h, api_lease.h, api_ops.h) on fuzzed input and abort()s
 * when an answer breaks the parser's contract, so the sanitizers and libFuzzer report it.
 * fuzz_api.c feeds them one piece of a request at a time; fuzz_http.c feeds them the pieces
 * libevent and the node's listener cut from a whole raw request.
 */
#ifndef COHORT_FUZZ_API_CHECKS_H
#define COHORT_FUZZ_API_CHECKS_H

#include <bson/bson.h>
#include <stdint.h>

#include "node/http/api_parse.h"

/* A refusal must have a 4xx or 5xx status, a code and a message. */
void fuzz_check_refusal(const cohort_api_error_t *err);

/* The route of `method` `path`; an accepted one has a scope, and a lease token in it is
 * written back as the same text. True if the route was accepted (then in `route`), else
 * false with the refusal in `err`. */
bool fuzz_check_route(const char *method, const char *path, cohort_api_route_t *route,
                      cohort_api_error_t *err);

/* `query` as GET .../tasks, GET .../counts (by=) and a cursor read it. */
void fuzz_check_queries(const char *query);

/* `body` (a parsed object) as each endpoint's parser reads it: a task (`where` prefixes the
 * field names), a batch's tasks, pause/resume/block/unblock, a claim and every lease call,
 * tasks:bulk, a settings patch. */
void fuzz_check_task(const bson_t *body, const char *where);
void fuzz_check_batch(const bson_t *body);
void fuzz_check_switch(const bson_t *body);
void fuzz_check_worker(const bson_t *body);
void fuzz_check_bulk(const bson_t *body);
void fuzz_check_settings(const bson_t *body);

#endif
