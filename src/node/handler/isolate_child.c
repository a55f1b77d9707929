/*
 * isolate_child.c - the child side of isolation = process: `cohortd --worker` (see
 * isolate_child.h). It loads the configuration, hosts the service's handler through the
 * same handler host as the node's own worker threads (host.h), and answers task messages
 * (isolate_wire.h) one at a time until the node hangs up.
 *
 * A child ignores SIGTERM, SIGINT and SIGHUP: a signal sent to the whole process group
 * (Ctrl-C, a service manager) must not kill tasks the node's shutdown grace lets finish.
 */
#include "node/handler/isolate_child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/error.h"
#include "node/handler/host.h"
#include "node/handler/isolate_wire.h"
#include "store/store.h"
#include "store/outcomes.h"

static int hello_failed(int fd, const char *fmt, ...) COHORT_PRINTF(2, 3);
static int hello_failed(int fd, const char *fmt, ...)
{
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    cohort_log_node(COHORT_LOG_ERROR, "worker process cannot start: %s", why);
    bson_t hello = BSON_INITIALIZER;
    BSON_APPEND_BOOL(&hello, "ready", false);
    BSON_APPEND_UTF8(&hello, "error", why);
    cohort_wire_write(fd, &hello);
    bson_destroy(&hello);
    return 1;
}

/* Runs one task message and writes the reply. False if the message or the write failed. */
static bool serve_task(cohort_ctx_t *ctx, int fd, const bson_t *message)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, message, "task") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    uint32_t len = 0;
    const uint8_t *data = NULL;
    bson_iter_document(&it, &len, &data);
    bson_t claimed;
    if (!bson_init_static(&claimed, data, len))
        return false;
    if (bson_iter_init_find(&it, message, "clock_offset_ms") && BSON_ITER_HOLDS_INT64(&it)) {
        int64_t mono = cohort_clock_monotonic_ms();
        cohort_clock_sync(mono + bson_iter_int64(&it), mono, mono, 0);
    }

    cohort_task_run_t run;
    memset(&run, 0, sizeof run);
    run.result.finish = COHORT_FINISH_FAILED;
    int64_t claimed_at = 0;
    bson_error_t malformed;
    if (cohort_task_from_doc(&claimed, &run.task, &claimed_at, &malformed)) {
        cohort_host_run_task(ctx, &run);
    } else {
        snprintf(run.why, sizeof run.why, "%s", malformed.message);
        run.result.error = run.why;
    }

    bson_t reply = BSON_INITIALIZER;
    BSON_APPEND_INT32(&reply, "finish", (int32_t)run.result.finish);
    if (run.result.error)
        BSON_APPEND_UTF8(&reply, "error", run.result.error);
    if (run.result.finish == COHORT_FINISH_RETRY)
        BSON_APPEND_INT64(&reply, "retry_in_ms",
                          run.result.retry_at_ms - cohort_clock_cluster_ms());
    bool ok = cohort_wire_write(fd, &reply);
    bson_destroy(&reply);
    bson_value_destroy(&run.task.id_value);
    return ok;
}

int cohort_isolate_child_main(const char *config_path, const char *service_name,
                              const char *node_id)
{
    /* The protocol socket moves off fds 0 and 1: a handler that prints must not corrupt it
     * (stdout goes to the node's log, stdin reads nothing). */
    int fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(2, 1) < 0) {
        fprintf(stderr, "cohortd --worker: cannot set up its file descriptors: %s\n",
                strerror(errno));
        return 1;
    }
    close(devnull);
    signal(SIGTERM, SIG_IGN); /* the node decides when its tasks stop (see the top) */
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_NAME, "cohortd-worker");
    cohort_log_set_node(node_id);

    cohort_config_errors_t errors = {0};
    cohort_config_t *config = cohort_config_load(config_path, &errors);
    if (!config) {
        int rc = hello_failed(fd, "%s: %zu problem(s), the first: %s", config_path, errors.count,
                              errors.count ? errors.messages[0] : "?");
        cohort_config_errors_clear(&errors);
        return rc;
    }
    cohort_log_set_level(config->log_level);
    cohort_log_set_json(config->log_json);
    const cohort_service_config_t *sc = cohort_config_find_service(config, service_name);
    if (!sc) {
        int rc = hello_failed(fd, "%s has no [service:%s] any more", config_path, service_name);
        cohort_config_destroy(config);
        return rc;
    }
    bson_error_t error;
    cohort_store_t *store =
        cohort_store_new(config->mongodb_uri, config->database, "cohortd-worker", &error);
    if (!store) {
        int rc = hello_failed(fd, "invalid mongodb_uri: %s", error.message);
        cohort_config_destroy(config);
        return rc;
    }
    mongoc_client_t *client = cohort_store_pop(store);
    cohort_settings_t file;
    cohort_settings_from_config(config, sc, &file);
    cohort_service_t *service = cohort_host_new(sc, node_id, &file, store, client, &error);
    int rc = 0;
    if (!service) {
        rc = hello_failed(fd, "%s", error.message);
    } else {
        bson_t hello = BSON_INITIALIZER;
        BSON_APPEND_BOOL(&hello, "ready", true);
        BSON_APPEND_UTF8(&hello, "handler", sc->handler_path);
        bool ok = cohort_wire_write(fd, &hello);
        bson_destroy(&hello);
        cohort_ctx_t ctx;
        cohort_ctx_init(&ctx, service, client, false);
        for (;;) {
            bson_t *message = NULL;
            cohort_wire_status_t st = ok ? cohort_wire_read(fd, -1, -1, &message) : COHORT_WIRE_EOF;
            if (st == COHORT_WIRE_EOF)
                break; /* the node hung up: stop */
            if (st != COHORT_WIRE_OK || !serve_task(&ctx, fd, message)) {
                cohort_log_node(COHORT_LOG_ERROR, "worker process: malformed message from the "
                                                  "node, or it went away; exiting");
                bson_destroy(message);
                rc = 2;
                break;
            }
            bson_destroy(message);
        }
        cohort_host_destroy(service);
    }
    close(fd);
    cohort_store_push(store, client);
    cohort_store_destroy(store);
    cohort_config_destroy(config);
    return rc;
}
