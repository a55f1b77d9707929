/*
 * http_framing.c - the framing scanner (node/http/http_framing.h) on requests fed whole and a byte
 * at a time (as a slow client's reads arrive): plain requests and chunked bodies pass, and
 * each ambiguity is caught wherever the reads split it; a second request after a clean one
 * is not scanned until reset.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "node/http/http_framing.h"

/* The scanner's verdict on `text`, fed whole or a byte at a time. */
static const char *scan(const char *text, bool bytewise)
{
    cohort_http_framing_t f;
    cohort_http_framing_reset(&f);
    size_t len = strlen(text);
    if (!bytewise)
        cohort_http_framing_scan(&f, text, len);
    for (size_t i = 0; bytewise && i < len; i++)
        cohort_http_framing_scan(&f, text + i, 1);
    return f.fault;
}

static void expect(const char *text, bool refused)
{
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        const char *fault = scan(text, bytewise);
        cr_assert_eq(fault != NULL, refused, "%s (%s): %s", text, bytewise ? "bytewise" : "whole",
                     fault ? fault : "accepted");
    }
}

#define HEAD "POST /x HTTP/1.1\r\nHost: x\r\n"
#define CHUNKED HEAD "Transfer-Encoding: chunked\r\n\r\n"

Test(http_framing, clean_requests_pass)
{
    expect("GET / HTTP/1.1\r\nHost: x\r\n\r\n", false);
    expect(HEAD "Content-Length: 2\r\n\r\n{}", false);
    expect(CHUNKED "2\r\n{}\r\nA\r\n0123456789\r\n0\r\n\r\n", false);
    expect(CHUNKED "2\n{}\n0\n\n", false);            /* bare LF line ends */
    expect(CHUNKED "0\r\nX-Trailer: 1\r\n\r\n", false); /* a trailer */
    /* the scan stops at the end of the request: what follows is the next one's */
    expect(HEAD "Content-Length: 2\r\n\r\n{}GET / HTTP/1.1\r\n folded\r\n\r\n", false);
    expect(CHUNKED "0\r\n\r\n 0x2\r\n", false);
}

Test(http_framing, ambiguities_are_caught_however_the_reads_split)
{
    expect(HEAD "X-A: 1\r\n Content-Length: 2\r\n\r\n", true); /* obs-fold, space */
    expect(HEAD "X-A: 1\r\n\tmore\r\n\r\n", true);              /* obs-fold, tab */
    expect(CHUNKED "0x2\r\n{}\r\n0\r\n\r\n", true);
    expect(CHUNKED "+2\r\n{}\r\n0\r\n\r\n", true);
    expect(CHUNKED " 2\r\n{}\r\n0\r\n\r\n", true);
    expect(CHUNKED "2;ext=1\r\n{}\r\n0\r\n\r\n", true);
    expect(CHUNKED "\r\n2\r\n{}\r\n0\r\n\r\n", true);             /* an empty size line */
    expect(CHUNKED "2\r\n{}x\r\n0\r\n\r\n", true);                /* data longer than said */
    expect(CHUNKED "1000000000000000\r\n", true);                  /* 16 hex digits */
}
