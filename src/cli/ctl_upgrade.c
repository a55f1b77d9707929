/*
 * ctl_upgrade.c - the upgrade commands (docs/OPERATING.md#upgrading):
 *   cohortctl migrate [--dry-run] [--to N]   run the schema migrations this release ships
 *   cohortctl upgrade finish                 commit the database to this release's level
 *   cohortctl upgrade lower --to N           lower it again, before a downgrade
 *   cohortctl schema [--json]                the database's version, the cluster's level,
 *                                            the live nodes, the migrations
 *
 * The order of a rolling upgrade: replace the nodes one at a time, run `migrate` (while old
 * and new nodes run side by side: each migration is additive, store/migrate.h), then
 * `upgrade finish`, which refuses while any live node does not know this release's feature
 * level, naming it, runs whatever migration is still pending, and raises the database's
 * schema version and the cluster's feature level together (store/meta.h). From then on a
 * node of an older release refuses to start on the database; `upgrade lower` undoes that.
 * Exit status: 0 done; 1 the database; 2 bad usage, or refused (a node too old, a level this
 * release does not know).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/ctl.h"
#include "core/settings.h"
#include "core/version.h"
#include "node/status/node_status.h"
#include "store/listing.h"
#include "store/meta.h"
#include "store/migrate.h"
#include "store/services.h"

#define MAX_NODES 256

/* The live cohortd nodes (external workers have no level), as `cohortctl nodes` sees them. */
typedef struct live_nodes {
    int64_t now, lease;
    bson_t docs[MAX_NODES];
    size_t n;
} live_nodes_t;

static bool keep_live(void *user, const bson_t *doc, bson_error_t *error)
{
    (void)error;
    live_nodes_t *l = user;
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "kind"))
        return true;
    bson_t ignored = BSON_INITIALIZER;
    cohort_node_summary_t s;
    cohort_node_status(doc, l->now, l->lease, &ignored, &s);
    bson_destroy(&ignored);
    if (strcmp(s.state, "live") == 0 && l->n < MAX_NODES)
        bson_copy_to(doc, &l->docs[l->n++]);
    return true;
}

static bool read_live(ctl_t *ctl, live_nodes_t *l, bson_error_t *error)
{
    cohort_settings_t file;
    cohort_settings_from_config(ctl->config, NULL, &file);
    l->lease = file.takeover_ms;
    int64_t declared = 0;
    bool ok = cohort_store_longest_lease(ctl->store, ctl->client, &declared, error);
    if (declared > 0)
        l->lease = declared;
    return ok && cohort_store_each_node(ctl->store, ctl->client, l->now - 86400000, keep_live, l,
                                        error);
}

static void free_live(live_nodes_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        bson_destroy(&l->docs[i]);
}

static int64_t doc_level(const bson_t *doc) /* a node from before levels knows level 1 */
{
    return ctl_doc_int(doc, "feature_level", 1);
}

static const char *doc_text(const bson_t *doc, const char *key, const char *fallback)
{
    const char *s = NULL;
    return ctl_doc_string(doc, key, &s) ? s : fallback;
}

/* Who writes into cohort_meta: "cohortctl USER@HOST (RELEASE)". */
static void upgrade_author(char *by, size_t len)
{
    char who[260];
    ctl_author(who, sizeof who);
    snprintf(by, len, "%s (%s)", who, COHORT_VERSION);
}

/* ---- migrate ------------------------------------------------------------------------------ */

typedef struct progress {
    const char *command;
    int64_t batches, exit_after; /* COHORT_TEST_MIGRATE_EXIT_AFTER: tests of a killed run */
} progress_t;

static void on_batch(void *user, const char *collection, int64_t changed)
{
    progress_t *p = user;
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\rcohortctl %s: %s: %lld changed so far", p->command, collection,
                (long long)changed);
    if (p->exit_after > 0 && ++p->batches >= p->exit_after)
        _exit(3); /* as if killed part way: nothing is flushed, the record says "running" */
}

/* Runs the migrations up to `to` that are not done (all of them, done or not, with
 * `dry_run`: it says what each would change). */
static bool run_migrations(ctl_t *ctl, const char *command, int64_t to, bool dry_run,
                           int64_t batch, bson_error_t *error)
{
    size_t n;
    const cohort_migration_t *m = cohort_migrations(&n);
    char by[300];
    upgrade_author(by, sizeof by);
    const char *env = getenv("COHORT_TEST_MIGRATE_EXIT_AFTER");
    progress_t p = {.command = command, .exit_after = env ? atoll(env) : 0};
    cohort_schema_state_t db;
    if (!cohort_store_read_schema(ctl->store, ctl->client, COHORT_SCHEMA_VERSION, NULL, &db,
                                  error))
        return false;
    int ran = 0;
    for (size_t i = 0; i < n && m[i].version <= to; i++) {
        bool done = db.recorded && db.version >= m[i].version; /* created at that layout */
        if (!done &&
            !cohort_store_migration_done(ctl->store, ctl->client, m[i].version, &done, error))
            return false;
        if (done && !dry_run)
            continue;
        int64_t changed = 0;
        if (!cohort_store_migrate(ctl->store, ctl->client, &m[i], by, dry_run, batch, on_batch,
                                  &p, &changed, error))
            return false;
        if (isatty(STDERR_FILENO))
            fprintf(stderr, "\r\033[K");
        printf("migration %lld (%s): %s%s %lld document(s)\n", (long long)m[i].version,
               m[i].name, dry_run ? (done ? "done before; " : "") : "done; ",
               dry_run ? "would change" : "changed", (long long)changed);
        ran++;
    }
    if (ran == 0)
        printf("no migration pending up to schema version %lld\n", (long long)to);
    return true;
}

/* migrate [--dry-run] [--to N] [--batch N] */
int cmd_migrate(ctl_t *ctl, int argc, char **argv)
{
    struct option options[CLI_MAX_OPTIONS + 1];
    ctl_longopts(ctl, options);
    bool dry_run = false;
    int64_t to = COHORT_SCHEMA_VERSION, batch = 1000;
    ctl_reset_getopt();
    int opt;
    while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (opt == 'n') {
            dry_run = true;
        } else if (opt == 't' && ctl_parse_int(optarg, &to) && to >= 1 &&
                   to <= COHORT_SCHEMA_VERSION) {
        } else if (opt == 'b' && ctl_parse_int(optarg, &batch) && batch >= 1 && batch <= 100000) {
        } else {
            fprintf(stderr,
                    "cohortctl migrate: bad argument '%s' (--to takes a schema version from 1 "
                    "to %d, --batch 1 to 100000)\n",
                    opt == 't' || opt == 'b' ? optarg : ctl_bad_arg(argv), COHORT_SCHEMA_VERSION);
            return CTL_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "cohortctl migrate: unexpected argument '%s'\n", argv[optind]);
        return CTL_USAGE;
    }
    if (!ctl_reach_database(ctl, NULL))
        return CTL_FAILED;
    bson_error_t error;
    if (!run_migrations(ctl, "migrate", to, dry_run, batch, &error)) {
        fprintf(stderr, "cohortctl migrate: %s (run it again: it resumes)\n", error.message);
        return CTL_FAILED;
    }
    return CTL_DONE;
}

/* ---- upgrade finish | lower --to N ------------------------------------------------------- */

static int upgrade_finish(ctl_t *ctl)
{
    live_nodes_t l = {0};
    bson_error_t error;
    int64_t level = 0;
    if (!ctl_reach_database(ctl, &l.now))
        return CTL_FAILED;
    if (!cohort_store_read_level(ctl->store, ctl->client, &level, &error) ||
        !read_live(ctl, &l, &error))
        goto failed;
    int older = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (doc_level(&l.docs[i]) >= COHORT_FEATURE_LEVEL)
            continue;
        fprintf(stderr,
                "cohortctl upgrade finish: refused: node %s (release %s, feature level %lld) is "
                "live and older than this release's level %d; replace it first\n",
                doc_text(&l.docs[i], "_id", "?"), doc_text(&l.docs[i], "release", "before 0.2.0"),
                (long long)doc_level(&l.docs[i]), COHORT_FEATURE_LEVEL);
        older++;
    }
    free_live(&l);
    if (older)
        return CTL_REFUSED;
    if (!run_migrations(ctl, "upgrade finish", COHORT_SCHEMA_VERSION, false, 1000, &error))
        goto failed;
    char by[300];
    upgrade_author(by, sizeof by);
    if (!cohort_store_commit_level(ctl->store, ctl->client, COHORT_FEATURE_LEVEL, by, &error))
        goto failed;
    printf("schema version and feature level %d (was %lld): every live node follows it within "
           "30 s; nodes of releases before %s now refuse to start on this database\n",
           COHORT_FEATURE_LEVEL, (long long)level, COHORT_VERSION);
    return CTL_DONE;
failed:
    free_live(&l);
    fprintf(stderr, "cohortctl upgrade finish: %s\n", error.message);
    return CTL_FAILED;
}

static int upgrade_lower(ctl_t *ctl, int64_t to)
{
    bson_error_t error;
    int64_t level = 0;
    if (!ctl_reach_database(ctl, NULL))
        return CTL_FAILED;
    if (!cohort_store_read_level(ctl->store, ctl->client, &level, &error))
        goto failed;
    if (to >= level) {
        fprintf(stderr, "cohortctl upgrade lower: refused: the level is %lld already, not above %lld\n",
                (long long)level, (long long)to);
        return CTL_REFUSED;
    }
    char by[300];
    upgrade_author(by, sizeof by);
    if (!cohort_store_commit_level(ctl->store, ctl->client, to, by, &error))
        goto failed;
    printf("schema version and feature level %lld (was %lld): live nodes follow it within 30 s; "
           "nodes of a release serving schema %lld may start again (the migrated documents "
           "stay: they read them as before)\n",
           (long long)to, (long long)level, (long long)to);
    return CTL_DONE;
failed:
    fprintf(stderr, "cohortctl upgrade lower: %s\n", error.message);
    return CTL_FAILED;
}

/* upgrade finish | upgrade lower --to N */
int cmd_upgrade(ctl_t *ctl, int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "finish") == 0)
        return upgrade_finish(ctl);
    int64_t to = 0;
    if (argc == 4 && strcmp(argv[1], "lower") == 0 && strcmp(argv[2], "--to") == 0 &&
        ctl_parse_int(argv[3], &to) && to >= COHORT_SCHEMA_VERSION_OLDEST &&
        to <= COHORT_FEATURE_LEVEL)
        return upgrade_lower(ctl, to);
    fprintf(stderr,
            "cohortctl upgrade: give 'finish', or 'lower --to N' with N from %d to %d\n",
            COHORT_SCHEMA_VERSION_OLDEST, COHORT_FEATURE_LEVEL);
    return CTL_USAGE;
}

/* ---- schema [--json] ---------------------------------------------------------------------- */

static void append_migrations(ctl_t *ctl, int64_t db_version, bson_t *out, bool json,
                              bson_error_t *error, bool *ok)
{
    size_t n;
    const cohort_migration_t *m = cohort_migrations(&n);
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(out, "migrations", &arr);
    for (size_t i = 0; i < n && *ok; i++) {
        bson_t rec, one;
        bool found = false;
        *ok = cohort_store_migration_record(ctl->store, ctl->client, m[i].version, &rec, &found,
                                            error);
        /* A database recorded at this version or later (created by a release that wrote
         * the new layout from the start) never needs it. */
        const char *state = found                      ? doc_text(&rec, "state", "running")
                            : db_version >= m[i].version ? "not needed"
                                                         : "pending";
        char key[16];
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, k, &one);
        BSON_APPEND_INT64(&one, "version", m[i].version);
        BSON_APPEND_UTF8(&one, "name", m[i].name);
        BSON_APPEND_UTF8(&one, "state", state);
        ctl_append_utf8_or_null(&one, "by", found ? doc_text(&rec, "by", NULL) : NULL);
        int64_t finished = found ? ctl_doc_date(&rec, "finished_at") : 0;
        if (finished)
            BSON_APPEND_DATE_TIME(&one, "finished_at", finished);
        BSON_APPEND_INT64(&one, "changed", found ? ctl_doc_int(&rec, "changed", 0) : 0);
        bson_append_document_end(&arr, &one);
        if (!json)
            printf("migration %lld %-12s %-8s %s\n", (long long)m[i].version, m[i].name, state,
                   found ? doc_text(&rec, "by", "") : m[i].summary);
        bson_destroy(&rec);
    }
    bson_append_array_end(out, &arr);
}

int cmd_schema(ctl_t *ctl, int argc, char **argv)
{
    bool json = false;
    if (!ctl_json_only(ctl, argc, argv, "schema", &json))
        return CTL_USAGE;
    live_nodes_t l = {0};
    if (!ctl_reach_database(ctl, &l.now))
        return CTL_FAILED;
    bson_error_t error;
    cohort_schema_state_t db;
    int64_t level = 0;
    bool ok = cohort_store_read_schema(ctl->store, ctl->client, COHORT_SCHEMA_VERSION, "cohortctl",
                                       &db, &error) &&
              cohort_store_read_level(ctl->store, ctl->client, &level, &error) &&
              read_live(ctl, &l, &error);
    bson_t out = BSON_INITIALIZER, arr;
    if (ok) {
        BSON_APPEND_INT64(&out, "database", db.version);
        BSON_APPEND_BOOL(&out, "recorded", db.recorded);
        BSON_APPEND_INT64(&out, "feature_level", level);
        BSON_APPEND_UTF8(&out, "release", COHORT_VERSION);
        BSON_APPEND_INT64(&out, "release_schema", COHORT_SCHEMA_VERSION);
        BSON_APPEND_INT64(&out, "release_feature_level", COHORT_FEATURE_LEVEL);
        if (!json)
            printf("database schema version %lld%s; cluster feature level %lld; this cohortctl "
                   "%s: schema %d, level %d\n",
                   (long long)db.version, db.recorded ? "" : " (not recorded: before 0.2.0)",
                   (long long)level, COHORT_VERSION, COHORT_SCHEMA_VERSION, COHORT_FEATURE_LEVEL);
        BSON_APPEND_ARRAY_BEGIN(&out, "nodes", &arr);
        for (size_t i = 0; i < l.n; i++) {
            const bson_t *d = &l.docs[i];
            bson_t one;
            char key[16];
            const char *k;
            bson_uint32_to_string((uint32_t)i, &k, key, sizeof key);
            BSON_APPEND_DOCUMENT_BEGIN(&arr, k, &one);
            BSON_APPEND_UTF8(&one, "node_id", doc_text(d, "_id", "?"));
            ctl_append_utf8_or_null(&one, "release", doc_text(d, "release", NULL));
            BSON_APPEND_INT64(&one, "schema", ctl_doc_int(d, "schema", 1));
            BSON_APPEND_INT64(&one, "feature_level", doc_level(d));
            BSON_APPEND_INT64(&one, "level_in_use", ctl_doc_int(d, "level_in_use", 1));
            bson_append_document_end(&arr, &one);
            if (!json)
                printf("node %-20s release %-8s schema %lld  knows level %lld, uses %lld\n",
                       doc_text(d, "_id", "?"), doc_text(d, "release", "<0.2.0"),
                       (long long)ctl_doc_int(d, "schema", 1), (long long)doc_level(d),
                       (long long)ctl_doc_int(d, "level_in_use", 1));
        }
        bson_append_array_end(&out, &arr);
        append_migrations(ctl, db.recorded ? db.version : 1, &out, json, &error, &ok);
    }
    free_live(&l);
    return ctl_finish_listing(&out, json, ok, "cohortctl schema", &error);
}
