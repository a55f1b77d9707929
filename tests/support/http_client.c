/*
 * http_client.c - a minimal HTTP client for the tests (see http_client.h).
 */
#include "http_client.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support.h"

void http_response_free(http_response_t *r)
{
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

int http_send(int port, const char *method, const char *path, const char *headers,
              const char *body)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    size_t body_len = body ? strlen(body) : 0;
    char *request = NULL;
    int len = asprintf(&request,
                       "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n"
                       "%sContent-Length: %zu\r\n\r\n%s",
                       method, path, port, headers ? headers : "", body_len, body ? body : "");
    cr_assert_geq(len, 0, "out of memory");
    bool sent = send(fd, request, (size_t)len, MSG_NOSIGNAL) == len;
    free(request);
    if (!sent) {
        close(fd);
        return -1;
    }
    return fd;
}

bool http_read_response(int fd, int64_t timeout_ms, http_response_t *out)
{
    memset(out, 0, sizeof *out);
    int64_t deadline = test_now_ms() + timeout_ms;
    char *data = NULL;
    size_t size = 0;
    bool closed = false;
    while (!closed) {
        int64_t left = deadline - test_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            break;
        char chunk[4096];
        ssize_t got = recv(fd, chunk, sizeof chunk, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            closed = true;
            break;
        }
        data = realloc(data, size + (size_t)got + 1);
        cr_assert_not_null(data, "out of memory");
        memcpy(data + size, chunk, (size_t)got);
        size += (size_t)got;
        data[size] = '\0';
    }
    close(fd);
    char *end = data ? strstr(data, "\r\n\r\n") : NULL;
    if (!closed || !end || sscanf(data, "HTTP/1.%*d %d", &out->status) != 1) {
        free(data);
        return false;
    }
    out->headers = strndup(data, (size_t)(end - data));
    out->body_len = size - (size_t)(end + 4 - data);
    out->body = malloc(out->body_len + 1);
    cr_assert(out->headers && out->body, "out of memory");
    memcpy(out->body, end + 4, out->body_len);
    out->body[out->body_len] = '\0';
    free(data);
    return true;
}

bool http_request_with(int port, const char *method, const char *path, const char *headers,
                       const char *body, int64_t timeout_ms, http_response_t *out)
{
    memset(out, 0, sizeof *out);
    int fd = http_send(port, method, path, headers, body);
    return fd >= 0 && http_read_response(fd, timeout_ms, out);
}

bool http_request(int port, const char *method, const char *path, int64_t timeout_ms,
                  http_response_t *out)
{
    return http_request_with(port, method, path, NULL, NULL, timeout_ms, out);
}
