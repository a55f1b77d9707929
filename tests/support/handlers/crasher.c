/*
 * crasher.c - a handler that kills its own process on request, for the `isolation = process`
 * tests. Each task's data says what to do:
 *
 *   { "crash": "segv" }   die of SIGSEGV
 *   { "crash": "abort" }  abort() (SIGABRT)
 *   { "crash": "exit" }   _exit(N) with N = data.exit_code (default 3)
 *   { "crash": "fork_segv" }  fork a process that lives on for 3 s (holding every fd, the
 *                         node's socket included), then die of SIGSEGV: the node must see
 *                         the death without waiting for the socket to close
 *   "crash_after_ms": N   with any crash: run N ms first (a poison task that takes its node
 *                         down while the tasks beside it run)
 *   { "sleep_ms": N }     sleep N ms, then succeed (a task to time out, or to be slow)
 *   anything else         succeed at once
 *
 * "segv" resets the SIGSEGV disposition and raises the signal rather than dereferencing
 * NULL: the process dies exactly as of a real segfault, without undefined behaviour that a
 * sanitizer build would intercept and turn into an ordinary exit. "exit" uses _exit() for
 * the same reason: exit() runs the libraries' exit-time cleanup while libmongoc's monitoring
 * thread still runs, a race that AddressSanitizer reports (turning the status into 1).
 *
 * In thread isolation these tasks take the whole node down: use them with isolation = process,
 * or to take a node down on purpose (cluster/poison).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cohort/handler.h>

#include "test_handler.h"

static cohort_outcome_t process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)ctx;
    (void)state;
    const bson_t *data = cohort_task_data(task);
    bson_iter_t it;
    if (bson_iter_init_find(&it, data, "crash") && BSON_ITER_HOLDS_UTF8(&it)) {
        const char *how = bson_iter_utf8(&it, NULL);
        task_sleep_ms(task_data_int(data, "crash_after_ms", 0));
        if (strcmp(how, "segv") == 0) {
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
        } else if (strcmp(how, "abort") == 0) {
            abort();
        } else if (strcmp(how, "exit") == 0) {
            _exit((int)task_data_int(data, "exit_code", 3));
        } else if (strcmp(how, "fork_segv") == 0) {
            if (fork() == 0) {
                task_sleep_ms(3000);
                _exit(0);
            }
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
        }
        cohort_task_set_error(task, "unknown crash '%s' (segv, abort, exit or fork_segv)", how);
        return COHORT_TASK_FAILED;
    }
    task_sleep_ms(task_data_int(data, "sleep_ms", 0));
    return COHORT_TASK_SUCCEEDED;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "crasher",
    .process_task = process,
};
