/*
 * http.c - the node's HTTP listener on evhttp (see http.h for the routes).
 *
 * Requests are small and answered at once from memory (the metrics text is a few KiB per
 * service), so one loop serves them between ticks. Header and body sizes and idle
 * connections are bounded, so a misbehaving client costs little:
 *
 * - Connections. libevent 2.1 has no cap on them, so the listener keeps its own list: every
 *   connection is made here (evhttp_set_bevcb) and holds a reference of ours, which a sweep
 *   every HTTP_SWEEP_MS drops once evhttp has let the connection go (its callbacks cleared).
 *   Past `max_connections`, a new connection shuts the oldest idle one down (shutdown(2):
 *   evhttp sees the end of the stream and frees it), so a flood of idle clients cannot lock
 *   out a health check; connections with a request being answered stay, and if all are, the
 *   new one goes instead. A log line (at most one a second) says how many went.
 * - Slow clients. Each connection must send a whole request within `request_deadline_ms` of
 *   being accepted or of its previous answer, however it dribbles: the sweep shuts down those
 *   past it. evhttp's own timeout (HTTP_TIMEOUT_S) still cuts a connection idle that long.
 * - Clients that leave while they wait. evhttp stops reading a connection once its request is
 *   whole and until it is answered, so it notices neither a close nor a reset meanwhile: a
 *   long-poll claim whose client went away would wait on, and claim, for nobody. The sweep
 *   therefore peeks (MSG_PEEK, no data consumed) at each connection whose API request is
 *   unanswered and tells the API (`api_gone`) once the client has closed it;
 *   cohort_http_api_reply() and cohort_http_api_client_gone() make the same check.
 * - Large bodies. evhttp refuses a body over `api_max_body` itself, with its HTML 413 page and
 *   before the request reaches us (Content-Length, chunked and Expect: 100-continue alike).
 * - evhttp's own refusals (that 413, a 400 for a request line, header or chunk it cannot
 *   parse, a 417) are HTML pages written before the request reaches us. A callback on each
 *   connection's output buffer replaces such a page, as evhttp writes it, with the API's JSON
 *   error {"error": {"code": ...}}: a status line written while no request of ours is being
 *   answered (between its arrival and its answer's end) can only be evhttp's.
 * - Framing. A request whose length could be read two ways (http_framing.h: two
 *   Content-Length headers, a folded header line, a chunk size "0x2", ...) gets the JSON 400
 *   with Connection: close, so what follows it on the connection never runs as a request: a
 *   callback on each connection's input buffer scans the raw bytes as they arrive, and the
 *   parsed headers are checked before the request is served.
 */
#include "node/http/http.h"

#include <errno.h>
#include <malloc.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/address.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "node/http/http_framing.h"
#include "node/http/metrics.h"
#include "node/http/ui.h"

#define HTTP_TIMEOUT_S 10
#define HTTP_MAX_HEADERS 8192
#define HTTP_MAX_BODY 4096
#define HTTP_MAX_CONNECTIONS 256
#define HTTP_REQUEST_DEADLINE_MS 10000
#define HTTP_SWEEP_MS 100
#define HTTP_LARGE_REPLY (256 * 1024) /* bytes: once written, the heap is trimmed */
#define TEXT_PLAIN "text/plain; charset=utf-8"
#define JSON "application/json"

/* One accepted connection, in accept order. */
typedef struct http_conn {
    struct bufferevent *bev; /* with a reference of ours */
    struct evbuffer_cb_entry *watch; /* on the output buffer: replaces evhttp's error pages */
    struct evbuffer_cb_entry *scan;  /* on the input buffer: reads the framing */
    cohort_http_framing_t framing;   /* of the request arriving now */
    int64_t deadline_ms;     /* a whole request by then (INT64_MAX while one is served) */
    bool shut;               /* shut down by us; evhttp frees it */
    bool replacing;          /* evhttp's page is being replaced: drop what evhttp writes */
    void *api_origin;        /* the API request being answered (NULL: none) */
    bool api_gone_told;      /* its client closed, and callbacks.api_gone was told */
    struct http_conn *prev, *next;
    struct cohort_http *owner;
} http_conn_t;

struct cohort_http {
    struct evhttp *http;
    cohort_http_callbacks_t callbacks;
    struct event *sweep;
    http_conn_t *first, *last;
    size_t open;  /* connections in the list */
    size_t shut;  /* of those, shut down by us and not yet let go by evhttp */
    size_t max_connections;
    int64_t request_deadline_ms;
    size_t body_max;
    int64_t refused_logged_ms; /* when the last "closed the oldest" line was written */
    size_t refused_unlogged;   /* connections closed since */
    int64_t late_logged_ms;    /* the same for connections past their deadline */
    size_t late_unlogged;
};

/* ---- connections --------------------------------------------------------------------------- */

/* Shuts `c` down (evhttp then reads the end of the stream and frees the connection); false if
 * it was already, or has no socket. */
static bool conn_shut(cohort_http_t *h, http_conn_t *c)
{
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (c->shut || fd < 0)
        return false;
    shutdown(fd, SHUT_RDWR);
    c->shut = true;
    h->shut++;
    return true;
}

/* Unlinks and releases `c` (evhttp has let it go, or the listener is closing). */
static void conn_release(cohort_http_t *h, http_conn_t *c)
{
    *(c->prev ? &c->prev->next : &h->first) = c->next;
    *(c->next ? &c->next->prev : &h->last) = c->prev;
    h->open--;
    if (c->shut)
        h->shut--;
    evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->watch);
    evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->scan);
    bufferevent_decref(c->bev); /* closes the socket once evhttp has freed it too */
    free(c);
}

/* True once evhttp has freed the connection: bufferevent_free() clears every callback. */
static bool conn_let_go(const http_conn_t *c)
{
    bufferevent_data_cb r = NULL, w = NULL;
    bufferevent_event_cb e = NULL;
    bufferevent_getcb(c->bev, &r, &w, &e, NULL);
    return !r && !w && !e;
}

/* Whether the peer of `fd` closed (or reset) the connection, or there is none: a peek that
 * reads the end of the stream or an error. Bytes waiting (a pipelined request) say it is
 * still there; nothing is consumed. */
static bool peer_gone(evutil_socket_t fd)
{
    char byte;
    if (fd < 0)
        return true;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Releases the connections evhttp let go; shuts down those past their deadline; tells the API
 * of a client that left while its request waits for an answer. `newest` (being made: evhttp
 * has not set its callbacks yet) is left alone. */
static void sweep(cohort_http_t *h, int64_t now, const http_conn_t *newest)
{
    for (http_conn_t *c = h->first, *next; c; c = next) {
        next = c->next;
        if (c == newest)
            continue;
        if (conn_let_go(c)) {
            conn_release(h, c);
        } else if (now >= c->deadline_ms && conn_shut(h, c)) {
            h->late_unlogged++;
        } else if (c->api_origin && !c->api_gone_told && h->callbacks.api_gone &&
                   peer_gone(bufferevent_getfd(c->bev))) {
            c->api_gone_told = true;
            h->callbacks.api_gone(h->callbacks.arg, c->api_origin);
        }
    }
    if (h->late_unlogged && now - h->late_logged_ms >= 1000) {
        cohort_log_node(COHORT_LOG_INFO,
                        "http: closed %zu connection(s) that sent no whole request within %lld ms",
                        h->late_unlogged, (long long)h->request_deadline_ms);
        h->late_logged_ms = now;
        h->late_unlogged = 0;
    }
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    sweep(arg, cohort_clock_monotonic_ms(), NULL);
}

/* Replaces the last `added` bytes of `out` (evhttp's) with `text` (or nothing). */
static void replace_tail(http_conn_t *c, struct evbuffer *out, size_t added, const char *text,
                         size_t len)
{
    evbuffer_cb_clear_flags(out, c->watch, EVBUFFER_CB_ENABLED);
    /* A socket bufferevent freezes the front of its output but while it writes: thaw it for
     * this rewrite, then put it back as it was (a drain of 0 bytes fails only if frozen). */
    bool frozen = evbuffer_drain(out, 0) != 0;
    if (frozen)
        evbuffer_unfreeze(out, 1);
    struct evbuffer *head = evbuffer_new();
    if (head) {
        evbuffer_remove_buffer(out, head, evbuffer_get_length(out) - added);
        evbuffer_drain(out, evbuffer_get_length(out));
        evbuffer_add_buffer(out, head);
        evbuffer_free(head);
        if (text)
            evbuffer_add(out, text, len);
    }
    if (frozen)
        evbuffer_freeze(out, 1);
    evbuffer_cb_set_flags(out, c->watch, EVBUFFER_CB_ENABLED);
}

/* Copies `len` bytes of `buf` from `offset` into `out` (walking its chains: no copy of the
 * rest); false if it does not hold them. */
static bool copy_at(struct evbuffer *buf, size_t offset, char *out, size_t len)
{
    struct evbuffer_iovec few[16], *vec = few;
    int n = evbuffer_peek(buf, -1, NULL, few, 16);
    if (n > 16) { /* more pieces (replies waiting to go out): look at them all */
        if (!(vec = calloc((size_t)n, sizeof *vec)))
            return false;
        n = evbuffer_peek(buf, -1, NULL, vec, n);
    }
    for (int i = 0; i < n && len > 0; i++) {
        if (offset >= vec[i].iov_len) {
            offset -= vec[i].iov_len;
            continue;
        }
        size_t take = vec[i].iov_len - offset < len ? vec[i].iov_len - offset : len;
        memcpy(out, (const char *)vec[i].iov_base + offset, take);
        out += take;
        len -= take;
        offset = 0;
    }
    if (vec != few)
        free(vec);
    return len == 0;
}

#define AMBIGUOUS "the request's length could be read two ways: %s; the connection is closed"

/* The JSON error replacing evhttp's page with `status` (its own refusals: see the top). A
 * request the framing scan refused is a 400 saying why, whatever evhttp made of it (it calls
 * a chunk size it cannot read a 413). */
static int evhttp_page_json(const http_conn_t *c, int status, char *text, size_t len)
{
    char message[200];
    const char *code = "bad_request", *reason = "Bad Request";
    if (c->framing.fault) {
        status = 400;
        snprintf(message, sizeof message, AMBIGUOUS, c->framing.fault);
    } else if (status == 413) {
        code = "too_large";
        reason = "Payload Too Large";
        snprintf(message, sizeof message, "the body is over api_max_body (%zu bytes)",
                 c->owner->body_max);
    } else if (status == 417) {
        reason = "Expectation Failed";
        snprintf(message, sizeof message, "the only Expect understood is 100-continue");
    } else {
        snprintf(message, sizeof message,
                 "not a well-formed HTTP/1.1 request (request line, headers or body framing); "
                 "the connection is closed");
    }
    char body[300];
    int body_len = snprintf(body, sizeof body,
                            "{ \"error\" : { \"code\" : \"%s\", \"message\" : \"%s\" } }",
                            code, message);
    return snprintf(text, len,
                    "HTTP/1.1 %d %s\r\nContent-Type: " JSON "\r\nCache-Control: no-store\r\n"
                    "Connection: close\r\nContent-Length: %d\r\n\r\n%s",
                    status, reason, body_len, body);
}

/* The output buffer's callback: evhttp's error pages become the API's JSON error. evhttp
 * writes a reply's status line with one call, so it is seen whole here; one written while no
 * request of ours is being answered (deadline_ms is INT64_MAX from its arrival to its
 * answer's end), other than a 100 Continue, is evhttp's own refusal. All evhttp writes after
 * it on this connection (headers, the HTML) is dropped: the page says Connection: close, so
 * nothing else follows. */
static void watch_output(struct evbuffer *out, const struct evbuffer_cb_info *info, void *arg)
{
    http_conn_t *c = arg;
    if (!info->n_added)
        return;
    if (c->replacing) {
        replace_tail(c, out, info->n_added, NULL, 0);
        return;
    }
    char start[13];
    if (c->deadline_ms == INT64_MAX || info->n_added < sizeof start ||
        !copy_at(out, evbuffer_get_length(out) - info->n_added, start, sizeof start) ||
        memcmp(start, "HTTP/1.", 7) != 0 || start[8] != ' ' || start[12] != ' ' ||
        memcmp(start + 9, "100", 3) == 0)
        return;
    char text[600];
    int len = evhttp_page_json(c, atoi(start + 9), text, sizeof text);
    c->replacing = true;
    replace_tail(c, out, info->n_added, text, (size_t)len);
}

/* Scans `buf` from `offset` to its end for the framing of the request arriving. */
static void scan_from(http_conn_t *c, struct evbuffer *buf, size_t offset)
{
    struct evbuffer_ptr at;
    if (c->framing.state == COHORT_FRAMING_DONE ||
        evbuffer_ptr_set(buf, &at, offset, EVBUFFER_PTR_SET) != 0)
        return;
    struct evbuffer_iovec vec[8];
    int n;
    while ((n = evbuffer_peek(buf, -1, &at, vec, 8)) > 0) {
        size_t seen = 0;
        for (int i = 0; i < n && i < 8; i++) {
            cohort_http_framing_scan(&c->framing, vec[i].iov_base, vec[i].iov_len);
            seen += vec[i].iov_len;
        }
        if (n <= 8 || evbuffer_ptr_set(buf, &at, seen, EVBUFFER_PTR_ADD) != 0)
            break;
    }
}

/* The input buffer's callback: the bytes just read, before evhttp parses them. */
static void watch_input(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
    if (info->n_added)
        scan_from(arg, in, evbuffer_get_length(in) - info->n_added);
}

/* Past the cap: the oldest connections not yet shut down go, leaving room for `newest`;
 * those with a request being answered stay (a reply on its way, a long wait for work). If
 * every other one is being answered, `newest` itself goes, at the next sweep (it has no
 * socket yet). */
static void make_room(cohort_http_t *h, http_conn_t *newest)
{
    if (h->open - h->shut <= h->max_connections)
        return;
    int64_t now = cohort_clock_monotonic_ms();
    sweep(h, now, newest); /* first those evhttp let go already */
    size_t closed = 0;
    for (http_conn_t *c = h->first; c && c != newest && h->open - h->shut > h->max_connections;
         c = c->next)
        if (c->deadline_ms != INT64_MAX)
            closed += conn_shut(h, c);
    if (h->open - h->shut > h->max_connections) {
        newest->deadline_ms = now;
        closed++;
    }
    h->refused_unlogged += closed;
    if (h->refused_unlogged && now - h->refused_logged_ms >= 1000) {
        cohort_log_node(COHORT_LOG_WARN,
                        "http: %zu connections open, over http_max_connections = %zu: closed "
                        "%zu (the oldest idle ones; the new one if all are busy)",
                        h->open, h->max_connections, h->refused_unlogged);
        h->refused_logged_ms = now;
        h->refused_unlogged = 0;
    }
}

/* evhttp's bufferevent for each new connection: made here, so the listener counts it. */
static struct bufferevent *on_connection(struct event_base *base, void *arg)
{
    cohort_http_t *h = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    http_conn_t *c = bev ? calloc(1, sizeof *c) : NULL;
    if (c) {
        c->watch = evbuffer_add_cb(bufferevent_get_output(bev), watch_output, c);
        c->scan = evbuffer_add_cb(bufferevent_get_input(bev), watch_input, c);
    }
    if (!c || !c->watch || !c->scan) {
        if (c && c->watch)
            evbuffer_remove_cb_entry(bufferevent_get_output(bev), c->watch);
        free(c); /* evhttp still serves it, uncounted (and unchecked): memory is short */
        return bev;
    }
    bufferevent_incref(bev);
    c->bev = bev;
    c->owner = h;
    c->deadline_ms = cohort_clock_monotonic_ms() + h->request_deadline_ms;
    c->prev = h->last;
    *(h->last ? &h->last->next : &h->first) = c;
    h->last = c;
    h->open++;
    make_room(h, c);
    return bev;
}

static http_conn_t *conn_of(cohort_http_t *h, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    for (http_conn_t *c = h->last; bev && c; c = c->prev)
        if (c->bev == bev)
            return c;
    return NULL;
}

/* A request answered: the connection has a new deadline for its next one, whose bytes (all
 * evhttp has not read yet) are scanned afresh. */
static void on_complete(struct evhttp_request *req, void *arg)
{
    cohort_http_t *h = arg;
    http_conn_t *c = conn_of(h, req);
    if (!c)
        return;
    c->deadline_ms = cohort_clock_monotonic_ms() + h->request_deadline_ms;
    c->api_origin = NULL;
    c->api_gone_told = false;
    cohort_http_framing_reset(&c->framing);
    scan_from(c, bufferevent_get_input(c->bev), 0);
}

/* A whole request arrived: no deadline while it is served; *conn gets its connection (NULL:
 * uncounted). Why its length is ambiguous (http_framing.h), or NULL. */
static const char *request_begins(cohort_http_t *h, struct evhttp_request *req,
                                  http_conn_t **conn)
{
    http_conn_t *c = conn_of(h, req);
    *conn = c;
    if (c) {
        c->deadline_ms = INT64_MAX;
        evhttp_request_set_on_complete_cb(req, on_complete, h);
        if (c->framing.fault)
            return c->framing.fault;
    }
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    return cohort_http_framing_fault(evhttp_request_get_input_headers(req),
                                     method == EVHTTP_REQ_HEAD || method == EVHTTP_REQ_TRACE);
}

/* ---- answers ------------------------------------------------------------------------------- */

/* Sends `buf` (freed here) as the body; none to HEAD (evhttp would send it too). */
static void send_body(struct evhttp_request *req, int code, const char *reason,
                      const char *content_type, struct evbuffer *buf)
{
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
    evhttp_add_header(headers, "Content-Type", content_type);
    evhttp_add_header(headers, "Cache-Control", "no-store");
    bool head = evhttp_request_get_command(req) == EVHTTP_REQ_HEAD;
    evhttp_send_reply(req, code, reason, head ? NULL : buf);
    evbuffer_free(buf);
}

static void reply(struct evhttp_request *req, int code, const char *reason,
                  const char *content_type, const char *body, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    if (!buf || evbuffer_add(buf, body, len) != 0) {
        if (buf)
            evbuffer_free(buf);
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    send_body(req, code, reason, content_type, buf);
}

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
    reply(req, code, reason, TEXT_PLAIN, text, strlen(text));
}

/* The JSON 400 for a request whose length is ambiguous (`why`); the connection closes after
 * it, so nothing after the request on it is read as another. */
static void refuse_framing(struct evhttp_request *req, const char *why)
{
    char body[400];
    int len = snprintf(body, sizeof body,
                       "{ \"error\" : { \"code\" : \"bad_request\", \"message\" : \"" AMBIGUOUS
                       "\" } }",
                       why);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
    reply(req, HTTP_BADREQUEST, "Bad Request", JSON, body, (size_t)len);
}

static void serve_ready(cohort_http_t *h, struct evhttp_request *req)
{
    char why[256] = "";
    if (h->callbacks.ready(h->callbacks.arg, why, sizeof why)) {
        reply_text(req, HTTP_OK, "OK", "ready\n");
        return;
    }
    char body[300];
    snprintf(body, sizeof body, "not ready: %s\n", why[0] ? why : "unknown reason");
    reply_text(req, 503, "Service Unavailable", body);
}

static void serve_metrics(cohort_http_t *h, struct evhttp_request *req)
{
    size_t len = 0;
    char *text = h->callbacks.metrics(h->callbacks.arg, &len);
    if (!text) {
        reply_text(req, HTTP_INTERNAL, "Internal Server Error", "cannot render the metrics\n");
        return;
    }
    reply(req, HTTP_OK, "OK", COHORT_METRICS_CONTENT_TYPE, text, len);
    free(text);
}

static const char *method_name(enum evhttp_cmd_type method)
{
    switch (method) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    default:
        return "OTHER";
    }
}

bool cohort_http_api_client_gone(void *origin)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(origin);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    return peer_gone(bev ? bufferevent_getfd(bev) : -1);
}

/* An API reply's text, freed once written. After a large one the heap is trimmed: glibc
 * keeps freed memory (it raises its mmap threshold after freeing a large block), and a node
 * that answered one 30 MB reply would otherwise hold that much for good. */
static void free_written(const void *data, size_t len, void *arg)
{
    (void)arg;
    bson_free((void *)data);
#ifdef __GLIBC__
    if (len >= HTTP_LARGE_REPLY)
        malloc_trim(0);
#else
    (void)len;
#endif
}

bool cohort_http_api_reply(void *origin, const cohort_api_reply_t *answer)
{
    struct evhttp_request *req = origin;
    bool there = !cohort_http_api_client_gone(origin);
    if (answer->allow)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", answer->allow);
    if (answer->set_cookie[0])
        evhttp_add_header(evhttp_request_get_output_headers(req), "Set-Cookie",
                          answer->set_cookie);
    if (answer->raw) { /* static bytes (the API's document): no copy, nothing to free */
        struct evbuffer *raw = evbuffer_new();
        if (!raw || evbuffer_add_reference(raw, answer->raw, answer->raw_len, NULL, NULL) != 0) {
            if (raw)
                evbuffer_free(raw);
            reply_text(req, HTTP_INTERNAL, "Internal Server Error", "cannot send the reply\n");
            return false;
        }
        send_body(req, answer->status, NULL, answer->content_type, raw);
        return there;
    }
    size_t text_len = 0;
    char *text = bson_as_relaxed_extended_json(&answer->body, &text_len);
    /* The text itself goes out (no copy); free_written() frees it once written. */
    struct evbuffer *buf = text ? evbuffer_new() : NULL;
    if (!buf || evbuffer_add_reference(buf, text, text_len, free_written, NULL) != 0) {
        bson_free(text);
        if (buf)
            evbuffer_free(buf);
        reply_text(req, HTTP_INTERNAL, "Internal Server Error", "cannot render the reply\n");
        return false;
    }
    send_body(req, answer->status, NULL, JSON, buf); /* frees `req` if the client left */
    return there;
}

/* /api/...: the request as the API reads it, handed on; its reply comes back through
 * cohort_http_api_reply(), perhaps later (the API's threads, a held claim). */
static void serve_api(cohort_http_t *h, struct evhttp_request *req, const struct evhttp_uri *uri)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(body);
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    cohort_api_request_t request = {
        /* HEAD is GET without the body (reply() leaves it out) */
        .method = method_name(method == EVHTTP_REQ_HEAD ? EVHTTP_REQ_GET : method),
        .path = evhttp_uri_get_path(uri),
        .query = evhttp_uri_get_query(uri),
        .authorization = evhttp_find_header(in, "Authorization"),
        .idempotency_key = evhttp_find_header(in, "Idempotency-Key"),
        .cookie = evhttp_find_header(in, "Cookie"),
        .sec_fetch_site = evhttp_find_header(in, "Sec-Fetch-Site"),
        .origin_header = evhttp_find_header(in, "Origin"),
        .host = evhttp_find_header(in, "Host"),
        .body = len ? (const char *)evbuffer_pullup(body, -1) : "",
        .body_len = len,
    };
    h->callbacks.api(h->callbacks.arg, &request, req);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    cohort_http_t *h = arg;
    http_conn_t *c = NULL;
    const char *ambiguous = request_begins(h, req, &c);
    if (ambiguous) {
        refuse_framing(req, ambiguous);
        return;
    }
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (path && h->callbacks.api && strncmp(path, "/api/", 5) == 0) {
        if (c)
            c->api_origin = req; /* until answered (on_complete) */
        serve_api(h, req, uri);
        return;
    }
    if (cohort_ui_path(path)) { /* the dashboard's static files (node/http/ui.h) */
        cohort_ui_serve(req, path);
        return;
    }
    enum { HEALTHZ, READYZ, METRICS, NONE } route = NONE;
    if (path && strcmp(path, "/healthz") == 0)
        route = HEALTHZ;
    else if (path && strcmp(path, "/readyz") == 0)
        route = READYZ;
    else if (path && strcmp(path, "/metrics") == 0)
        route = METRICS;
    if (route == NONE) {
        reply_text(req, HTTP_NOTFOUND, "Not Found",
                   "not found: the paths are /healthz, /readyz and /metrics\n");
        return;
    }
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        reply_text(req, HTTP_BADMETHOD, "Method Not Allowed", "method not allowed: use GET\n");
        return;
    }
    switch (route) {
    case HEALTHZ:
        reply_text(req, HTTP_OK, "OK", "ok\n");
        break;
    case READYZ:
        serve_ready(h, req);
        break;
    case METRICS:
        serve_metrics(h, req);
        break;
    case NONE:
        break;
    }
}

cohort_http_t *cohort_http_start(struct event_base *base, const char *listen,
                                 const cohort_http_callbacks_t *callbacks, bson_error_t *error)
{
    cohort_address_t address;
    if (!cohort_address_parse(listen, &address, error)) {
        cohort_error_prefix(error, "http_listen = ");
        return NULL;
    }
    cohort_http_t *h = calloc(1, sizeof *h);
    if (!h || !(h->http = evhttp_new(base)) ||
        !(h->sweep = event_new(base, -1, EV_PERSIST, on_sweep, h))) {
        if (h && h->http)
            evhttp_free(h->http);
        free(h);
        bson_set_error(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_NO_MEMORY,
                       "http_listen = '%s': out of memory", listen);
        return NULL;
    }
    h->callbacks = *callbacks;
    h->max_connections = callbacks->max_connections ? callbacks->max_connections
                                                    : HTTP_MAX_CONNECTIONS;
    h->request_deadline_ms = callbacks->request_deadline_ms > 0 ? callbacks->request_deadline_ms
                                                                : HTTP_REQUEST_DEADLINE_MS;
    h->body_max = callbacks->api_max_body ? callbacks->api_max_body : HTTP_MAX_BODY;
#ifdef __GLIBC__
    /* Large blocks (a reply's text, a batch of tasks read for it) in their own mappings,
     * returned to the system when freed: glibc would otherwise raise this threshold after the
     * first large free and keep every later one in its heap. */
    mallopt(M_MMAP_THRESHOLD, HTTP_LARGE_REPLY);
#endif
    /* Every method reaches on_request, which answers 405 itself (evhttp would say 501). */
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                            EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_timeout(h->http, HTTP_TIMEOUT_S);
    evhttp_set_max_headers_size(h->http, HTTP_MAX_HEADERS);
    evhttp_set_max_body_size(h->http, h->body_max);
    evhttp_set_bevcb(h->http, on_connection, h);
    evhttp_set_gencb(h->http, on_request, h);
    struct timeval every = {0, HTTP_SWEEP_MS * 1000};
    event_add(h->sweep, &every);
    /* Our own listener, for its backlog: evhttp_bind_socket() listens with 128, and a burst
     * of connections past that (SYNs dropped, retried a second later) would keep a health
     * check waiting even while the loop is free. SOMAXCONN (-1) lets the kernel queue them. */
    errno = 0;
    struct evconnlistener *listener = evconnlistener_new_bind(
        base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE, -1,
        (struct sockaddr *)&address.sa, address.sa_len);
    if (!listener || !evhttp_bind_listener(h->http, listener)) {
        int saved = errno;
        if (listener)
            evconnlistener_free(listener);
        bson_set_error(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_IO,
                       "http_listen = '%s': cannot listen on it: %s", listen,
                       saved ? strerror(saved) : "address not available");
        cohort_http_destroy(h);
        return NULL;
    }
    return h;
}

size_t cohort_http_connections(const cohort_http_t *h)
{
    return h->open - h->shut;
}

void cohort_http_destroy(cohort_http_t *h)
{
    if (!h)
        return;
    event_free(h->sweep);
    evhttp_free(h->http); /* frees every connection: only our references are left */
    while (h->first)
        conn_release(h, h->first);
    free(h);
}
