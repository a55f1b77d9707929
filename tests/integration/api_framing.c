/*
 * api_framing.c - request framing over real sockets (node/http/http.c with the API behind it):
 * every request whose length could be read two ways (two Content-Length headers, a signed or
 * spaced one, Content-Length with Transfer-Encoding, an encoding other than chunked, a body
 * on HEAD, a folded header line, a chunk size that is not plain hex) gets the API's JSON 400
 * and the connection is closed, so nothing after it runs as a second request and nothing is
 * written. Errors evhttp produces itself are the same JSON, not its HTML page. HEAD on an API
 * GET path answers as GET without the body; a query value holding %00 is refused.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_fixture.h"
#include "support.h"
#include "core/token.h"
#include "store/store.h"

#define SERVICE "web"
#define TASKS "/api/v1/services/" SERVICE "/tasks"

static test_api_fixture_t fx;
static char token[COHORT_TOKEN_TEXT_MAX];

static void setup(void)
{
    static const cohort_http_callbacks_t limits = {.api_max_body = 4096};
    test_api_fixture_open(
        &fx, &(test_api_setup_t){.prefix = "apiframe", .service = SERVICE, .listen = &limits});
    test_api_token(fx.store, fx.client, "root", "admin", token);
}

static void teardown(void)
{
    test_api_fixture_close(&fx);
}

TestSuite(api_framing, .init = setup, .fini = teardown, .timeout = 120);

/* Sends `text` (with "%s" standing for the token) on a new connection; everything the node
 * sends until it closes (NULL if it kept the connection open for 5 s). */
static char *exchange(const char *text)
{
    char raw[4096];
    int n = snprintf(raw, sizeof raw, text, token);
    cr_assert(n > 0 && (size_t)n < sizeof raw);
    int fd = test_connect(fx.server.port);
    cr_assert_eq(send(fd, raw, (size_t)n, MSG_NOSIGNAL), n);
    char *got = test_read_until_closed(fd, 5000);
    close(fd);
    return got;
}

static int count(const char *haystack, const char *needle)
{
    int n = 0;
    for (const char *p = haystack; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* `got` is one JSON 400 with `code` (NULL: no body, the answer to HEAD), and the connection
 * was closed after it. */
static void assert_refused(const char *got, const char *code, const char *what)
{
    cr_assert_not_null(got, "%s: the connection stayed open", what);
    cr_assert(strncmp(got, "HTTP/1.1 400", 12) == 0, "%s: want 400, got: %.300s", what, got);
    cr_assert(strstr(got, "Content-Type: application/json"), "%s: not JSON: %.400s", what, got);
    cr_assert(!code || strstr(got, code), "%s: want code %s: %.600s", what, code, got);
    cr_assert_null(strstr(got, "<HTML>"), "%s: evhttp's page: %.600s", what, got);
    cr_assert_eq(count(got, "\nHTTP/1."), 0, "%s: a second answer: %.900s", what, got);
    cr_assert_eq(test_count(fx.client, fx.db, "queue_" SERVICE, "{}"), 0, "%s: a task was written",
                 what);
}

#define POST_HEAD "POST " TASKS " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
#define SMUGGLED "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"

Test(api_framing, two_content_lengths_are_refused_and_nothing_runs_after)
{
    char *got = exchange(POST_HEAD "Content-Length: 2\r\nContent-Length: 37\r\n\r\n{}" SMUGGLED);
    assert_refused(got, "\"bad_request\"", "two Content-Length");
    cr_assert(strstr(got, "Content-Length"), "the message names the header: %s", got);
    /* the same value twice is still two headers */
    got = exchange(POST_HEAD "Content-Length: 2\r\nContent-length: 2\r\n\r\n{}" SMUGGLED);
    assert_refused(got, "\"bad_request\"", "two equal Content-Length");
}

Test(api_framing, a_signed_content_length_is_refused)
{
    assert_refused(exchange(POST_HEAD "Content-Length: +2\r\n\r\n{}" SMUGGLED),
                   "\"bad_request\"", "+2");
}

Test(api_framing, content_length_with_transfer_encoding_is_refused)
{
    assert_refused(exchange(POST_HEAD "Content-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
                                      "2\r\n{}\r\n0\r\n\r\n" SMUGGLED),
                   "\"bad_request\"", "CL + TE");
    assert_refused(exchange(POST_HEAD "Transfer-Encoding: gzip, chunked\r\nContent-Length: 2\r\n"
                                      "\r\n{}" SMUGGLED),
                   "\"bad_request\"", "TE gzip");
    assert_refused(exchange(POST_HEAD "Transfer-Encoding: identity\r\n\r\n{}" SMUGGLED),
                   "\"bad_request\"", "TE identity");
}

Test(api_framing, a_body_on_head_is_refused)
{
    assert_refused(
        exchange("HEAD /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 37\r\n\r\n" SMUGGLED), NULL,
        "HEAD with a body");
}

Test(api_framing, a_folded_header_line_is_refused)
{
    assert_refused(exchange(POST_HEAD "X-A: 1\r\n  Content-Length: 37\r\nContent-Length: 2\r\n\r\n"
                                      "{}" SMUGGLED),
                   "\"bad_request\"", "obs-fold");
}

Test(api_framing, a_chunk_size_that_is_not_plain_hex_is_refused)
{
    assert_refused(exchange(POST_HEAD "Transfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n"),
                   "\"bad_request\"", "0x2");
    assert_refused(exchange(POST_HEAD "Transfer-Encoding: chunked\r\n\r\n+2\r\n{}\r\n0\r\n\r\n"),
                   "\"bad_request\"", "+2");
    assert_refused(exchange(POST_HEAD "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"),
                   "\"bad_request\"", "zz");
    /* a plain chunked body is fine */
    char *got = exchange(POST_HEAD "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                   "2\r\n{}\r\n0\r\n\r\n");
    cr_assert(got && strncmp(got, "HTTP/1.1 201", 12) == 0, "chunked: %.300s", got);
}

Test(api_framing, errors_evhttp_makes_itself_are_the_json_error)
{
    assert_refused(exchange("NOT A REQUEST\r\n\r\n"), "\"bad_request\"", "request line");
    assert_refused(exchange(POST_HEAD "Content-Length: 2x\r\n\r\n{}"), "\"bad_request\"", "2x");
}

Test(api_framing, head_on_an_api_get_path_answers_as_get_without_a_body)
{
    char *got = exchange("HEAD " TASKS " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                         "Connection: close\r\n\r\n");
    cr_assert(got && strncmp(got, "HTTP/1.1 200", 12) == 0, "HEAD: %.300s", got);
    cr_assert(strstr(got, "Content-Type: application/json"), "%.300s", got);
    const char *end = strstr(got, "\r\n\r\n");
    cr_assert(end && end[4] == '\0', "HEAD sent a body: %.300s", got);
}

Test(api_framing, a_query_value_holding_nul_is_refused)
{
    char *got = exchange("GET " TASKS "?kind=a%%00b HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                         "%s\r\nConnection: close\r\n\r\n");
    cr_assert(got && strncmp(got, "HTTP/1.1 400", 12) == 0, "%%00: %.300s", got);
    cr_assert(strstr(got, "%00"), "the message says why: %.400s", got);
}
