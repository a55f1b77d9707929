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
