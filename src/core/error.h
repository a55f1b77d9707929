/*
 * error.h - Cohort's one error type, for the daemon and the CLI alike.
 *
 * An error is libbson's bson_error_t: a domain, a code and a message a person can act on.
 * (The name cohort_error_t belongs to the handler ABI's smaller error, include/cohort/handler.h;
 * inside the node and the CLI every error is a bson_error_t.)
 * Errors that come from libmongoc keep the driver's domain and code, so callers can tell a
 * network failure from a duplicate key; errors Cohort raises itself use the domains below
 * (numbered far above the driver's). Functions that can fail return bool (or NULL) and fill
 * a `bson_error_t *error` the caller owns; `error` may be NULL when the caller does not
 * want the reason. Library code never exits the process: it reports and returns.
 */
#ifndef COHORT_ERROR_H
#define COHORT_ERROR_H

#include <bson/bson.h>
#include <stdbool.h>

/* Domains of the errors Cohort raises (libmongoc's own stay as the driver set them). */
enum {
    COHORT_DOMAIN_CONFIG = 1000, /* the config file, a setting's value, a task option */
    COHORT_DOMAIN_USAGE = 1001,  /* a command line or an API call the caller got wrong */
    COHORT_DOMAIN_STORE = 1002,  /* a database answer Cohort cannot use */
    COHORT_DOMAIN_HANDLER = 1003, /* loading or calling a handler */
    COHORT_DOMAIN_SYSTEM = 1004, /* the operating system: files, processes, sockets, memory */
};

/* Codes, shared by every domain. */
enum {
    COHORT_CODE_INVALID = 1,   /* bad input, named in the message */
    COHORT_CODE_NOT_FOUND = 2, /* the thing named does not exist */
    COHORT_CODE_EXISTS = 3,    /* it exists already */
    COHORT_CODE_CONFLICT = 4,  /* the state moved on (a lost claim, a lost lease) */
    COHORT_CODE_NO_MEMORY = 5, /* an allocation failed */
    COHORT_CODE_IO = 6,        /* a read, write, fork or exec failed (errno in the message) */
    COHORT_CODE_UNAVAILABLE = 7, /* the database did not answer */
};

/* An error is filled with libbson's bson_set_error(error, domain, code, fmt, ...): it does
 * nothing when `error` is NULL, and cuts the message at the struct's 504 bytes. */

/* Puts "PREFIX: " (printf-style) before the message already in `error`, keeping its domain
 * and code: "config line 12: " + "takeover_ms must be > tick_ms". */
void cohort_error_prefix(bson_error_t *error, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Makes a database error that came without a reason say what failed: if the message is empty,
 * "null", or ends in ": null" (mongo-java-server's "Unknown error: null", an exception with no
 * message), it becomes "the database failed the WHAT (code N, no message from the server)",
 * WHAT printf-style ("update of queue_demo"); the server's words are kept after it. Domain and
 * code stay. Returns whether it rewrote the message; NULL `error` does nothing. */
bool cohort_error_explain_silent(bson_error_t *error, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Fills `error` with "out of memory: WHAT" in the system domain and returns false, so an
 * allocation failure reads `return cohort_error_nomem(error, "the task list");`. */
bool cohort_error_nomem(bson_error_t *error, const char *what);

/* Clears `error` to "no error". */
static inline void cohort_error_clear(bson_error_t *error)
{
    if (error)
        memset(error, 0, sizeof *error);
}

#endif
