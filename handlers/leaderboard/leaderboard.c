/*
 * leaderboard.c - the seed's sample use case: daily (or any period) leaderboard rollover that
 * happens exactly once per board and period, however many replicas run and whichever dies.
 *
 * The primary checks the generic data each tick; when a new period has begun it creates one
 * tracked rollover task per board, each with the unique key "rollover:<period>:<board>", so a
 * primary replaced halfway through creating them cannot create any twice: the next primary
 * simply creates the rest. Any node processes them. When the batch has drained,
 * on_tasks_completed records last_rollover and rolled_over_boards with cohort_set(), which
 * Cohort applies in the same atomic write that marks the batch completed.
 *
 * Options:
 *   boards            = N     leaderboards to roll over each period (default 100)
 *   period_ms         = N     length of a period (default 86400000: daily)
 *   work_ms           = N     simulated work per board (default 10)
 *   journal           = PATH  append "<period> <board> <node id> <attempt>" per rollover done
 *   callback_delay_ms = N     sleep inside on_tasks_completed (to test failover there)
 *
 * Generic data: last_rollover (the period last completed), rolled_over_boards (boards in that
 * batch), rollover_started (the period whose tasks all exist).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cohort/handler.h>

typedef struct leaderboard {
    long boards;
    long period_ms;
    long work_ms;
    long callback_delay_ms;
    int journal_fd;
} leaderboard_t;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static bool option_long(cohort_ctx_t *ctx, const cohort_option_t *o, long min, long max,
                        long *out)
{
    char *end;
    errno = 0;
    long v = strtol(o->value, &end, 10);
    if (errno || end == o->value || *end || v < min || v > max) {
        cohort_ctx_set_error(ctx, "line %d: %s = '%s' must be a number from %ld to %ld", o->line,
                             o->key, o->value, min, max);
        return false;
    }
    *out = v;
    return true;
}

static void lb_destroy(void *state)
{
    leaderboard_t *lb = state;
    if (lb && lb->journal_fd >= 0)
        close(lb->journal_fd);
    free(lb);
}

static bool lb_init(cohort_ctx_t *ctx, const cohort_option_t *opts, size_t n, void **state)
{
    leaderboard_t *lb = calloc(1, sizeof *lb);
    if (!lb) {
        cohort_ctx_set_error(ctx, "out of memory");
        return false;
    }
    *lb = (leaderboard_t){.boards = 100, .period_ms = 86400000, .work_ms = 10, .journal_fd = -1};
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        const cohort_option_t *o = &opts[i];
        if (strcmp(o->key, "boards") == 0)
            ok = option_long(ctx, o, 1, 10000000, &lb->boards);
        else if (strcmp(o->key, "period_ms") == 0)
            ok = option_long(ctx, o, 100, 366L * 86400000, &lb->period_ms);
        else if (strcmp(o->key, "work_ms") == 0)
            ok = option_long(ctx, o, 0, 3600000, &lb->work_ms);
        else if (strcmp(o->key, "callback_delay_ms") == 0)
            ok = option_long(ctx, o, 0, 3600000, &lb->callback_delay_ms);
        else if (strcmp(o->key, "journal") == 0) {
            lb->journal_fd = open(o->value, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
            if (lb->journal_fd < 0) {
                cohort_ctx_set_error(ctx, "line %d: journal '%s' cannot be opened: %s", o->line,
                                     o->value, strerror(errno));
                ok = false;
            }
        } else {
            cohort_ctx_set_error(ctx,
                                 "line %d: unknown option '%s' for the leaderboard handler "
                                 "(known: boards, period_ms, work_ms, journal, callback_delay_ms)",
                                 o->line, o->key);
            ok = false;
        }
    }
    if (!ok) {
        lb_destroy(lb);
        return false;
    }
    *state = lb;
    return true;
}

/* Generic data as an integer; `fallback` when unset. False on a database error. */
static bool get_int(cohort_ctx_t *ctx, const char *key, int64_t fallback, int64_t *out)
{
    bson_value_t v;
    cohort_error_t error;
    *out = fallback;
    if (cohort_get(ctx, key, &v, &error)) {
        if (v.value_type == BSON_TYPE_INT64)
            *out = v.value.v_int64;
        else if (v.value_type == BSON_TYPE_INT32)
            *out = v.value.v_int32;
        bson_value_destroy(&v);
        return true;
    }
    if (error.code != COHORT_OK) {
        cohort_ctx_set_error(ctx, "%s", error.message);
        return false;
    }
    return true;
}

static bool set_int(cohort_ctx_t *ctx, const char *key, int64_t value)
{
    bson_value_t v = {.value_type = BSON_TYPE_INT64, .value.v_int64 = value};
    cohort_error_t error;
    if (!cohort_set(ctx, key, &v, &error)) {
        cohort_ctx_set_error(ctx, "%s", error.message);
        return false;
    }
    return true;
}

static bool lb_primary_work(cohort_ctx_t *ctx, void *state)
{
    leaderboard_t *lb = state;
    int64_t period = cohort_now_ms(ctx) / lb->period_ms;
    int64_t started;
    if (!get_int(ctx, "rollover_started", -1, &started))
        return false;
    if (started >= period)
        return true; /* this period's tasks exist; the batch callback finishes it */

    cohort_log(ctx, COHORT_LOG_INFO, "leaderboard: period %lld begins: rolling over %ld boards",
               (long long)period, lb->boards);
    long created = 0, existed = 0;
    for (long board = 0; board < lb->boards; board++) {
        char key[96];
        snprintf(key, sizeof key, "rollover:%lld:%ld", (long long)period, board);
        bson_t *data = BCON_NEW("period", BCON_INT64(period), "board", BCON_INT64(board));
        bson_t *opts = BCON_NEW("unique_key", BCON_UTF8(key));
        cohort_error_t error;
        bool ok = cohort_task_create(ctx, data, opts, NULL, &error);
        bson_destroy(opts);
        bson_destroy(data);
        if (ok) {
            created++;
        } else if (error.code == COHORT_ERROR_EXISTS) {
            existed++; /* created by an earlier primary: nothing to do */
        } else {
            cohort_ctx_set_error(ctx, "period %lld: created %ld tasks, then: %s",
                                 (long long)period, created, error.message);
            return false; /* the next tick (or primary) creates the rest */
        }
    }
    if (existed > 0)
        cohort_log(ctx, COHORT_LOG_INFO,
                   "leaderboard: period %lld: %ld rollover tasks created, %ld already existed",
                   (long long)period, created, existed);
    return set_int(ctx, "rollover_started", period);
}

static cohort_outcome_t lb_process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    leaderboard_t *lb = state;
    bson_iter_t period, board;
    const bson_t *data = cohort_task_data(task);
    if (!bson_iter_init_find(&period, data, "period") || !BSON_ITER_HOLDS_INT64(&period) ||
        !bson_iter_init_find(&board, data, "board") || !BSON_ITER_HOLDS_INT64(&board)) {
        cohort_task_set_error(task, "leaderboard: data needs integer 'period' and 'board'");
        return COHORT_TASK_FAILED;
    }
    if (lb->work_ms > 0)
        sleep_ms(lb->work_ms); /* the rollover itself: archive, reset scores, pay rewards */
    if (lb->journal_fd >= 0) {
        char line[192];
        int len = snprintf(line, sizeof line, "%lld %lld %s %d\n",
                           (long long)bson_iter_int64(&period), (long long)bson_iter_int64(&board),
                           cohort_ctx_node_id(ctx), cohort_task_attempt(task));
        if (len < 0 || (size_t)len >= sizeof line ||
            write(lb->journal_fd, line, (size_t)len) != (ssize_t)len) {
            cohort_task_set_error(task, "leaderboard: journal write failed: %s", strerror(errno));
            return COHORT_TASK_RETRY;
        }
    }
    return COHORT_TASK_SUCCEEDED;
}

static bool lb_completed(cohort_ctx_t *ctx, void *state, cohort_batch_t *batch)
{
    leaderboard_t *lb = state;
    int64_t period = -1, boards = 0;
    const cohort_task_t *task;
    while ((task = cohort_batch_next(batch))) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, cohort_task_data(task), "period") &&
            BSON_ITER_HOLDS_INT64(&it) && bson_iter_int64(&it) > period)
            period = bson_iter_int64(&it);
        boards++;
    }
    cohort_error_t error;
    if (cohort_batch_error(batch, &error)) {
        cohort_ctx_set_error(ctx, "%s", error.message);
        return false;
    }
    if (lb->callback_delay_ms > 0)
        sleep_ms(lb->callback_delay_ms);
    if (period >= 0 && (!set_int(ctx, "last_rollover", period) ||
                        !set_int(ctx, "rolled_over_boards", boards)))
        return false;
    cohort_log(ctx, COHORT_LOG_INFO,
               "leaderboard: period %lld rolled over: %lld boards done, %lld failed (batch %lld)",
               (long long)period, (long long)boards, (long long)cohort_batch_failed(batch),
               (long long)cohort_batch_id(batch));
    return true;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "leaderboard",
    .init = lb_init,
    .destroy = lb_destroy,
    .primary_work = lb_primary_work,
    .process_task = lb_process,
    .on_tasks_completed = lb_completed,
};
