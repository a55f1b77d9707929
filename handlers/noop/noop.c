/*
 * noop.c - the no-op handler, for tests, benchmarks and the local demo cluster.
 *
 * Options (all optional):
 *   sleep_ms          = N     each task sleeps N ms (default 0)
 *   fail_first_n      = N     a task's first N attempts fail retryably (default 0)
 *   journal           = PATH  after each successful run append "<task id> <node id> <attempt>
 *                             <started ms> <ended ms>" (the last two: the run's start and end
 *                             on the cluster clock, cohort_now_ms) with one write() on an
 *                             O_APPEND descriptor, so concurrent writers (threads and
 *                             processes) never interleave lines
 *   crash_on          = FIELD abort() the whole process when a task's data has FIELD = true:
 *                             a poison task, for the chaos tests (default: none)
 *   generate_per_tick = N     the primary creates N tasks per tick (default 0)
 *   generate_every    = N     ... every N-th tick only (default 1), so tracked batches drain
 *   generate_tracked  = bool  generated tasks are tracked (default false)
 *   completed_log     = PATH  on_tasks_completed appends "<batch id> <succeeded> <failed>
 *                             <tasks iterated> <node id> <at ms>" (the last: when the callback
 *                             ran, on the cluster clock, so that the chaos checker can place
 *                             it before or after a dropped database) (one write, O_APPEND)
 *
 * On SIGHUP every option but the two paths and crash_on can change (the handler's reload
 * callback).
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cohort/handler.h>

/* The options; all but the two paths may change on SIGHUP (see noop_reload). */
typedef struct noop_options {
    long sleep_ms;
    long fail_first_n;
    long generate_per_tick;
    long generate_every;
    bool generate_tracked;
    const char *crash_on;      /* only during parsing, like the paths */
    const char *journal;       /* paths: only during parsing */
    const char *completed_log;
} noop_options_t;

typedef struct noop {
    _Atomic long sleep_ms; /* read by workers, changed by reload */
    _Atomic long fail_first_n;
    long generate_per_tick; /* main thread only, like reload */
    long generate_every;
    bool generate_tracked;
    char *crash_on; /* fixed at init, like the paths; NULL: none */
    char *journal_path;
    char *completed_path;
    int journal_fd;
    int completed_fd;
    long long generated;
    long long ticks;
} noop_t;

static bool parse_long(cohort_ctx_t *ctx, const cohort_option_t *opt, long min, long max,
                       long *out)
{
    char *end;
    errno = 0;
    long v = strtol(opt->value, &end, 10);
    if (errno || end == opt->value || *end || v < min || v > max) {
        cohort_ctx_set_error(ctx, "line %d: %s = '%s' must be a number from %ld to %ld",
                             opt->line, opt->key, opt->value, min, max);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_options(cohort_ctx_t *ctx, const cohort_option_t *opts, size_t n_opts,
                          noop_options_t *out)
{
    *out = (noop_options_t){.generate_every = 1};
    for (size_t i = 0; i < n_opts; i++) {
        const cohort_option_t *o = &opts[i];
        bool ok = true;
        if (strcmp(o->key, "sleep_ms") == 0) {
            ok = parse_long(ctx, o, 0, 3600000, &out->sleep_ms);
        } else if (strcmp(o->key, "fail_first_n") == 0) {
            ok = parse_long(ctx, o, 0, 1000, &out->fail_first_n);
        } else if (strcmp(o->key, "generate_per_tick") == 0) {
            ok = parse_long(ctx, o, 0, 100000, &out->generate_per_tick);
        } else if (strcmp(o->key, "generate_every") == 0) {
            ok = parse_long(ctx, o, 1, 1000000, &out->generate_every);
        } else if (strcmp(o->key, "generate_tracked") == 0) {
            ok = strcmp(o->value, "true") == 0 || strcmp(o->value, "false") == 0;
            out->generate_tracked = strcmp(o->value, "true") == 0;
            if (!ok)
                cohort_ctx_set_error(ctx, "line %d: generate_tracked = '%s' must be true or false",
                                     o->line, o->value);
        } else if (strcmp(o->key, "crash_on") == 0) {
            ok = o->value[0] != '\0';
            out->crash_on = o->value;
            if (!ok)
                cohort_ctx_set_error(ctx, "line %d: crash_on needs a field name", o->line);
        } else if (strcmp(o->key, "journal") == 0) {
            out->journal = o->value;
        } else if (strcmp(o->key, "completed_log") == 0) {
            out->completed_log = o->value;
        } else {
            cohort_ctx_set_error(ctx,
                                 "line %d: unknown option '%s' for the noop handler (known: "
                                 "sleep_ms, fail_first_n, journal, generate_per_tick, "
                                 "generate_every, generate_tracked, completed_log, crash_on)",
                                 o->line, o->key);
            ok = false;
        }
        if (!ok)
            return false;
    }
    return true;
}

static void apply(noop_t *n, const noop_options_t *o)
{
    atomic_store(&n->sleep_ms, o->sleep_ms);
    atomic_store(&n->fail_first_n, o->fail_first_n);
    n->generate_per_tick = o->generate_per_tick;
    n->generate_every = o->generate_every;
    n->generate_tracked = o->generate_tracked;
}

static bool open_log(cohort_ctx_t *ctx, const char *what, const char *path, int *fd, char **kept)
{
    if (!path)
        return true;
    *fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (*fd < 0) {
        cohort_ctx_set_error(ctx, "%s '%s' cannot be opened: %s", what, path, strerror(errno));
        return false;
    }
    *kept = strdup(path);
    return true;
}

static void noop_destroy(void *state)
{
    noop_t *n = state;
    if (!n)
        return;
    if (n->journal_fd >= 0)
        close(n->journal_fd);
    if (n->completed_fd >= 0)
        close(n->completed_fd);
    free(n->crash_on);
    free(n->journal_path);
    free(n->completed_path);
    free(n);
}

static bool noop_init(cohort_ctx_t *ctx, const cohort_option_t *opts, size_t n_opts,
                      void **state)
{
    noop_options_t o;
    if (!parse_options(ctx, opts, n_opts, &o))
        return false;
    noop_t *n = calloc(1, sizeof *n);
    if (!n) {
        cohort_ctx_set_error(ctx, "out of memory");
        return false;
    }
    n->journal_fd = n->completed_fd = -1;
    apply(n, &o);
    if (o.crash_on && !(n->crash_on = strdup(o.crash_on))) {
        cohort_ctx_set_error(ctx, "out of memory");
        noop_destroy(n);
        return false;
    }
    if (!open_log(ctx, "journal", o.journal, &n->journal_fd, &n->journal_path) ||
        !open_log(ctx, "completed_log", o.completed_log, &n->completed_fd, &n->completed_path)) {
        noop_destroy(n);
        return false;
    }
    *state = n;
    return true;
}

static bool same_path(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* SIGHUP: every option but the two file paths and crash_on changes live. */
static bool noop_reload(cohort_ctx_t *ctx, void *state, const cohort_option_t *opts,
                        size_t n_opts)
{
    noop_t *n = state;
    noop_options_t o;
    if (!parse_options(ctx, opts, n_opts, &o))
        return false;
    if (!same_path(o.journal, n->journal_path) || !same_path(o.completed_log, n->completed_path)) {
        cohort_ctx_set_error(ctx, "journal and completed_log cannot change without a restart");
        return false;
    }
    if (!same_path(o.crash_on, n->crash_on)) {
        cohort_ctx_set_error(ctx, "crash_on cannot change without a restart");
        return false;
    }
    apply(n, &o);
    return true;
}

static bool noop_primary_work(cohort_ctx_t *ctx, void *state)
{
    noop_t *n = state;
    if (n->generate_per_tick == 0 || n->ticks++ % n->generate_every != 0)
        return true;
    bson_t *opts = BCON_NEW("tracked", BCON_BOOL(n->generate_tracked));
    bool ok = true;
    for (long i = 0; i < n->generate_per_tick; i++) {
        bson_t *data = BCON_NEW("seq", BCON_INT64(++n->generated));
        cohort_error_t error;
        ok = cohort_task_create(ctx, data, opts, NULL, &error);
        bson_destroy(data);
        if (!ok) {
            cohort_ctx_set_error(ctx, "created %ld of %ld tasks: %s", i, n->generate_per_tick,
                                 error.message);
            break;
        }
    }
    bson_destroy(opts);
    return ok;
}

/* True if the task's data has `field` set to true. */
static bool data_flag(const cohort_task_t *task, const char *field)
{
    bson_iter_t it;
    return field && bson_iter_init_find(&it, cohort_task_data(task), field) &&
           BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
}

static cohort_outcome_t noop_process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    noop_t *n = state;
    int64_t started_ms = cohort_now_ms(ctx);
    if (data_flag(task, n->crash_on)) {
        cohort_log(ctx, COHORT_LOG_ERROR, "noop: task %s is poison (crash_on): aborting",
                   cohort_task_id(task));
        abort();
    }
    long sleep_ms = atomic_load(&n->sleep_ms), fail_first_n = atomic_load(&n->fail_first_n);
    if (sleep_ms > 0) {
        struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    if (cohort_task_attempt(task) <= fail_first_n) {
        cohort_task_set_error(task, "noop: failing attempt %d of the first %ld on purpose",
                              cohort_task_attempt(task), fail_first_n);
        return COHORT_TASK_RETRY;
    }
    if (n->journal_fd >= 0) {
        char line[384];
        int len = snprintf(line, sizeof line, "%s %s %d %lld %lld\n", cohort_task_id(task),
                           cohort_ctx_node_id(ctx), cohort_task_attempt(task),
                           (long long)started_ms, (long long)cohort_now_ms(ctx));
        if (len < 0 || (size_t)len >= sizeof line ||
            write(n->journal_fd, line, (size_t)len) != (ssize_t)len) {
            cohort_task_set_error(task, "noop: journal write failed: %s", strerror(errno));
            return COHORT_TASK_RETRY;
        }
    }
    return COHORT_TASK_SUCCEEDED;
}

/* Counts the batch's succeeded tasks by iterating them (constant memory) and logs a line. */
static bool noop_completed(cohort_ctx_t *ctx, void *state, cohort_batch_t *batch)
{
    noop_t *n = state;
    long long iterated = 0;
    while (cohort_batch_next(batch))
        iterated++;
    cohort_error_t error;
    if (cohort_batch_error(batch, &error)) {
        cohort_ctx_set_error(ctx, "%s", error.message);
        return false;
    }
    cohort_log(ctx, COHORT_LOG_INFO, "noop: batch %lld done: %lld succeeded, %lld failed",
               (long long)cohort_batch_id(batch), (long long)cohort_batch_succeeded(batch),
               (long long)cohort_batch_failed(batch));
    if (n->completed_fd >= 0) {
        char line[256];
        int len = snprintf(line, sizeof line, "%lld %lld %lld %lld %s %lld\n",
                           (long long)cohort_batch_id(batch),
                           (long long)cohort_batch_succeeded(batch),
                           (long long)cohort_batch_failed(batch), iterated,
                           cohort_ctx_node_id(ctx), (long long)cohort_now_ms(ctx));
        if (len < 0 || (size_t)len >= sizeof line ||
            write(n->completed_fd, line, (size_t)len) != (ssize_t)len) {
            cohort_ctx_set_error(ctx, "noop: completed_log write failed: %s", strerror(errno));
            return false;
        }
    }
    return true;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "noop",
    .init = noop_init,
    .destroy = noop_destroy,
    .primary_work = noop_primary_work,
    .process_task = noop_process,
    .on_tasks_completed = noop_completed,
    .reload = noop_reload,
};
