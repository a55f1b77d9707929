/*
 * api_record.h - an opt-in record of every API reply, for the contract test only
 * (tests/openapi/contract.py checks each recorded reply against docs/openapi.yaml).
 *
 * COHORT_API_RECORD=FILE in the environment of a process that creates an API (cohortd, or a
 * test that calls cohort_api_handle() itself) appends one JSON line per reply to FILE:
 * {"method", "path", "query", "status", "body"} ("content_type" instead of "body" for a reply
 * that is not JSON), the body as the wire carries it. Unset (the default and in production),
 * nothing is opened or written. Each line is one write() to a file opened O_APPEND, so
 * several processes may share one file.
 */
#ifndef COHORT_API_RECORD_H
#define COHORT_API_RECORD_H

#include "node/http/api_parse.h"

/* The record file COHORT_API_RECORD names, opened for appending; -1 if unset or it cannot be
 * opened (logged). Read once, when an API is created. */
int cohort_api_record_open(void);

/* Appends `reply` to `request` to the record `fd` (nothing if fd < 0). Thread-safe. */
void cohort_api_record(int fd, const cohort_api_request_t *request,
                       const cohort_api_reply_t *reply);

#endif
