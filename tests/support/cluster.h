/*
 * cluster.h - a harness for the cluster tests: several real cohortd processes sharing one
 * database, driven from a Criterion test.
 *
 * A cluster owns a temporary directory (one config file and one log file per node, plus
 * whatever the test puts there), a database of its own (test_db_name()) and a client to
 * read it. Nodes are spawned with posix_spawn, their stdout and stderr appended to their
 * log file, and are stopped (SIGTERM), killed (SIGKILL), paused (SIGSTOP) and resumed
 * (SIGCONT) by the test.
 *
 * Cleanup is not left to the test's happy path: every cluster (and every private database
 * server started here) is registered, and cluster_cleanup_all() - which tests name as their
 * Criterion .fini and which also runs at exit - kills every node still running, drops the
 * database and removes the directory. Where util-linux's setpriv exists, nodes also get
 * SIGKILL as parent-death signal, so even a test process that dies hard leaves none behind.
 *
 * Nothing here sleeps for correctness: waits poll with a deadline. A failed assertion prints
 * the tail of every node's log; COHORT_TEST_KEEP=1 keeps the directory (configs, logs) too.
 */
#ifndef COHORT_TEST_CLUSTER_H
#define COHORT_TEST_CLUSTER_H

#include <criterion/criterion.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CLUSTER_MAX_NODES 24
#define CLUSTER_MAX_SERVICES 6
#define CLUSTER_MAX_ENV 4
#define CLUSTER_ID_MAX 129
#define CLUSTER_MAX_PROCESSES 16

/* One [service:NAME] section; every node of the cluster hosts the same services. */
typedef struct cluster_service_spec {
    const char *name;
    /* Extra lines for the section, e.g. "workers = 2\nsleep_ms = 5" (may be NULL); "@DIR@"
     * stands for the cluster's directory. */
    const char *settings;
    /* The handler's file in build/handlers/ (NULL: "cohort_noop.so"; "external": the line
     * `handler = external`; an absolute path: that file). */
    const char *handler;
} cluster_service_spec_t;

typedef struct cluster_options {
    const char *tag;           /* names the directory and the database */
    int64_t tick_ms;           /* 0: 200 */
    int64_t takeover_ms;       /* 0: 1500 */
    int64_t shutdown_grace_ms; /* 0: 5000 */
    const char *uri;           /* NULL: MONGODB_URI */
    /* Start a private database server for this cluster (deploy/localdb, data in an H2 file,
     * on a free port) instead of using `uri`, so the test may stop and restart it. */
    bool private_db;
    cluster_service_spec_t services[CLUSTER_MAX_SERVICES];
} cluster_options_t;

typedef struct cluster cluster_t;

typedef struct cluster_node {
    cluster_t *cluster;
    int index;   /* 1-based */
    char id[32]; /* its node_id: "n1", "n2", ... */
    char *config_path;
    char *log_path;
    char *env[CLUSTER_MAX_ENV]; /* extra "KEY=VALUE" for the process; owned */
    const char *cohortd;        /* the program started: NULL for this build's cohortd, else
                                 * another's (another release's); not owned */
    pid_t pid;                  /* 0: not running (never started, or reaped) */
    bool paused;
    bool exited; /* reaped: see wait_status */
    int wait_status;
} cluster_node_t;

struct cluster {
    char *dir;
    char *db;
    char *uri;
    int64_t tick_ms, takeover_ms, shutdown_grace_ms;
    cluster_service_spec_t services[CLUSTER_MAX_SERVICES];
    size_t n_services;
    cluster_node_t nodes[CLUSTER_MAX_NODES];
    size_t n_nodes;
    mongoc_client_t *client; /* the test's own reads; short timeouts */
    char *db_state;          /* private_db: localdb.sh state directory, H2 file and port */
    char *db_h2;
    int db_port;
    struct cohort_store *store; /* cluster_enqueue()'s, made on first use */
    pid_t processes[CLUSTER_MAX_PROCESSES]; /* cluster_spawn()'s, killed at destroy */
    size_t n_processes;
};

/* A new cluster with no nodes yet. Fails the test on any problem. Freed by
 * cluster_cleanup_all() (or cluster_destroy()). */
cluster_t *cluster_new(const cluster_options_t *options);

/* Spawns another program of the test (argv[0] is a path: PATH is not searched; use
 * /usr/bin/env for that), stdout and stderr appended to log_path; killed (SIGKILL) by
 * cluster_destroy() if still running. */
pid_t cluster_spawn(cluster_t *c, char *const *argv, const char *log_path);

/* SIGKILLs and reaps a process of cluster_spawn(). */
void cluster_process_kill(cluster_t *c, pid_t pid);

/* Kills any node still running, drops the database, removes the directory. Idempotent. */
void cluster_destroy(cluster_t *c);

/* Destroys every cluster and stops every private database started by this process. Name it
 * as the Criterion .fini of each cluster test; it is also registered with atexit(). */
void cluster_cleanup_all(void);

/* Writes the next node's config file. `env` is a NULL-terminated list of "KEY=VALUE" added to
 * the process environment (may be NULL); a MONGODB_URI there replaces the cluster's (to put a
 * proxy between the node and the database). The node is not started. */
cluster_node_t *cluster_add_node(cluster_t *c, const char *const *env);

/* Spawns the node (build/cohortd -c FILE, or n->cohortd if set); MONGODB_URI is set to the
 * cluster's URI. */
void cluster_node_start(cluster_node_t *n);

/* cluster_add_node() + cluster_node_start() for `count` nodes without extra environment. */
void cluster_start_nodes(cluster_t *c, size_t count);

/* True while the process has not exited (reaps it if it has). */
bool cluster_node_alive(cluster_node_t *n);

/* Sends SIGTERM (and SIGCONT if the node is paused) without waiting. */
void cluster_node_send_term(cluster_node_t *n);

/* Waits up to timeout_ms for the node to exit and reaps it. Returns the milliseconds from
 * `since_ms` (a test_now_ms() time) to the exit, or -1 if it is still running. */
int64_t cluster_node_wait_exit(cluster_node_t *n, int64_t since_ms, int64_t timeout_ms);

/* SIGTERM, then waits up to timeout_ms for the exit. Returns the milliseconds it took to
 * exit, or -1 if it did not (the node is then still running). */
int64_t cluster_node_term(cluster_node_t *n, int64_t timeout_ms);

/* Asserts that the node has exited with status 0 (dumping the logs if not). */
void cluster_node_assert_clean_exit(cluster_node_t *n);

/* cluster_node_term() and asserts a clean exit with status 0 within timeout_ms. */
int64_t cluster_node_stop_ok(cluster_node_t *n, int64_t timeout_ms);

/* SIGKILL and reap (also works on a paused node). */
void cluster_node_kill(cluster_node_t *n);

void cluster_node_pause(cluster_node_t *n);
void cluster_node_resume(cluster_node_t *n);

/* The node whose node_id is `id`, or NULL. */
cluster_node_t *cluster_node_by_id(cluster_t *c, const char *id);

/* Waits until every started node has registered in the `nodes` collection (its first ping,
 * which also synchronises its clock, is done). Returns whether they all did in time. */
bool cluster_wait_registered(cluster_t *c, int64_t timeout_ms);

/* ---- logs ------------------------------------------------------------------------------ */

/* Lines of the node's log that contain `needle` and, if not NULL, also `needle2`. */
int cluster_log_count(cluster_node_t *n, const char *needle, const char *needle2);

/* The first such line (without its newline), or NULL; caller frees. */
char *cluster_log_find(cluster_node_t *n, const char *needle, const char *needle2);

/* Polls until cluster_log_count() > 0. */
bool cluster_wait_log(cluster_node_t *n, const char *needle, const char *needle2,
                      int64_t timeout_ms);

/* Checks that across all nodes' logs each epoch of `service` was announced ("became primary
 * (epoch N") at most once. On a duplicate returns false and describes it in `why`. */
bool cluster_epochs_unique(cluster_t *c, const char *service, char *why, size_t whylen);

/* Prints the last `lines` lines of every node's log to stderr (for failure reports). */
void cluster_dump_logs(cluster_t *c, int lines);

/* Fails the test like cr_assert_fail(), after printing the tail of every node's log. */
#define cluster_assert(c, cond, ...)                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            cluster_dump_logs((c), 25);                                                            \
            cr_assert_fail(__VA_ARGS__);                                                           \
        }                                                                                          \
    } while (0)

/* ---- database -------------------------------------------------------------------------- */

typedef struct cluster_primacy {
    char primary[CLUSTER_ID_MAX]; /* "" if none */
    int64_t epoch;
    int64_t last_active_ms; /* server time; 0 if unset */
    int64_t elected_at_ms;  /* server time; 0 if unset */
} cluster_primacy_t;

/* Reads the `services` document of `service`. False on a database error or if there is no
 * document yet (out is then zeroed). Never fails the test. */
bool cluster_read_primacy(cluster_t *c, const char *service, cluster_primacy_t *out);

/* Polls until `service` has a primary other than `not_this` (NULL or "": any primary).
 * Returns whether it did; `out` holds the last reading. */
bool cluster_wait_primary(cluster_t *c, const char *service, const char *not_this,
                          int64_t timeout_ms, cluster_primacy_t *out);

/* Starts `count` nodes and waits for them to register (20 s) and for `service` to have a
 * primary (timeout_ms, a whole number of seconds), which *out then describes. Fails the test
 * otherwise. */
void cluster_start_elected(cluster_t *c, size_t count, const char *service, int64_t timeout_ms,
                           cluster_primacy_t *out);

/* A change of primary, seen by polling the services document every 20 ms. */
typedef struct cluster_takeover {
    cluster_primacy_t before; /* the last reading that still named the old primary */
    cluster_primacy_t after;  /* the first reading naming another node */
    int64_t elapsed_ms;       /* from `since_ms` to the end of that first reading: an upper
                               * bound, late by at most one poll interval plus a read */
} cluster_takeover_t;

/* Polls until `service` has a primary that is neither `old_primary` nor none. `since_ms`
 * (test_now_ms() time, e.g. of a kill) is where elapsed_ms counts from. */
bool cluster_wait_takeover(cluster_t *c, const char *service, const char *old_primary,
                           int64_t since_ms, int64_t timeout_ms, cluster_takeover_t *out);

/* Counts tasks of queue_<service> matching the JSON filter; -1 on a database error. */
int64_t cluster_try_count(cluster_t *c, const char *service, const char *filter_json);

/* Tasks of `service` with status `status` ("pending", "claimed", ...); fails the test on a
 * database error. */
int64_t cluster_count_status(cluster_t *c, const char *service, const char *status);

/* Polls until at least `count` tasks of `service` match the JSON filter (database errors
 * just mean "not yet"). */
bool cluster_wait_count(cluster_t *c, const char *service, const char *filter_json,
                        int64_t count, int64_t timeout_ms);

/* Polls until `count` tasks of `service` are succeeded (database errors just mean "not
 * yet"). Gives up once no task has succeeded for `timeout_ms`: a bound on progress, not on
 * the whole wait, so a busy machine only makes it longer. */
bool cluster_wait_succeeded(cluster_t *c, const char *service, int64_t count, int64_t timeout_ms);

/* Runs build/cohortctl -c <node 1's config> ARGS... (NULL-terminated) with the cluster's
 * MONGODB_URI and returns its exit status (-1 if it did not exit normally). Its output is
 * appended to <dir>/cohortctl.log. */
int cluster_run_ctl(cluster_t *c, const char *const *args);

/* ---- journal --------------------------------------------------------------------------- */

/* What a noop journal (lines "<task id> <node id> <attempt>") says about a service's queue. */
typedef struct cluster_journal_report {
    int64_t lines;
    int64_t malformed;   /* lines that are not "<24 hex> <node> <attempt>" */
    int64_t tasks_in_db; /* documents in queue_<service> */
    int64_t duplicates;  /* journal lines repeating an id seen before */
    int64_t missing;     /* tasks in the db absent from the journal */
    int64_t unknown;     /* journal ids that are not tasks in the db */
    int64_t not_first_attempt;
    char nodes[CLUSTER_MAX_NODES][CLUSTER_ID_MAX]; /* distinct node ids, in order seen */
    int64_t per_node[CLUSTER_MAX_NODES];
    size_t n_nodes;
    char example[160]; /* one offending line or id, for the failure message */
} cluster_journal_report_t;

/* Reads the journal at `path` and every task id of `service` from the database. Fails the
 * test if either cannot be read. */
void cluster_journal_check(cluster_t *c, const char *service, const char *path,
                           cluster_journal_report_t *report);

/* ---- a private database server (for tests that stop it) -------------------------------- */

/* For a private_db cluster: stop its server cleanly (localdb.sh stop), and start it again on
 * the same port with the same H2 file. */
void cluster_db_stop(cluster_t *c);
void cluster_db_start(cluster_t *c);

/* A TCP port that was free a moment ago (bind port 0, read it, close). */
int cluster_free_port(void);

/* Starts deploy/localdb/localdb.sh in `state_dir` with data in the H2 file `h2_file` on
 * `port`; returns its URI (caller frees). Registered: cluster_cleanup_all() stops it. */
char *cluster_localdb_start(const char *state_dir, const char *h2_file, int port);

/* Stops it cleanly (localdb.sh stop); fails the test if the script fails. */
void cluster_localdb_stop(const char *state_dir);

/* ---- helpers added for the QueueService tests (leases, batches, purge, memory) ----------- */

/* The node's resident set size (VmRSS of /proc/PID/status) in KiB; -1 if it is not running
 * or the value cannot be read. */
int64_t cluster_node_rss_kb(cluster_node_t *n);

/* Peak VmRSS per node (indexed like c->nodes), updated by cluster_rss_sample(). */
typedef struct cluster_rss_peaks {
    int64_t peak_kb[CLUSTER_MAX_NODES];
    int64_t samples; /* sampling rounds taken */
} cluster_rss_peaks_t;

/* Reads every running node's VmRSS once and raises the peaks. */
void cluster_rss_sample(cluster_t *c, cluster_rss_peaks_t *peaks);

/* Calls visit(line, arg) for each line of the node's log containing `needle` and, if not
 * NULL, `needle2`, in order, until visit returns false (visit may be NULL). Returns the
 * number of lines visited. */
int cluster_log_scan(cluster_node_t *n, const char *needle, const char *needle2,
                     bool (*visit)(const char *line, void *arg), void *arg);

/* cluster_log_count() summed over every node of the cluster. */
int cluster_log_count_all(cluster_t *c, const char *needle, const char *needle2);

/* Copies the `services` document of `service` into *doc (initialised by this call; destroy
 * it). False if there is none or on a database error (then *doc is empty). */
bool cluster_read_service_doc(cluster_t *c, const char *service, bson_t *doc);

/* cluster_run_ctl(), but its stdout is returned in *out (caller frees; never NULL on
 * return); stderr still goes to <dir>/cohortctl.log. */
int cluster_run_ctl_output(cluster_t *c, const char *const *args, char **out);

/* ---- helpers added for the operations tests (registry, settings, reload) ----------------- */

/* Sends SIGHUP (the node re-reads its config file). */
void cluster_node_reload(cluster_node_t *n);

/* Rewrites the node's config file with the first line "KEY = ..." replaced by
 * "KEY = VALUE" (the node sees it on its next SIGHUP or start). Fails the test if the file has
 * no such line. */
void cluster_node_config_set(cluster_node_t *n, const char *key, const char *value);

/* Adds `lines` (e.g. "http_listen = 127.0.0.1:PORT") at the top of the node's [cluster]
 * section. */
void cluster_node_config_add(cluster_node_t *n, const char *lines);

/* Adds "http_listen = 127.0.0.1:<a free port>" and `more` (config lines; may be NULL) to the
 * node's [cluster] section, as cluster_node_config_add() does; returns the port. */
int cluster_node_listen(cluster_node_t *n, const char *more);

/* Creates API token `name` with `scopes` ("work,read") through `cohortctl tokens create` and
 * returns the request header line "Authorization: Bearer <token>\r\n" (caller frees). Fails
 * the test if cohortctl fails. */
char *cluster_api_auth(cluster_t *c, const char *name, const char *scopes);

/* Runs cohortctl like cluster_run_ctl_output() and parses its stdout as one JSON document into
 * *out (initialised by this call; destroy it). Returns the exit status; -2 if it exited 0 but
 * its output is not JSON (*out is then empty). */
int cluster_run_ctl_json(cluster_t *c, const char *const *args, bson_t *out);

/* The entry of `node_id` in `cohortctl nodes --json`, copied into *entry (initialised by this
 * call; destroy it). False if the node is not listed; fails the test if cohortctl does. */
bool cluster_ctl_node(cluster_t *c, const char *node_id, bson_t *entry);

/* ---- helpers added for the scheduling tests (groups, switches, timeouts) ---------------- */

/* COHORT_TEST_CLAIM_BATCH=N in the test's environment gives every service section the harness
 * writes "claim_batch = N", unless the test's own settings set claim_batch (so the core
 * cluster tests can be rerun with batch claims; see tests/CMakeLists.txt). */

/* Creates one task of `service` through the product's own path (the task options parser that
 * cohortctl enqueue and cohort_task_create() use, then cohort_store_insert_task()), stamped
 * with the server's time. `options_json` (may be NULL) are task options such as
 * {"group": "a", "priority": 5, "kind": "k", "task_timeout_ms": 500}; the nodes' service
 * defaults are not applied (the test does not read their config). `data_json` may be NULL.
 * `id` (may be NULL) receives the task's id. Fails the test on a bad option or a database
 * error. */
void cluster_enqueue(cluster_t *c, const char *service, const char *data_json,
                     const char *options_json, char id[25]);

/* The database server's clock now (ms since the Unix epoch): the clock that nodes'
 * cohort_now_ms() follows. Fails the test on a database error. */
int64_t cluster_server_ms(cluster_t *c);

/* One line of a sleeper journal (tests/support/handlers/sleeper.c). */
typedef struct cluster_run {
    char id[25];
    char node[CLUSTER_ID_MAX];
    int attempt;
    char group[128]; /* "-": none */
    char kind[72];   /* "-": none */
    int64_t start_ms, end_ms; /* cluster clock (each node's estimate of the server's) */
    /* The host's wall clock (CLOCK_REALTIME): one clock for every node of a cluster, which
     * all run on this machine; the run is inside [wall_start_ms, wall_end_ms]. */
    int64_t wall_start_ms, wall_end_ms;
} cluster_run_t;

/* Reads a sleeper journal (a missing file is an empty journal) into *runs (caller frees);
 * returns the number of runs. Fails the test on a malformed line. */
size_t cluster_sleeper_runs(const char *path, cluster_run_t **runs);

/* Copies the task `id` (24 hex digits) of `service` into *doc (initialised by this call;
 * destroy it). False if there is no such task. Fails the test on a database error. */
bool cluster_read_task(cluster_t *c, const char *service, const char *id, bson_t *doc);

/* ---- task documents (cluster_tasks.c) ---------------------------------------------------- */

/* A copy of the string at `key` of doc into out (len bytes, truncated); "" if absent or not a
 * string. */
void cluster_doc_utf8(const bson_t *doc, const char *key, char *out, size_t len);

/* The number at `key` of doc as an int64; 0 if absent or not a number. */
int64_t cluster_doc_number(const bson_t *doc, const char *key);

/* What the cluster tests read of a task document; "" and 0 where a field is absent. */
typedef struct cluster_task_view {
    char id[25];
    char status[16];
    char claimed_by[CLUSTER_ID_MAX];
    int64_t attempts;
    int64_t heartbeat_at_ms;        /* server time of the last claim or check-in */
    int history;                    /* entries */
    int succeeded_entries;          /* entries with outcome "succeeded" */
    char last_node[CLUSTER_ID_MAX]; /* node of the last entry */
    int64_t last_attempt;           /* attempt of the last entry */
    char last_outcome[16];          /* outcome of the last entry */
    int64_t last_run_ms;            /* ended_at - started_at of the last entry */
} cluster_task_view_t;

/* Fills *v from the task document doc. */
void cluster_task_view(const bson_t *doc, cluster_task_view_t *v);

/* Reads every task of `service` into out (room for max); returns how many. Fails the test if
 * there are more than max or on a database error. */
size_t cluster_read_task_views(cluster_t *c, const char *service, cluster_task_view_t *out,
                               size_t max);

#endif
