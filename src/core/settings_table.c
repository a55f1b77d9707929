/*
 * settings_table.c - the rows of the settings table (see settings.h): every key of the config
 * file once, with its type, default, range, how it changes, and its line of documentation.
 *
 * Only this file (with config.c) knows the config structs: each row names the field its
 * value lands in, so settings.c stores values without knowing the structs.
 */
#include <string.h>

#include "core/config.h"
#include "core/settings.h"

#define DAY_MS (86400000LL)
#define FIELD(type, member) {offsetof(type, member), sizeof(((type *)0)->member)}
#define NO_FIELD {-1, 0}
#define CLUSTER(member) FIELD(cohort_config_t, member)
#define SERVICE(member) FIELD(cohort_service_config_t, member)
#define KIND(member) FIELD(cohort_kind_config_t, defaults.member)
#define LIVE(member) FIELD(cohort_settings_t, member)

static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const log_formats[] = {"text", "json", NULL};
static const char *const isolations[] = {"thread", "process", NULL};
static const char *const wake_modes[] = {"change_stream", "poll", NULL};

/* claim_batch = auto: each claim sized by node/work/prefetch.c. */
static bool parse_claim_batch(const char *text, int64_t *value)
{
    if (strcmp(text, "auto") != 0)
        return false;
    *value = COHORT_CLAIM_BATCH_AUTO;
    return true;
}

/* log_level also takes "warning" and any case, as cohort_log_parse_level does. */
static bool parse_log_level(const char *text, int64_t *value)
{
    cohort_log_level_t level;
    if (!cohort_log_parse_level(text, &level))
        return false;
    *value = level;
    return true;
}

const cohort_setting_t cohort_settings_table[] = {
    /* ---- [cluster] ---- */
    {.name = "mongodb_uri", .section = COHORT_SECTION_CLUSTER, .type = COHORT_SETTING_STRING,
     .def_text = "mongodb://127.0.0.1:27017", .check = cohort_setting_check_uri, .env = "MONGODB_URI",
     .field = CLUSTER(mongodb_uri), .live_field = NO_FIELD,
     .doc = "the MongoDB connection string; Cohort adds `serverSelectionTimeoutMS=2000`, "
            "`connectTimeoutMS=2000` and `socketTimeoutMS=15000` unless the URI sets them"},
    {.name = "database", .section = COHORT_SECTION_CLUSTER, .type = COHORT_SETTING_STRING,
     .def_text = "cohort", .check = cohort_setting_check_database, .field = CLUSTER(database),
     .live_field = NO_FIELD, .doc = "the database for all collections"},
    {.name = "tick_ms", .section = COHORT_SECTION_CLUSTER, .type = COHORT_SETTING_DURATION_MS,
     .def = 1000, .min = 10, .max = 3600000, .live = true, .reloads = true,
     .field = CLUSTER(tick_ms), .live_field = LIVE(tick_ms),
     .doc = "timer tick of every node: elections, claims while idle, check-ins and maintenance "
            "run on it"},
    {.name = "takeover_ms", .section = COHORT_SECTION_CLUSTER,
     .type = COHORT_SETTING_DURATION_MS, .def = 10000, .min = 20, .max = COHORT_TAKEOVER_MS_MAX,
     .live = true, .reloads = true, .field = CLUSTER(takeover_ms),
     .live_field = LIVE(takeover_ms),
     .doc = "a primary silent this long may be replaced; must be greater than `tick_ms`. A "
            "primary acts for `takeover_ms × 3/4` after each renewal, so keep 3 or more ticks "
            "per takeover. `cohortctl settings set` refuses, unless `--force`, a value under 3 "
            "× a live node's p99 database round trip (`db_rtt_p99_ms` in `cohortctl nodes "
            "--json`)"},
    {.name = "shutdown_grace_ms", .section = COHORT_SECTION_CLUSTER,
     .type = COHORT_SETTING_DURATION_MS, .def = 30000, .min = 0, .max = 3600000,
     .field = CLUSTER(shutdown_grace_ms), .live_field = NO_FIELD,
     .doc = "on SIGTERM, how long running tasks may take"},
    {.name = "node_id", .section = COHORT_SECTION_CLUSTER, .type = COHORT_SETTING_STRING,
     .def_text = NULL, .check = cohort_setting_check_node_id, .empty_unsets = true, .field = CLUSTER(node_id),
     .live_field = NO_FIELD,
     .doc = "this node's name, 1-128 printable characters without spaces; empty: "
            "`host-pid-random`, unique per process"},
    {.name = "log_level", .section = COHORT_SECTION_CLUSTER, .type = COHORT_SETTING_ENUM,
     .def = COHORT_LOG_INFO, .choices = log_levels, .parse = parse_log_level, .reloads = true,
     .field = CLUSTER(log_level), .live_field = NO_FIELD,
     .doc = "the least severe level logged"},
    {.name = "log_format", .section = COHORT_SECTION_CLUSTER, .type = COHORT_SETTING_ENUM,
     .def = 0, .choices = log_formats, .reloads = true, .field = CLUSTER(log_json),
     .live_field = NO_FIELD,
     .doc = "`text`, or `json`: one JSON object per line (see the operating guide)"},
    {.name = "http_listen", .section = COHORT_SECTION_CLUSTER, .type = COHORT_SETTING_STRING,
     .def_text = NULL, .check = cohort_setting_check_listen, .empty_unsets = true,
     .field = CLUSTER(http_listen), .live_field = NO_FIELD,
     .doc = "`HOST:PORT` (e.g. `0.0.0.0:9464`; IPv6 as `[::1]:9464`) of the HTTP listener for "
            "`/healthz`, `/readyz`, `/metrics` and the HTTP API (`/api/v1/`, docs/API.md); "
            "empty: no listener. Prefer a loopback address with TLS in a reverse proxy"},
    {.name = "api_max_body", .section = COHORT_SECTION_CLUSTER, .type = COHORT_SETTING_COUNT,
     .def = 1048576, .min = 1024, .max = 67108864, .field = CLUSTER(api_max_body),
     .live_field = NO_FIELD,
     .doc = "the largest request body the HTTP API accepts, in bytes; a larger one is "
            "answered 413 without being read"},
    {.name = "api_threads", .section = COHORT_SECTION_CLUSTER, .type = COHORT_SETTING_COUNT,
     .def = 4, .min = 1, .max = 64, .field = CLUSTER(api_threads), .live_field = NO_FIELD,
     .doc = "threads answering the HTTP API, each with its own database connection; a claim "
            "held for an external worker (long-poll) takes none while it waits"},
    {.name = "api_max_wait_ms", .section = COHORT_SECTION_CLUSTER,
     .type = COHORT_SETTING_DURATION_MS, .def = 30000, .min = 0, .max = 300000,
     .field = CLUSTER(api_max_wait_ms), .live_field = NO_FIELD,
     .doc = "the longest an external worker's claim waits for a task (its `wait_ms` is capped "
            "to this); 0: claims never wait"},
    {.name = "http_max_connections", .section = COHORT_SECTION_CLUSTER,
     .type = COHORT_SETTING_COUNT, .def = 256, .min = 1, .max = 65536,
     .field = CLUSTER(http_max_connections), .live_field = NO_FIELD,
     .doc = "the most HTTP connections open at once; a new one past it closes the oldest idle "
            "one (logged), so idle clients cannot lock out health checks. Keep it well under "
            "the process's file descriptor limit"},
    {.name = "wake", .section = COHORT_SECTION_CLUSTER, .type = COHORT_SETTING_ENUM,
     .def = COHORT_WAKE_CHANGE_STREAM, .choices = wake_modes, .field = CLUSTER(wake),
     .live_field = NO_FIELD,
     .doc = "`change_stream`: each node watches its queues' inserts and wakes an idle worker "
            "at once; where change streams are refused (no replica set) or break, it logs "
            "once, claims on each tick meanwhile and reopens the stream from its resume token. "
            "`poll`: idle workers claim on each tick only"},
    {.name = "wake_await_ms", .section = COHORT_SECTION_CLUSTER,
     .type = COHORT_SETTING_DURATION_MS, .def = 30000, .min = 10, .max = 60000,
     .field = CLUSTER(wake_await_ms), .live_field = NO_FIELD,
     .doc = "how long the server holds each change stream's empty getMore "
            "(`maxAwaitTimeMS`): an idle node sends one getMore per hosted queue per this "
            "period (an insert is delivered at once whatever it is). Stopping does not wait "
            "for a getMore in flight. A server that answers empty getMores at once "
            "(mongo-java-server itself; the local test server holds them as MongoDB does) is "
            "asked again every tick, or every this period if shorter"},

    /* ---- [service:NAME] ---- */
    {.name = "handler", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_PATH,
     .def_text = "required", .field = SERVICE(handler_path), .live_field = NO_FIELD,
     .doc = "path of the handler `.so`; relative paths are resolved from the config file's "
            "folder. `external`: no handler and no workers on the node; external workers run "
            "the service's tasks over the HTTP API (docs/API.md)"},
    {.name = "primary_task_count", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_COUNT, .def = 10, .min = 1, .max = 1000000, .live = true,
     .reloads = true, .field = SERVICE(primary_task_count),
     .live_field = LIVE(primary_task_count),
     .doc = "tasks the primary may claim per tick while other live nodes serve the service "
            "(low, so primary duties keep their rhythm and the others get the work); a primary "
            "with no live peer claims without this cap"},
    {.name = "secondary_task_count", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_COUNT, .def = 0, .min = 0, .max = 1000000, .live = true,
     .reloads = true, .field = SERVICE(secondary_task_count),
     .live_field = LIVE(secondary_task_count),
     .doc = "tasks a secondary may claim per tick; `0`: keep claiming until none is left"},
    {.name = "workers", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_COUNT,
     .def = 2, .min = 1, .max = 1024, .reloads = true, .field = SERVICE(workers),
     .live_field = NO_FIELD,
     .doc = "threads (or, with `isolation = process`, child processes) running this service's "
            "tasks on this node"},
    {.name = "capacity", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_COUNT,
     .def = 0, .def_text = "`workers`", .min = 0, .max = COHORT_CAPACITY_MAX, .reloads = true,
     .field = SERVICE(capacity), .live_field = NO_FIELD,
     .doc = "the weight of tasks this node holds at once (running, or claimed and waiting for a "
            "worker): a worker claims a task only while it fits, so heavy tasks go to nodes "
            "with room and light ones still start; batch claims prefetch only weight-1 tasks. "
            "A node holding nothing claims any one task, however heavy; `0`: the worker count"},
    {.name = "max_attempts", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_COUNT,
     .def = 5, .min = 1, .max = 1000, .field = SERVICE(max_attempts), .live_field = NO_FIELD,
     .doc = "runs before a task stays failed (kept in the database for debugging)"},
    {.name = "retry_base_ms", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_DURATION_MS, .def = 20000, .min = 0, .max = DAY_MS,
     .field = SERVICE(retry_base_ms), .live_field = NO_FIELD,
     .doc = "retry *n* (n = 0 for the first) waits `retry_base_ms × 2^n`, capped at 7 days"},
    {.name = "stall_timeout_ms", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_DURATION_MS, .def = 1800000, .min = 100, .max = 7 * DAY_MS,
     .live = true, .reloads = true, .field = SERVICE(stall_timeout_ms),
     .live_field = LIVE(stall_timeout_ms),
     .doc = "a claimed task whose node has not checked in for this long is reset to pending; "
            "running tasks are checked in every third of it, so it must be at least "
            "`3 × tick_ms`"},
    {.name = "succeeded_retention_ms", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_DURATION_MS, .def = 7 * DAY_MS, .min = 0, .max = 3650 * DAY_MS,
     .live = true, .reloads = true, .field = SERVICE(succeeded_retention_ms),
     .live_field = LIVE(succeeded_retention_ms),
     .doc = "the primary deletes succeeded tasks finished longer ago (7 days); `0` keeps them"},
    {.name = "failed_retention_ms", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_DURATION_MS, .def = 7 * DAY_MS, .min = 0, .max = 3650 * DAY_MS,
     .live = true, .reloads = true, .field = SERVICE(failed_retention_ms),
     .live_field = LIVE(failed_retention_ms),
     .doc = "the same for failed, timed-out and cancelled tasks; `0` keeps them until an "
            "operator deletes them (`cohortctl delete`)"},
    {.name = "history_retention_ms", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_DURATION_MS, .def = DAY_MS, .min = 3600000, .max = 90 * DAY_MS,
     .field = SERVICE(history_retention_ms), .live_field = NO_FIELD,
     .doc = "the primary keeps one document a minute of queue counts and throughput (the "
            "dashboard's charts, collection `history`) for this long (1 day)"},
    {.name = "priority", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_COUNT,
     .def = 0, .min = -COHORT_PRIORITY_LIMIT, .max = COHORT_PRIORITY_LIMIT,
     .field = SERVICE(defaults.priority), .live_field = NO_FIELD,
     .doc = "default priority of new tasks; higher is claimed first"},
    {.name = "weight", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_COUNT,
     .def = 1, .min = 1, .max = COHORT_WEIGHT_MAX, .field = SERVICE(defaults.weight),
     .live_field = NO_FIELD,
     .doc = "default weight of new tasks: the load one puts on a node, counted against the "
            "node's `capacity`"},
    {.name = "not_after_ms", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_DURATION_MS, .def = 0, .min = 0, .max = 3650 * DAY_MS,
     .field = SERVICE(defaults.not_after_ms), .live_field = NO_FIELD,
     .doc = "default deadline: a task still pending this long after it became due is "
            "promoted once; `0`: none"},
    {.name = "not_after_boost", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_COUNT,
     .def = 10, .min = 0, .max = COHORT_PRIORITY_LIMIT, .field = SERVICE(not_after_boost),
     .live_field = NO_FIELD, .doc = "what a promotion adds to a task's priority"},
    {.name = "task_timeout_ms", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_DURATION_MS, .def = 0, .min = 0, .max = 7 * DAY_MS,
     .field = SERVICE(defaults.task_timeout_ms), .live_field = NO_FIELD,
     .doc = "default run time limit; a longer run ends the task `timed_out` (final, never "
            "retried); `0`: none"},
    {.name = "kind.KIND.priority", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_COUNT, .def_text = "the service's", .min = -COHORT_PRIORITY_LIMIT,
     .max = COHORT_PRIORITY_LIMIT, .pattern = true, .field = KIND(priority),
     .live_field = NO_FIELD,
     .doc = "`priority` for tasks of kind KIND (1-64 of `A-Z a-z 0-9 _ -`)"},
    {.name = "kind.KIND.not_after_ms", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_DURATION_MS, .def_text = "the service's", .min = 0,
     .max = 3650 * DAY_MS, .pattern = true, .field = KIND(not_after_ms),
     .live_field = NO_FIELD, .doc = "`not_after_ms` for tasks of kind KIND"},
    {.name = "kind.KIND.task_timeout_ms", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_DURATION_MS, .def_text = "the service's", .min = 0,
     .max = 7 * DAY_MS, .pattern = true, .field = KIND(task_timeout_ms),
     .live_field = NO_FIELD, .doc = "`task_timeout_ms` for tasks of kind KIND"},
    {.name = "kind.KIND.weight", .section = COHORT_SECTION_SERVICE,
     .type = COHORT_SETTING_COUNT, .def_text = "the service's", .min = 1,
     .max = COHORT_WEIGHT_MAX, .pattern = true, .field = KIND(weight),
     .live_field = NO_FIELD, .doc = "`weight` for tasks of kind KIND"},
    {.name = "schedule.ID", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_STRING,
     .def_text = "none", .pattern = true, .reloads = true, .field = NO_FIELD,
     .live_field = NO_FIELD,
     .doc = "a recurring task: `CRON ; key=value ; ...`. CRON has 5 fields (or 6, seconds "
            "first) or an alias (`@hourly`, `@daily`, ...); options: `kind`, `priority`, `weight`, "
            "`data` (a JSON object), `timeout`, `deadline`, `group`, `tracked` (as "
            "`cohortctl enqueue`), `tz` (a zone of the tz database; `UTC`), `catch_up` "
            "(`none`, `latest` or `all`: slots missed while no primary ran are skipped, the "
            "latest runs, or each runs; `latest`), `catch_up_max` (1-1000; 10). ID: 1-64 of "
            "`A-Z a-z 0-9 _ -`. Each slot runs once (README, Recurring tasks)"},
    {.name = "claim_batch", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_COUNT,
     .def = COHORT_CLAIM_BATCH_AUTO, .def_text = "`auto`", .parse = parse_claim_batch,
     .min = 1, .max = COHORT_CLAIM_BATCH_MAX, .field = SERVICE(claim_batch),
     .live_field = NO_FIELD,
     .doc = "`auto`, or how many tasks a worker claims at once (a batch takes three database "
            "commands; its outcomes go in one bulk write). `auto`: as many as the idle "
            "workers and the recent run times justify, short tasks up to 64 at once (about "
            "50 ms of work per idle worker, at most a quarter tick), long ones one per idle "
            "worker, so no task waits here while another node idles. A number pins it"},
    {.name = "isolation", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_ENUM,
     .def = COHORT_ISOLATION_THREAD, .choices = isolations, .field = SERVICE(isolation),
     .live_field = NO_FIELD,
     .doc = "`thread`: tasks run on the node's worker threads; `process`: in child worker "
            "processes the node supervises (a crash or a timeout costs only that child)"},
    {.name = "KEY", .section = COHORT_SECTION_SERVICE, .type = COHORT_SETTING_OPTION,
     .pattern = true, .reloads = true, .field = NO_FIELD, .live_field = NO_FIELD,
     .doc = "any other key is handed to the handler's `init` as a key/value pair with its "
            "line number; a SIGHUP reloads them if the handler has a `reload` callback"},
    {.name = NULL},
};

const char *const cohort_setting_names[] = {
    "tick_ms",          "takeover_ms",           "primary_task_count", "secondary_task_count",
    "stall_timeout_ms", "succeeded_retention_ms", "failed_retention_ms", NULL,
};

const cohort_setting_t *cohort_setting_find(cohort_setting_section_t section, const char *name)
{
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++)
        if (r->section == section && !r->pattern && strcmp(r->name, name) == 0)
            return r;
    return NULL;
}

const cohort_setting_t *cohort_setting_find_kind(const char *key)
{
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++)
        if (r->pattern && strncmp(r->name, "kind.KIND.", 10) == 0 &&
            strcmp(r->name + 10, key) == 0)
            return r;
    return NULL;
}

void cohort_settings_list_names(cohort_setting_section_t section, bool live_only, char *buf,
                                size_t len)
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (const cohort_setting_t *r = cohort_settings_table; r->name; r++) {
        if (r->section != section || r->pattern || (live_only && !r->live))
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", r->name);
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
    }
}

