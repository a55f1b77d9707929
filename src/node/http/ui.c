/*
 * ui.c - serves the dashboard's embedded files (see ui.h).
 *
 * The table is small and fixed at build time, so a lookup is a scan of it; nothing here
 * touches the database or allocates beyond the reply buffer, and any path that is not in
 * the table is a 404 (no file system, so no traversal).
 */
#include "node/http/ui.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <string.h>

#define UI_PREFIX "/ui/"

const cohort_ui_asset_t *cohort_ui_find(const char *path)
{
    if (!path || strncmp(path, UI_PREFIX, strlen(UI_PREFIX)) != 0)
        return NULL;
    const char *name = path + strlen(UI_PREFIX);
    if (!*name)
        name = "index.html";
    else if (strcmp(name, "login") == 0)
        name = "login.html";
    for (size_t i = 0; i < cohort_ui_asset_count; i++)
        if (strcmp(cohort_ui_assets[i].name, name) == 0)
            return &cohort_ui_assets[i];
    return NULL;
}

const char *cohort_ui_content_type(const char *name)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".json", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
        {".md", "text/plain; charset=utf-8"},
    };
    const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    if (strcmp(base, "LICENSE") == 0) /* a vendored library's licence */
        return "text/plain; charset=utf-8";
    const char *dot = strrchr(name, '.');
    if (dot && !strchr(dot, '/'))
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (strcmp(dot, types[i].ext) == 0)
                return types[i].type;
    return "application/octet-stream";
}

bool cohort_ui_etag_matches(const char *if_none_match, const char *etag)
{
    if (!if_none_match)
        return false;
    /* A list of entity tags, each perhaps weak (W/"..."): a weak match is enough here. */
    const char *p = if_none_match;
    size_t n = strlen(etag);
    while (*p) {
        p += strspn(p, " \t,");
        if (*p == '*')
            return true;
        if (strncmp(p, "W/", 2) == 0)
            p += 2;
        if (strncmp(p, etag, n) == 0 && (p[n] == '\0' || p[n] == ',' || p[n] == ' ' ||
                                         p[n] == '\t'))
            return true;
        p += strcspn(p, ",");
    }
    return false;
}

bool cohort_ui_path(const char *path)
{
    return path && strncmp(path, "/ui", 3) == 0 && (path[3] == '\0' || path[3] == '/');
}

static void add_security_headers(struct evkeyvalq *out)
{
    evhttp_add_header(out, "Content-Security-Policy", COHORT_UI_CSP);
    evhttp_add_header(out, "X-Content-Type-Options", "nosniff");
    evhttp_add_header(out, "X-Frame-Options", "DENY");
    /* The login URL carries a one-time code: never let it leave in a Referer. */
    evhttp_add_header(out, "Referrer-Policy", "no-referrer");
}

static void reply_text(struct evhttp_request *req, int code, const char *reason,
                       const char *text)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "Content-Type", "text/plain; charset=utf-8");
    evhttp_add_header(out, "Cache-Control", "no-store");
    add_security_headers(out);
    struct evbuffer *buf = evbuffer_new();
    if (buf && evhttp_request_get_command(req) != EVHTTP_REQ_HEAD)
        evbuffer_add(buf, text, strlen(text));
    evhttp_send_reply(req, code, reason, buf);
    if (buf)
        evbuffer_free(buf);
}

void cohort_ui_serve(struct evhttp_request *req, const char *path)
{
    enum evhttp_cmd_type method = evhttp_request_get_command(req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD) {
        evhttp_add_header(out, "Allow", "GET, HEAD");
        reply_text(req, HTTP_BADMETHOD, "Method Not Allowed", "method not allowed: use GET\n");
        return;
    }
    if (strcmp(path, "/ui") == 0) {
        evhttp_add_header(out, "Location", UI_PREFIX);
        reply_text(req, HTTP_MOVEPERM, "Moved Permanently", "see /ui/\n");
        return;
    }
    const cohort_ui_asset_t *asset = cohort_ui_find(path);
    if (!asset) {
        reply_text(req, HTTP_NOTFOUND, "Not Found", "not found: the dashboard is at /ui/\n");
        return;
    }
    evhttp_add_header(out, "ETag", asset->etag);
    evhttp_add_header(out, "Cache-Control", "no-cache");
    add_security_headers(out);
    const char *inm = evhttp_find_header(evhttp_request_get_input_headers(req), "If-None-Match");
    if (cohort_ui_etag_matches(inm, asset->etag)) {
        evhttp_send_reply(req, HTTP_NOTMODIFIED, "Not Modified", NULL);
        return;
    }
    evhttp_add_header(out, "Content-Type", cohort_ui_content_type(asset->name));
    if (method == EVHTTP_REQ_HEAD) {
        char len[32];
        snprintf(len, sizeof len, "%zu", asset->len);
        evhttp_add_header(out, "Content-Length", len);
        evhttp_send_reply(req, HTTP_OK, "OK", NULL);
        return;
    }
    struct evbuffer *buf = evbuffer_new();
    /* The bytes are static for the life of the process: no copy. */
    if (!buf || evbuffer_add_reference(buf, asset->bytes, asset->len, NULL, NULL) != 0) {
        if (buf)
            evbuffer_free(buf);
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    evhttp_send_reply(req, HTTP_OK, "OK", buf);
    evbuffer_free(buf);
}
