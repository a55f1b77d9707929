/*
 * http_client.h - a minimal HTTP client for the tests: one request to 127.0.0.1 over a plain
 * socket (HTTP/1.1, Connection: close), so the tests need no HTTP client program.
 */
#ifndef COHORT_TEST_HTTP_CLIENT_H
#define COHORT_TEST_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct http_response {
    int status;
    char *headers; /* the header block, lines separated by \r\n */
    char *body;
    size_t body_len;
} http_response_t;

/* Sends `method path` to 127.0.0.1:port and reads the whole response (the server closes the
 * connection). False if the node did not answer within timeout_ms (not listening yet, or
 * busy). Free the response with http_response_free(). */
bool http_request(int port, const char *method, const char *path, int64_t timeout_ms,
                  http_response_t *out);

/* The same with extra header lines (each ending in \r\n; may be NULL) and a body (may be
 * NULL). */
bool http_request_with(int port, const char *method, const char *path, const char *headers,
                       const char *body, int64_t timeout_ms, http_response_t *out);

/* The two halves, for requests held open (long-poll): sends the request and returns the
 * connected socket (-1 if the node did not take it); http_read_response() reads the answer
 * and closes the socket. */
int http_send(int port, const char *method, const char *path, const char *headers,
              const char *body);
bool http_read_response(int fd, int64_t timeout_ms, http_response_t *out);

void http_response_free(http_response_t *r);

#endif
