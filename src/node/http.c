/*
 * http.c - the node's HTTP listener on evhttp (see http.h for the routes).
 *
 * Requests are small and answered at once from memory (the metrics text is a few KiB per
 * service), so one loop serves them between ticks. Header and body sizes and idle
 * connections are bounded, so a misbehaving client costs little.
 */
#include "node/http.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/address.h"
#include "core/error.h"
#include "node/metrics.h"
#include "node/ui.h"

#define HTTP_TIMEOUT_S 10
#define HTTP_MAX_HEADERS 8192
#define HTTP_MAX_BODY 4096
#define TEXT_PLAIN "text/plain; charset=utf-8"
#define JSON "application/json"

struct cohort_http {
    struct evhttp *http;
    cohort_http_callbacks_t callbacks;
};

static void reply(struct evhttp_request *req, int code, const char *reason,
                  const char *content_type, const char *body, size_t len)
{
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
    evhttp_add_header(headers, "Content-Type", content_type);
    evhttp_add_header(headers, "Cache-Control", "no-store");
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        evhttp_send_reply(req, code, reason, NULL); /* evhttp would send the body too */
        return;
    }
    struct evbuffer *buf = evbuffer_new();
    if (!buf || evbuffer_add(buf, body, len) != 0) {
        if (buf)
            evbuffer_free(buf);
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    evhttp_send_reply(req, code, reason, buf);
    evbuffer_free(buf);
}

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
    reply(req, code, reason, TEXT_PLAIN, text, strlen(text));
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

void cohort_http_api_reply(void *origin, const cohort_api_reply_t *answer)
{
    struct evhttp_request *req = origin;
    if (answer->allow)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", answer->allow);
    if (answer->set_cookie[0])
        evhttp_add_header(evhttp_request_get_output_headers(req), "Set-Cookie",
                          answer->set_cookie);
    size_t text_len = 0;
    char *text = bson_as_relaxed_extended_json(&answer->body, &text_len);
    if (!text) {
        reply_text(req, HTTP_INTERNAL, "Internal Server Error", "cannot render the reply\n");
        return;
    }
    reply(req, answer->status, NULL, JSON, text, text_len);
    bson_free(text);
}

/* /api/...: the request as the API reads it, handed on; its reply comes back through
 * cohort_http_api_reply(), perhaps later (the API's threads, a held claim). */
static void serve_api(cohort_http_t *h, struct evhttp_request *req, const struct evhttp_uri *uri)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(body);
    cohort_api_request_t request = {
        .method = method_name(evhttp_request_get_command(req)),
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
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (path && h->callbacks.api && strncmp(path, "/api/", 5) == 0) {
        serve_api(h, req, uri);
        return;
    }
    if (cohort_ui_path(path)) { /* the dashboard's static files (node/ui.h) */
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
    if (!h || !(h->http = evhttp_new(base))) {
        free(h);
        cohort_error_set(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_NO_MEMORY,
                         "http_listen = '%s': out of memory", listen);
        return NULL;
    }
    h->callbacks = *callbacks;
    /* Every method reaches on_request, which answers 405 itself (evhttp would say 501). */
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                            EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_timeout(h->http, HTTP_TIMEOUT_S);
    evhttp_set_max_headers_size(h->http, HTTP_MAX_HEADERS);
    evhttp_set_max_body_size(h->http, callbacks->api_max_body ? callbacks->api_max_body
                                                              : HTTP_MAX_BODY);
    evhttp_set_gencb(h->http, on_request, h);
    errno = 0;
    if (!evhttp_bind_socket_with_handle(h->http, address.host, address.port)) {
        int saved = errno;
        cohort_error_set(error, COHORT_DOMAIN_SYSTEM, COHORT_CODE_IO,
                         "http_listen = '%s': cannot listen on it: %s", listen,
                         saved ? strerror(saved) : "address not available");
        cohort_http_destroy(h);
        return NULL;
    }
    return h;
}

void cohort_http_destroy(cohort_http_t *h)
{
    if (!h)
        return;
    evhttp_free(h->http);
    free(h);
}
