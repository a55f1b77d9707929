/*
 * cohort/handler.h - the handler ABI of Cohort.
 *
 * A handler is a shared object that exports one symbol, `cohort_handler`, of type
 * cohort_handler_t. cohortd loads it with dlopen(), checks abi_version, calls init() once
 * per service that names it, then calls primary_work() on the service's primary every tick,
 * process_task() on the service's worker threads for every task this node claims, and
 * on_tasks_completed() on the primary once a tracked batch has drained. At load, the node
 * logs "handler 'NAME' loaded from PATH (ABI version N)".
 *
 * Where init() runs, each time followed by destroy() when that user is done:
 *   - `cohortd --check-config`, to judge the options (no database: cohort_task_create,
 *     cohort_get/set and the other data calls fail with COHORT_ERROR_DATABASE there);
 *   - each service that names the handler, when the node starts (a reload on SIGHUP does
 *     not call init() again: it hands the new options to reload(), and cannot add services);
 *   - each child worker process of a service with `isolation = process`, before its first
 *     task.
 * So init() must be cheap and repeatable, with no effect another init() would trip over.
 *
 * History: ABI 1 had init, destroy, primary_work, process_task. ABI 2 added
 * on_tasks_completed, reload, batches, generic data (cohort_get/cohort_set), cohort_now_ms
 * and the unique_key task option. ABI 3 added `kinds`, the scheduling task options
 * (priority, delay_ms, not_before, not_after, kind, group, coalesce_key, task_timeout_ms)
 * and the cohort_task_kind/group/priority accessors. ABI 4 added the atomic generic-data
 * calls cohort_data_inc and cohort_data_cas, the unsuccessful tasks of a batch
 * (cohort_batch_next_unsuccessful) and the cohort_task_status/last_error accessors.
 *
 * The handler calls back into the node only through the cohort_* functions declared here
 * (they are exported by the cohortd executable, and they alone: a handler that calls any
 * other function of the daemon fails to load; a handler links with nothing but libbson).
 *
 * Stability: this header is versioned by COHORT_HANDLER_ABI_VERSION. A release that adds to
 * the ABI raises the version and appends fields to cohort_handler_t; cohortd keeps loading
 * handlers built against any older version it knows (from 1 up to its own), and refuses
 * handlers built for a newer one with a message naming both versions.
 *
 * Threads: process_task() runs concurrently on up to `workers` threads of a service; it must
 * be thread-safe with respect to the handler's state. With `isolation = process` in the
 * service's section, process_task() runs instead in child worker processes (one task at a
 * time each); every child calls init() with the same options first, and destroy() at exit.
 * init(), primary_work(), on_tasks_completed(), reload() and destroy() run on the node's
 * main thread, never concurrently with each other.
 *
 * Ownership: every pointer the node passes to a callback is owned by the node and valid only
 * for the duration of that call, unless stated otherwise. Pointers returned by cohort_*
 * accessors follow the same rule.
 *
 * Which call is allowed where. A call is made with the ctx (or task, batch) of the callback
 * it runs in, on that callback's thread; a ctx is never valid in another thread or after
 * its callback returned. "fenced": the write applies only while this node is primary under
 * the callback's epoch, else it fails with COHORT_ERROR_NOT_PRIMARY and changes nothing.
 * "deferred": applied atomically with the batch's completion, discarded if it fails.
 *
 *   call                       init/reload  primary_work  process_task  on_tasks_completed
 *   cohort_ctx_*, cohort_log   yes          yes           yes           yes
 *   cohort_now_ms              yes          yes           yes           yes
 *   cohort_task_create         immediate    fenced        immediate     fenced
 *   cohort_get                 yes          yes           yes           yes (sees its own
 *                                                                       deferred sets)
 *   cohort_set                 immediate    fenced        immediate     deferred
 *   cohort_data_inc / _cas     immediate    fenced        immediate     refused
 *                                                                       (COHORT_ERROR_INVALID)
 *   cohort_task_* accessors    -            -             its task      the batch's task
 *   cohort_task_set_error      -            -             its task      -
 *   cohort_batch_*             -            -             -             its batch
 *
 * init() and reload() run on the main thread (init() in a worker process for isolation =
 * process), with no database during --check-config; "immediate" writes need none there
 * and fail with COHORT_ERROR_DATABASE without one.
 */
#ifndef COHORT_HANDLER_H
#define COHORT_HANDLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COHORT_HANDLER_ABI_VERSION 4
#define COHORT_HANDLER_SYMBOL "cohort_handler"

#if defined(__GNUC__)
#define COHORT_HANDLER_EXPORT __attribute__((visibility("default")))
#define COHORT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define COHORT_HANDLER_EXPORT
#define COHORT_PRINTF(f, a)
#endif

/* The major version of libbson the handler was built against. bson_t and bson_value_t cross
 * this ABI, so cohortd refuses a handler built against another major version of libbson,
 * with one line naming both. Every object file that includes this header carries it (a weak
 * definition, so a handler of several files still links); a handler built before it was
 * added carries none and loads as before. Do not define COHORT_HANDLER_BSON_MAJOR yourself:
 * it exists so that a test can build a mismatched handler. */
#define COHORT_HANDLER_BSON_SYMBOL "cohort_handler_bson_major"
#ifndef COHORT_HANDLER_BSON_MAJOR
#define COHORT_HANDLER_BSON_MAJOR BSON_MAJOR_VERSION
#endif
#if defined(__GNUC__) && !defined(COHORT_DAEMON)
extern const int cohort_handler_bson_major; /* external linkage in C++ too */
__attribute__((weak, visibility("default"))) const int cohort_handler_bson_major =
    COHORT_HANDLER_BSON_MAJOR;
#endif

/* Every function declared from here on is exported by cohortd, and nothing else is: cohortd
 * is built with hidden visibility, so a handler that calls any other function of the daemon
 * fails to load ("calls 'NAME', which is not part of the handler ABI"). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* Opaque: the call context (service, node, role), a task, and a completed tracked batch. */
typedef struct cohort_ctx cohort_ctx_t;
typedef struct cohort_task cohort_task_t;
typedef struct cohort_batch cohort_batch_t;

/* What process_task() reports. Any other value is a handler bug: the task is failed with
 * the message "handler returned invalid outcome N". */
typedef enum cohort_outcome {
    COHORT_TASK_SUCCEEDED = 0, /* done; the task is marked succeeded */
    COHORT_TASK_RETRY = 1,     /* transient failure; retried with backoff up to max_attempts */
    COHORT_TASK_FAILED = 2,    /* permanent failure; failed at once, never retried */
} cohort_outcome_t;

typedef enum cohort_log_level {
    COHORT_LOG_DEBUG = 0,
    COHORT_LOG_INFO = 1,
    COHORT_LOG_WARN = 2,
    COHORT_LOG_ERROR = 3,
} cohort_log_level_t;

/* A key of the service's config section that cohortd does not know itself. */
typedef struct cohort_option {
    const char *key;
    const char *value;
    int line; /* line number in the config file, for error messages */
} cohort_option_t;

/* An error from a cohort_* call: a stable code and a message a person can act on. */
typedef enum cohort_error_code {
    COHORT_OK = 0,
    COHORT_ERROR_INVALID = 1,     /* bad argument (e.g. task data that is not a document) */
    COHORT_ERROR_NOT_PRIMARY = 2, /* primary-only call made without a valid primary lease */
    COHORT_ERROR_DATABASE = 3,    /* MongoDB failed or is unreachable; nothing was written */
    COHORT_ERROR_EXISTS = 4,      /* a task with this unique_key exists already: a no-op */
} cohort_error_code_t;

typedef struct cohort_error {
    cohort_error_code_t code;
    char message[256];
} cohort_error_t;

typedef struct cohort_handler {
    uint32_t abi_version; /* always COHORT_HANDLER_ABI_VERSION */
    const char *name;     /* short name, for logs */

    /* Optional. Called once per service that uses this handler, before any other callback.
     * `options` are the service section's keys cohortd does not know; reject a bad or unknown
     * one by returning false after cohort_ctx_set_error(). *state is handed to every other
     * callback and to destroy(). */
    bool (*init)(cohort_ctx_t *ctx, const cohort_option_t *options, size_t n_options,
                 void **state);

    /* Optional. Called once at shutdown, after the last task finished. */
    void (*destroy)(void *state);

    /* Optional. Called on the service's primary once per tick, while its primary lease is
     * valid. Create tasks here with cohort_task_create(); keep it short (heavy work belongs in
     * tasks). Return false (with cohort_ctx_set_error()) to have an error logged. */
    bool (*primary_work)(cohort_ctx_t *ctx, void *state);

    /* Required. Processes one claimed task. Runs on a worker thread. Execution is
     * at-least-once: a task may run again if a node dies mid-run, so make it idempotent. */
    cohort_outcome_t (*process_task)(cohort_ctx_t *ctx, void *state, cohort_task_t *task);

    /* ABI 2. Optional. Called on the primary, on the main thread, once every tracked task of
     * a batch has finished (succeeded or failed) and at least one tick has passed. Iterate
     * the batch's succeeded tasks with cohort_batch_next() and (ABI 4) the others with
     * cohort_batch_next_unsuccessful(); memory stays constant whatever the batch size.
     *
     * Guarantees: "batch N is completed" is recorded exactly once, in the same atomic write
     * that applies every cohort_set() made during this call. The callback body itself runs
     * at least once: if the primary dies or loses primacy before that write, the next
     * primary calls it again for the same batch id. So effects outside Cohort should be keyed
     * by cohort_batch_id() to be idempotent; effects made with cohort_set() need nothing.
     * Return false (with cohort_ctx_set_error()) to have the batch retried next tick.
     * A long callback keeps primacy: a helper thread renews the lease while it runs, for at
     * most 10 x takeover_ms (the same holds for primary_work). */
    bool (*on_tasks_completed)(cohort_ctx_t *ctx, void *state, cohort_batch_t *batch);

    /* ABI 2. Optional. The node received SIGHUP and the service's handler options changed:
     * apply `options` (the whole new set) and return true, or return false (with
     * cohort_ctx_set_error()) to refuse; the handler then keeps its old options. Having this
     * callback is how a handler declares its options reloadable: without it, a changed
     * option makes the node refuse the reload. Runs on the main thread while workers may be
     * running process_task(): synchronise what they share. */
    bool (*reload)(cohort_ctx_t *ctx, void *state, const cohort_option_t *options,
                   size_t n_options);

    /* ABI 3. Optional. The task kinds this handler serves, as a NULL-terminated list of
     * names (1-64 of [A-Za-z0-9_-]). A node whose handler declares kinds claims only tasks
     * of those kinds and tasks without a kind (an external worker's claim names kind-less
     * tasks with null instead: docs/HANDLERS.md, Kinds); NULL serves every kind. */
    const char *const *kinds;
} cohort_handler_t;

/* ---- context --------------------------------------------------------------------------- */

const char *cohort_ctx_service(const cohort_ctx_t *ctx);
const char *cohort_ctx_node_id(const cohort_ctx_t *ctx);
/* True while this node holds a valid primary lease for the service. */
bool cohort_ctx_is_primary(const cohort_ctx_t *ctx);
/* The epoch of this node's current primacy, or 0 if it is not primary. */
int64_t cohort_ctx_epoch(const cohort_ctx_t *ctx);
/* Now, in ms since the Unix epoch, on the cluster clock (the database server's time as this
 * node measures it; ABI 2). Use it rather than the node's own clock for anything other nodes
 * must agree on, such as which period a leaderboard is in. */
int64_t cohort_now_ms(const cohort_ctx_t *ctx);
/* Sets the message reported when init() or primary_work() returns false. */
void cohort_ctx_set_error(cohort_ctx_t *ctx, const char *fmt, ...) COHORT_PRINTF(2, 3);
/* One log line, tagged with the node, service and role. */
void cohort_log(cohort_ctx_t *ctx, cohort_log_level_t level, const char *fmt, ...)
    COHORT_PRINTF(3, 4);

/* ---- tasks ----------------------------------------------------------------------------- */

/* Creates one task of the context's service with `data` (copied; may be NULL for {}). A
 * `data` with a key given twice in one document, an empty key, a key starting with '$', more
 * than 64 levels of nesting or over 8 MiB fails with COHORT_ERROR_INVALID naming the field
 * (the database would refuse it); cohort_set and cohort_data_cas check their values the same
 * way, except that a value's keys may start with '$'.
 * `opts` may be NULL or a document of options:
 *   tracked (bool, default true): the task belongs to the service's open tracked batch.
 *   unique_key (string, ABI 2): at most one task with this key ever exists in the service
 *     (a unique index enforces it); creating another fails with COHORT_ERROR_EXISTS and
 *     changes nothing. Makes primary_work idempotent across failover.
 * Scheduling options (ABI 3); the service's section gives the defaults (`priority`,
 * `not_after_ms`, `task_timeout_ms`, and `kind.NAME.KEY` per kind):
 *   priority (int32, -1000000..1000000, default 0): higher is claimed first; FIFO within one.
 *   delay_ms (int, >= 0) or not_before (date, or int ms since the epoch): the task cannot be
 *     claimed before then.
 *   not_after (date or int ms) or not_after_ms (int, relative to when it is due): if still
 *     pending then, the task's priority is raised by the service's not_after_boost, once.
 *   kind (string, 1-64 of [A-Za-z0-9_-]): see `kinds`; pause, block and counts work per kind.
 *   group (string, 1-512 bytes): no two tasks of one group run at the same time anywhere.
 *   coalesce_key (string, 1-512 bytes): while a pending task has this key, creating another
 *     creates nothing: the pending task takes the new data (the latest data wins; it counts
 *     `coalesced`) and `id` receives its id. Once claimed, a new one can be created.
 *   task_timeout_ms (int, >= 0; 0: none): a run longer than this ends the task timed_out,
 *     a final state that is never retried.
 *   weight (int, 1..1000, default the kind's or the service's `weight`, else 1): the load the
 *     task puts on the node running it; a node claims it only while the weight it holds plus
 *     this fits its `capacity` (docs/CONFIGURATION.md). An option, not an ABI change: the
 *     ABI version stays, and a cohortd older than the option refuses it as unknown.
 * From primary_work() the call is fenced: it fails with COHORT_ERROR_NOT_PRIMARY once the
 * primary lease has run out, and the task records the creating epoch. On success, if `id`
 * is not NULL it receives the new task's id (25 bytes: 24 hex digits and a NUL).
 * Returns false and fills `error` (may be NULL) on failure; nothing is created then. */
bool cohort_task_create(cohort_ctx_t *ctx, const bson_t *data, const bson_t *opts, char id[25],
                        cohort_error_t *error);

/* The task's id as 24 hex digits. */
const char *cohort_task_id(const cohort_task_t *task);
/* The task's data document (never NULL; may be empty). */
const bson_t *cohort_task_data(const cohort_task_t *task);
/* 1 for the first run, 2 for the first retry, and so on. */
int cohort_task_attempt(const cohort_task_t *task);
/* ABI 3: the task's kind and group (NULL if none) and its priority as it runs (raised by a
 * not_after promotion). */
const char *cohort_task_kind(const cohort_task_t *task);
const char *cohort_task_group(const cohort_task_t *task);
int64_t cohort_task_priority(const cohort_task_t *task);
/* Records why the task failed; stored in the task's history and last_error. */
void cohort_task_set_error(cohort_task_t *task, const char *fmt, ...) COHORT_PRINTF(2, 3);
/* ABI 4: the task's status as stored ("succeeded", "failed", "timed_out", "cancelled", ...:
 * compare with strcmp; a later release may add statuses) and its last error message (NULL if
 * it has none). In process_task() the status is "claimed" and the last error is the previous
 * attempt's, if any. */
const char *cohort_task_status(const cohort_task_t *task);
const char *cohort_task_last_error(const cohort_task_t *task);

/* ---- batches (ABI 2) -------------------------------------------------------------------- */

/* The batch's number: unique and increasing per service. Key external effects on it. */
int64_t cohort_batch_id(const cohort_batch_t *batch);
/* How many of the batch's tracked tasks succeeded / did not (failed, timed_out, cancelled:
 * the tasks cohort_batch_next_unsuccessful() yields). */
int64_t cohort_batch_succeeded(const cohort_batch_t *batch);
int64_t cohort_batch_failed(const cohort_batch_t *batch);
/* The next succeeded task of the batch (in creation order), or NULL at the end. The task is
 * valid until the next call. If iteration stopped because of a database error, the callback
 * is retried later: see cohort_batch_error(). */
const cohort_task_t *cohort_batch_next(cohort_batch_t *batch);
/* ABI 4. The next tracked task of the batch that ended in a final status other than
 * succeeded (failed, timed_out, cancelled, and any such status a later release adds), in
 * creation order, or NULL at the end; read why with cohort_task_status() and
 * cohort_task_last_error(). Its data is empty if it was not a document (the reason such a
 * task failed). Same rules as cohort_batch_next(): the task is valid until the next call of
 * this function, memory stays constant, and an error ends the iteration (cohort_batch_error).
 * The two iterations are independent; either may be used alone. */
const cohort_task_t *cohort_batch_next_unsuccessful(cohort_batch_t *batch);
/* True if iteration ended on an error (then returning false from the callback retries it). */
bool cohort_batch_error(const cohort_batch_t *batch, cohort_error_t *error);

/* ---- generic data (ABI 2) --------------------------------------------------------------- */

/* Generic data of the service: key/value pairs stored in its config document, surviving
 * restarts and failover (the seed's Get/Set). Keys are 1-64 characters without '.' or '$'.
 *
 * cohort_get copies the value into *value (release it with bson_value_destroy()) and returns
 * true. It returns false when the key is not set (then error->code is COHORT_OK: not found
 * is not an error) and on a failure (then error->code says which: COHORT_ERROR_INVALID for
 * a bad key, COHORT_ERROR_DATABASE). Pass an `error` to tell the two apart.
 *
 * cohort_set stores a copy of `value` (NULL, or a null value, removes the key). Writes are
 * fenced like task creation: from primary_work they happen only while the primary lease is
 * valid and only under this node's epoch; from on_tasks_completed they are applied
 * atomically with marking the batch completed (and are discarded if that does not happen).
 * Elsewhere (process_task on any node) they are immediate and unconditional: the last
 * writer wins. So a cohort_get + cohort_set from process_task loses updates when several
 * workers do it at once; count with cohort_data_inc, or guard a read-modify-write with
 * cohort_data_cas. Reads during on_tasks_completed see the callback's own pending writes. */
bool cohort_get(cohort_ctx_t *ctx, const char *key, bson_value_t *value, cohort_error_t *error);
bool cohort_set(cohort_ctx_t *ctx, const char *key, const bson_value_t *value,
                cohort_error_t *error);

/* ABI 4. Atomic generic data: each call is one findAndModify on the service's config
 * document, so concurrent calls from any threads and nodes never lose an update.
 *
 * cohort_data_inc adds `delta` to the integer at `key` and, if `result` is not NULL, puts
 * the new value there. A missing key starts from 0. A value that is not an int32 or int64
 * (a double, a string...), or a sum that would overflow an int64, fails with
 * COHORT_ERROR_INVALID and changes nothing. The stored value becomes an int64.
 *
 *     int64_t done;
 *     if (!cohort_data_inc(ctx, "processed", 1, &done, &error)) ...   // no update lost
 *
 * From process_task the change is immediate and counts the run, not the task: a task run
 * again (its node killed, its lease lost) adds again. For totals that must be exact, add
 * cohort_batch_succeeded() in on_tasks_completed (docs/HANDLERS.md, "Counting").
 *
 * cohort_data_cas sets `key` to `value` (NULL removes it) only if it holds `expected` now;
 * `expected` NULL (or a null value) means "only if the key is absent". Values compare as
 * MongoDB's aggregation $eq does: whole values (an array is not equal to its elements),
 * documents field by field in order, numbers by value whatever their type (1 == 1.0 ==
 * NumberLong(1)). Returns true if it set the key; false with error->code COHORT_OK if the
 * value differs (read it again with cohort_get and retry); false with another code on a
 * failure.
 *
 * From primary_work both are fenced like cohort_set (COHORT_ERROR_NOT_PRIMARY once this
 * node is not primary under its epoch, nothing changed). From on_tasks_completed both are
 * refused with COHORT_ERROR_INVALID: that callback's writes are deferred to the batch's
 * completion (it may run again), so use cohort_set there. */
bool cohort_data_inc(cohort_ctx_t *ctx, const char *key, int64_t delta, int64_t *result,
                     cohort_error_t *error);
bool cohort_data_cas(cohort_ctx_t *ctx, const char *key, const bson_value_t *expected,
                     const bson_value_t *value, cohort_error_t *error);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* COHORT_HANDLER_H */
