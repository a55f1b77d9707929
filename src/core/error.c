/*
 * error.c - filling Cohort's error type (see error.h).
 */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void cohort_error_prefix(bson_error_t *error, const char *fmt, ...)
{
    if (!error)
        return;
    char prefix[sizeof error->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* The message moves right by the prefix's length (cut at the end if it must be). */
    size_t n = strlen(prefix), size = sizeof error->message;
    if (n >= size)
        n = size - 1;
    memmove(error->message + n, error->message, size - n - 1);
    memcpy(error->message, prefix, n);
    error->message[size - 1] = '\0';
}

bool cohort_error_nomem(bson_error_t *error, const char *what)
{
    bson_set_error(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_NO_MEMORY, "out of memory: %s",
                   what);
    return false;
}

/* Whether a database error's message says nothing: "", "null", or "...: null". */
static bool message_is_silent(const char *message)
{
    size_t n = strlen(message);
    return n == 0 || strcmp(message, "null") == 0 ||
           (n >= 6 && strcmp(message + n - 6, ": null") == 0);
}

bool cohort_error_explain_silent(bson_error_t *error, const char *fmt, ...)
{
    if (!error || !message_is_silent(error->message))
        return false;
    char what[sizeof error->message / 2], said[sizeof error->message / 4];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    size_t kept = strnlen(error->message, sizeof said - 1); /* the end of it, when long */
    const char *from = error->message + strlen(error->message) - kept;
    memcpy(said, from, kept);
    said[kept] = '\0';
    if (said[0])
        snprintf(error->message, sizeof error->message,
                 "the database failed the %s (code %u, no message from the server, only "
                 "\"%s\")",
                 what, error->code, said);
    else
        snprintf(error->message, sizeof error->message,
                 "the database failed the %s (code %u, no message from the server)", what,
                 error->code);
    return true;
}
