/*
 * noop.c - the no-op handler, for tests, benchmarks and the local demo cluster.
 *
 * Options (all optional):
 *   sleep_ms          = N     each task sleeps N ms (default 0)
 *   fail_first_n      = N     a task's first N attempts fail retryably (default 0)
 *   journal           = PATH  after each successful run append "<task id> <node id> <attempt>"
 *                             with one write() on an O_APPEND descriptor, so concurrent
 *                             writers (threads and processes) never interleave lines
 *   generate_per_tick = N     the primary creates N tasks per tick (default 0)
 *   generate_every    = N     ... every N-th tick only (default 1), so tracked batches drain
 *   generate_tracked  = bool  generated tasks are tracked (default false)
 *   completed_log     = PATH  on_tasks_completed appends "<batch id> <succeeded> <failed>
 *                             <tasks iterated> <node id>" (one write, O_APPEND)
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cohort/handler.h>

typedef struct noop {
    long sleep_ms;
    long fail_first_n;
    long generate_per_tick;
    long generate_every;
    bool generate_tracked;
    int journal_fd;
    int completed_fd;
    long long generated;
    long long ticks;
} noop_t;

static bool parse_long(cohort_ctx_t *ctx, const cohort_option_t *opt, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(opt->value, &end, 10);
    if (errno || end == opt->value || *end || v < 0 || v > max) {
        cohort_ctx_set_error(ctx, "line %d: %s = '%s' must be a number from 0 to %ld",
                             opt->line, opt->key, opt->value, max);
        return false;
    }
    *out = v;
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
    free(n);
}

static bool noop_init(cohort_ctx_t *ctx, const cohort_option_t *opts, size_t n_opts,
                      void **state)
{
    noop_t *n = calloc(1, sizeof *n);
    if (!n) {
        cohort_ctx_set_error(ctx, "out of memory");
        return false;
    }
    n->journal_fd = -1;
    n->completed_fd = -1;
    n->generate_every = 1;
    bool ok = true;
    for (size_t i = 0; ok && i < n_opts; i++) {
        const cohort_option_t *o = &opts[i];
        if (strcmp(o->key, "sleep_ms") == 0) {
            ok = parse_long(ctx, o, 3600000, &n->sleep_ms);
        } else if (strcmp(o->key, "fail_first_n") == 0) {
            ok = parse_long(ctx, o, 1000, &n->fail_first_n);
        } else if (strcmp(o->key, "generate_per_tick") == 0) {
            ok = parse_long(ctx, o, 100000, &n->generate_per_tick);
        } else if (strcmp(o->key, "generate_every") == 0) {
            ok = parse_long(ctx, o, 1000000, &n->generate_every);
            if (ok && n->generate_every < 1) {
                cohort_ctx_set_error(ctx, "line %d: generate_every must be at least 1", o->line);
                ok = false;
            }
        } else if (strcmp(o->key, "generate_tracked") == 0) {
            if (strcmp(o->value, "true") == 0 || strcmp(o->value, "false") == 0) {
                n->generate_tracked = strcmp(o->value, "true") == 0;
            } else {
                cohort_ctx_set_error(ctx, "line %d: generate_tracked = '%s' must be true or false",
                                     o->line, o->value);
                ok = false;
            }
        } else if (strcmp(o->key, "journal") == 0 || strcmp(o->key, "completed_log") == 0) {
            int *fd = o->key[0] == 'j' ? &n->journal_fd : &n->completed_fd;
            *fd = open(o->value, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
            if (*fd < 0) {
                cohort_ctx_set_error(ctx, "line %d: %s '%s' cannot be opened: %s", o->line,
                                     o->key, o->value, strerror(errno));
                ok = false;
            }
        } else {
            cohort_ctx_set_error(ctx,
                                 "line %d: unknown option '%s' for the noop handler (known: "
                                 "sleep_ms, fail_first_n, journal, generate_per_tick, "
                                 "generate_every, generate_tracked, completed_log)",
                                 o->line, o->key);
            ok = false;
        }
    }
    if (!ok) {
        noop_destroy(n);
        return false;
    }
    *state = n;
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

static cohort_outcome_t noop_process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    noop_t *n = state;
    if (n->sleep_ms > 0) {
        struct timespec ts = {n->sleep_ms / 1000, (n->sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    if (cohort_task_attempt(task) <= n->fail_first_n) {
        cohort_task_set_error(task, "noop: failing attempt %d of the first %ld on purpose",
                              cohort_task_attempt(task), n->fail_first_n);
        return COHORT_TASK_RETRY;
    }
    if (n->journal_fd >= 0) {
        char line[256];
        int len = snprintf(line, sizeof line, "%s %s %d\n", cohort_task_id(task),
                           cohort_ctx_node_id(ctx), cohort_task_attempt(task));
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
        int len = snprintf(line, sizeof line, "%lld %lld %lld %lld %s\n",
                           (long long)cohort_batch_id(batch),
                           (long long)cohort_batch_succeeded(batch),
                           (long long)cohort_batch_failed(batch), iterated,
                           cohort_ctx_node_id(ctx));
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
};
