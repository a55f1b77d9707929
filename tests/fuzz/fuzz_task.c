/*
 * fuzz_task.c - libFuzzer target for task data handed to the shipped handlers (noop, hello,
 * leaderboard) through the node's own code: each input becomes a claimed task document that
 * cohort_task_run() parses and, if well formed, passes to each handler's process_task(),
 * exactly as a worker thread does after a claim (only the write of the outcome is left out:
 * there is no database here).
 *
 * Input: the first byte chooses how the rest is read, the remaining bytes are the payload.
 *   byte & 3 == 0  payload is the body of the task's `data` document (raw BSON elements; a
 *                  length header and the trailing NUL are added), inside a well-formed task
 *   byte & 3 == 1  payload is JSON text for `data` (skipped if libbson cannot parse it)
 *   byte & 3 == 2  payload is the body of the whole claimed task document, raw BSON, so _id,
 *                  attempts, kind, priority ... can have any type too
 *   byte & 3 == 3  payload is JSON text for the whole claimed task document
 *   byte & 4       log lines in JSON (log_format = json) instead of text
 *
 * Checks beyond the sanitizers': a document with an _id always gets a result; a result that
 * is not a success always carries a non-empty reason.
 *
 * The services are made once, without a database (no store, no client): handler options are
 * chosen so that process_task() never needs one (no journals, leaderboard work_ms = 0).
 * COHORT_FUZZ_HANDLER_DIR is the build's handlers directory.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "node/handler/context.h"
#include "core/log.h"
#include "node/service.h"
#include "node/work/task.h"
#include "store/outcomes.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char config_text[] = "[cluster]\n"
                                  "mongodb_uri = mongodb://127.0.0.1:1\n"
                                  "database = fuzz\n"
                                  "node_id = fuzz-node\n"
                                  "[service:noop]\n"
                                  "handler = cohort_noop.so\n"
                                  "max_attempts = 5\n"
                                  "[service:hello]\n"
                                  "handler = cohort_hello.so\n"
                                  "[service:leaderboard]\n"
                                  "handler = cohort_leaderboard.so\n"
                                  "work_ms = 0\n";

static cohort_config_t *config;
static cohort_service_t *services[3];
static size_t n_services;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    unsetenv("MONGODB_URI");
    cohort_config_errors_t errors = {0};
    config = cohort_config_load_string(config_text, "fuzz_task", COHORT_FUZZ_HANDLER_DIR, &errors);
    if (!config) {
        for (size_t i = 0; i < errors.count; i++)
            fprintf(stderr, "fuzz_task: %s\n", errors.messages[i]);
        abort();
    }
    cohort_log_set_node(config->node_id);
    for (size_t i = 0; i < config->n_services && i < 3; i++) {
        bson_error_t err;
        cohort_settings_t file;
        cohort_settings_from_config(config, &config->services[i], &file);
        services[i] =
            cohort_service_new(&config->services[i], config->node_id, &file, NULL, NULL, &err);
        if (!services[i]) {
            fprintf(stderr, "fuzz_task: %s\n", err.message);
            abort();
        }
        n_services++;
    }
    return 0;
}

/* `body` as a BSON document: a length header, the bytes, a trailing NUL. Caller frees. */
static uint8_t *wrap_body(const uint8_t *body, size_t size, uint32_t *len)
{
    if (size > 16 * 1024 * 1024)
        return NULL;
    *len = (uint32_t)size + 5;
    uint8_t *buf = malloc(*len);
    if (!buf)
        return NULL;
    buf[0] = (uint8_t)(*len & 0xff);
    buf[1] = (uint8_t)((*len >> 8) & 0xff);
    buf[2] = (uint8_t)((*len >> 16) & 0xff);
    buf[3] = (uint8_t)((*len >> 24) & 0xff);
    memcpy(buf + 4, body, size);
    buf[*len - 1] = 0;
    return buf;
}

/* A task as a claim returns it, with `data` as given. */
static void claimed_task(bson_t *doc, const bson_t *data)
{
    bson_oid_t id;
    bson_oid_init_from_string(&id, "65f000000000000000000001");
    bson_init(doc);
    BSON_APPEND_OID(doc, "_id", &id);
    BSON_APPEND_UTF8(doc, "status", "claimed");
    BSON_APPEND_DOCUMENT(doc, "data", data);
    BSON_APPEND_BOOL(doc, "tracked", true);
    BSON_APPEND_INT32(doc, "attempts", 1);
    BSON_APPEND_UTF8(doc, "claimed_by", "fuzz-node");
    BSON_APPEND_DATE_TIME(doc, "claimed_at", 1700000000000LL);
}

static void run_everywhere(const bson_t *doc)
{
    for (size_t i = 0; i < n_services; i++) {
        cohort_ctx_t ctx;
        cohort_ctx_init(&ctx, services[i], NULL, false);
        cohort_task_run_t run;
        cohort_task_run(&ctx, 0, doc, &run);
        if (run.valid) {
            const cohort_task_result_t *r = &run.result;
            if (r->finish != COHORT_FINISH_SUCCEEDED && (!r->error || !r->error[0]))
                abort(); /* a failure or retry without a reason */
        }
        bson_value_destroy(&run.task.id_value);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] & 3;
    cohort_log_set_json((data[0] & 4) != 0);
    const uint8_t *payload = data + 1;
    size_t n = size - 1;

    bson_t *parsed = NULL, inner, doc;
    uint8_t *buf = NULL;
    uint32_t len = 0;
    if (mode == 0 || mode == 2) {
        buf = wrap_body(payload, n, &len);
        if (!buf || !bson_init_static(&inner, buf, len)) {
            free(buf);
            return 0;
        }
    } else {
        bson_error_t error;
        parsed = bson_new_from_json(payload, (ssize_t)n, &error);
        if (!parsed)
            return 0;
    }
    const bson_t *given = parsed ? parsed : &inner;
    if (mode <= 1) {
        claimed_task(&doc, given);
        run_everywhere(&doc);
        bson_destroy(&doc);
    } else {
        run_everywhere(given);
    }
    if (parsed)
        bson_destroy(parsed);
    free(buf);
    return 0;
}
