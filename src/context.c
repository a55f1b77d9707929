/*
 * context.c - the cohort_ctx_* and cohort_task_create() functions of the handler ABI.
 *
 * cohort_task_create() from primary_work is fenced: it checks the primary lease right
 * before the write and stamps the task with the epoch it acted under, so a node that lost
 * primacy (paused, partitioned) creates nothing once its lease has run out.
 */
#include "context.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"

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
    cohort_logv(level, ctx->service->config->name, cohort_service_role(ctx->service),
                cohort_election_epoch(&ctx->service->election), fmt, ap);
    va_end(ap);
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

static bool parse_create_opts(const bson_t *opts, bool *tracked, cohort_error_t *error)
{
    *tracked = true;
    if (!opts)
        return true;
    bson_iter_t it;
    if (!bson_iter_init(&it, opts))
        return fail(error, COHORT_ERROR_INVALID, "task options are not a valid BSON document");
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (strcmp(key, "tracked") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return fail(error, COHORT_ERROR_INVALID, "task option 'tracked' must be a bool");
            *tracked = bson_iter_bool(&it);
        } else {
            return fail(error, COHORT_ERROR_INVALID, "unknown task option '%s' (known: tracked)",
                        key);
        }
    }
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
    bool tracked;
    if (!parse_create_opts(opts, &tracked, error))
        return false;
    if (data && !bson_validate(data, BSON_VALIDATE_NONE, NULL))
        return fail(error, COHORT_ERROR_INVALID, "task data is not a valid BSON document");
    if (!ctx->client)
        return fail(error, COHORT_ERROR_DATABASE, "no database connection in this callback");

    cohort_service_t *service = ctx->service;
    int64_t epoch = cohort_election_epoch(&service->election);
    if (ctx->fenced && epoch == 0)
        return fail(error, COHORT_ERROR_NOT_PRIMARY,
                    "not primary of '%s' any more (lease expired): task not created",
                    service->config->name);

    cohort_new_task_t task = {
        .data = data,
        .tracked = tracked,
        .created_by = service->node_id,
        .epoch = ctx->fenced ? epoch : 0,
        .now_ms = cohort_clock_cluster_ms(),
    };
    bson_oid_t oid;
    bson_error_t db_error;
    if (!cohort_store_insert_task(service->store, ctx->client, service->config->name, &task, &oid,
                                  &db_error))
        return fail(error, COHORT_ERROR_DATABASE, "task not created: %s", db_error.message);
    if (id)
        bson_oid_to_string(&oid, id);
    return true;
}
