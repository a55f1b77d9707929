/*
 * ctl_nodes.c - `cohortctl nodes [--json]`: the nodes seen in the last day, live or
 * expired, with their last ping and the services they host.
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

/* Copies `key` of `doc` into `out` as it is, if present. */
static void copy_field(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key))
        bson_append_value(out, key, -1, bson_iter_value(&it));
}

/* Appends the document's runs to `runs` (a JSON array) and, in the table, to `clash_line`;
 * returns how many are live. */
static int list_runs(const node_list_t *list, const bson_t *doc, bson_t *runs, char *clash_line,
                     size_t len)
{
    bson_iter_t it, entries;
    int live = 0;
    uint32_t n = 0;
    clash_line[0] = '\0';
    if (!bson_iter_init_find(&it, doc, "runs") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &entries))
        return 0;
    while (bson_iter_next(&entries)) {
        uint32_t doc_len;
        const uint8_t *data;
        bson_t entry;
        if (!BSON_ITER_HOLDS_DOCUMENT(&entries))
            continue;
        bson_iter_document(&entries, &doc_len, &data);
        if (!bson_init_static(&entry, data, doc_len))
            continue;
        const char *host = "";
        ctl_doc_string(&entry, "host", &host);
        int64_t pid = ctl_doc_int(&entry, "pid", 0);
        int64_t ago = list->now - ctl_doc_date(&entry, "seen_at");
        bool is_live = ago <= list->lease;
        live += is_live;
        bson_t one;
        ctl_array_begin_document(runs, &n, &one);
        BSON_APPEND_UTF8(&one, "run_id", bson_iter_key(&entries));
        BSON_APPEND_UTF8(&one, "host", host);
        BSON_APPEND_INT64(&one, "pid", pid);
        BSON_APPEND_INT64(&one, "last_seen_ms_ago", ago);
        BSON_APPEND_BOOL(&one, "live", is_live);
        bson_append_document_end(runs, &one);
        size_t used = strlen(clash_line);
        if (is_live)
            snprintf(clash_line + used, len - used, "%shost %s pid %lld (run %.8s, seen %.1fs ago)",
                     used ? "; " : "", host, (long long)pid, bson_iter_key(&entries),
                     (double)ago / 1000.0);
    }
    return live;
}

static bool list_node(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    node_list_t *list = user;
    const char *id = "", *host = "", *version = "", *kind = "cohortd";
    ctl_doc_string(doc, "_id", &id);
    ctl_doc_string(doc, "host", &host);
    ctl_doc_string(doc, "version", &version);
    ctl_doc_string(doc, "kind", &kind);
    int64_t pid = ctl_doc_int(doc, "pid", 0);
    int64_t ago = list->now - ctl_doc_date(doc, "seen_at");
    bson_iter_t it;
    bool expired = bson_iter_init_find(&it, doc, "expired") && BSON_ITER_HOLDS_BOOL(&it) &&
                   bson_iter_bool(&it);
    /* An external worker (HTTP API) is live until the alive_until its last call set. */
    bool external = strcmp(kind, "external") == 0;
    if (external)
        host = "(external)";
    bool gone = external ? list->now > ctl_doc_date(doc, "alive_until") : ago > list->lease;
    const char *state = expired || gone ? "expired" : "live";

    bson_t one;
    ctl_array_begin_document(list->nodes, &list->n, &one);
    BSON_APPEND_UTF8(&one, "node_id", id);
    BSON_APPEND_UTF8(&one, "kind", kind);
    BSON_APPEND_UTF8(&one, "state", state);
    BSON_APPEND_UTF8(&one, "host", host);
    BSON_APPEND_INT64(&one, "pid", pid);
    BSON_APPEND_UTF8(&one, "version", version);
    BSON_APPEND_INT64(&one, "last_ping_ms_ago", ago);
    copy_field(doc, "services", &one);
    copy_field(doc, "workers", &one);
    bson_t runs;
    char clash[1024];
    BSON_APPEND_ARRAY_BEGIN(&one, "runs", &runs);
    int live_runs = list_runs(list, doc, &runs, clash, sizeof clash);
    bson_append_array_end(&one, &runs);
    BSON_APPEND_INT32(&one, "live_runs", live_runs);
    BSON_APPEND_BOOL(&one, "clash", live_runs > 1);
    bson_append_document_end(list->nodes, &one);
    if (!list->json) {
        char services[512];
        join_services(doc, services, sizeof services);
        printf("%-32s %-8s %-20s %8lld %-8s %9.1fs %4d  %s\n", id, state, host, (long long)pid,
               version, (double)ago / 1000.0, live_runs, services);
        if (live_runs > 1)
            printf("  CLASH: %d live processes use node_id %s: %s\n", live_runs, id, clash);
    }
    return true;
}

/* cohortctl nodes [--json] */
int cmd_nodes(ctl_t *ctl, int argc, char **argv)
{
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    cohort_settings_t file; /* the file's takeover_ms, or the table's default */
    cohort_settings_from_config(ctl->config, NULL, &file);
    node_list_t list = {.lease = file.takeover_ms};
    int opt, given = 0;
    bool bad = false;
    ctl_reset_getopt();
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        bad |= opt != 'j';
        given++;
    }
    list.json = given == 1 && !bad;
    if (bad || given > 1 || optind < argc) {
        fprintf(stderr, "cohortctl nodes: unexpected argument '%s'\n",
                optind < argc ? argv[optind] : ctl_bad_arg(argv));
        return CTL_USAGE;
    }
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
