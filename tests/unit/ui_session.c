/*
 * ui_session.c - the pure parts of the dashboard's sessions (node/http/api_session.h, api_ui.h):
 * finding the session cookie among others, judging whether a request comes from the same
 * origin, and which paths the dashboard's endpoints claim (and refuse) before the API's own
 * router sees them.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "node/http/api_session.h"
#include "node/http/api_ui.h"

Test(ui_session, finds_the_cookie_among_others)
{
    char out[64];
    cr_assert(cohort_api_session_cookie("cohort_session=cht_abc", out, sizeof out));
    cr_assert_str_eq(out, "cht_abc");
    cr_assert(cohort_api_session_cookie("a=1; cohort_session=cht_x; b=2", out, sizeof out));
    cr_assert_str_eq(out, "cht_x");
    cr_assert(cohort_api_session_cookie("a=1;cohort_session=cht_y ", out, sizeof out));
    cr_assert_str_eq(out, "cht_y");
    cr_assert_not(cohort_api_session_cookie(NULL, out, sizeof out));
    cr_assert_not(cohort_api_session_cookie("", out, sizeof out));
    cr_assert_not(cohort_api_session_cookie("xcohort_session=cht_z", out, sizeof out));
    cr_assert_not(cohort_api_session_cookie("cohort_session=", out, sizeof out));
    cr_assert_not(cohort_api_session_cookie("cohort_sessionx=cht_z", out, sizeof out));
    char tiny[4];
    cr_assert_not(cohort_api_session_cookie("cohort_session=cht_long", tiny, sizeof tiny),
                  "a value that does not fit is refused, not cut");
}

static cohort_api_request_t req(const char *site, const char *origin, const char *host)
{
    return (cohort_api_request_t){
        .method = "POST", .sec_fetch_site = site, .origin_header = origin, .host = host};
}

Test(ui_session, same_origin_by_fetch_metadata_or_origin)
{
    cohort_api_request_t r = req("same-origin", NULL, NULL);
    cr_assert(cohort_api_same_origin(&r));
    r = req("same-site", NULL, NULL);
    cr_assert_not(cohort_api_same_origin(&r));
    r = req("cross-site", "http://127.0.0.1:9464", "127.0.0.1:9464");
    cr_assert_not(cohort_api_same_origin(&r), "Sec-Fetch-Site wins over a matching Origin");
    r = req("none", NULL, NULL);
    cr_assert_not(cohort_api_same_origin(&r));
    r = req(NULL, "http://127.0.0.1:9464", "127.0.0.1:9464");
    cr_assert(cohort_api_same_origin(&r));
    r = req(NULL, "https://Cohort.example", "cohort.example");
    cr_assert(cohort_api_same_origin(&r));
    r = req(NULL, "http://127.0.0.1:9465", "127.0.0.1:9464");
    cr_assert_not(cohort_api_same_origin(&r), "another port is another origin");
    r = req(NULL, "null", "127.0.0.1:9464");
    cr_assert_not(cohort_api_same_origin(&r));
    r = req(NULL, "http://evil.example/127.0.0.1:9464", "127.0.0.1:9464");
    cr_assert_not(cohort_api_same_origin(&r));
    r = req(NULL, NULL, "127.0.0.1:9464");
    cr_assert_not(cohort_api_same_origin(&r), "neither header: refused");
    r = req(NULL, "http://127.0.0.1:9464", NULL);
    cr_assert_not(cohort_api_same_origin(&r));
}

Test(ui_session, the_dashboards_paths)
{
    cr_assert(cohort_api_session_path("/api/v1/session"));
    cr_assert_not(cohort_api_session_path("/api/v1/session/x"));
    cr_assert_not(cohort_api_session_path(NULL));
    cr_assert(cohort_api_ui_owns("/api/v1/whoami"));
    cr_assert(cohort_api_ui_owns("/api/v1/nodes"));
    cr_assert(cohort_api_ui_owns("/api/v1/audit"));
    cr_assert(cohort_api_ui_owns("/api/v1/services/web/history"));
    cr_assert(cohort_api_ui_owns("/api/v1/services/web/batches"));
    cr_assert_not(cohort_api_ui_owns("/api/v1/services/web/tasks"));
    cr_assert_not(cohort_api_ui_owns("/api/v1/services/a/b/history"));
    cr_assert_not(cohort_api_ui_owns("/api/v1/services//history"));
    cohort_api_route_t route;
    cohort_api_error_t err;
    cr_assert(cohort_api_ui_route("GET", "/api/v1/services/web/history", &route, &err));
    cr_assert_eq(route.endpoint, COHORT_API_HISTORY);
    cr_assert_str_eq(route.service, "web");
    cr_assert(cohort_api_ui_route("GET", "/api/v1/whoami", &route, &err));
    cr_assert_eq(route.scope, 0u);
    cr_assert_not(cohort_api_ui_route("POST", "/api/v1/nodes", &route, &err));
    cr_assert_eq(err.status, 405);
    cr_assert_str_eq(route.allow, "GET");
    cr_assert_not(cohort_api_ui_route("GET", "/api/v1/services/..%2f/history", &route, &err));
    cr_assert_eq(err.status, 400);
    char longer[128]; /* a name of 65 characters */
    snprintf(longer, sizeof longer, "/api/v1/services/%065d/batches", 0);
    cr_assert_not(cohort_api_ui_route("GET", longer, &route, &err));
    cr_assert_eq(err.status, 400);
}
