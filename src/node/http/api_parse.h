/*
 * api_parse.h - reading HTTP API requests: the route from the method and path, the query
 * string, and every JSON body. Pure functions (no database, no network), so the fuzz target
 * (tests/fuzz/fuzz_api.c) drives them directly.
 *
 * Every refusal is a cohort_api_error_t: the HTTP status, a stable code, and a message that
 * names the field at fault ("field 'tasks[3].priority': ...").
 */
#ifndef COHORT_API_PARSE_H
#define COHORT_API_PARSE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/jsondoc.h"
#include "core/taskopts.h"
#include "store/claims.h"
#include "store/leases.h"
#include "store/queue_counts.h"
#include "store/requests.h"

#define COHORT_API_LIST_DEFAULT 50
#define COHORT_API_LIST_MAX 500
#define COHORT_API_COUNTS_LIMIT_DEFAULT 50
#define COHORT_API_COUNTS_LIMIT_MAX COHORT_COUNTS_VALUES_MAX
/* A page of tasks ends early (with `next`) once its items reach this many bytes of BSON; it
 * holds at least one task, whatever its size. */
#define COHORT_API_PAGE_BYTES (1024 * 1024)
#define COHORT_API_BATCH_MAX 1000
#define COHORT_API_KEY_MAX 256   /* Idempotency-Key */
#define COHORT_API_REASON_MAX 1000

/* A request as the API reads it, and its answer (http.c converts from and to evhttp). */
typedef struct cohort_api_request {
    const char *method;          /* "GET", "POST", ... */
    const char *path;            /* as sent (not decoded), without the query */
    const char *query;           /* NULL: none */
    const char *authorization;   /* the Authorization header, NULL if absent */
    const char *idempotency_key; /* the Idempotency-Key header, NULL if absent */
    const char *body;            /* may hold anything; not NUL-terminated */
    size_t body_len;
    bool again; /* a held claim run again (api_pool.h): the worker is registered already */
    /* For the dashboard's session cookie (node/http/api_session.h); each NULL if absent. */
    const char *cookie;         /* the Cookie header */
    const char *sec_fetch_site; /* Sec-Fetch-Site */
    const char *origin_header;  /* Origin */
    const char *host;           /* Host */
} cohort_api_request_t;

typedef struct cohort_api_reply {
    int status;
    bson_t body; /* the JSON document to send; cohort_api_handle() initialises it, the
                    caller destroys it */
    const char *allow; /* for a 405: the Allow header (static text); else NULL */
    /* > 0: a claim that found nothing and may wait this long: hold the request and run it
     * again on work for `held_service` (api_pool.h); the body is the reply if none comes. */
    int64_t hold_ms;
    char held_service[65];
    char wake[65]; /* "" or a service whose queue gained tasks: its held claims run again */
    /* A claim that handed out tasks (all under one claim token): if the reply cannot be
     * delivered, they are given back (cohort_api_give_back()). service "": none. */
    struct {
        char service[65];
        char worker[65];
        char token[COHORT_CLAIM_TOKEN_SIZE];
    } claimed;
    char set_cookie[256]; /* "" or a Set-Cookie header (the dashboard's session) */
    /* Not NULL: send these bytes (static, never freed) as `content_type` instead of `body`
     * (GET /api/v1/openapi.yaml). */
    const unsigned char *raw;
    size_t raw_len;
    const char *content_type;
} cohort_api_reply_t;

/* An error reply: {"error": {"code": code, "message": message}} with `status`. */
typedef struct cohort_api_error {
    int status;
    const char *code; /* static text: "bad_request", "not_found", ... */
    char message[512];
} cohort_api_error_t;

/* Starts `it` on a request body; false with a 400 ("the body is not a valid document") if
 * libbson cannot iterate it. */
bool cohort_api_body_iter(const bson_t *body, bson_iter_t *it, cohort_api_error_t *err);

/* Fills `err` and returns false. */
bool cohort_api_fail(cohort_api_error_t *err, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

typedef enum cohort_api_endpoint {
    COHORT_API_SERVICES,     /* GET  /api/v1/services */
    COHORT_API_TASKS_LIST,   /* GET  /api/v1/services/{svc}/tasks */
    COHORT_API_TASKS_CREATE, /* POST /api/v1/services/{svc}/tasks */
    COHORT_API_TASKS_BATCH,  /* POST /api/v1/services/{svc}/tasks:batch */
    COHORT_API_TASK,         /* GET  /api/v1/services/{svc}/tasks/{id} */
    COHORT_API_COUNTS,       /* GET  /api/v1/services/{svc}/counts */
    COHORT_API_PAUSE,        /* POST /api/v1/services/{svc}/pause */
    COHORT_API_RESUME,       /* POST /api/v1/services/{svc}/resume */
    COHORT_API_CLAIMS,       /* POST /api/v1/services/{svc}/claims (external workers) */
    COHORT_API_LEASE_HEARTBEAT, /* POST /api/v1/leases/{token}/heartbeat */
    COHORT_API_LEASE_SUCCEED,   /* POST /api/v1/leases/{token}/succeed */
    COHORT_API_LEASE_FAIL,      /* POST /api/v1/leases/{token}/fail */
    COHORT_API_LEASE_RELEASE,   /* POST /api/v1/leases/{token}/release */
    COHORT_API_SCHEDULES,    /* GET  /api/v1/services/{svc}/schedules */
    COHORT_API_SCHEDULE_PAUSE,  /* POST /api/v1/services/{svc}/schedules/{id}/pause */
    COHORT_API_SCHEDULE_RESUME, /* POST /api/v1/services/{svc}/schedules/{id}/resume */
    /* operators' changes (api_ops.c) */
    COHORT_API_TASK_RETRY,     /* POST   /api/v1/services/{svc}/tasks/{id}/retry */
    COHORT_API_TASK_CANCEL,    /* POST   /api/v1/services/{svc}/tasks/{id}/cancel */
    COHORT_API_TASK_DELETE,    /* DELETE /api/v1/services/{svc}/tasks/{id} */
    COHORT_API_TASKS_BULK,     /* POST   /api/v1/services/{svc}/tasks:bulk */
    COHORT_API_SETTINGS,       /* GET    /api/v1/services/{svc}/settings */
    COHORT_API_SETTINGS_WRITE, /* PATCH (or POST) /api/v1/services/{svc}/settings */
    /* The dashboard's (node/http/api_ui.h routes them) */
    COHORT_API_WHOAMI, /* GET /api/v1/whoami */
    COHORT_API_NODES,  /* GET /api/v1/nodes */
    COHORT_API_HISTORY, /* GET /api/v1/services/{svc}/history */
    COHORT_API_KINDS,   /* GET /api/v1/services/{svc}/kinds */
    COHORT_API_HISTORY_HOURS, /* GET /api/v1/services/{svc}/history/hours */
    COHORT_API_AUDIT,   /* GET /api/v1/audit */
    COHORT_API_BATCHES, /* GET /api/v1/services/{svc}/batches */
    COHORT_API_DUE,     /* GET /api/v1/services/{svc}/due */
    COHORT_API_BLOCK,   /* POST /api/v1/services/{svc}/block */
    COHORT_API_UNBLOCK, /* POST /api/v1/services/{svc}/unblock */
    COHORT_API_OPENAPI, /* GET /api/v1/openapi.yaml (node/http/api.c) */
    COHORT_API_SESSION, /* POST|DELETE /api/v1/session (node/http/api_session.h) */
} cohort_api_endpoint_t;

typedef struct cohort_api_route {
    cohort_api_endpoint_t endpoint;
    uint32_t scope;      /* the scope it needs (core/token.h) */
    char service[65];    /* "" for /services */
    cohort_lease_ref_t lease; /* COHORT_API_LEASE_* only (its service is `service` too) */
    char task_id[25];    /* COHORT_API_TASK and COHORT_API_TASK_{RETRY,CANCEL,DELETE} */
    char schedule_id[65]; /* COHORT_API_SCHEDULE_{PAUSE,RESUME} */
    const char *allow;   /* for a 405: the methods the path takes */
} cohort_api_route_t;

/* A lease token is "l1.SERVICE.TASK.ATTEMPT.CLAIM": the service, the task's id (24 hex
 * digits), the attempt the claim raised, and the claim's token (32 hex digits: 128 bits from
 * getrandom(), the token's secret; 24 in tokens from nodes of older versions). Opaque to
 * workers; it names exactly one claim, so a write made with it is fenced on that claim
 * (store/leases.c). */
#define COHORT_LEASE_TOKEN_MAX 160 /* with its NUL */

/* The text of `ref` into `out` (COHORT_LEASE_TOKEN_MAX bytes). */
void cohort_lease_token_format(const cohort_lease_ref_t *ref, char *out, size_t len);

/* The claim `text` names; false if it is not a token cohort_lease_token_format() writes. */
bool cohort_lease_token_parse(const char *text, cohort_lease_ref_t *ref);

/* The endpoint of `method` `path` (the path as sent, not decoded: a '%' is never part of a
 * name or id). 404 for an unknown path, 405 (route->allow set) for a known path with another
 * method, 400 for a bad service name, task id or lease token. */
bool cohort_api_route(const char *method, const char *path, cohort_api_route_t *route,
                      cohort_api_error_t *err);

/* The query string's parameters: each name at most once, only those in `known` (NULL-
 * terminated), values decoded. `values[i]` (strdup'ed or NULL; free with
 * cohort_api_query_free) is known[i]'s value. */
bool cohort_api_query(const char *query, const char *const *known, char **values,
                      cohort_api_error_t *err);
void cohort_api_query_free(char **values, size_t n);

/* GET .../tasks: ?status=&kind=&group=&limit=&after=&order=&view=&total= */
typedef struct cohort_api_list {
    const char *status, *kind, *group; /* views into the query values; NULL: any */
    int64_t limit;
    bool has_after;
    bson_oid_t after;
    bool newest_first;                  /* order=newest (default oldest: _id ascending) */
    cohort_task_view_t view;            /* view=retrying|scheduled narrows to pending tasks */
    bool total;                         /* total=true: the reply counts every matching task */
    const char *data_path, *data_value; /* a search by task data (both or neither) */
} cohort_api_list_t;
/* status, kind, group, limit, after, order, view, total, data_path, data_value */
extern const char *const cohort_api_list_params[];
#define COHORT_API_LIST_PARAMS 10
bool cohort_api_parse_list(char *const *values, cohort_api_list_t *list, cohort_api_error_t *err);

/* The opaque cursor `next` of a page ending at task `last`, and its reverse. */
void cohort_api_cursor_encode(const bson_oid_t *last, char *out, size_t len);
bool cohort_api_cursor_decode(const char *text, bson_oid_t *oid);

/* A body nests at most this many levels: a task's data (core/jsondoc.h) inside a batch's
 * body, its tasks array and the task. */
#define COHORT_API_BODY_DEPTH_MAX (COHORT_DOC_DEPTH_MAX + 3)

/* A JSON body that must be one object and pass core/jsondoc.h's rules (integers within int64,
 * nothing after the object, no empty, '$'-prefixed or repeated key at any level): into `doc`
 * (initialised; destroy it). An empty body is {} when `empty_ok`. */
bool cohort_api_parse_object(const char *body, size_t len, bool empty_ok, bson_t *doc,
                             cohort_api_error_t *err);

/* An object field at `it` (`name` in messages: "result", "tasks[3].data") into `out`: a view
 * into the body (not destroyed), checked as a task's data is (core/jsondoc.h). */
bool cohort_api_object_field(const bson_iter_t *it, const char *name, bson_t *out,
                             cohort_api_error_t *err);

/* One task of POST .../tasks (or one element of tasks:batch; `where` prefixes field names,
 * "" or "tasks[3]."): `data` (an object; NULL if absent, pointing into `body`) and the task
 * options in `options` (a BSON document for cohort_task_options_parse(), initialised by the
 * call; destroy it), each field checked alone so a refusal names it. */
bool cohort_api_parse_task(const bson_t *body, const char *where, bson_t *data, bool *has_data,
                           bson_t *options, cohort_api_error_t *err);

/* POST .../pause|resume: {"kind": K, "reason": R}, both optional (reason only for pause).
 * Views into `body`. */
bool cohort_api_parse_switch(const bson_t *body, bool pause, const char **kind,
                             const char **reason, cohort_api_error_t *err);

/* GET .../counts?by=status|kind|group&limit=N: `field` "status" if `by` is absent;
 * `max_values` the kinds or groups to show (`limit`, 1 to COHORT_API_COUNTS_LIMIT_MAX,
 * COHORT_API_COUNTS_LIMIT_DEFAULT if absent; refused with by=status). */
bool cohort_api_parse_counts_by(const char *by, const char *limit, const char **field,
                                int64_t *max_values, cohort_api_error_t *err);

#endif
