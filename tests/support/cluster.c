/*
 * cluster.c - the cluster test harness (see cluster.h): config files, cohortd processes,
 * their logs, the database they share, noop journals and a private database server.
 *
 * Processes are reaped with waitpid(WNOHANG) polls so a wait always has a deadline. All
 * state lives in a small registry so cluster_cleanup_all() can kill what a failed
 * assertion left behind.
 */
#include "cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/store.h"
#include "store/insert.h"
#include "store/nodes.h"
#include "support.h"
#include "core/taskopts.h"

extern char **environ;

#define SETPRIV "/usr/bin/setpriv"
#define MAX_CLUSTERS 8
#define MAX_LOCALDBS 4
#define POLL_MS 10

static cluster_t *registry[MAX_CLUSTERS];
static char *localdbs[MAX_LOCALDBS];
static bool cleanup_registered;

/* ---- small helpers --------------------------------------------------------------------- */

static char *xstrdup(const char *s)
{
    char *copy = strdup(s ? s : "");
    cr_assert_not_null(copy, "out of memory");
    return copy;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    int rc = vasprintf(&out, fmt, ap);
    va_end(ap);
    cr_assert_geq(rc, 0, "out of memory");
    return out;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0, "cannot write %s: %s", path, strerror(errno));
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- processes ------------------------------------------------------------------------- */

/* Spawns argv[0] (a path) with stdin from /dev/null, stdout appended to out_path and stderr
 * to err_path (which may be the same file), in our environment changed by `env` (see
 * test_child_environment(); may be NULL). Fails the test if it cannot. */
static pid_t spawn(char *const *argv, const char *const *env, const char *out_path,
                   const char *err_path)
{
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    if (strcmp(out_path, err_path) == 0)
        posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
    else
        posix_spawn_file_actions_addopen(&files, STDERR_FILENO, err_path,
                                         O_WRONLY | O_CREAT | O_APPEND, 0644);

    /* Criterion may have changed signal handling; a node must start with the defaults. */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGCHLD);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    char **child_env = test_child_environment(env);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, argv[0], &files, &attr, argv, child_env);
    free(child_env);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&files);
    cr_assert_eq(rc, 0, "cannot spawn %s: %s", argv[0], strerror(rc));
    return pid;
}

pid_t cluster_spawn(cluster_t *c, char *const *argv, const char *log_path)
{
    cr_assert_lt(c->n_processes, CLUSTER_MAX_PROCESSES, "too many processes");
    pid_t pid = spawn(argv, NULL, log_path, log_path);
    c->processes[c->n_processes++] = pid;
    return pid;
}

void cluster_process_kill(cluster_t *c, pid_t pid)
{
    for (size_t i = 0; i < c->n_processes; i++) {
        if (c->processes[i] != pid)
            continue;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        c->processes[i] = c->processes[--c->n_processes];
        return;
    }
}

/* Waits up to timeout_ms for `pid` to exit. True and *status if it did. */
static bool wait_exit(pid_t pid, int64_t timeout_ms, int *status)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return true;
        if (r < 0 && errno != EINTR)
            return false;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(POLL_MS);
    }
}

static int scan_log(const char *path, const char *needle, const char *needle2,
                    bool (*visit)(const char *line, void *arg), void *arg);

/* "exited with status N" or "killed by signal N (NAME)", into `out`. */
static void describe_status(int status, char *out, size_t len)
{
    if (WIFEXITED(status))
        snprintf(out, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, len, "wait status 0x%x", status);
}

/* ---- the database client --------------------------------------------------------------- */

/* A client with short timeouts, so reads against a stopped server fail in seconds. */
static mongoc_client_t *make_client(const char *uri_string)
{
    static bool initialised;
    if (!initialised) {
        mongoc_init();
        initialised = true;
    }
    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_string, &error);
    cr_assert_not_null(uri, "bad MongoDB URI '%s': %s", uri_string, error.message);
    static const char *const timeouts[] = {MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
                                           MONGOC_URI_CONNECTTIMEOUTMS};
    for (size_t i = 0; i < 2; i++)
        if (!mongoc_uri_has_option(uri, timeouts[i]))
            mongoc_uri_set_option_as_int32(uri, timeouts[i], 2000);
    if (!mongoc_uri_has_option(uri, MONGOC_URI_SOCKETTIMEOUTMS))
        mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SOCKETTIMEOUTMS, 10000);
    mongoc_client_t *client = mongoc_client_new_from_uri_with_error(uri, &error);
    mongoc_uri_destroy(uri);
    cr_assert_not_null(client, "cannot create a client: %s", error.message);
    mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
    return client;
}

static mongoc_collection_t *queue_of(cluster_t *c, const char *service)
{
    char name[96];
    snprintf(name, sizeof name, "queue_%s", service);
    return mongoc_client_get_collection(c->client, c->db, name);
}

/* ---- clusters -------------------------------------------------------------------------- */

static void register_cleanup(void)
{
    if (!cleanup_registered) {
        atexit(cluster_cleanup_all);
        cleanup_registered = true;
    }
}

cluster_t *cluster_new(const cluster_options_t *o)
{
    register_cleanup();
    size_t slot = 0;
    while (slot < MAX_CLUSTERS && registry[slot])
        slot++;
    cr_assert_lt(slot, MAX_CLUSTERS, "too many clusters in one test");

    /* Everything that can fail the test comes before the first thing to clean up. */
    const char *uri = o->private_db ? NULL : o->uri ? o->uri : test_uri();
    cluster_t *c = calloc(1, sizeof *c);
    cr_assert_not_null(c, "out of memory");
    cr_assert(o->services[0].name, "a cluster needs at least one service");
    const char *tag = o->tag ? o->tag : "cluster";
    c->uri = uri ? xstrdup(uri) : NULL;
    c->db = test_db_name(tag);
    c->dir = test_tmpdir(tag);
    registry[slot] = c; /* from here on, cleanup covers what is started */
    c->tick_ms = o->tick_ms ? o->tick_ms : 200;
    c->takeover_ms = o->takeover_ms ? o->takeover_ms : 1500;
    c->shutdown_grace_ms = o->shutdown_grace_ms ? o->shutdown_grace_ms : 5000;
    for (size_t i = 0; i < CLUSTER_MAX_SERVICES && o->services[i].name; i++) {
        c->services[i].name = xstrdup(o->services[i].name);
        c->services[i].settings = xstrdup(o->services[i].settings);
        c->services[i].handler = o->services[i].handler ? xstrdup(o->services[i].handler) : NULL;
        c->n_services++;
    }
    if (o->private_db) {
        c->db_state = xasprintf("%s/db", c->dir);
        c->db_h2 = xasprintf("%s/db/data.mv.db", c->dir);
        c->db_port = cluster_free_port();
        c->uri = cluster_localdb_start(c->db_state, c->db_h2, c->db_port);
    }
    c->client = make_client(c->uri);
    return c;
}

/* SIGKILL every node still running and reap it. */
static void kill_all_nodes(cluster_t *c)
{
    for (size_t i = 0; i < c->n_nodes; i++) {
        cluster_node_t *n = &c->nodes[i];
        if (n->pid > 0) {
            kill(n->pid, SIGKILL);
            waitpid(n->pid, &n->wait_status, 0);
            n->pid = 0;
            n->exited = true;
        }
    }
}

static int run_localdb_script(const char *const *args, const char *out_path, const char *err_path);

/* Stops the private servers whose state directory is inside `dir` (all if NULL). */
static void stop_localdbs_under(const char *dir)
{
    size_t len = dir ? strlen(dir) : 0;
    for (size_t i = 0; i < MAX_LOCALDBS; i++) {
        if (!localdbs[i] || (dir && (strncmp(localdbs[i], dir, len) != 0 ||
                                     (localdbs[i][len] != '/' && localdbs[i][len] != '\0'))))
            continue;
        const char *args[] = {"stop", localdbs[i], NULL};
        run_localdb_script(args, "/dev/null", "/dev/null");
        free(localdbs[i]);
        localdbs[i] = NULL;
    }
}

void cluster_destroy(cluster_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < MAX_CLUSTERS; i++)
        if (registry[i] == c)
            registry[i] = NULL;
    kill_all_nodes(c);
    for (size_t i = 0; i < c->n_processes; i++) {
        kill(c->processes[i], SIGKILL);
        waitpid(c->processes[i], NULL, 0);
    }
    if (c->store)
        cohort_store_destroy(c->store);
    if (c->client) {
        mongoc_database_t *db = mongoc_client_get_database(c->client, c->db);
        mongoc_database_drop(db, NULL);
        mongoc_database_destroy(db);
        mongoc_client_destroy(c->client);
    }
    stop_localdbs_under(c->dir);
    const char *keep = getenv("COHORT_TEST_KEEP");
    if (keep && *keep && strcmp(keep, "0") != 0)
        fprintf(stderr, "cluster: kept %s\n", c->dir);
    else
        remove_tree(c->dir);
    for (size_t i = 0; i < c->n_nodes; i++) {
        free(c->nodes[i].config_path);
        free(c->nodes[i].log_path);
        for (size_t j = 0; j < CLUSTER_MAX_ENV; j++)
            free(c->nodes[i].env[j]);
    }
    for (size_t i = 0; i < c->n_services; i++) {
        free((char *)c->services[i].name);
        free((char *)c->services[i].settings);
        free((char *)c->services[i].handler);
    }
    free(c->db_state);
    free(c->db_h2);
    free(c->dir);
    free(c->db);
    free(c->uri);
    free(c);
}

void cluster_cleanup_all(void)
{
    for (size_t i = 0; i < MAX_CLUSTERS; i++)
        if (registry[i])
            cluster_destroy(registry[i]);
    stop_localdbs_under(NULL);
}

/* ---- nodes ----------------------------------------------------------------------------- */

/* COHORT_TEST_CLAIM_BATCH (see cluster.h): the claim_batch line every service section gets
 * unless its settings set one; NULL if the variable is unset or empty. */
static const char *claim_batch_override(void)
{
    const char *value = getenv("COHORT_TEST_CLAIM_BATCH");
    if (!value || !*value)
        return NULL;
    char *end = NULL;
    long n = strtol(value, &end, 10);
    cr_assert(*end == '\0' && n >= 1 && n <= 256,
              "COHORT_TEST_CLAIM_BATCH='%s' is not a number from 1 to 256", value);
    return value;
}

/* Whether the settings text has a line setting `key`. */
static bool settings_set(const char *settings, const char *key)
{
    size_t keylen = strlen(key);
    for (const char *line = settings; line && *line;) {
        line += strspn(line, " \t");
        if (strncmp(line, key, keylen) == 0 && line[keylen] && strchr(" \t=", line[keylen]))
            return true;
        const char *end = strchr(line, '\n');
        line = end ? end + 1 : NULL;
    }
    return false;
}

static char *node_config(const cluster_t *c, const cluster_node_t *n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f, "out of memory");
    fprintf(f,
            "# written by the cluster test harness\n"
            "[cluster]\n"
            "mongodb_uri = %s\n"
            "database = %s\n"
            "tick_ms = %lld\n"
            "takeover_ms = %lld\n"
            "shutdown_grace_ms = %lld\n"
            "node_id = %s\n"
            "log_level = info\n",
            c->uri, c->db, (long long)c->tick_ms, (long long)c->takeover_ms,
            (long long)c->shutdown_grace_ms, n->id);
    for (size_t i = 0; i < c->n_services; i++) {
        char handler[256];
        const char *file = c->services[i].handler ? c->services[i].handler : "cohort_noop.so";
        snprintf(handler, sizeof handler, "handlers/%s", file);
        bool external = strcmp(file, "external") == 0, absolute = file[0] == '/';
        fprintf(f, "\n[service:%s]\nhandler = %s\n", c->services[i].name,
                external || absolute ? file : test_build_path(handler));
        const char *settings = c->services[i].settings;
        for (const char *at = settings; at && *at;) {
            const char *mark = strstr(at, "@DIR@");
            size_t chunk = mark ? (size_t)(mark - at) : strlen(at);
            fwrite(at, 1, chunk, f);
            if (mark)
                fputs(c->dir, f);
            at = mark ? mark + strlen("@DIR@") : at + chunk;
        }
        fputc('\n', f);
        const char *batch = claim_batch_override();
        if (batch && !settings_set(settings, "claim_batch"))
            fprintf(f, "claim_batch = %s\n", batch);
    }
    fclose(f);
    return text;
}

cluster_node_t *cluster_add_node(cluster_t *c, const char *const *env)
{
    cr_assert_lt(c->n_nodes, CLUSTER_MAX_NODES, "too many nodes");
    cluster_node_t *n = &c->nodes[c->n_nodes];
    memset(n, 0, sizeof *n);
    n->cluster = c;
    n->index = (int)c->n_nodes + 1;
    snprintf(n->id, sizeof n->id, "n%d", n->index);
    n->config_path = xasprintf("%s/%s.ini", c->dir, n->id);
    n->log_path = xasprintf("%s/%s.log", c->dir, n->id);
    size_t k = 0;
    for (size_t i = 0; env && env[i]; i++) {
        cr_assert_lt(k, CLUSTER_MAX_ENV - 1, "too many environment variables for a node");
        n->env[k++] = xstrdup(env[i]);
    }
    char *text = node_config(c, n);
    write_file(n->config_path, text);
    free(text);
    c->n_nodes++;
    return n;
}

void cluster_node_start(cluster_node_t *n)
{
    cluster_t *c = n->cluster;
    cr_assert_eq(n->pid, 0, "node %s is already running", n->id);
    char *cohortd = xstrdup(n->cohortd ? n->cohortd : test_build_path("cohortd"));
    cr_assert_eq(access(cohortd, X_OK), 0, "%s is missing: build the project first", cohortd);

    const char *extra[CLUSTER_MAX_ENV + 2];
    size_t n_extra = 0;
    bool own_uri = false; /* the node's env names its own database address (a proxy) */
    for (size_t i = 0; i < CLUSTER_MAX_ENV && n->env[i]; i++) {
        own_uri |= strncmp(n->env[i], "MONGODB_URI=", strlen("MONGODB_URI=")) == 0;
        extra[n_extra++] = n->env[i];
    }
    char *uri_env = xasprintf("MONGODB_URI=%s", c->uri);
    if (!own_uri)
        extra[n_extra++] = uri_env;
    extra[n_extra] = NULL;

    /* setpriv execs cohortd in place (same pid) after arranging SIGKILL on our death. */
    char *with_setpriv[] = {SETPRIV, "--pdeathsig", "KILL", cohortd, "-c", n->config_path, NULL};
    char *direct[] = {cohortd, "-c", n->config_path, NULL};
    char **argv = access(SETPRIV, X_OK) == 0 ? with_setpriv : direct;
    n->pid = spawn(argv, extra, n->log_path, n->log_path);
    n->exited = false;
    n->paused = false;
    free(uri_env);
    free(cohortd);
}

void cluster_start_nodes(cluster_t *c, size_t count)
{
    for (size_t i = 0; i < count; i++)
        cluster_node_start(cluster_add_node(c, NULL));
}

bool cluster_node_alive(cluster_node_t *n)
{
    if (n->pid <= 0)
        return false;
    if (waitpid(n->pid, &n->wait_status, WNOHANG) == n->pid) {
        n->pid = 0;
        n->exited = true;
        return false;
    }
    return true;
}

void cluster_node_send_term(cluster_node_t *n)
{
    cr_assert_gt(n->pid, 0, "node %s is not running", n->id);
    kill(n->pid, SIGTERM);
    if (n->paused) {
        kill(n->pid, SIGCONT);
        n->paused = false;
    }
}

int64_t cluster_node_wait_exit(cluster_node_t *n, int64_t since_ms, int64_t timeout_ms)
{
    cr_assert_gt(n->pid, 0, "node %s is not running", n->id);
    if (!wait_exit(n->pid, timeout_ms, &n->wait_status))
        return -1;
    n->pid = 0;
    n->exited = true;
    return test_now_ms() - since_ms;
}

int64_t cluster_node_term(cluster_node_t *n, int64_t timeout_ms)
{
    int64_t start = test_now_ms();
    cluster_node_send_term(n);
    return cluster_node_wait_exit(n, start, timeout_ms);
}

static bool keep_last(const char *line, void *arg)
{
    snprintf(arg, 240, "%s", line);
    return true;
}

void cluster_node_assert_clean_exit(cluster_node_t *n)
{
    cr_assert(n->exited, "node %s has not exited", n->id);
    if (WIFEXITED(n->wait_status) && WEXITSTATUS(n->wait_status) == 0)
        return;
    char how[96];
    describe_status(n->wait_status, how, sizeof how);
    /* A sanitizer's report is long; its SUMMARY line says what went wrong. */
    char summary[240] = "";
    scan_log(n->log_path, "SUMMARY: ", NULL, keep_last, summary);
    cluster_dump_logs(n->cluster, 25);
    cr_assert_fail("node %s should exit 0 after SIGTERM but %s%s%s (COHORT_TEST_KEEP=1 keeps "
                   "%s)",
                   n->id, how, summary[0] ? "; " : "", summary, n->log_path);
}

int64_t cluster_node_stop_ok(cluster_node_t *n, int64_t timeout_ms)
{
    int64_t took = cluster_node_term(n, timeout_ms);
    cluster_assert(n->cluster, took >= 0, "node %s did not exit within %lld ms of SIGTERM", n->id,
                   (long long)timeout_ms);
    cluster_node_assert_clean_exit(n);
    return took;
}

void cluster_node_kill(cluster_node_t *n)
{
    cr_assert_gt(n->pid, 0, "node %s is not running", n->id);
    kill(n->pid, SIGKILL);
    waitpid(n->pid, &n->wait_status, 0);
    n->pid = 0;
    n->exited = true;
    n->paused = false;
}

void cluster_node_pause(cluster_node_t *n)
{
    cr_assert_gt(n->pid, 0, "node %s is not running", n->id);
    cr_assert_eq(kill(n->pid, SIGSTOP), 0, "SIGSTOP %s: %s", n->id, strerror(errno));
    n->paused = true;
}

void cluster_node_resume(cluster_node_t *n)
{
    cr_assert_gt(n->pid, 0, "node %s is not running", n->id);
    cr_assert_eq(kill(n->pid, SIGCONT), 0, "SIGCONT %s: %s", n->id, strerror(errno));
    n->paused = false;
}

cluster_node_t *cluster_node_by_id(cluster_t *c, const char *id)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        if (strcmp(c->nodes[i].id, id) == 0)
            return &c->nodes[i];
    return NULL;
}

static bool all_registered(void *arg)
{
    cluster_t *c = arg;
    mongoc_collection_t *nodes = mongoc_client_get_collection(c->client, c->db, "nodes");
    bool all = true;
    for (size_t i = 0; i < c->n_nodes && all; i++) {
        if (c->nodes[i].pid <= 0)
            continue;
        bson_t *filter = BCON_NEW("_id", BCON_UTF8(c->nodes[i].id));
        all = mongoc_collection_count_documents(nodes, filter, NULL, NULL, NULL, NULL) == 1;
        bson_destroy(filter);
    }
    mongoc_collection_destroy(nodes);
    return all;
}

bool cluster_wait_registered(cluster_t *c, int64_t timeout_ms)
{
    return test_wait_until(all_registered, c, timeout_ms);
}

/* ---- logs ------------------------------------------------------------------------------ */

/* Calls visit(line, arg) for each line containing the needles; stops when it returns
 * false. Returns the number of matching lines visited. */
static int scan_log(const char *path, const char *needle, const char *needle2,
                    bool (*visit)(const char *line, void *arg), void *arg)
{
    char *text = test_try_read_file(path);
    if (!text)
        return 0;
    int count = 0;
    char *line = text;
    while (*line) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        if ((!needle || strstr(line, needle)) && (!needle2 || strstr(line, needle2))) {
            count++;
            if (visit && !visit(line, arg))
                break;
        }
        if (!end)
            break;
        line = end + 1;
    }
    free(text);
    return count;
}

int cluster_log_count(cluster_node_t *n, const char *needle, const char *needle2)
{
    return scan_log(n->log_path, needle, needle2, NULL, NULL);
}

static bool keep_first(const char *line, void *arg)
{
    *(char **)arg = xstrdup(line);
    return false;
}

char *cluster_log_find(cluster_node_t *n, const char *needle, const char *needle2)
{
    char *found = NULL;
    scan_log(n->log_path, needle, needle2, keep_first, &found);
    return found;
}

bool cluster_wait_log(cluster_node_t *n, const char *needle, const char *needle2,
                      int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        if (cluster_log_count(n, needle, needle2) > 0)
            return true;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(20);
    }
}

typedef struct epoch_claims {
    long long epochs[256];
    int owners[256];
    size_t count;
    int node;
    char *why;
    size_t whylen;
    bool unique;
} epoch_claims_t;

static bool note_epoch(const char *line, void *arg)
{
    epoch_claims_t *e = arg;
    const char *at = strstr(line, "became primary (epoch ");
    long long epoch = at ? strtoll(at + strlen("became primary (epoch "), NULL, 10) : 0;
    for (size_t i = 0; i < e->count; i++) {
        if (e->epochs[i] == epoch && e->unique) {
            snprintf(e->why, e->whylen, "epoch %lld announced by n%d and n%d", epoch, e->owners[i],
                     e->node);
            e->unique = false;
        }
    }
    if (e->count < sizeof e->epochs / sizeof e->epochs[0]) {
        e->epochs[e->count] = epoch;
        e->owners[e->count++] = e->node;
    }
    return true;
}

bool cluster_epochs_unique(cluster_t *c, const char *service, char *why, size_t whylen)
{
    epoch_claims_t e = {.why = why, .whylen = whylen, .unique = true};
    char *tag = xasprintf(" service=%s ", service);
    for (size_t i = 0; i < c->n_nodes; i++) {
        e.node = c->nodes[i].index;
        scan_log(c->nodes[i].log_path, tag, "became primary (epoch ", note_epoch, &e);
    }
    free(tag);
    if (e.unique)
        snprintf(why, whylen, "%zu epoch(s), each announced once", e.count);
    return e.unique;
}

void cluster_dump_logs(cluster_t *c, int lines)
{
    for (size_t i = 0; i < c->n_nodes; i++) {
        char *text = test_try_read_file(c->nodes[i].log_path);
        fprintf(stderr, "---- last %d lines of %s (%s) ----\n", lines, c->nodes[i].id,
                c->nodes[i].log_path);
        if (!text)
            continue;
        size_t len = strlen(text);
        size_t start = len;
        int seen = 0;
        while (start > 0 && seen <= lines) {
            start--;
            if (text[start] == '\n' && start + 1 < len)
                seen++;
        }
        if (seen > lines)
            start++;
        fputs(text + start, stderr);
        free(text);
    }
    fflush(stderr);
}

/* ---- database -------------------------------------------------------------------------- */

static int64_t date_or_zero(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_DATE_TIME(&it))
        return bson_iter_date_time(&it);
    return 0;
}

bool cluster_read_primacy(cluster_t *c, const char *service, cluster_primacy_t *out)
{
    memset(out, 0, sizeof *out);
    mongoc_collection_t *services = mongoc_client_get_collection(c->client, c->db, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(services, filter, NULL, NULL);
    const bson_t *doc;
    bool found = mongoc_cursor_next(cursor, &doc);
    if (found) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "primary") && BSON_ITER_HOLDS_UTF8(&it))
            snprintf(out->primary, sizeof out->primary, "%s", bson_iter_utf8(&it, NULL));
        if (bson_iter_init_find(&it, doc, "epoch") && BSON_ITER_HOLDS_NUMBER(&it))
            out->epoch = bson_iter_as_int64(&it);
        out->last_active_ms = date_or_zero(doc, "last_active");
        out->elected_at_ms = date_or_zero(doc, "elected_at");
    }
    bool ok = found && !mongoc_cursor_error(cursor, NULL);
    mongoc_cursor_destroy(cursor);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    return ok;
}

bool cluster_wait_primary(cluster_t *c, const char *service, const char *not_this,
                          int64_t timeout_ms, cluster_primacy_t *out)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        if (cluster_read_primacy(c, service, out) && out->primary[0] &&
            !(not_this && strcmp(out->primary, not_this) == 0))
            return true;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(20);
    }
}

void cluster_start_elected(cluster_t *c, size_t count, const char *service, int64_t timeout_ms,
                           cluster_primacy_t *out)
{
    cluster_start_nodes(c, count);
    cluster_assert(c, cluster_wait_registered(c, 20000), "the nodes did not register in 20 s");
    cluster_assert(c, cluster_wait_primary(c, service, NULL, timeout_ms, out),
                   "no primary in %lld s", (long long)(timeout_ms / 1000));
}

bool cluster_wait_takeover(cluster_t *c, const char *service, const char *old_primary,
                           int64_t since_ms, int64_t timeout_ms, cluster_takeover_t *out)
{
    memset(out, 0, sizeof *out);
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        cluster_primacy_t now;
        bool ok = cluster_read_primacy(c, service, &now);
        int64_t read_at = test_now_ms();
        if (ok && strcmp(now.primary, old_primary) == 0)
            out->before = now;
        if (ok && now.primary[0] && strcmp(now.primary, old_primary) != 0) {
            out->after = now;
            out->elapsed_ms = read_at - since_ms;
            return true;
        }
        if (read_at >= deadline)
            return false;
        test_sleep_ms(20);
    }
}

int64_t cluster_try_count(cluster_t *c, const char *service, const char *filter_json)
{
    bson_error_t error;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &error);
    cr_assert_not_null(filter, "bad filter %s: %s", filter_json, error.message);
    mongoc_collection_t *tasks = queue_of(c, service);
    int64_t n = mongoc_collection_count_documents(tasks, filter, NULL, NULL, NULL, &error);
    mongoc_collection_destroy(tasks);
    bson_destroy(filter);
    return n < 0 ? -1 : n;
}

int64_t cluster_count_status(cluster_t *c, const char *service, const char *status)
{
    char *filter = xasprintf("{\"status\": \"%s\"}", status);
    int64_t n = cluster_try_count(c, service, filter);
    cr_assert_geq(n, 0, "cannot count %s tasks of %s", status, service);
    free(filter);
    return n;
}

typedef struct count_wait {
    cluster_t *c;
    const char *service;
    const char *filter_json;
    int64_t count;
} count_wait_t;

static bool count_reached(void *arg)
{
    count_wait_t *w = arg;
    return cluster_try_count(w->c, w->service, w->filter_json) >= w->count;
}

bool cluster_wait_count(cluster_t *c, const char *service, const char *filter_json,
                        int64_t count, int64_t timeout_ms)
{
    count_wait_t w = {c, service, filter_json, count};
    return test_wait_until(count_reached, &w, timeout_ms);
}

bool cluster_wait_succeeded(cluster_t *c, const char *service, int64_t count, int64_t timeout_ms)
{
    int64_t done = -1, progress_at = test_now_ms();
    while (test_now_ms() - progress_at <= timeout_ms) {
        int64_t n = cluster_try_count(c, service, "{\"status\": \"succeeded\"}");
        if (n >= count)
            return true;
        if (n > done) {
            done = n;
            progress_at = test_now_ms();
        }
        test_sleep_ms(20);
    }
    return false;
}

/* Runs cohortctl with `args`; its stdout goes to out_path, its stderr to cohortctl.log. */
static int run_ctl(cluster_t *c, const char *const *args, const char *out_path)
{
    char *ctl = xstrdup(test_build_path("cohortctl"));
    char *argv[32];
    size_t k = 0;
    argv[k++] = ctl;
    argv[k++] = "--database";
    argv[k++] = c->db;
    for (size_t i = 0; args[i]; i++) {
        cr_assert_lt(k, sizeof argv / sizeof argv[0] - 1, "too many cohortctl arguments");
        argv[k++] = (char *)args[i];
    }
    argv[k] = NULL;
    char *uri_env = xasprintf("MONGODB_URI=%s", c->uri);
    char *log = xasprintf("%s/cohortctl.log", c->dir);
    const char *env[] = {uri_env, NULL};
    pid_t pid = spawn(argv, env, out_path ? out_path : log, log);
    int status = 0;
    bool exited = wait_exit(pid, 60000, &status);
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    free(log);
    free(uri_env);
    free(ctl);
    return exited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int cluster_run_ctl(cluster_t *c, const char *const *args)
{
    return run_ctl(c, args, NULL);
}

/* ---- journal --------------------------------------------------------------------------- */

typedef struct id_list {
    char (*ids)[25];
    size_t count, cap;
} id_list_t;

static void id_list_add(id_list_t *l, const char *id)
{
    if (l->count == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 1024;
        l->ids = realloc(l->ids, l->cap * sizeof *l->ids);
        cr_assert_not_null(l->ids, "out of memory");
    }
    snprintf(l->ids[l->count++], 25, "%s", id);
}

static int compare_ids(const void *a, const void *b)
{
    return strcmp(a, b);
}

static bool is_oid_hex(const char *s)
{
    if (strlen(s) != 24)
        return false;
    for (size_t i = 0; i < 24; i++)
        if (!strchr("0123456789abcdef", s[i]))
            return false;
    return true;
}

static void db_task_ids(cluster_t *c, const char *service, id_list_t *out)
{
    mongoc_collection_t *tasks = queue_of(c, service);
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, &filter, opts, NULL);
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it)) {
            char id[25];
            bson_oid_to_string(bson_iter_oid(&it), id);
            id_list_add(out, id);
        }
    }
    bson_error_t error;
    bool failed = mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    mongoc_collection_destroy(tasks);
    cr_assert_not(failed, "cannot read the task ids of %s: %s", service, error.message);
}

static void note_node(cluster_journal_report_t *r, const char *node)
{
    for (size_t i = 0; i < r->n_nodes; i++) {
        if (strcmp(r->nodes[i], node) == 0) {
            r->per_node[i]++;
            return;
        }
    }
    if (r->n_nodes < CLUSTER_MAX_NODES) {
        snprintf(r->nodes[r->n_nodes], CLUSTER_ID_MAX, "%s", node);
        r->per_node[r->n_nodes++] = 1;
    }
}

static void read_journal(const char *path, cluster_journal_report_t *r, id_list_t *ids)
{
    char *text = test_try_read_file(path);
    cr_assert_not_null(text, "cannot read the journal %s: %s", path, strerror(errno));
    char *line = text;
    while (*line) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        char id[64], node[CLUSTER_ID_MAX];
        int attempt = 0;
        r->lines++;
        if (sscanf(line, "%63s %128s %d", id, node, &attempt) == 3 && is_oid_hex(id)) {
            id_list_add(ids, id);
            note_node(r, node);
            if (attempt != 1) {
                r->not_first_attempt++;
                snprintf(r->example, sizeof r->example, "attempt %d: %.120s", attempt, line);
            }
        } else {
            r->malformed++;
            snprintf(r->example, sizeof r->example, "malformed: %.120s", line);
        }
        if (!end)
            break;
        line = end + 1;
    }
    free(text);
}

void cluster_journal_check(cluster_t *c, const char *service, const char *path,
                           cluster_journal_report_t *r)
{
    memset(r, 0, sizeof *r);
    id_list_t journal = {0}, db = {0};
    read_journal(path, r, &journal);
    db_task_ids(c, service, &db);
    r->tasks_in_db = (int64_t)db.count;
    qsort(journal.ids, journal.count, sizeof *journal.ids, compare_ids);
    qsort(db.ids, db.count, sizeof *db.ids, compare_ids);

    /* Walk both sorted lists at once. */
    size_t i = 0, j = 0;
    while (i < journal.count || j < db.count) {
        if (i > 0 && i < journal.count && strcmp(journal.ids[i], journal.ids[i - 1]) == 0) {
            r->duplicates++;
            snprintf(r->example, sizeof r->example, "duplicate id %s", journal.ids[i]);
            i++;
            continue;
        }
        int cmp = i >= journal.count ? 1 : j >= db.count ? -1 : strcmp(journal.ids[i], db.ids[j]);
        if (cmp == 0) {
            i++;
            j++;
        } else if (cmp < 0) {
            r->unknown++;
            snprintf(r->example, sizeof r->example, "journal id %s is not a task", journal.ids[i]);
            i++;
        } else {
            r->missing++;
            snprintf(r->example, sizeof r->example, "task %s is not in the journal", db.ids[j]);
            j++;
        }
    }
    free(journal.ids);
    free(db.ids);
}

/* ---- a private database server --------------------------------------------------------- */

int cluster_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0, "bind: %s", strerror(errno));
    socklen_t len = sizeof addr;
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0, "getsockname: %s",
                 strerror(errno));
    close(fd);
    return ntohs(addr.sin_port);
}

/* Runs localdb.sh with `args` (NULL-terminated), stdout to out_path; returns its exit code. */
static int run_localdb_script(const char *const *args, const char *out_path, const char *err_path)
{
    char *script = xasprintf("%s/deploy/localdb/localdb.sh", COHORT_SOURCE_DIR);
    char *argv[16];
    size_t k = 0;
    argv[k++] = "/bin/bash";
    argv[k++] = script;
    for (size_t i = 0; args[i] && k < sizeof argv / sizeof argv[0] - 1; i++)
        argv[k++] = (char *)args[i];
    argv[k] = NULL;
    pid_t pid = spawn(argv, NULL, out_path, err_path);
    int status = 0;
    bool exited = wait_exit(pid, 120000, &status);
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    free(script);
    return exited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

char *cluster_localdb_start(const char *state_dir, const char *h2_file, int port)
{
    register_cleanup();
    cr_assert(mkdir(state_dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", state_dir,
              strerror(errno));
    bool known = false;
    for (size_t i = 0; i < MAX_LOCALDBS; i++)
        known = known || (localdbs[i] && strcmp(localdbs[i], state_dir) == 0);
    for (size_t i = 0; i < MAX_LOCALDBS && !known; i++) {
        if (!localdbs[i]) {
            localdbs[i] = xstrdup(state_dir);
            known = true;
        }
    }
    cr_assert(known, "too many private database servers");

    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    char *out = xasprintf("%s/start.out", state_dir);
    char *err = xasprintf("%s/script.log", state_dir);
    unlink(out);
    const char *args[] = {"start", state_dir, "--h2", h2_file, "--port", port_text, NULL};
    int rc = run_localdb_script(args, out, err);
    char *uri = test_try_read_file(out);
    char *log = test_try_read_file(err);
    cr_assert(rc == 0 && uri && strncmp(uri, "mongodb://", 10) == 0,
              "localdb.sh start failed (exit %d): %s", rc, log ? log : "(no output)");
    uri[strcspn(uri, "\r\n")] = '\0';
    free(log);
    free(err);
    free(out);
    return uri;
}

void cluster_db_stop(cluster_t *c)
{
    cr_assert_not_null(c->db_state, "the cluster has no private database");
    cluster_localdb_stop(c->db_state);
}

void cluster_db_start(cluster_t *c)
{
    cr_assert_not_null(c->db_state, "the cluster has no private database");
    char *uri = cluster_localdb_start(c->db_state, c->db_h2, c->db_port);
    cr_assert_str_eq(uri, c->uri, "the database came back at another address");
    free(uri);
}

void cluster_localdb_stop(const char *state_dir)
{
    char *err = xasprintf("%s/script.log", state_dir);
    const char *args[] = {"stop", state_dir, NULL};
    int rc = run_localdb_script(args, "/dev/null", err);
    cr_assert_eq(rc, 0, "localdb.sh stop %s failed (exit %d)", state_dir, rc);
    free(err);
}

/* ---- helpers added for the QueueService tests ------------------------------------------- */

int64_t cluster_node_rss_kb(cluster_node_t *n)
{
    if (n->pid <= 0)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)n->pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

void cluster_rss_sample(cluster_t *c, cluster_rss_peaks_t *peaks)
{
    for (size_t i = 0; i < c->n_nodes; i++) {
        int64_t kb = cluster_node_rss_kb(&c->nodes[i]);
        if (kb > peaks->peak_kb[i])
            peaks->peak_kb[i] = kb;
    }
    peaks->samples++;
}

int cluster_log_scan(cluster_node_t *n, const char *needle, const char *needle2,
                     bool (*visit)(const char *line, void *arg), void *arg)
{
    return scan_log(n->log_path, needle, needle2, visit, arg);
}

int cluster_log_count_all(cluster_t *c, const char *needle, const char *needle2)
{
    int count = 0;
    for (size_t i = 0; i < c->n_nodes; i++)
        count += cluster_log_count(&c->nodes[i], needle, needle2);
    return count;
}

bool cluster_read_service_doc(cluster_t *c, const char *service, bson_t *doc)
{
    bson_init(doc);
    mongoc_collection_t *services = mongoc_client_get_collection(c->client, c->db, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(services, filter, NULL, NULL);
    const bson_t *found;
    bool ok = mongoc_cursor_next(cursor, &found);
    if (ok)
        bson_concat(doc, found);
    ok = ok && !mongoc_cursor_error(cursor, NULL);
    mongoc_cursor_destroy(cursor);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    return ok;
}

int cluster_run_ctl_output(cluster_t *c, const char *const *args, char **out)
{
    char *path = xasprintf("%s/cohortctl.out", c->dir);
    unlink(path);
    int rc = run_ctl(c, args, path);
    *out = test_try_read_file(path);
    if (!*out)
        *out = xstrdup("");
    unlink(path);
    free(path);
    return rc;
}

/* ---- helpers added for the operations tests ---------------------------------------------- */

void cluster_node_reload(cluster_node_t *n)
{
    cr_assert_gt(n->pid, 0, "node %s is not running", n->id);
    cr_assert_eq(kill(n->pid, SIGHUP), 0, "SIGHUP %s: %s", n->id, strerror(errno));
}

void cluster_node_config_set(cluster_node_t *n, const char *key, const char *value)
{
    char *text = test_try_read_file(n->config_path);
    cr_assert_not_null(text, "cannot read %s: %s", n->config_path, strerror(errno));
    size_t keylen = strlen(key);
    char *line = text;
    while (*line) {
        const char *after = line + strspn(line, " \t");
        if (strncmp(after, key, keylen) == 0 && after[keylen] && strchr(" \t=", after[keylen]))
            break;
        char *end = strchr(line, '\n');
        line = end ? end + 1 : line + strlen(line);
    }
    cr_assert(*line, "%s has no line '%s = ...'", n->config_path, key);
    char *end = strchr(line, '\n');
    *line = '\0';
    char *next = xasprintf("%s%s = %s\n%s", text, key, value, end ? end + 1 : "");
    write_file(n->config_path, next);
    free(next);
    free(text);
}

bool cluster_ctl_node(cluster_t *c, const char *node_id, bson_t *entry)
{
    const char *args[] = {"nodes", "--json", NULL};
    bson_t doc;
    int rc = cluster_run_ctl_json(c, args, &doc);
    cluster_assert(c, rc == 0, "cohortctl nodes --json exited %d (-2: not JSON)", rc);
    bson_iter_t it, list;
    cluster_assert(c,
                   bson_iter_init_find(&it, &doc, "nodes") && BSON_ITER_HOLDS_ARRAY(&it) &&
                       bson_iter_recurse(&it, &list),
                   "cohortctl nodes --json has no \"nodes\" array");
    bool found = false;
    bson_init(entry);
    while (!found && bson_iter_next(&list)) {
        uint32_t len;
        const uint8_t *data;
        bson_t one;
        if (!BSON_ITER_HOLDS_DOCUMENT(&list))
            continue;
        bson_iter_document(&list, &len, &data);
        if (!bson_init_static(&one, data, len))
            continue;
        char id[CLUSTER_ID_MAX];
        cluster_doc_utf8(&one, "node_id", id, sizeof id);
        found = strcmp(id, node_id) == 0;
        if (found)
            bson_concat(entry, &one);
    }
    bson_destroy(&doc);
    return found;
}

void cluster_node_config_add(cluster_node_t *n, const char *lines)
{
    char *text = test_try_read_file(n->config_path);
    cr_assert_not_null(text, "cannot read %s: %s", n->config_path, strerror(errno));
    char *at = strstr(text, "[cluster]\n");
    cr_assert_not_null(at, "%s has no [cluster] section", n->config_path);
    at += strlen("[cluster]\n");
    char *next = xasprintf("%.*s%s\n%s", (int)(at - text), text, lines, at);
    write_file(n->config_path, next);
    free(next);
    free(text);
}

int cluster_node_listen(cluster_node_t *n, const char *more)
{
    int port = cluster_free_port();
    char *lines =
        xasprintf("http_listen = 127.0.0.1:%d%s%s", port, more ? "\n" : "", more ? more : "");
    cluster_node_config_add(n, lines);
    free(lines);
    return port;
}

char *cluster_api_auth(cluster_t *c, const char *name, const char *scopes)
{
    const char *create[] = {"tokens", "create", name, "--scopes", scopes, NULL};
    char *token = NULL;
    cluster_assert(c, cluster_run_ctl_output(c, create, &token) == 0,
                   "cannot create API token %s (%s)", name, scopes);
    token[strcspn(token, "\r\n")] = '\0';
    char *line = xasprintf("Authorization: Bearer %s\r\n", token);
    free(token);
    return line;
}

int cluster_run_ctl_json(cluster_t *c, const char *const *args, bson_t *out)
{
    char *text = NULL;
    int rc = cluster_run_ctl_output(c, args, &text);
    bson_error_t error;
    bson_init(out);
    if (rc == 0 && !bson_init_from_json(out, text, -1, &error)) {
        bson_init(out);
        rc = -2;
    }
    free(text);
    return rc;
}

/* ---- helpers added for the scheduling tests ---------------------------------------------- */

static cohort_store_t *cluster_store(cluster_t *c)
{
    if (!c->store) {
        bson_error_t error;
        c->store = cohort_store_new(c->uri, c->db, "cluster-test", &error);
        cr_assert_not_null(c->store, "cannot create a store: %s", error.message);
    }
    return c->store;
}

int64_t cluster_server_ms(cluster_t *c)
{
    cohort_store_t *store = cluster_store(c);
    mongoc_client_t *client = cohort_store_pop(store);
    int64_t now = 0;
    bson_error_t error;
    bool ok = cohort_store_server_time(store, client, &now, &error);
    cohort_store_push(store, client);
    cr_assert(ok, "cannot read the server's time: %s", error.message);
    return now;
}

void cluster_enqueue(cluster_t *c, const char *service, const char *data_json,
                     const char *options_json, char id[25])
{
    bson_error_t error;
    bson_t *data = data_json ? bson_new_from_json((const uint8_t *)data_json, -1, &error) : NULL;
    cr_assert(!data_json || data, "bad task data %s: %s", data_json, error.message);
    bson_t *opts = options_json ? bson_new_from_json((const uint8_t *)options_json, -1, &error)
                                : NULL;
    cr_assert(!options_json || opts, "bad task options %s: %s", options_json, error.message);
    cohort_task_options_t parsed;
    bson_error_t why;
    cr_assert(cohort_task_options_parse(opts, false, &parsed, &why),
              "task options %s refused: %s", options_json, why.message);

    cohort_new_task_t task = {.data = data, .tracked = false, .created_by = "cluster-test"};
    task.now_ms = cluster_server_ms(c);
    cohort_task_options_apply(&parsed, NULL, &task);
    task.unique_key = parsed.unique_key; /* set by the creator, as cohort_task_create() does */
    cohort_store_t *store = cluster_store(c);
    mongoc_client_t *client = cohort_store_pop(store);
    bson_oid_t oid;
    bool ok = cohort_store_insert_task(store, client, service, &task, &oid, NULL, NULL, &error);
    cohort_store_push(store, client);
    cr_assert(ok, "cannot create a task of %s: %s", service, error.message);
    if (id)
        bson_oid_to_string(&oid, id);
    if (opts)
        bson_destroy(opts);
    if (data)
        bson_destroy(data);
}

size_t cluster_sleeper_runs(const char *path, cluster_run_t **runs)
{
    *runs = NULL;
    char *text = test_try_read_file(path);
    if (!text)
        return 0;
    size_t n = 0, cap = 0;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            *runs = realloc(*runs, cap * sizeof **runs);
            cr_assert_not_null(*runs, "out of memory");
        }
        cluster_run_t *r = &(*runs)[n];
        long long start = 0, stop = 0, wall_start = 0, wall_stop = 0;
        int fields = sscanf(line, "%24s %128s %d %127s %lld %lld %71s %lld %lld", r->id, r->node,
                            &r->attempt, r->group, &start, &stop, r->kind, &wall_start,
                            &wall_stop);
        cr_assert(fields == 9 && is_oid_hex(r->id) && stop >= start && wall_stop >= wall_start,
                  "malformed line in the journal %s: '%s'", path, line);
        r->start_ms = start;
        r->end_ms = stop;
        r->wall_start_ms = wall_start;
        r->wall_end_ms = wall_stop;
        n++;
        if (!end)
            break;
        line = end + 1;
    }
    free(text);
    return n;
}

bool cluster_read_task(cluster_t *c, const char *service, const char *id, bson_t *doc)
{
    bson_init(doc);
    cr_assert(is_oid_hex(id), "'%s' is not a task id", id);
    bson_oid_t oid;
    bson_oid_init_from_string(&oid, id);
    mongoc_collection_t *tasks = queue_of(c, service);
    bson_t *filter = BCON_NEW("_id", BCON_OID(&oid));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(tasks, filter, NULL, NULL);
    const bson_t *found;
    bool ok = mongoc_cursor_next(cursor, &found);
    if (ok)
        bson_concat(doc, found);
    bson_error_t error;
    bool failed = mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
    bson_destroy(filter);
    mongoc_collection_destroy(tasks);
    cr_assert_not(failed, "cannot read task %s of %s: %s", id, service, error.message);
    return ok;
}
