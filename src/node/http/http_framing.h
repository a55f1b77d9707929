/*
 * http_framing.h - one way only to read where a request ends (request smuggling defence for
 * node/http/http.c). evhttp (libevent 2.1) is lenient where a proxy in front may read the same
 * bytes another way: it takes the first of two Content-Length headers, reads "+2" as 2,
 * frames by Transfer-Encoding beside a Content-Length, joins folded header lines, reads a
 * chunk size "0x2" or "+2" as 2 and skips empty lines between chunks. Cohort refuses every
 * such request (http.c answers the JSON 400 and closes the connection), so the bytes after
 * it never run as a request of their own.
 *
 * Two checks: cohort_http_framing_scan() reads the raw bytes as they arrive (folded header
 * lines and chunk-size lines are gone once evhttp has parsed them); cohort_http_framing_fault()
 * reads the parsed headers (duplicates stay in evhttp's list). Pure functions: no I/O.
 */
#ifndef COHORT_HTTP_FRAMING_H
#define COHORT_HTTP_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evkeyvalq;

/* The scanner's state for one request on one connection; zero it (or call
 * cohort_http_framing_reset()) where a request begins. */
typedef struct cohort_http_framing {
    enum {
        COHORT_FRAMING_HEAD,
        COHORT_FRAMING_CHUNK_SIZE,
        COHORT_FRAMING_CHUNK_DATA,
        COHORT_FRAMING_CHUNK_END,
        COHORT_FRAMING_TRAILER,
        COHORT_FRAMING_DONE
    } state;
    size_t line_no;    /* in the head: 0 is the request line */
    size_t line_len;   /* bytes of the current line so far, CR aside */
    char name[20];     /* the current header line's first bytes (lower case) */
    bool chunked;      /* the head named a Transfer-Encoding */
    uint64_t remaining; /* COHORT_FRAMING_CHUNK_DATA: bytes of the chunk still to come */
    uint64_t size;      /* COHORT_FRAMING_CHUNK_SIZE: the size read so far */
    const char *fault;  /* static text: why the request is refused; NULL while none */
} cohort_http_framing_t;

void cohort_http_framing_reset(cohort_http_framing_t *f);

/* Reads the next `len` bytes of the connection; past the end of the request (its head, or
 * its chunked body) it reads nothing more until reset. Sets f->fault on a folded header line,
 * or a chunk-size line that is not 1 to 15 hex digits, or a chunk not followed by its line
 * end. */
void cohort_http_framing_scan(cohort_http_framing_t *f, const char *bytes, size_t len);

/* Why the parsed request (`headers`, with a body unless `bodyless`, as HEAD and TRACE are)
 * has an ambiguous length: two Content-Length or Transfer-Encoding headers, both kinds, a
 * Content-Length that is not plain digits, an encoding other than "chunked", a body on a
 * body-less method; static text, or NULL if its length is clear. */
const char *cohort_http_framing_fault(const struct evkeyvalq *headers, bool bodyless);

#endif
