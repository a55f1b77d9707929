/*
 * context.c - the functions of the handler ABI that work on its opaque handles: the
 * cohort_ctx_* calls, the task accessors (cohort_task_id() ...) and parsing a task document
 * into one, cohort_task_create(), generic data (cohort_get/set) and batches.
 *
 * cohort_task_create() from primary_work is fenced: it checks the primary lease right
 * before the write and stamps the task with the epoch it acted under, so a node that lost
 * primacy (paused, partitioned) creates nothing once its lease has run out.
 */
#include "node/handler/context.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/taskopts.h"
#include "core/error.h"
#include "core/jsondoc.h"
#include "store/batches.h"
#include "store/data.h"
#include "store/insert.h"
#include "store/services.h"

void cohort_ctx_init(cohort_ctx_t *ctx, cohort_service_t *service, mongoc_client_t *client,
                     bool fenced)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->service = service;
    ctx->client = client;
    ctx->fenced = fenced;
}

const char *cohort_ctx_service(const cohort_ctx_t *ctx)
{
    return ctx->service->config->name;
}

const char *cohort_ctx_node_id(const cohort_ctx_t *ctx)
{
    return ctx->service->node_id;
}

bool cohort_ctx_is_primary(const cohort_ctx_t *ctx)
{
    return cohort_election_has_lease(&ctx->service->election);
}

int64_t cohort_ctx_epoch(const cohort_ctx_t *ctx)
{
    return cohort_election_epoch(&ctx->service->election);
}

int64_t cohort_now_ms(const cohort_ctx_t *ctx)
{
    (void)ctx;
    return cohort_clock_cluster_ms();
}

void cohort_ctx_set_error(cohort_ctx_t *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
}

void cohort_log(cohort_ctx_t *ctx, cohort_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cohort_logv(level, ctx->service->config->name, cohort_election_role(&ctx->service->election),
                cohort_election_epoch(&ctx->service->election), fmt, ap);
    va_end(ap);
}

/* ---- tasks: the handle a handler reads ------------------------------------------------ */

const char *cohort_task_id(const cohort_task_t *task)
{
    return task->id;
}

const bson_t *cohort_task_data(const cohort_task_t *task)
{
    return &task->data;
}

int cohort_task_counted_attempts(const cohort_task_t *task)
{
    return task->attempt - task->uncounted;
}

int cohort_task_attempt(const cohort_task_t *task)
{
    return task->attempt;
}

const char *cohort_task_kind(const cohort_task_t *task)
{
    return task->kind;
}

const char *cohort_task_group(const cohort_task_t *task)
{
    return task->group;
}

int64_t cohort_task_priority(const cohort_task_t *task)
{
    return task->priority;
}

const char *cohort_task_status(const cohort_task_t *task)
{
    return task->status ? task->status : "unknown";
}

const char *cohort_task_last_error(const cohort_task_t *task)
{
    return task->last_error;
}

void cohort_task_set_error(cohort_task_t *task, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(task->error, sizeof task->error, fmt, ap);
    va_end(ap);
}

/* Reads the fields of a task document; false if it is not a well-formed task (a claimed one
 * is then failed without running, with `why` as the reason). */
bool cohort_task_from_doc(const bson_t *doc, cohort_task_t *task, int64_t *claimed_at,
                          bson_error_t *error)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id")) {
        /* Cannot happen: MongoDB gives every document an _id. */
        bson_set_error(error, COHORT_DOMAIN_STORE, COHORT_CODE_INVALID, "task has no _id");
        return false;
    }
    bson_value_copy(bson_iter_value(&it), &task->id_value);
    bool oid = BSON_ITER_HOLDS_OID(&it);
    if (oid)
        bson_oid_to_string(bson_iter_oid(&it), task->id);
    else
        snprintf(task->id, sizeof task->id, "(not an ObjectId)");

    task->attempt = 1;
    task->attempts_bad = false;
    if (bson_iter_init_find(&it, doc, "attempts") && BSON_ITER_HOLDS_NUMBER(&it)) {
        double as_double = BSON_ITER_HOLDS_DOUBLE(&it) ? bson_iter_double(&it) : 0;
        int64_t n = bson_iter_as_int64(&it);
        bool whole = BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it) ||
                     (BSON_ITER_HOLDS_DOUBLE(&it) && as_double == (double)n);
        if (whole && n >= 1 && n <= INT32_MAX) {
            task->attempt = (int)n;
        } else if (!BSON_ITER_HOLDS_DECIMAL128(&it)) {
            task->attempts_bad = true;
            bson_value_copy(bson_iter_value(&it), &task->attempts_raw); /* a number: no heap */
        }
    }

    task->uncounted = 0;
    if (bson_iter_init_find(&it, doc, "uncounted") && BSON_ITER_HOLDS_NUMBER(&it) &&
        bson_iter_as_int64(&it) > 0 && bson_iter_as_int64(&it) < task->attempt)
        task->uncounted = (int)bson_iter_as_int64(&it);

    task->kind = task->group = task->status = task->last_error = NULL;
    task->priority = 0;
    task->timeout_ms = -1;
    if (bson_iter_init_find(&it, doc, "kind") && BSON_ITER_HOLDS_UTF8(&it))
        task->kind = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, doc, "group") && BSON_ITER_HOLDS_UTF8(&it))
        task->group = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, doc, "status") && BSON_ITER_HOLDS_UTF8(&it))
        task->status = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, doc, "last_error") && BSON_ITER_HOLDS_UTF8(&it))
        task->last_error = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, doc, "priority") && BSON_ITER_HOLDS_NUMBER(&it))
        task->priority = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, doc, "task_timeout_ms") && BSON_ITER_HOLDS_NUMBER(&it))
        task->timeout_ms = bson_iter_as_int64(&it);

    *claimed_at = cohort_clock_cluster_ms();
    if (bson_iter_init_find(&it, doc, "claimed_at") && BSON_ITER_HOLDS_DATE_TIME(&it))
        *claimed_at = bson_iter_date_time(&it);

    if (!oid) {
        bson_set_error(error, COHORT_DOMAIN_STORE, COHORT_CODE_INVALID,
                       "task _id is not an ObjectId (Cohort creates ObjectIds; insert "
                       "tasks without an _id or with an ObjectId)");
        return false;
    }
    if (task->attempts_bad) {
        bson_init(&task->data);
        bson_set_error(error, COHORT_DOMAIN_STORE, COHORT_CODE_INVALID,
                       "task attempts is not a whole number from 1 to 2147483647 (it "
                       "was written by hand; Cohort counts attempts itself)");
        return false;
    }
    if (!bson_iter_init_find(&it, doc, "data")) {
        bson_init(&task->data);
        return true;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_init(&task->data);
        bson_set_error(error, COHORT_DOMAIN_STORE, COHORT_CODE_INVALID,
                       "task data is a %s, not a document",
                       BSON_ITER_HOLDS_NULL(&it) ? "null" : "non-document value");
        return false;
    }
    uint32_t len;
    const uint8_t *bytes;
    bson_iter_document(&it, &len, &bytes);
    if (!bson_init_static(&task->data, bytes, len)) {
        bson_init(&task->data);
        bson_set_error(error, COHORT_DOMAIN_STORE, COHORT_CODE_INVALID,
                       "task data is not valid BSON");
        return false;
    }
    return true;
}

static bool fail(cohort_error_t *error, cohort_error_code_t code, const char *fmt, ...)
    COHORT_PRINTF(3, 4);
static bool fail(cohort_error_t *error, cohort_error_code_t code, const char *fmt, ...)
{
    if (error) {
        error->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(error->message, sizeof error->message, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* The batch a tracked task created now joins: the primary keeps it current on its tick;
 * anyone else asks the config document. */
static bool open_batch(cohort_ctx_t *ctx, int64_t *batch, cohort_error_t *error)
{
    cohort_service_t *service = ctx->service;
    if (cohort_election_has_lease(&service->election)) {
        *batch = atomic_load(&service->batch_open);
        if (*batch > 0)
            return true;
    }
    cohort_batch_state_t state;
    bson_error_t db_error;
    if (!cohort_store_batch_state(service->store, ctx->client, service->config->name, &state,
                                  &db_error))
        return fail(error, COHORT_ERROR_DATABASE, "task not created: %s", db_error.message);
    *batch = state.open;
    return true;
}

bool cohort_task_create(cohort_ctx_t *ctx, const bson_t *data, const bson_t *opts, char id[25],
                        cohort_error_t *error)
{
    if (error) {
        error->code = COHORT_OK;
        error->message[0] = '\0';
    }
    if (!ctx)
        return fail(error, COHORT_ERROR_INVALID, "cohort_task_create: ctx is NULL");
    cohort_task_options_t o;
    bson_error_t why;
    if (!cohort_task_options_parse(opts, true, &o, &why))
        return fail(error, COHORT_ERROR_INVALID, "%s", why.message);
    bool tracked = o.tracked;
    const char *unique_key = o.unique_key;
    bson_error_t refused;
    if (data && !cohort_doc_check(data, "data", &refused))
        return fail(error, COHORT_ERROR_INVALID, "task data refused: %s", refused.message);
    if (!ctx->client)
        return fail(error, COHORT_ERROR_DATABASE, "no database connection in this callback");

    cohort_service_t *service = ctx->service;
    int64_t epoch = cohort_election_epoch(&service->election);
    if (ctx->fenced && epoch == 0)
        return fail(error, COHORT_ERROR_NOT_PRIMARY,
                    "not primary of '%s' any more (lease expired): task not created",
                    service->config->name);
    int64_t batch = 0;
    if (tracked && !open_batch(ctx, &batch, error))
        return false;

    cohort_new_task_t task = {
        .data = data,
        .tracked = tracked,
        .batch = batch,
        .unique_key = unique_key,
        .created_by = service->node_id,
        .epoch = ctx->fenced ? epoch : 0,
        .now_ms = cohort_clock_cluster_ms(),
    };
    cohort_task_options_apply(&o, service->config, &task);
    bson_oid_t oid;
    bool exists = false, coalesced = false;
    bson_error_t db_error;
    if (!cohort_store_insert_task(service->store, ctx->client, service->config->name, &task, &oid,
                                  &exists, &coalesced, &db_error)) {
        if (exists)
            return fail(error, COHORT_ERROR_EXISTS, "a task with unique_key '%s' already exists",
                        unique_key);
        return fail(error, COHORT_ERROR_DATABASE, "task not created: %s", db_error.message);
    }
    if (id)
        bson_oid_to_string(&oid, id);
    return true;
}

/* ---- generic data -------------------------------------------------------------------------- */

static bool valid_data_key(const char *key, cohort_error_t *error)
{
    size_t len = key ? strlen(key) : 0;
    if (len == 0 || len > 64 || strpbrk(key, ".$"))
        return fail(error, COHORT_ERROR_INVALID,
                    "generic data key '%s' is invalid (1-64 characters, no '.' or '$')",
                    key ? key : "(null)");
    return true;
}

/* Clears `error` and checks the key: what every generic-data call does first. */
static bool data_call_begin(const char *key, cohort_error_t *error)
{
    if (error) {
        error->code = COHORT_OK;
        error->message[0] = '\0';
    }
    return valid_data_key(key, error);
}

/* The fence of an immediate generic-data write: a database to write to and, from a fenced
 * callback (primary_work), a valid lease, whose epoch *epoch receives (0 unfenced). */
static bool data_fence(cohort_ctx_t *ctx, const char *key, const char *verb, int64_t *epoch,
                       cohort_error_t *error)
{
    *epoch = 0;
    if (!ctx->client)
        return fail(error, COHORT_ERROR_DATABASE, "no database connection in this callback");
    if (!ctx->fenced)
        return true;
    *epoch = cohort_election_epoch(&ctx->service->election);
    if (*epoch == 0)
        return fail(error, COHORT_ERROR_NOT_PRIMARY,
                    "not primary any more (lease expired): '%s' not %s", key, verb);
    return true;
}

bool cohort_get(cohort_ctx_t *ctx, const char *key, bson_value_t *value, cohort_error_t *error)
{
    if (!data_call_begin(key, error))
        return false;
    bson_iter_t it;
    if (ctx->pending_sets && bson_iter_init_find(&it, ctx->pending_sets, key)) {
        if (BSON_ITER_HOLDS_NULL(&it))
            return false; /* removed by this callback */
        bson_value_copy(bson_iter_value(&it), value);
        return true;
    }
    if (!ctx->client)
        return fail(error, COHORT_ERROR_DATABASE, "no database connection in this callback");
    bool found = false;
    bson_error_t db_error;
    cohort_service_t *service = ctx->service;
    if (!cohort_store_get_data(service->store, ctx->client, service->config->name, key, value,
                               &found, &db_error))
        return fail(error, COHORT_ERROR_DATABASE, "cannot read '%s': %s", key, db_error.message);
    return found;
}

/* How long an unfenced data write waits for a missing config document to come back. Some
 * node recreates it on its next tick once its election round reads it missing (node.c); a
 * node whose clock sample is not in yet, or whose tick runs late, needs a few more. So: three
 * lease periods and two ticks of the live settings (4.9 s with the defaults of the tests),
 * never less than a second. */
#define DOCUMENT_POLL_MS 50

static int64_t document_wait_ms(const cohort_service_t *service)
{
    cohort_election_t *e = (cohort_election_t *)&service->election;
    int64_t wait = 3 * atomic_load(&e->takeover_ms) + 2 * atomic_load(&e->tick_ms);
    return wait < 1000 ? 1000 : wait;
}

/* An unfenced write found no config document (dropped, or the database lost its data while
 * nodes ran). That is no fault of the task: wait for a node to recreate the document, so the
 * caller can write then and the handler's write is neither lost nor its task failed. One call
 * waits at most document_wait_ms() in all, from its first miss (*deadline, 0 until then),
 * however often the document goes missing again. False with `error` filled once that passed. */
static bool wait_for_document(cohort_ctx_t *ctx, const char *key, const char *verb,
                              int64_t *deadline, cohort_error_t *error)
{
    cohort_service_t *service = ctx->service;
    int64_t wait = document_wait_ms(service);
    if (*deadline == 0)
        *deadline = cohort_clock_monotonic_ms() + wait;
    while (cohort_clock_monotonic_ms() < *deadline) {
        struct timespec pause = {.tv_sec = 0, .tv_nsec = DOCUMENT_POLL_MS * 1000000L};
        nanosleep(&pause, NULL);
        bson_t doc;
        bool found = false;
        bson_error_t db_error;
        bool ok = cohort_store_read_service(service->store, ctx->client, service->config->name,
                                            &doc, &found, &db_error);
        bson_destroy(&doc);
        if (!ok) {
            /* A read that fails while the collection is dropped again is asked again: the
             * wait is bounded by the deadline, and a lasting error is what is reported. */
            if (cohort_clock_monotonic_ms() < *deadline)
                continue;
            return fail(error, COHORT_ERROR_DATABASE, "cannot %s '%s': %s", verb, key,
                        db_error.message);
        }
        if (found)
            return true;
    }
    return fail(error, COHORT_ERROR_DATABASE,
                "cannot %s '%s': the service's config document is missing (not recreated "
                "within %lld ms); retry later",
                verb, key, (long long)wait);
}

/* A value to store passes the gate of every stored document (core/jsondoc.h). */
static bool value_allowed(const char *key, const bson_value_t *value, cohort_error_t *error)
{
    bson_error_t refused;
    if (cohort_value_check(value, key, &refused))
        return true;
    return fail(error, COHORT_ERROR_INVALID, "value of '%s' refused: %s", key, refused.message);
}

bool cohort_set(cohort_ctx_t *ctx, const char *key, const bson_value_t *value,
                cohort_error_t *error)
{
    if (!data_call_begin(key, error) || !value_allowed(key, value, error))
        return false;
    if (value && value->value_type == BSON_TYPE_NULL)
        value = NULL; /* storing null is removing */
    if (ctx->pending_sets) {
        /* Applied with the batch's completion; a later set of the same key wins. */
        bson_t copy = BSON_INITIALIZER;
        bson_iter_t it;
        bson_iter_init(&it, ctx->pending_sets);
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), key) != 0)
                bson_append_value(&copy, bson_iter_key(&it), -1, bson_iter_value(&it));
        if (value)
            bson_append_value(&copy, key, -1, value);
        else
            bson_append_null(&copy, key, -1);
        bson_reinit(ctx->pending_sets);
        bson_concat(ctx->pending_sets, &copy);
        bson_destroy(&copy);
        return true;
    }
    int64_t epoch = 0;
    if (!data_fence(ctx, key, "set", &epoch, error))
        return false;
    cohort_service_t *service = ctx->service;
    int64_t deadline = 0;
    for (;;) {
        bool applied = false;
        bson_error_t db_error;
        if (!cohort_store_set_data(service->store, ctx->client, service->config->name, key,
                                   value, ctx->fenced ? service->node_id : NULL, epoch, &applied,
                                   &db_error)) {
            /* A $set is idempotent, so an unfenced one that the server refused while the
             * document was being dropped or recreated (mongo-java-server answers "Unknown
             * error: null" then) is tried again within the same wait as a missing document.
             * The server's error is what the caller sees if that wait runs out. */
            cohort_error_t waited;
            if (ctx->fenced || !wait_for_document(ctx, key, "set", &deadline, &waited))
                return fail(error, COHORT_ERROR_DATABASE, "cannot set '%s': %s", key,
                            db_error.message);
            continue;
        }
        if (applied)
            return true;
        if (ctx->fenced)
            return fail(error, COHORT_ERROR_NOT_PRIMARY,
                        "not primary under epoch %lld any more: '%s' not set", (long long)epoch,
                        key);
        if (!wait_for_document(ctx, key, "set", &deadline, error))
            return false;
    }
}

/* The atomic calls are refused in on_tasks_completed: its writes are deferred to the
 * completion's write (the callback may run again), so they could not return a result now. */
static bool atomic_data_begin(cohort_ctx_t *ctx, const char *call, const char *key,
                              int64_t *epoch, cohort_error_t *error)
{
    if (!data_call_begin(key, error))
        return false;
    if (ctx->pending_sets)
        return fail(error, COHORT_ERROR_INVALID,
                    "%s('%s') is not available in on_tasks_completed (its writes apply with "
                    "the batch's completion): use cohort_set there",
                    call, key);
    return data_fence(ctx, key, "changed", epoch, error);
}

/* Why a conditional write of `key` matched nothing, from one read of the service document:
 * false with `error` filled if the document is gone or (fenced) this node is no longer
 * primary under `epoch`; else true, with the key's current value in *current if
 * *present (the caller destroys it). An unfenced write whose document is gone waits for it
 * like cohort_set() (wait_for_document() with the call's *deadline); *recreated then tells
 * the caller to write again. */
static bool explain_unmatched(cohort_ctx_t *ctx, const char *key, const char *verb,
                              int64_t epoch, int64_t *deadline, bson_value_t *current,
                              bool *present, bool *recreated, cohort_error_t *error)
{
    cohort_service_t *service = ctx->service;
    const char *name = service->config->name;
    bson_t doc;
    bool found = false;
    bson_error_t db_error;
    bool ok = cohort_store_read_service(service->store, ctx->client, name, &doc, &found,
                                        &db_error);
    *present = *recreated = false;
    if (!ok) {
        fail(error, COHORT_ERROR_DATABASE, "cannot read '%s': %s", key, db_error.message);
    } else if (!found && !ctx->fenced) {
        ok = *recreated = wait_for_document(ctx, key, verb, deadline, error);
    } else if (!found) {
        ok = fail(error, COHORT_ERROR_DATABASE, "service document of '%s' missing: '%s' unchanged",
                  name, key);
    } else if (ctx->fenced) {
        bson_iter_t it;
        bool same = bson_iter_init_find(&it, &doc, "primary") && BSON_ITER_HOLDS_UTF8(&it) &&
                    strcmp(bson_iter_utf8(&it, NULL), service->node_id) == 0 &&
                    bson_iter_init_find(&it, &doc, "epoch") && bson_iter_as_int64(&it) == epoch;
        if (!same)
            ok = fail(error, COHORT_ERROR_NOT_PRIMARY,
                      "not primary under epoch %lld any more: '%s' unchanged", (long long)epoch,
                      key);
    }
    char path[128];
    snprintf(path, sizeof path, "data.%s", key);
    bson_iter_t it, child;
    if (ok && bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, path, &child)) {
        bson_value_copy(bson_iter_value(&child), current);
        *present = true;
    }
    bson_destroy(&doc);
    return ok;
}

/* Tries the increment a few times: a value that changed between the write and the read
 * that explains its miss (removed, or made an integer) deserves another try. */
#define INC_TRIES 3

bool cohort_data_inc(cohort_ctx_t *ctx, const char *key, int64_t delta, int64_t *result,
                     cohort_error_t *error)
{
    int64_t epoch;
    if (!atomic_data_begin(ctx, "cohort_data_inc", key, &epoch, error))
        return false;
    cohort_service_t *service = ctx->service;
    const char *fence = ctx->fenced ? service->node_id : NULL;
    int64_t deadline = 0;
    for (int tries = 0; tries < INC_TRIES;) {
        bool applied = false;
        int64_t sum = 0;
        bson_error_t db_error;
        if (!cohort_store_inc_data(service->store, ctx->client, service->config->name, key,
                                   delta, fence, epoch, &sum, &applied, &db_error))
            return fail(error, COHORT_ERROR_DATABASE, "cannot increment '%s': %s", key,
                        db_error.message);
        if (applied) {
            if (result)
                *result = sum;
            return true;
        }
        bson_value_t current;
        bool present, recreated;
        if (!explain_unmatched(ctx, key, "increment", epoch, &deadline, &current, &present,
                               &recreated, error))
            return false;
        if (recreated)
            continue; /* bounded by the deadline, not by the tries */
        tries++;
        if (!present)
            continue;
        bson_type_t type = current.value_type;
        bson_value_destroy(&current);
        if (type == BSON_TYPE_INT32 || type == BSON_TYPE_INT64)
            return fail(error, COHORT_ERROR_INVALID,
                        "'%s' + %lld would overflow a 64-bit integer: not incremented", key,
                        (long long)delta);
        return fail(error, COHORT_ERROR_INVALID,
                    "generic data '%s' is %s, not an integer: not incremented", key,
                    cohort_value_type_name(type));
    }
    return fail(error, COHORT_ERROR_DATABASE, "'%s' kept changing under the increment", key);
}

bool cohort_data_cas(cohort_ctx_t *ctx, const char *key, const bson_value_t *expected,
                     const bson_value_t *value, cohort_error_t *error)
{
    int64_t epoch;
    if (!value_allowed(key, value, error) ||
        !atomic_data_begin(ctx, "cohort_data_cas", key, &epoch, error))
        return false;
    /* A stored null does not exist (cohort_set(null) removes): null is "absent" here too. */
    if (expected && expected->value_type == BSON_TYPE_NULL)
        expected = NULL;
    if (value && value->value_type == BSON_TYPE_NULL)
        value = NULL;
    cohort_service_t *service = ctx->service;
    int64_t deadline = 0;
    for (;;) {
        bool applied = false;
        bson_error_t db_error;
        if (!cohort_store_cas_data(service->store, ctx->client, service->config->name, key,
                                   expected, value, ctx->fenced ? service->node_id : NULL, epoch,
                                   &applied, &db_error))
            return fail(error, COHORT_ERROR_DATABASE, "cannot compare-and-set '%s': %s", key,
                        db_error.message);
        if (applied)
            return true;
        bson_value_t current;
        bool present, recreated;
        if (!explain_unmatched(ctx, key, "compare-and-set", epoch, &deadline, &current, &present,
                               &recreated, error))
            return false;
        if (present)
            bson_value_destroy(&current);
        if (!recreated)
            return false; /* the value differs: not an error */
        /* The document is back: compare with it (bounded by the deadline). */
    }
}

/* ---- batches ------------------------------------------------------------------------------- */

int64_t cohort_batch_id(const cohort_batch_t *batch)
{
    return batch->id;
}

int64_t cohort_batch_succeeded(const cohort_batch_t *batch)
{
    return batch->succeeded;
}

int64_t cohort_batch_failed(const cohort_batch_t *batch)
{
    return batch->failed;
}

/* The next task of one of the batch's cursors; with `malformed_too`, a task whose document
 * is not well-formed comes back as far as it could be read (its data empty). */
static const cohort_task_t *batch_next(cohort_batch_t *batch, mongoc_cursor_t *cursor,
                                       bool malformed_too)
{
    if (!cursor || batch->failed_iterating)
        return NULL;
    const bson_t *doc;
    while (mongoc_cursor_next(cursor, &doc)) {
        int64_t ignored;
        bson_error_t malformed;
        memset(&batch->task, 0, sizeof batch->task);
        bool ok = cohort_task_from_doc(doc, &batch->task, &ignored, &malformed);
        bson_value_destroy(&batch->task.id_value);
        if (ok || malformed_too)
            return &batch->task;
    }
    if (mongoc_cursor_error(cursor, &batch->error))
        batch->failed_iterating = true;
    return NULL;
}

const cohort_task_t *cohort_batch_next(cohort_batch_t *batch)
{
    /* A succeeded task always had well-formed data; skip anything else. */
    return batch_next(batch, batch->cursor, false);
}

const cohort_task_t *cohort_batch_next_unsuccessful(cohort_batch_t *batch)
{
    /* Malformed data is often why such a task failed: the handler still hears of it. */
    return batch_next(batch, batch->unsuccessful, true);
}

bool cohort_batch_error(const cohort_batch_t *batch, cohort_error_t *error)
{
    if (!batch->failed_iterating)
        return false;
    fail(error, COHORT_ERROR_DATABASE, "batch %lld: %s", (long long)batch->id,
         batch->error.message);
    return true;
}
