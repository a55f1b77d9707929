/*
 * isolate_wire.c - reading and writing the messages of the worker process protocol (see
 * isolate_wire.h): length-prefixed BSON documents over a stream socket.
 */
#include "node/handler/isolate_wire.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"

#define MESSAGE_MAX (48 * 1024 * 1024) /* a 16 MB task document, with room to spare */

/* Reads exactly `len` bytes before `deadline_ms` (monotonic; < 0: none). `pidfd` (-1: none)
 * ends the wait when the writer has exited, even if a process it forked keeps the socket
 * open. */
static cohort_wire_status_t read_full(int fd, int pidfd, uint8_t *buf, size_t len,
                                      int64_t deadline_ms)
{
    size_t got = 0;
    while (got < len) {
        int wait = -1;
        if (deadline_ms >= 0) {
            int64_t left = deadline_ms - cohort_clock_monotonic_ms();
            if (left <= 0)
                return COHORT_WIRE_TIMEOUT;
            wait = left > INT_MAX ? INT_MAX : (int)left;
        }
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
        int ready = poll(p, 2, wait);
        if (ready < 0 && errno != EINTR)
            return COHORT_WIRE_EOF;
        if (ready <= 0)
            continue;
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            return COHORT_WIRE_EOF; /* the writer exited and nothing is left to read */
        ssize_t n = read(fd, buf + got, len - got);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
            return COHORT_WIRE_EOF;
        if (n > 0)
            got += (size_t)n;
    }
    return COHORT_WIRE_OK;
}

cohort_wire_status_t cohort_wire_read(int fd, int pidfd, int64_t deadline_ms, bson_t **doc)
{
    *doc = NULL;
    uint8_t head[4];
    cohort_wire_status_t st = read_full(fd, pidfd, head, sizeof head, deadline_ms);
    if (st != COHORT_WIRE_OK)
        return st;
    uint32_t len = (uint32_t)head[0] | (uint32_t)head[1] << 8 | (uint32_t)head[2] << 16 |
                   (uint32_t)head[3] << 24;
    if (len < 5 || len > MESSAGE_MAX)
        return COHORT_WIRE_BAD;
    uint8_t *buf = malloc(len);
    if (!buf)
        return COHORT_WIRE_BAD;
    memcpy(buf, head, sizeof head);
    st = read_full(fd, pidfd, buf + 4, len - 4, deadline_ms);
    if (st == COHORT_WIRE_OK) {
        *doc = bson_new_from_data(buf, len);
        if (!*doc || !bson_validate(*doc, BSON_VALIDATE_NONE, NULL)) {
            bson_destroy(*doc);
            *doc = NULL;
            st = COHORT_WIRE_BAD;
        }
    }
    free(buf);
    return st;
}

bool cohort_wire_write(int fd, const bson_t *doc)
{
    const uint8_t *data = bson_get_data(doc);
    size_t len = doc->len, sent = 0;
    while (sent < len) {
        ssize_t n = send(fd, data + sent, len - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        sent += (size_t)n;
    }
    return true;
}

const char *cohort_wire_utf8(const bson_t *doc, const char *key, const char *fallback)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return fallback;
}

int64_t cohort_wire_int(const bson_t *doc, const char *key, int64_t fallback)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return fallback;
}
