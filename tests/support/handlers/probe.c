/*
 * probe.c - a handler that records its batch callbacks, for the batch, generic-data and
 * maintenance tests.
 *
 * process_task does what the task's data says, like outcome.c:
 *   { "outcome": N }   return N (default 0, succeeded)
 *   { "sleep_ms": N }  sleep N ms first (to keep a task running across ticks)
 *   { "inc": KEY }     cohort_data_inc(KEY, 1) first; a failure makes the run a retry
 *   { "getset": KEY }  cohort_get(KEY) then cohort_set(KEY, value + 1): the racy way
 *   { "set": KEY }     then cohort_set(KEY, the task's id), and fail the task (for good) if
 *                      that write fails: a handler whose write is essential
 *
 * on_tasks_completed iterates the batch with cohort_batch_next() and then
 * cohort_batch_next_unsuccessful() and records the call (batch id, counts, the ids iterated
 * with the status and last error of the unsuccessful ones, node, epoch) in a process-wide
 * record (probe.h). Then, in this order, it applies the options below and calls the test's
 * hook, if one is set; the call succeeds only if neither asked it to fail.
 *
 * primary_work calls the test's primary hook, if one is set, and returns its verdict.
 *
 * Options:
 *   fail_callbacks = N   the first N on_tasks_completed calls (since the last probe_reset)
 *                        return false, after iterating
 *   set_key = KEY        every callback does cohort_set(KEY, batch id) and reads it back with
 *                        cohort_get(), recording whether it saw its own pending value
 *
 * The test reaches the record and the hooks through the exported probe_* functions
 * (dlopen() of this object, then dlsym()). Hooks and the record are reset by probe_reset(),
 * never by init(): two services of one test (a failover) share them.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "test_handler.h"

typedef struct probe_options {
    long fail_callbacks;
    char set_key[80];
} probe_options_t;

static probe_record_t record;
static _Atomic long long processed;
static probe_completed_hook_t completed_hook;
static void *completed_arg;
static probe_primary_hook_t primary_hook;
static void *primary_arg;

COHORT_HANDLER_EXPORT probe_record_t *probe_record(void);
COHORT_HANDLER_EXPORT void probe_reset(void);
COHORT_HANDLER_EXPORT long long probe_processed(void);
COHORT_HANDLER_EXPORT void probe_set_completed_hook(probe_completed_hook_t hook, void *arg);
COHORT_HANDLER_EXPORT void probe_set_primary_hook(probe_primary_hook_t hook, void *arg);

probe_record_t *probe_record(void)
{
    return &record;
}

void probe_reset(void)
{
    memset(&record, 0, sizeof record);
    atomic_store(&processed, 0);
    completed_hook = NULL;
    completed_arg = NULL;
    primary_hook = NULL;
    primary_arg = NULL;
}

long long probe_processed(void)
{
    return atomic_load(&processed);
}

void probe_set_completed_hook(probe_completed_hook_t hook, void *arg)
{
    completed_hook = hook;
    completed_arg = arg;
}

void probe_set_primary_hook(probe_primary_hook_t hook, void *arg)
{
    primary_hook = hook;
    primary_arg = arg;
}

static bool parse_count(cohort_ctx_t *ctx, const cohort_option_t *o, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(o->value, &end, 10);
    if (errno || end == o->value || *end || v < 0) {
        cohort_ctx_set_error(ctx, "line %d: %s = '%s' must be a number >= 0", o->line, o->key,
                             o->value);
        return false;
    }
    *out = v;
    return true;
}

static bool probe_init(cohort_ctx_t *ctx, const cohort_option_t *opts, size_t n_opts, void **state)
{
    probe_options_t *p = calloc(1, sizeof *p);
    if (!p) {
        cohort_ctx_set_error(ctx, "out of memory");
        return false;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < n_opts; i++) {
        if (strcmp(opts[i].key, "fail_callbacks") == 0) {
            ok = parse_count(ctx, &opts[i], &p->fail_callbacks);
        } else if (strcmp(opts[i].key, "set_key") == 0) {
            snprintf(p->set_key, sizeof p->set_key, "%s", opts[i].value);
        } else {
            cohort_ctx_set_error(ctx,
                                 "line %d: unknown option '%s' (known: fail_callbacks, "
                                 "set_key)",
                                 opts[i].line, opts[i].key);
            ok = false;
        }
    }
    if (!ok) {
        free(p);
        return false;
    }
    *state = p;
    return true;
}

static void probe_destroy(void *state)
{
    free(state);
}

static bool probe_primary_work(cohort_ctx_t *ctx, void *state)
{
    (void)state;
    return primary_hook ? primary_hook(ctx, primary_arg) : true;
}

static const char *data_str(const bson_t *data, const char *key)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, data, key) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return NULL;
}

/* The racy counter: another worker's set between this get and set is lost. */
static bool get_and_set(cohort_ctx_t *ctx, const char *key, cohort_error_t *error)
{
    bson_value_t value = {.value_type = BSON_TYPE_INT64};
    bson_value_t read;
    if (cohort_get(ctx, key, &read, error)) {
        value.value.v_int64 = read.value.v_int64;
        bson_value_destroy(&read);
    } else if (error->code != COHORT_OK) {
        return false;
    }
    value.value.v_int64++;
    return cohort_set(ctx, key, &value, error);
}

static cohort_outcome_t probe_process(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)state;
    atomic_fetch_add(&processed, 1);
    const bson_t *data = cohort_task_data(task);
    task_sleep_ms(task_data_int(data, "sleep_ms", 0));
    const char *inc = data_str(data, "inc"), *getset = data_str(data, "getset");
    cohort_error_t error;
    if ((inc && !cohort_data_inc(ctx, inc, 1, NULL, &error)) ||
        (getset && !get_and_set(ctx, getset, &error))) {
        cohort_task_set_error(task, "probe: %s", error.message);
        return COHORT_TASK_RETRY;
    }
    const char *set = data_str(data, "set");
    if (set) {
        bson_value_t value = {.value_type = BSON_TYPE_UTF8};
        value.value.v_utf8.str = (char *)cohort_task_id(task);
        value.value.v_utf8.len = (uint32_t)strlen(value.value.v_utf8.str);
        if (!cohort_set(ctx, set, &value, &error)) {
            cohort_task_set_error(task, "probe: cohort_set: %s", error.message);
            return COHORT_TASK_FAILED;
        }
    }
    return (cohort_outcome_t)task_data_int(data, "outcome", COHORT_TASK_SUCCEEDED);
}

/* cohort_set(key, batch id), then cohort_get(key): true if it read back what it set. */
static bool set_and_read_back(cohort_ctx_t *ctx, const char *key, int64_t batch_id)
{
    bson_value_t value = {.value_type = BSON_TYPE_INT64, .value.v_int64 = batch_id};
    cohort_error_t error;
    if (!cohort_set(ctx, key, &value, &error)) {
        cohort_ctx_set_error(ctx, "probe: cohort_set(%s): %s", key, error.message);
        return false;
    }
    bson_value_t read;
    if (!cohort_get(ctx, key, &read, &error))
        return false;
    bool same = read.value_type == BSON_TYPE_INT64 && read.value.v_int64 == batch_id;
    bson_value_destroy(&read);
    return same;
}

static bool probe_completed(cohort_ctx_t *ctx, void *state, cohort_batch_t *batch)
{
    probe_options_t *p = state;
    int n = record.calls++;
    probe_call_t scratch;
    probe_call_t *call = n < PROBE_MAX_CALLS ? &record.call[n] : &scratch;
    memset(call, 0, sizeof *call);
    call->batch_id = cohort_batch_id(batch);
    call->succeeded = cohort_batch_succeeded(batch);
    call->failed = cohort_batch_failed(batch);
    call->epoch = cohort_ctx_epoch(ctx);
    snprintf(call->node, sizeof call->node, "%s", cohort_ctx_node_id(ctx));

    const cohort_task_t *task;
    while ((task = cohort_batch_next(batch)) != NULL) {
        if (call->iterated < PROBE_MAX_IDS)
            snprintf(call->ids[call->iterated], sizeof call->ids[0], "%s", cohort_task_id(task));
        call->iterated++;
    }
    while ((task = cohort_batch_next_unsuccessful(batch)) != NULL) {
        if (call->unsuccessful < PROBE_MAX_UNSUCCESSFUL) {
            probe_unsuccessful_t *bad = &call->bad[call->unsuccessful];
            snprintf(bad->id, sizeof bad->id, "%s", cohort_task_id(task));
            snprintf(bad->status, sizeof bad->status, "%s", cohort_task_status(task));
            const char *last_error = cohort_task_last_error(task);
            snprintf(bad->last_error, sizeof bad->last_error, "%s",
                     last_error ? last_error : "(null)");
        }
        call->unsuccessful++;
    }
    cohort_error_t error;
    call->iteration_error = cohort_batch_error(batch, &error);

    bool ok = !call->iteration_error;
    if (p->set_key[0])
        call->read_own_set = set_and_read_back(ctx, p->set_key, call->batch_id);
    if (n < p->fail_callbacks) {
        cohort_ctx_set_error(ctx, "probe: failing callback %d of the first %ld on purpose", n + 1,
                             p->fail_callbacks);
        ok = false;
    }
    if (completed_hook && !completed_hook(ctx, batch, completed_arg))
        ok = false;
    call->returned = ok;
    return ok;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "probe",
    .init = probe_init,
    .destroy = probe_destroy,
    .primary_work = probe_primary_work,
    .process_task = probe_process,
    .on_tasks_completed = probe_completed,
};
