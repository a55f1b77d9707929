/*
 * isolate.c - the worker process pool of `isolation = process` (src/node/handler/isolate.c), driven
 * in process: a service on the crasher test handler, a pool whose children are the built
 * cohortd (COHORT_WORKER_EXE), and claimed task documents made by hand and passed through
 * cohort_task_run(). No database is involved: the crasher never calls one.
 *
 * Covered: a success; a segfault and an _exit(9) reported with the signal or status and
 * retried, failed at max_attempts; a segfault seen at once although a process the handler
 * forked still holds the socket; a run past its timeout killed and timed_out within the
 * timeout plus slack, the slot working again at once; two slots at a time; a child that
 * cannot start (a config without the service; a missing executable) giving a retry with
 * the reason, logged once per burst rather than once per task.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "core/clock.h"
#include "node/handler/context.h"
#include "node/handler/isolate.h"
#include "node/work/task.h"
#include "store/outcomes.h"

TestSuite(isolate, .timeout = 60);

typedef struct fixture {
    char *dir;
    char *config_path;
    cohort_service_config_t config;
    cohort_service_t *service;
    cohort_ctx_t ctx;
} fixture_t;

/* A service "iso" on the crasher with a pool of two slots; the config file the children
 * load names `file_service` (so a test can make the children fail to start). */
static void setup(fixture_t *f, const char *file_service, const char *exe)
{
    memset(f, 0, sizeof *f);
    f->dir = test_tmpdir("isolate");
    const char *handler = test_handler_path("crasher");
    char text[2048];
    snprintf(text, sizeof text,
             "[cluster]\nmongodb_uri = mongodb://127.0.0.1:1\ndatabase = isolate_test\n"
             "log_level = info\n\n[service:%s]\nhandler = %s\nisolation = process\n",
             file_service, handler);
    f->config_path = test_write_file(f->dir, "cohort.ini", text);
    setenv("COHORT_WORKER_EXE", exe ? exe : test_build_path("cohortd"), 1);
    f->config = test_service_config("iso", handler);
    f->config.isolation = COHORT_ISOLATION_PROCESS;
    f->config.max_attempts = 5;
    f->service = test_service_new(&f->config, "t1", 1500, NULL, NULL);
    bson_error_t err;
    f->service->isolate = cohort_isolate_new(f->service, f->config_path, 2, &err);
    cr_assert_not_null(f->service->isolate, "cohort_isolate_new: %s", err.message);
    cohort_ctx_init(&f->ctx, f->service, NULL, false);
}

static void teardown(fixture_t *f)
{
    cohort_isolate_destroy(f->service->isolate);
    f->service->isolate = NULL;
    cohort_service_destroy(f->service, NULL);
    free(f->config.handler_path);
    free(f->config_path);
    free(f->dir);
    unsetenv("COHORT_WORKER_EXE");
}

/* Runs a claimed task with `data_json`, attempt `attempt`, its own timeout `timeout_ms`
 * (0: none), in `slot`. run->result.error points into `run`. */
static void run_task(fixture_t *f, size_t slot, const char *data_json, int attempt,
                     int64_t timeout_ms, cohort_task_run_t *run, bson_t *doc)
{
    bson_error_t error;
    bson_t *data = bson_new_from_json((const uint8_t *)data_json, -1, &error);
    cr_assert_not_null(data, "bad JSON %s: %s", data_json, error.message);
    bson_init(doc);
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    BSON_APPEND_OID(doc, "_id", &oid);
    BSON_APPEND_UTF8(doc, "status", "claimed");
    BSON_APPEND_INT32(doc, "attempts", attempt);
    BSON_APPEND_DOCUMENT(doc, "data", data);
    BSON_APPEND_DATE_TIME(doc, "claimed_at", cohort_clock_cluster_ms());
    if (timeout_ms > 0)
        BSON_APPEND_INT64(doc, "task_timeout_ms", timeout_ms);
    bson_destroy(data);
    cohort_task_run(&f->ctx, slot, doc, run);
    cr_assert(run->valid);
}

static void done(cohort_task_run_t *run, bson_t *doc)
{
    bson_value_destroy(&run->task.id_value);
    bson_destroy(doc);
}

static void expect(const cohort_task_run_t *run, cohort_finish_t finish, const char *error)
{
    cr_assert_eq(run->result.finish, finish, "finish %d, expected %d (error: %s)",
                 (int)run->result.finish, (int)finish,
                 run->result.error ? run->result.error : "none");
    if (!error) {
        cr_assert_null(run->result.error, "unexpected error: %s", run->result.error);
        return;
    }
    cr_assert_not_null(run->result.error, "no error, expected '%s'", error);
    cr_assert(strstr(run->result.error, error), "error '%s', expected it to contain '%s'",
              run->result.error, error);
}

Test(isolate, crashes_and_timeouts_cost_only_the_child)
{
    fixture_t f;
    setup(&f, "iso", NULL);
    cohort_task_run_t run;
    bson_t doc;

    run_task(&f, 0, "{\"n\": 1}", 1, 0, &run, &doc);
    expect(&run, COHORT_FINISH_SUCCEEDED, NULL);
    done(&run, &doc);

    int64_t before = cohort_clock_cluster_ms();
    run_task(&f, 0, "{\"crash\": \"segv\"}", 1, 0, &run, &doc);
    expect(&run, COHORT_FINISH_RETRY, "worker process killed by signal 11 (Segmentation fault)");
    cr_assert_geq(run.result.retry_at_ms, before + 1000, "retry at %lld, before + base 1000",
                  (long long)(run.result.retry_at_ms - before));
    done(&run, &doc);

    run_task(&f, 0, "{\"crash\": \"segv\"}", 5, 0, &run, &doc);
    expect(&run, COHORT_FINISH_FAILED, "worker process killed by signal 11");
    done(&run, &doc);

    run_task(&f, 1, "{\"crash\": \"exit\", \"exit_code\": 9}", 2, 0, &run, &doc);
    expect(&run, COHORT_FINISH_RETRY, "worker process exited with status 9");
    done(&run, &doc);

    /* A process the handler forked keeps the socket open for 3 s: the death is seen anyway. */
    int64_t forked = test_now_ms();
    run_task(&f, 1, "{\"crash\": \"fork_segv\"}", 1, 0, &run, &doc);
    expect(&run, COHORT_FINISH_RETRY, "worker process killed by signal 11");
    cr_assert_lt(test_now_ms() - forked, 2500, "the crash was seen only after %lld ms",
                 (long long)(test_now_ms() - forked));
    done(&run, &doc);

    int64_t started = test_now_ms();
    run_task(&f, 0, "{\"sleep_ms\": 20000}", 1, 300, &run, &doc);
    int64_t took = test_now_ms() - started;
    expect(&run, COHORT_FINISH_TIMED_OUT, "timed out after 300 ms (worker process killed)");
    cr_assert(took >= 300 && took < 5000, "the timed-out run took %lld ms", (long long)took);
    done(&run, &doc);

    /* Both slots serve again, each from a new child. */
    run_task(&f, 0, "{\"n\": 2}", 1, 300, &run, &doc);
    expect(&run, COHORT_FINISH_SUCCEEDED, NULL);
    done(&run, &doc);
    run_task(&f, 1, "{\"sleep_ms\": 10}", 1, 0, &run, &doc);
    expect(&run, COHORT_FINISH_SUCCEEDED, NULL);
    done(&run, &doc);
    teardown(&f);
}

Test(isolate, a_child_that_cannot_start_means_a_retry_logged_once)
{
    fixture_t f;
    setup(&f, "other", NULL);
    cohort_task_run_t run;
    bson_t doc;
    test_stderr_begin();
    for (int i = 0; i < 3; i++) {
        run_task(&f, (size_t)(i % 2), "{\"n\": 1}", 1, 0, &run, &doc);
        expect(&run, COHORT_FINISH_RETRY, "worker process could not start: ");
        cr_assert(strstr(run.result.error, "has no [service:iso]"), "error: %s", run.result.error);
        done(&run, &doc);
    }
    char *log = test_stderr_end();
    int reports = 0;
    for (const char *at = log; (at = strstr(at, "cannot start a worker process:")); at++)
        reports++;
    /* The children's own line ("worker process cannot start: ...") comes once per child. */
    cr_assert_eq(reports, 1, "the start failure was reported %d times:\n%s", reports, log);
    free(log);
    teardown(&f);
}

Test(isolate, a_missing_executable_is_named)
{
    fixture_t f;
    setup(&f, "iso", "/nonexistent/cohortd");
    cohort_task_run_t run;
    bson_t doc;
    run_task(&f, 0, "{\"n\": 1}", 5, 0, &run, &doc);
    expect(&run, COHORT_FINISH_FAILED,
           "worker process could not start: cannot execute /nonexistent/cohortd: No such file");
    done(&run, &doc);
    teardown(&f);
}
