/*
 * sleeper.c - a handler for the scheduling cluster tests (groups, switches, timeouts): each
 * run sleeps and then records when it ran, so a test can check from the record which runs
 * overlapped in time.
 *
 * Task data:
 *   { "sleep_ms": N }   sleep N ms (default 0), then succeed
 *
 * Service option:
 *   journal = PATH      after each run append one line (one O_APPEND write, so lines of
 *                       concurrent runs and of several nodes never interleave):
 *                       "<task id> <node id> <attempt> <group|-> <start ms> <end ms> <kind|->
 *                       <wall start ms> <wall end ms>"
 *                       where start and end are cohort_now_ms() (the cluster clock, each
 *                       node's estimate of the database server's clock, so two nodes may
 *                       disagree by a few ms) and wall start and end the host's
 *                       CLOCK_REALTIME (one clock for all the nodes of a test, which run on
 *                       this machine), taken before and after the sleep.
 *
 * The line is written whatever becomes of the run (a run the node already recorded timed_out
 * still writes it when the sleep ends), so the journal shows what actually ran and when.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cohort/handler.h>

#include "test_handler.h"

typedef struct sleeper {
    int journal_fd; /* -1: no journal */
} sleeper_t;

static bool init(cohort_ctx_t *ctx, const cohort_option_t *options, size_t n_options,
                 void **state)
{
    const char *journal = NULL;
    for (size_t i = 0; i < n_options; i++) {
        if (strcmp(options[i].key, "journal") == 0) {
            journal = options[i].value;
        } else {
            cohort_ctx_set_error(ctx, "sleeper: unknown option '%s' (line %d); known: journal",
                                 options[i].key, options[i].line);
            return false;
        }
    }
    sleeper_t *s = malloc(sizeof *s);
    if (!s) {
        cohort_ctx_set_error(ctx, "sleeper: out of memory");
        return false;
    }
    s->journal_fd = -1;
    if (journal) {
        s->journal_fd = open(journal, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (s->journal_fd < 0) {
            cohort_ctx_set_error(ctx, "sleeper: cannot open journal %s: %s", journal,
                                 strerror(errno));
            free(s);
            return false;
        }
    }
    *state = s;
    return true;
}

static void destroy(void *state)
{
    sleeper_t *s = state;
    if (s && s->journal_fd >= 0)
        close(s->journal_fd);
    free(s);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static cohort_outcome_t process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    sleeper_t *s = state;
    int64_t wall_start = wall_ms();
    int64_t start = cohort_now_ms(ctx);
    task_sleep_ms(task_data_int(cohort_task_data(task), "sleep_ms", 0));
    int64_t end = cohort_now_ms(ctx);
    int64_t wall_end = wall_ms();
    if (s->journal_fd < 0)
        return COHORT_TASK_SUCCEEDED;

    const char *group = cohort_task_group(task);
    const char *kind = cohort_task_kind(task);
    char line[1024];
    int len = snprintf(line, sizeof line, "%s %s %d %s %lld %lld %s %lld %lld\n",
                       cohort_task_id(task), cohort_ctx_node_id(ctx), cohort_task_attempt(task),
                       group ? group : "-", (long long)start, (long long)end, kind ? kind : "-",
                       (long long)wall_start, (long long)wall_end);
    if (len < 0 || (size_t)len >= sizeof line) {
        cohort_task_set_error(task, "sleeper: journal line too long");
        return COHORT_TASK_FAILED;
    }
    if (write(s->journal_fd, line, (size_t)len) != (ssize_t)len) {
        cohort_task_set_error(task, "sleeper: journal write failed: %s", strerror(errno));
        return COHORT_TASK_FAILED;
    }
    return COHORT_TASK_SUCCEEDED;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "sleeper",
    .init = init,
    .destroy = destroy,
    .process_task = process,
};
