/*
 * ctl_doctor.c - `cohortctl doctor [--json]`: what Cohort depends on, checked against the
 * deployment it points at. One line per check, "ok", "warn" or "fail" and what it found;
 * --json prints {"checks": [{name, status, detail}]}. Exit 0 only when every check is ok.
 *
 * The database's answers come from store/doctor.h; the nodes' from what each live node
 * publishes in its document (docs/SCHEMA.md, nodes): settings.<svc>.file and .effective,
 * version, db_rtt_p50_ms / db_rtt_p99_ms and clock_skew_ms. docs/OPERATING.md ("cohortctl
 * doctor") says what each check means and what to do when it warns.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ctl.h"
#include "core/settings.h"
#include "node/status/api_json.h"
#include "node/status/node_status.h"
#include "store/doctor.h"
#include "store/listing.h"
#include "store/services.h"

#define DOCTOR_MAX_NODES 64
#define DOCTOR_MAX_SERVICES 64
#define DOCTOR_AWAIT_MS 400      /* the getMore's maxAwaitTimeMS */
#define DOCTOR_SKEW_WARN_MS 1000 /* as the node's own log warning */
/* Ends each warning the embedded server causes by design, so that a first run of the quick
 * start reads as expected (the exit status stays 1: a clean exit means a real deployment). */
#define EMBEDDED_NOTE "expected on the embedded test server; on real MongoDB, "

typedef enum { CHECK_OK, CHECK_WARN, CHECK_FAIL } check_status_t;
static const char *const status_names[] = {"ok", "warn", "fail"};

typedef struct doctor {
    ctl_t *ctl;
    bool json;
    bson_t checks;
    uint32_t n;
    check_status_t worst;
    bool embedded; /* the embedded test server (mongo-java-server): its warnings say so */
    int64_t now, lease;
    bson_t nodes[DOCTOR_MAX_NODES]; /* the live cohortd nodes' documents */
    size_t n_nodes;
    char *services[DOCTOR_MAX_SERVICES];
    size_t n_services;
} doctor_t;

static void check(doctor_t *d, const char *name, check_status_t status, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (status > d->worst)
        d->worst = status;
    bson_t one;
    cohort_json_array_begin_document(&d->checks, &d->n, &one);
    BSON_APPEND_UTF8(&one, "name", name);
    BSON_APPEND_UTF8(&one, "status", status_names[status]);
    BSON_APPEND_UTF8(&one, "detail", detail);
    bson_append_document_end(&d->checks, &one);
    if (!d->json)
        printf("%-4s  %-28s %s\n", status_names[status], name, detail);
}

static bool keep_node(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    doctor_t *d = user;
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "kind")) /* an external worker: no settings, no clock */
        return true;
    bson_t ignored = BSON_INITIALIZER;
    cohort_node_summary_t s;
    cohort_node_status(doc, d->now, d->lease, &ignored, &s);
    bool live = strcmp(s.state, "live") == 0;
    bson_destroy(&ignored);
    if (live && d->n_nodes < DOCTOR_MAX_NODES)
        bson_copy_to(doc, &d->nodes[d->n_nodes++]);
    return true;
}

static bool keep_service(void *user, const char *name, bson_error_t *error)
{
    (void)error;
    doctor_t *d = user;
    if (d->n_services < DOCTOR_MAX_SERVICES)
        d->services[d->n_services++] = strdup(name);
    return true;
}

static const char *node_id(const bson_t *doc)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it)
               ? bson_iter_utf8(&it, NULL)
               : "?";
}

/* The number at `path` in `doc`, or -1. */
static int64_t number_at(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found) &&
        BSON_ITER_HOLDS_NUMBER(&found))
        return bson_iter_as_int64(&found);
    return -1;
}

static void check_server(doctor_t *d)
{
    cohort_doctor_server_t server;
    bson_error_t error;
    if (!cohort_doctor_server(d->ctl->store, d->ctl->client, &server, &error)) {
        check(d, "server", CHECK_FAIL, "cannot ask the server: %s", error.message);
        return;
    }
    d->embedded = server.embedded;
    if (server.replica_set || server.sharded)
        check(d, "server", CHECK_OK, "version %s, %s", server.version, server.topology);
    else if (server.embedded)
        check(d, "server", CHECK_WARN,
              "version %s, %s: " EMBEDDED_NOTE "a server that is no replica set means no "
              "failover of the database (use a replica set in production)",
              server.version, server.topology);
    else
        check(d, "server", CHECK_WARN,
              "version %s, %s: no failover of the database (use a replica set in production)",
              server.version, server.topology);
    /* Fencing by epoch is only as durable as the write that recorded the epoch. */
    bool weak = server.replica_set && !server.majority_writes;
    check(d, "concerns",
          server.unacknowledged ? CHECK_FAIL
          : weak                ? CHECK_WARN
                                : CHECK_OK,
          "write concern %s%s; read concern %s", server.write_concern,
          server.unacknowledged ? " (unacknowledged: claims cannot be trusted)"
          : weak                ? " (not majority: a MongoDB failover can lose an epoch)"
                                : "",
          server.read_concern);
}

static void check_change_streams(doctor_t *d)
{
    cohort_doctor_stream_t stream;
    bson_error_t error;
    if (!cohort_doctor_change_stream(d->ctl->store, d->ctl->client, DOCTOR_AWAIT_MS, &stream,
                                     &error))
        check(d, "change_streams", CHECK_FAIL, "%s", error.message);
    else if (!stream.opened)
        check(d, "change_streams", CHECK_WARN,
              "do not open (%s): wake = change_stream cannot work, nodes poll each tick",
              stream.why);
    else if (stream.waited_ms < DOCTOR_AWAIT_MS / 2)
        check(d, "change_streams", CHECK_WARN,
              "open, but an empty getMore was answered at once (%lld ms of maxAwaitTimeMS "
              "%d): %sidle nodes send more commands and wake later than they should",
              (long long)stream.waited_ms, DOCTOR_AWAIT_MS,
              d->embedded ? "expected on the embedded test server with --no-hold-getmore; on "
                            "real MongoDB, which holds it, it would mean that "
                          : "");
    else
        check(d, "change_streams", CHECK_OK,
              "open; an empty getMore was held %lld ms (maxAwaitTimeMS %d)",
              (long long)stream.waited_ms, DOCTOR_AWAIT_MS);
}

static void judge_plan(doctor_t *d, const char *name, const cohort_doctor_plan_t *plan)
{
    if (!plan->explained && d->embedded)
        check(d, name, CHECK_WARN,
              "the server does not explain (%s): plan unknown; " EMBEDDED_NOTE
              "this check shows whether the query uses an index",
              plan->why);
    else if (!plan->explained)
        check(d, name, CHECK_WARN, "the server does not explain (%s): plan unknown", plan->why);
    else if (strstr(plan->stages, "EOF"))
        check(d, name, CHECK_OK, "the queue does not exist yet (%s)", plan->stages);
    else if (plan->index_scan && !plan->in_memory_sort && !plan->collection_scan)
        check(d, name, CHECK_OK, "index scan, no in-memory sort (%s)", plan->stages);
    else
        check(d, name, CHECK_WARN, "%s%s%s(%s)", plan->index_scan ? "" : "no index scan, ",
              plan->collection_scan ? "a collection scan, " : "",
              plan->in_memory_sort ? "an in-memory sort " : "", plan->stages);
}

/* The service's live settings: the config document's where set, else the -c file's (its
 * service section), else the defaults. */
static void service_settings(doctor_t *d, const char *service, cohort_settings_t *settings)
{
    const cohort_service_config_t *section =
        d->ctl->config ? cohort_config_find_service(d->ctl->config, service) : NULL;
    cohort_settings_from_config(d->ctl->config, section, settings);
    bson_t doc;
    bool found = false;
    bson_error_t error;
    if (cohort_store_read_service(d->ctl->store, d->ctl->client, service, &doc, &found, &error) &&
        found) {
        bson_iter_t it, sub;
        if (bson_iter_init_find(&it, &doc, "settings") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &sub))
            cohort_settings_overlay_iter(settings, &sub);
    }
    bson_destroy(&doc);
}

static void check_service(doctor_t *d, const char *service)
{
    char name[160], missing[1024];
    bson_error_t error;
    snprintf(name, sizeof name, "indexes %s", service);
    if (!cohort_doctor_missing_indexes(d->ctl->store, d->ctl->client, service, missing,
                                       sizeof missing, &error))
        check(d, name, CHECK_FAIL, "cannot list them: %s", error.message);
    else if (missing[0])
        check(d, name, CHECK_FAIL, "queue_%s lacks: %s (a node creates them at start-up)", service,
              missing);
    else
        check(d, name, CHECK_OK, "all present");

    cohort_doctor_plan_t plan;
    snprintf(name, sizeof name, "claim_plan %s", service);
    if (cohort_doctor_explain_claim(d->ctl->store, d->ctl->client, service, d->now, &plan, &error))
        judge_plan(d, name, &plan);
    snprintf(name, sizeof name, "count_plan %s", service);
    if (cohort_doctor_explain_count(d->ctl->store, d->ctl->client, service, &plan, &error))
        judge_plan(d, name, &plan);

    cohort_settings_t settings;
    service_settings(d, service, &settings);
    int64_t stale = 0, leases = 0;
    snprintf(name, sizeof name, "stale_claims %s", service);
    if (!cohort_doctor_stale_claims(d->ctl->store, d->ctl->client, service,
                                    d->now - settings.stall_timeout_ms, &stale, &error))
        check(d, name, CHECK_FAIL, "%s", error.message);
    else
        check(d, name, stale ? CHECK_WARN : CHECK_OK,
              "%lld claimed task(s) not checked in for longer than stall_timeout_ms (%lld ms)",
              (long long)stale, (long long)settings.stall_timeout_ms);
    snprintf(name, sizeof name, "expired_leases %s", service);
    if (!cohort_doctor_expired_leases(d->ctl->store, d->ctl->client, service,
                                      d->now - settings.takeover_ms, &leases, &error))
        check(d, name, CHECK_FAIL, "%s", error.message);
    else
        check(d, name, leases ? CHECK_WARN : CHECK_OK,
              "%lld external lease(s) expired more than takeover_ms (%lld ms) ago and not "
              "swept",
              (long long)leases, (long long)settings.takeover_ms);
}

/* Two live nodes whose files disagree on `key` for `service`. */
static void check_drift(doctor_t *d, const char *service)
{
    static const char *const keys[] = {"takeover_ms", "tick_ms"};
    char name[160], found[1024] = "";
    for (size_t k = 0; k < 2; k++) {
        char path[256];
        snprintf(path, sizeof path, "settings.%s.file.%s", service, keys[k]);
        for (size_t i = 0; i < d->n_nodes; i++)
            for (size_t j = i + 1; j < d->n_nodes; j++) {
                int64_t a = number_at(&d->nodes[i], path), b = number_at(&d->nodes[j], path);
                if (a >= 0 && b >= 0 && a != b)
                    snprintf(found + strlen(found), sizeof found - strlen(found),
                             "%s%s: node %s has %lld, node %s %lld", found[0] ? "; " : "", keys[k],
                             node_id(&d->nodes[i]), (long long)a, node_id(&d->nodes[j]),
                             (long long)b);
            }
    }
    snprintf(name, sizeof name, "settings_drift %s", service);
    if (found[0])
        check(d, name, CHECK_WARN, "the config files disagree: %s", found);
    else
        check(d, name, CHECK_OK, "the live nodes' files agree on takeover_ms and tick_ms");
}

static void check_nodes(doctor_t *d)
{
    char releases[1024] = "";
    bool differ = false;
    const char *first = NULL;
    for (size_t i = 0; i < d->n_nodes; i++) {
        const bson_t *doc = &d->nodes[i];
        const char *id = node_id(doc), *version = "?";
        ctl_doc_string(doc, "version", &version);
        int64_t schema = number_at(doc, "schema");
        char name[160];
        snprintf(releases + strlen(releases), sizeof releases - strlen(releases), "%s%s %s",
                 i ? ", " : "", id, version);
        if (schema >= 0)
            snprintf(releases + strlen(releases), sizeof releases - strlen(releases),
                     " (schema %lld)", (long long)schema);
        differ |= first && strcmp(first, version) != 0;
        first = first ? first : version;

        snprintf(name, sizeof name, "clock %s", id);
        int64_t skew = number_at(doc, "clock_skew_ms");
        bson_iter_t it;
        if (!bson_iter_init_find(&it, doc, "clock_skew_ms"))
            check(d, name, CHECK_OK, "offset not published (an older release)");
        else
            check(d, name,
                  skew > DOCTOR_SKEW_WARN_MS || -skew > DOCTOR_SKEW_WARN_MS ? CHECK_WARN : CHECK_OK,
                  "its clock is %lld ms %s the server's", (long long)(skew < 0 ? -skew : skew),
                  skew < 0 ? "behind" : "ahead of");

        snprintf(name, sizeof name, "round_trips %s", id);
        int64_t p50 = number_at(doc, "db_rtt_p50_ms"), p99 = number_at(doc, "db_rtt_p99_ms");
        int64_t takeover = -1; /* the smallest takeover_ms it runs with */
        bson_iter_t services;
        if (bson_iter_init_find(&it, doc, "services") && BSON_ITER_HOLDS_ARRAY(&it) &&
            bson_iter_recurse(&it, &services))
            while (bson_iter_next(&services)) {
                char path[256];
                snprintf(path, sizeof path, "settings.%s.effective.takeover_ms",
                         bson_iter_utf8(&services, NULL));
                int64_t t = number_at(doc, path);
                if (t > 0 && (takeover < 0 || t < takeover))
                    takeover = t;
            }
        if (p99 < 0 || takeover < 0)
            check(d, name, CHECK_OK, "not published yet");
        else
            check(d, name, COHORT_TAKEOVER_RTT_MULTIPLE * p99 > takeover ? CHECK_WARN : CHECK_OK,
                  "p50 %lld ms, p99 %lld ms against takeover_ms %lld (at most 1/%d of it)",
                  (long long)p50, (long long)p99, (long long)takeover,
                  COHORT_TAKEOVER_RTT_MULTIPLE);
    }
    if (d->n_nodes == 0)
        check(d, "releases", CHECK_WARN, "no live node");
    else
        check(d, "releases", differ ? CHECK_WARN : CHECK_OK, "%s%s", releases,
              differ ? " (a rolling upgrade in progress?)" : "");
}

static void free_doctor(doctor_t *d)
{
    for (size_t i = 0; i < d->n_nodes; i++)
        bson_destroy(&d->nodes[i]);
    for (size_t i = 0; i < d->n_services; i++)
        free(d->services[i]);
}

/* cohortctl doctor [--json] */
int cmd_doctor(ctl_t *ctl, int argc, char **argv)
{
    doctor_t d = {.ctl = ctl};
    if (!ctl_json_only(ctl, argc, argv, "doctor", &d.json))
        return CTL_USAGE;
    if (!ctl_reach_database(ctl, &d.now))
        return CTL_FAILED;
    cohort_settings_t file;
    cohort_settings_from_config(ctl->config, NULL, &file);
    d.lease = file.takeover_ms;
    bson_error_t error;
    int64_t declared = 0;
    bool ok =
        cohort_store_longest_lease(ctl->store, ctl->client, &declared, &error) &&
        cohort_store_each_node(ctl->store, ctl->client, d.now - 86400000, keep_node, &d, &error) &&
        cohort_store_each_service(ctl->store, ctl->client, keep_service, &d, &error);
    if (declared > 0)
        d.lease = declared;
    if (!ok) {
        fprintf(stderr, "cohortctl doctor: %s\n", error.message);
        free_doctor(&d);
        return CTL_FAILED;
    }
    bson_t out = BSON_INITIALIZER;
    BSON_APPEND_ARRAY_BEGIN(&out, "checks", &d.checks);
    check_server(&d);
    check_change_streams(&d);
    for (size_t i = 0; i < d.n_services; i++) {
        check_service(&d, d.services[i]);
        check_drift(&d, d.services[i]);
    }
    check_nodes(&d);
    bson_append_array_end(&out, &d.checks);
    if (d.json)
        ctl_print_json(&out);
    bson_destroy(&out);
    free_doctor(&d);
    return d.worst == CHECK_OK ? CTL_DONE : CTL_FAILED;
}
