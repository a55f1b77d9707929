/*
 * service_settings.c - a service's live settings as the nodes will run them, and the effect
 * of a change on them (see service_settings.h): one reading for `cohortctl settings` and the
 * HTTP API, so a change refused by one is refused by the other.
 */
#include "node/status/service_settings.h"

#include <stdio.h>
#include <string.h>

#include "store/listing.h"
#include "store/store.h"
#include "store/nodes.h"
#include "store/services.h"

bool cohort_service_settings_read(cohort_store_t *store, mongoc_client_t *client,
                                  const cohort_config_t *config, const char *service,
                                  cohort_settings_t *eff, bson_t *in_db, bool *found,
                                  bson_error_t *error)
{
    /* The file's values where it has the service (or the cluster), else the table's
     * defaults. */
    const cohort_service_config_t *sc = config ? cohort_config_find_service(config, service)
                                               : NULL;
    cohort_settings_from_config(config, sc, eff);
    bson_init(in_db);
    bson_t doc;
    if (!cohort_store_read_service(store, client, service, &doc, found, error)) {
        bson_destroy(&doc);
        return false;
    }
    bson_iter_t it, child;
    /* Without the file, the values the primary declared are the best defaults. */
    if (*found && !sc) {
        if (bson_iter_init_find(&it, &doc, "tick_ms") && BSON_ITER_HOLDS_NUMBER(&it))
            eff->tick_ms = bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, &doc, "lease_ms") && BSON_ITER_HOLDS_NUMBER(&it))
            eff->takeover_ms = bson_iter_as_int64(&it);
    }
    if (*found && bson_iter_init_find(&it, &doc, "settings") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &child)) {
        while (bson_iter_next(&child)) {
            int64_t *field = cohort_settings_field(eff, bson_iter_key(&child));
            if (field && BSON_ITER_HOLDS_NUMBER(&child)) {
                *field = bson_iter_as_int64(&child);
                BSON_APPEND_INT64(in_db, bson_iter_key(&child), *field);
            }
        }
    }
    bson_destroy(&doc);
    return true;
}

void cohort_service_settings_change(const cohort_config_t *config, const char *service,
                                    cohort_settings_t *next, const char *key, bool set,
                                    int64_t value)
{
    const cohort_service_config_t *sc = config ? cohort_config_find_service(config, service)
                                               : NULL;
    int64_t *field = cohort_settings_field(next, key);
    if (!field)
        return;
    if (set) {
        *field = value;
    } else if (sc) {
        /* Unset: the file's value comes back. */
        cohort_settings_t file;
        cohort_settings_from_config(config, sc, &file);
        *field = *cohort_settings_field(&file, key);
    }
}

/* ---- each live node's own values ------------------------------------------------------- */

typedef struct node_walk {
    const char *service;
    int64_t now_ms;
    cohort_node_settings_fn fn;
    void *user;
} node_walk_t;

static bool hosts(const bson_t *doc, const char *service)
{
    bson_iter_t it, arr;
    if (!bson_iter_init_find(&it, doc, "services") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr))
        return false;
    while (bson_iter_next(&arr))
        if (BSON_ITER_HOLDS_UTF8(&arr) && strcmp(bson_iter_utf8(&arr, NULL), service) == 0)
            return true;
    return false;
}

/* Reads settings.<service>.<part> of a node document into `out` (left as is if absent). */
static bool read_part(const bson_t *doc, const char *service, const char *part,
                      cohort_settings_t *out)
{
    char path[COHORT_SERVICE_NAME_MAX + 32];
    snprintf(path, sizeof path, "settings.%s.%s", service, part);
    bson_iter_t it, child;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &child) ||
        !BSON_ITER_HOLDS_DOCUMENT(&child) || !bson_iter_recurse(&child, &it))
        return false;
    cohort_settings_overlay_iter(out, &it);
    return true;
}

static bool walk_node(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    node_walk_t *w = user;
    bson_iter_t it;
    int64_t seen = 0;
    if (!hosts(doc, w->service) ||
        (bson_iter_init_find(&it, doc, "expired") && BSON_ITER_HOLDS_BOOL(&it) &&
         bson_iter_bool(&it)) ||
        (bson_iter_init_find(&it, doc, "kind") && BSON_ITER_HOLDS_UTF8(&it) &&
         strcmp(bson_iter_utf8(&it, NULL), "external") == 0) ||
        !bson_iter_init_find(&it, doc, "seen_at") || !BSON_ITER_HOLDS_DATE_TIME(&it))
        return true;
    seen = bson_iter_date_time(&it);
    cohort_node_settings_t node = {.db_rtt_p99_ms = -1};
    cohort_settings_defaults(&node.file);
    node.published = read_part(doc, w->service, "file", &node.file);
    node.effective = node.file;
    read_part(doc, w->service, "effective", &node.effective);
    int64_t live_ms = 2 * node.effective.takeover_ms > 3000 ? 2 * node.effective.takeover_ms
                                                            : 3000;
    if (seen < w->now_ms - live_ms)
        return true;
    bson_iter_t child;
    char path[COHORT_SERVICE_NAME_MAX + 32];
    snprintf(path, sizeof path, "settings.%s.problem", w->service);
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &child) &&
        BSON_ITER_HOLDS_UTF8(&child))
        node.problem = bson_iter_utf8(&child, NULL);
    if (bson_iter_init_find(&it, doc, "db_rtt_p99_ms") && BSON_ITER_HOLDS_NUMBER(&it))
        node.db_rtt_p99_ms = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_UTF8(&it))
        node.node_id = bson_iter_utf8(&it, NULL);
    if (node.node_id)
        w->fn(w->user, &node);
    return true;
}

bool cohort_service_settings_each_node(cohort_store_t *store, mongoc_client_t *client,
                                       const char *service, cohort_node_settings_fn fn,
                                       void *user, bson_error_t *error)
{
    node_walk_t w = {.service = service, .fn = fn, .user = user};
    if (!cohort_store_server_time(store, client, &w.now_ms, error))
        return false;
    /* A day back, as cohortctl nodes: walk_node judges each node by its own takeover. */
    return cohort_store_each_node(store, client, w.now_ms - 86400000, walk_node, &w, error);
}

void cohort_service_settings_next_db(const bson_t *in_db, const char *key, bool set,
                                     int64_t value, bson_t *out)
{
    bson_init(out);
    bson_copy_to_excluding_noinit(in_db, out, key, NULL);
    if (set)
        BSON_APPEND_INT64(out, key, value);
}

typedef struct node_check {
    const bson_t *next_db;
    bool force;
    char *refusal;
    size_t len;
    char unsafe[512]; /* the first round-trip refusal: reported if no node refuses outright */
} node_check_t;

static void check_node(void *user, const cohort_node_settings_t *node)
{
    node_check_t *c = user;
    if (c->refusal[0] || !node->published)
        return; /* one refusal is enough; an older node publishes nothing to check */
    cohort_settings_t next = node->file;
    cohort_settings_overlay(&next, c->next_db);
    bson_error_t why;
    if (!cohort_settings_validate(&next, &why)) {
        snprintf(c->refusal, c->len, "node %s would refuse it (with its config file's values): %s",
                 node->node_id, why.message);
        return;
    }
    int64_t floor = COHORT_TAKEOVER_RTT_MULTIPLE * node->db_rtt_p99_ms;
    if (!c->force && !c->unsafe[0] && next.takeover_ms != node->effective.takeover_ms &&
        next.takeover_ms < floor)
        snprintf(c->unsafe, sizeof c->unsafe,
                 "takeover_ms %lld is under %d x the database round trip node %s measured "
                 "(p99 %lld ms): at least %lld ms is safe; --force sets it anyway",
                 (long long)next.takeover_ms, COHORT_TAKEOVER_RTT_MULTIPLE, node->node_id,
                 (long long)node->db_rtt_p99_ms, (long long)floor);
}

bool cohort_service_settings_check_nodes(cohort_store_t *store, mongoc_client_t *client,
                                         const char *service, const bson_t *next_db, bool force,
                                         char *refusal, size_t len, bson_error_t *error)
{
    refusal[0] = '\0';
    node_check_t c = {.next_db = next_db, .force = force, .refusal = refusal, .len = len};
    if (!cohort_service_settings_each_node(store, client, service, check_node, &c, error))
        return false;
    if (!refusal[0])
        snprintf(refusal, len, "%s", c.unsafe);
    return true;
}
