/*
 * ui.h - the dashboard's static files under /ui/ on http_listen (docs/UI.md).
 *
 *   GET|HEAD /ui        301 to /ui/
 *   GET|HEAD /ui/       index.html (the pages route by the URL's #fragment)
 *   GET|HEAD /ui/login  login.html (a one-time code from `cohortctl ui-link`, or a token)
 *   GET|HEAD /ui/NAME   the embedded file NAME; 404 for any other
 *
 * Every answer carries the Content-Type of its extension, an ETag (a 304 when If-None-Match
 * names it), Cache-Control: no-cache (revalidate each time: a new binary serves new files at
 * once), a strict Content-Security-Policy (only this origin's scripts, styles and fetches;
 * no inline script; no framing) and X-Content-Type-Options: nosniff. The files are public:
 * they hold no data; every datum comes from /api/v1 under the caller's token or session.
 * C renders no HTML here.
 */
#ifndef COHORT_UI_H
#define COHORT_UI_H

#include <stdbool.h>

#include "node/http/ui_assets.h"

struct evhttp_request;

#define COHORT_UI_CSP                                                                      \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "      \
    "connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; "           \
    "frame-ancestors 'none'"

/* The embedded file a path under /ui/ names ("/ui/" is index.html, "/ui/login"
 * login.html), or NULL. */
const cohort_ui_asset_t *cohort_ui_find(const char *path);

/* The Content-Type of a file by its extension ("application/octet-stream" if unknown). */
const char *cohort_ui_content_type(const char *name);

/* Whether an If-None-Match header (may be NULL) names `etag` (or is "*"). */
bool cohort_ui_etag_matches(const char *if_none_match, const char *etag);

/* Whether `path` is /ui or under /ui/ (http.c's route hook). */
bool cohort_ui_path(const char *path);

/* Answers `req` for `path` (a cohort_ui_path()), on the loop thread. */
void cohort_ui_serve(struct evhttp_request *req, const char *path);

#endif
