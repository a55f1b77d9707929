/*
 * ctl_nodes.c - `cohortctl nodes [--json]`: the nodes seen in the last day, live or
 * expired, with their last ping and the services they host.
 *
 * Each node's object is node/status/node_status.c's, shared with GET /api/v1/nodes.
 *
 * A node is live while its last ping is younger than the takeover time: the longest lease
 * a primary declared (primaries expire nodes by their service's), else the config file's,
 * else the built-in 10 s. Times are the server's, so this machine's clock does not matter.
 *
 * Each process running a node_id records a run (runs.<run id> in the document, node/runs.h);
 * a run is live by the same bound. Two live runs are a clash: the table marks it with a CLASH
 * line naming each process (host, pid), and --json has the runs, live_runs and clash. The
 * top-level host and pid are the working process's: a run standing back writes only its own
 * entry.
 *
 * External workers (the HTTP API's claims, kind "external") are listed too: live until the
 * alive_until their last call set (their wait or lease, whichever is longer), with host
 * "(external)".
 */
#include <stdio.h>
#include <string.h>

#include "cli/ctl.h"
#include "node/status/api_json.h"
#include "node/status/node_status.h"
#include "store/listing.h"

typedef struct node_list {
    int64_t now, lease;
    bson_t *nodes; /* the JSON array being built */
    uint32_t n;
    bool json;
} node_list_t;

/* "a,b,c" from the node's services array. */
static void join_services(const bson_t *doc, char *buf, size_t len)
{
    buf[0] = '\0';
    bson_iter_t it, arr;
    if (!bson_iter_init_find(&it, doc, "services") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr))
        return;
    while (bson_iter_next(&arr))
        if (BSON_ITER_HOLDS_UTF8(&arr))
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? "," : "",
                     bson_iter_utf8(&arr, NULL));
}

static bool list_node(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    node_list_t *list = user;
    bson_t one;
    cohort_node_summary_t s;
    cohort_json_array_begin_document(list->nodes, &list->n, &one);
    cohort_node_status(doc, list->now, list->lease, &one, &s);
    bson_append_document_end(list->nodes, &one);
    if (!list->json) {
        char services[512];
        join_services(doc, services, sizeof services);
        printf("%-32s %-8s %-20s %8lld %-8s %9.1fs %4d  %s\n", s.id, s.state, s.host,
               (long long)s.pid, s.version, (double)s.last_ping_ms_ago / 1000.0, s.live_runs,
               services);
        if (s.live_runs > 1)
            printf("  CLASH: %d live processes use node_id %s: %s\n", s.live_runs, s.id,
                   s.clash);
        for (const char *line = s.problems, *end; *line; line = *end ? end + 1 : end) {
            end = strchr(line, '\n') ? strchr(line, '\n') : line + strlen(line);
            printf("  SETTINGS: %.*s\n", (int)(end - line), line);
        }
    }
    return true;
}

/* cohortctl nodes [--json] */
int cmd_nodes(ctl_t *ctl, int argc, char **argv)
{
    cohort_settings_t file; /* the file's takeover_ms, or the table's default */
    cohort_settings_from_config(ctl->config, NULL, &file);
    node_list_t list = {.lease = file.takeover_ms};
    if (!ctl_json_only(ctl, argc, argv, "nodes", &list.json))
        return CTL_USAGE;
    if (!ctl_reach_database(ctl, &list.now))
        return CTL_FAILED;
    bson_error_t error;
    int64_t declared;
    if (!cohort_store_longest_lease(ctl->store, ctl->client, &declared, &error)) {
        fprintf(stderr, "cohortctl nodes: %s\n", error.message);
        return CTL_FAILED;
    }
    if (declared > 0)
        list.lease = declared;

    bson_t out = BSON_INITIALIZER, nodes;
    BSON_APPEND_ARRAY_BEGIN(&out, "nodes", &nodes);
    list.nodes = &nodes;
    if (!list.json)
        printf("%-32s %-8s %-20s %8s %-8s %10s %4s  %s\n", "NODE", "STATE", "HOST", "PID",
               "VERSION", "LAST PING", "RUNS", "SERVICES");
    bool ok = cohort_store_each_node(ctl->store, ctl->client, list.now - 86400000, list_node,
                                     &list, &error);
    bson_append_array_end(&out, &nodes);
    return ctl_finish_listing(&out, list.json, ok, "cohortctl nodes", &error);
}
