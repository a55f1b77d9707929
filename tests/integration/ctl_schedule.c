/*
 * ctl_schedule.c - cohortctl's scheduling commands end to end against the local database:
 * every `enqueue` scheduling flag lands in the task document (and the config file's defaults
 * apply), bad flags are refused with exit 2 and a message naming the flag, coalescing and
 * unique keys with --count, pause/resume/block/unblock write the config document and
 * `status` shows them, `counts` by status, kind and group, and `tasks` / `task`.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "support.h"
#include "store/store.h"
#include "store/services.h"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    /* enqueue refuses a service no node has run */
    test_service_db_open("ctlsched", "mail", &db, &store, &client);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(ctl_schedule, .init = setup, .fini = teardown, .timeout = 60);

#define ctl(...) test_ctl(db, __VA_ARGS__)

/* Runs cohortctl and asserts it succeeded. */
#define ctl_ok(r, ...)                                                                          \
    do {                                                                                        \
        r = ctl(__VA_ARGS__);                                                                   \
        cr_assert_eq(r.exit_code, 0, "cohortctl exit %d; stderr:\n%s", r.exit_code, r.err);    \
    } while (0)

static void ensure_service(const char *name)
{
    bson_error_t error;
    cr_assert(test_ensure_service(store, client, name, &error), "%s", error.message);
}

static int64_t count(const char *filter)
{
    return test_count(client, db, "queue_mail", filter);
}

/* The id cohortctl printed (its first line) into id[25]. */
static void printed_id(const test_run_result_t *r, char id[25])
{
    cr_assert(strlen(r->out) >= 25 && r->out[24] == '\n', "want an id and a newline: '%s'",
              r->out);
    memcpy(id, r->out, 24);
    id[24] = '\0';
    cr_assert(bson_oid_is_valid(id, 24), "'%s' is not an id", id);
}

static void read_task(const char *id, bson_t *doc)
{
    char filter[96];
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%s\"}}", id);
    cr_assert(test_find_one(client, db, "queue_mail", filter, doc), "task %s not found", id);
}

static bool has(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found);
}

static int64_t int_at(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    cr_assert(bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found),
              "no '%s'", path);
    cr_assert(BSON_ITER_HOLDS_NUMBER(&found), "'%s' is not a number", path);
    return bson_iter_as_int64(&found);
}

static int64_t date_at(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    cr_assert(bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found),
              "no '%s'", path);
    cr_assert(BSON_ITER_HOLDS_DATE_TIME(&found), "'%s' is not a date", path);
    return bson_iter_date_time(&found);
}

static const char *str_at(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    cr_assert(bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found),
              "no '%s'", path);
    cr_assert(BSON_ITER_HOLDS_UTF8(&found), "'%s' is not a string", path);
    return bson_iter_utf8(&found, NULL);
}

static bool bool_at(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    cr_assert(bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found),
              "no '%s'", path);
    cr_assert(BSON_ITER_HOLDS_BOOL(&found), "'%s' is not a bool", path);
    return bson_iter_bool(&found);
}

/* cohortctl's stdout parsed as JSON (fails the test if it is not). Caller destroys. */
static bson_t *json_out(const test_run_result_t *r)
{
    bson_error_t error;
    bson_t *doc = bson_new_from_json((const uint8_t *)r->out, -1, &error);
    cr_assert_not_null(doc, "not JSON (%s):\n%s", error.message, r->out);
    return doc;
}

/* ---- enqueue flags ---------------------------------------------------------------------- */

Test(ctl_schedule, enqueue_stores_every_relative_flag)
{
    test_run_result_t r;
    ctl_ok(r, "enqueue", "mail", "--priority", "7", "--delay", "30s", "--kind", "render",
           "--group", "user-42", "--deadline", "5m", "--timeout", "2500ms", "--data",
           "{\"k\": 1}", "--weight", "12");
    char id[25];
    printed_id(&r, id);
    test_run_result_free(&r);
    bson_t doc;
    read_task(id, &doc);
    int64_t created = date_at(&doc, "created_at");
    cr_assert_eq(int_at(&doc, "priority"), 7);
    cr_assert_eq(int_at(&doc, "base_priority"), 7);
    cr_assert_eq(int_at(&doc, "weight"), 12);
    cr_assert_eq(date_at(&doc, "not_before"), created + 30000, "--delay 30s: not_before");
    cr_assert_eq(date_at(&doc, "run_at"), created + 30000, "--delay 30s: run_at");
    cr_assert_eq(date_at(&doc, "not_after"), created + 30000 + 300000,
                 "--deadline 5m counts from when the task is due");
    cr_assert_eq(int_at(&doc, "task_timeout_ms"), 2500);
    cr_assert_str_eq(str_at(&doc, "kind"), "render");
    cr_assert_str_eq(str_at(&doc, "group"), "user-42");
    cr_assert_eq(int_at(&doc, "data.k"), 1);
    cr_assert_not(bool_at(&doc, "tracked"));
    cr_assert_str_eq(str_at(&doc, "status"), "pending");
    bson_destroy(&doc);
}

Test(ctl_schedule, enqueue_stores_absolute_times_and_keys)
{
    ensure_service("mail"); /* unique and coalesce keys need the queue's indexes */
    test_run_result_t r;
    /* 2040-01-02T03:04:05.678Z = 2209086245678 ms */
    ctl_ok(r, "enqueue", "mail", "--not-before", "2040-01-02T03:04:05.678Z", "--not-after",
           "2209090000000", "--unique-key", "order-1", "--tracked");
    char id[25];
    printed_id(&r, id);
    test_run_result_free(&r);
    bson_t doc;
    read_task(id, &doc);
    cr_assert_eq(date_at(&doc, "not_before"), 2209086245678LL);
    cr_assert_eq(date_at(&doc, "run_at"), 2209086245678LL);
    cr_assert_eq(date_at(&doc, "not_after"), 2209090000000LL);
    cr_assert_str_eq(str_at(&doc, "unique_key"), "order-1");
    cr_assert(bool_at(&doc, "tracked"));
    cr_assert_eq(int_at(&doc, "priority"), 0, "no --priority: the built-in default 0");
    cr_assert_not(has(&doc, "task_timeout_ms"));
    cr_assert_not(has(&doc, "kind"));
    bson_destroy(&doc);

    ctl_ok(r, "enqueue", "mail", "--coalesce-key", "refresh", "--not-before", "86400000");
    printed_id(&r, id);
    test_run_result_free(&r);
    read_task(id, &doc);
    cr_assert_str_eq(str_at(&doc, "coalesce_key"), "refresh");
    cr_assert_str_eq(str_at(&doc, "coalesce_pending"), "refresh");
    cr_assert_eq(date_at(&doc, "not_before"), 86400000, "a past not_before is stored as given");
    cr_assert_geq(date_at(&doc, "run_at"), date_at(&doc, "created_at"),
                  "a past not_before: due now");
    bson_destroy(&doc);
}

Test(ctl_schedule, enqueue_durations)
{
    static const struct {
        const char *dur;
        int64_t ms;
    } cases[] = {{"250ms", 250}, {"30s", 30000}, {"5m", 300000}, {"2h", 7200000},
                 {"1d", 86400000}, {"1500", 1500}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_run_result_t r;
        ctl_ok(r, "enqueue", "mail", "--timeout", cases[i].dur, "--delay", cases[i].dur);
        char id[25];
        printed_id(&r, id);
        test_run_result_free(&r);
        bson_t doc;
        read_task(id, &doc);
        cr_assert_eq(int_at(&doc, "task_timeout_ms"), cases[i].ms, "--timeout %s", cases[i].dur);
        cr_assert_eq(date_at(&doc, "not_before") - date_at(&doc, "created_at"), cases[i].ms,
                     "--delay %s", cases[i].dur);
        bson_destroy(&doc);
    }
}

Test(ctl_schedule, enqueue_takes_the_config_files_defaults)
{
    char *dir = test_tmpdir("ctlsched");
    char text[1024];
    snprintf(text, sizeof text,
             "[cluster]\nmongodb_uri = %s\ndatabase = unused\n\n"
             "[service:mail]\nhandler = %s\npriority = 3\ntask_timeout_ms = 1000\n"
             "not_after_ms = 60000\nkind.render.priority = 9\nkind.render.task_timeout_ms = 0\n"
             "kind.render.weight = 5\n",
             test_uri(), test_build_path("handlers/cohort_noop.so"));
    char *path = test_write_file(dir, "cohort.ini", text);
    test_run_result_t r;
    char id[25];
    bson_t doc;

    ctl_ok(r, "-c", path, "enqueue", "mail");
    printed_id(&r, id);
    test_run_result_free(&r);
    read_task(id, &doc);
    cr_assert_eq(int_at(&doc, "priority"), 3, "the service's default priority");
    cr_assert_eq(int_at(&doc, "weight"), 1, "the built-in default weight");
    cr_assert_eq(int_at(&doc, "task_timeout_ms"), 1000);
    cr_assert_eq(date_at(&doc, "not_after"), date_at(&doc, "run_at") + 60000);
    bson_destroy(&doc);

    ctl_ok(r, "-c", path, "enqueue", "mail", "--kind", "render");
    printed_id(&r, id);
    test_run_result_free(&r);
    read_task(id, &doc);
    cr_assert_eq(int_at(&doc, "priority"), 9, "the kind's default priority");
    cr_assert_eq(int_at(&doc, "weight"), 5, "the kind's default weight");
    cr_assert_not(has(&doc, "task_timeout_ms"), "the kind turned the timeout off");
    bson_destroy(&doc);

    ctl_ok(r, "-c", path, "enqueue", "mail", "--kind", "render", "--priority", "-2",
           "--timeout", "7s");
    printed_id(&r, id);
    test_run_result_free(&r);
    read_task(id, &doc);
    cr_assert_eq(int_at(&doc, "priority"), -2, "a flag wins over the defaults");
    cr_assert_eq(int_at(&doc, "task_timeout_ms"), 7000);
    bson_destroy(&doc);

    ctl_ok(r, "-c", path, "enqueue", "mail", "--count", "3", "--kind", "render");
    cr_assert_str_eq(r.out, "3\n");
    test_run_result_free(&r);
    cr_assert_eq(count("{\"kind\": \"render\", \"priority\": 9}"), 4, "bulk path: defaults");
    free(path);
    free(dir);
}

Test(ctl_schedule, enqueue_refuses_bad_flags)
{
    static const struct {
        const char *args[6];
        const char *message;
    } bad[] = {
        {{"--priority", "abc"}, "--priority 'abc' must be an integer"},
        {{"--priority", "2000000"}, "out of range"},
        {{"--priority", "1", "--priority", "2"}, "--priority given twice"},
        {{"--weight", "0"}, "--weight '0': task option 'weight' = 0 is out of range [1, 1000]"},
        {{"--weight", "heavy"}, "--weight 'heavy' must be an integer"},
        {{"--delay", "5y"}, "--delay '5y' must be a duration"},
        {{"--delay", "-5s"}, "--delay '-5s' must be a duration"},
        {{"--delay", ""}, "--delay '' must be a duration"},
        {{"--delay", "99999d"}, "--delay '99999d'"},
        {{"--timeout", "8d"}, "--timeout '8d'"},
        {{"--deadline", "soon"}, "--deadline 'soon' must be a duration"},
        {{"--not-before", "2026-13-01T00:00:00Z"}, "--not-before '2026-13-01T00:00:00Z' must be"},
        {{"--not-before", "2026-02-30T00:00:00Z"}, "--not-before"},
        {{"--not-before", "2026-11-21T10:00:00"}, "UTC time like"},
        {{"--not-after", "tomorrow"}, "--not-after 'tomorrow' must be"},
        {{"--not-after", "0"}, "--not-after '0'"},
        {{"--kind", "bad kind"}, "--kind 'bad kind'"},
        {{"--group", ""}, "--group ''"},
        {{"--coalesce-key", ""}, "--coalesce-key ''"},
        {{"--unique-key", ""}, "--unique-key ''"},
        {{"--kind"}, "--kind needs a value"},
        {{"--delay", "1s", "--not-before", "1893456000000"}, "exclude each other (--delay sets delay_ms, --not-before sets not_before)"},
        {{"--not-after", "1893456000000", "--deadline", "1m"}, "--not-after sets not_after, --deadline sets not_after_ms"},
        {{"--coalesce-key", "a", "--unique-key", "b"}, "--coalesce-key sets coalesce_key, --unique-key sets unique_key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[10] = {"enqueue", "mail"};
        size_t n = 2;
        for (size_t j = 0; j < 6 && bad[i].args[j]; j++)
            args[n++] = bad[i].args[j];
        test_run_result_t r = test_ctl_run(db, NULL, args);
        cr_assert_eq(r.exit_code, 2, "case %zu (%s): exit %d, stderr: %s", i, bad[i].args[0],
                     r.exit_code, r.err);
        cr_assert_not_null(strstr(r.err, bad[i].message), "case %zu: want '%s' in:\n%s", i,
                           bad[i].message, r.err);
        cr_assert_str_eq(r.out, "", "case %zu wrote to stdout", i);
        test_run_result_free(&r);
    }
    cr_assert_eq(count("{}"), 0, "a refused enqueue inserted tasks");
}

/* ---- coalescing and unique keys --------------------------------------------------------- */

Test(ctl_schedule, coalesce_key_with_count_creates_one_task)
{
    ensure_service("mail");
    test_run_result_t r;
    ctl_ok(r, "enqueue", "mail", "--coalesce-key", "k1", "--count", "40", "--data",
           "{\"v\": 1}");
    cr_assert_str_eq(r.out, "created=1 coalesced=39\n");
    test_run_result_free(&r);
    ctl_ok(r, "enqueue", "mail", "--coalesce-key", "k1", "--data", "{\"v\": 2}");
    char id[25];
    printed_id(&r, id);
    cr_assert_not_null(strstr(r.err, "coalesced"), "a coalesced single enqueue says so: %s",
                       r.err);
    test_run_result_free(&r);
    cr_assert_eq(count("{}"), 1);
    bson_t doc;
    read_task(id, &doc);
    cr_assert_eq(int_at(&doc, "creations"), 41);
    cr_assert_eq(int_at(&doc, "data.v"), 2, "the latest data wins");
    bson_destroy(&doc);

    ctl_ok(r, "enqueue", "mail", "--coalesce-key", "k2", "--count", "5");
    cr_assert_str_eq(r.out, "created=1 coalesced=4\n");
    test_run_result_free(&r);
    cr_assert_eq(count("{}"), 2);
}

Test(ctl_schedule, unique_key_with_count_creates_one_task)
{
    ensure_service("mail");
    test_run_result_t r;
    ctl_ok(r, "enqueue", "mail", "--unique-key", "u1", "--count", "3");
    cr_assert_str_eq(r.out, "created=1 existing=2\n");
    test_run_result_free(&r);
    r = ctl("enqueue", "mail", "--unique-key", "u1");
    cr_assert_eq(r.exit_code, 1, "exit %d", r.exit_code);
    cr_assert_not_null(strstr(r.err, "exists already"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    test_run_result_free(&r);
    cr_assert_eq(count("{\"unique_key\": \"u1\"}"), 1);
}

Test(ctl_schedule, keys_need_the_service_to_exist)
{
    /* without a node having run the service, the queue has no unique indexes: refused like
     * any task for an unknown service */
    test_run_result_t r = ctl("enqueue", "ghost", "--unique-key", "u1");
    cr_assert_eq(r.exit_code, 2, "exit %d", r.exit_code);
    cr_assert_not_null(strstr(r.err, "does not exist"), "%s", r.err);
    test_run_result_free(&r);
    r = ctl("enqueue", "ghost", "--coalesce-key", "c", "--count", "2");
    cr_assert_eq(r.exit_code, 2, "exit %d", r.exit_code);
    test_run_result_free(&r);
    cr_assert_eq(test_count(client, db, "queue_ghost", "{}"), 0);
}

/* ---- pause, resume, block, unblock, and status ------------------------------------------ */

static bson_t *service_doc(void)
{
    bson_t found;
    cr_assert(test_find_one(client, db, "services", "{\"_id\": \"mail\"}", &found));
    bson_t *doc = bson_copy(&found);
    bson_destroy(&found);
    return doc;
}

/* The service "mail"'s entry of `status --json`. Caller destroys. */
static bson_t *status_entry(void)
{
    test_run_result_t r;
    ctl_ok(r, "status", "--json");
    bson_t *out = json_out(&r);
    bson_iter_t it, entry;
    cr_assert(bson_iter_init(&it, out) && bson_iter_find_descendant(&it, "services.0", &entry) &&
                  BSON_ITER_HOLDS_DOCUMENT(&entry),
              "%s", r.out);
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(&entry, &len, &data);
    bson_t *svc = bson_new_from_data(data, len);
    bson_destroy(out);
    test_run_result_free(&r);
    return svc;
}

Test(ctl_schedule, switches_need_an_existing_service)
{
    static const char *const commands[] = {"pause", "resume", "unblock"};
    for (size_t i = 0; i < 3; i++) {
        test_run_result_t r = ctl(commands[i], "ghost");
        cr_assert_eq(r.exit_code, 2, "%s: exit %d", commands[i], r.exit_code);
        cr_assert_not_null(strstr(r.err, "'ghost' does not exist"), "%s: %s", commands[i],
                           r.err);
        cr_assert_not_null(strstr(r.err, "known services: "), "%s: %s", commands[i], r.err);
        test_run_result_free(&r);
    }
    test_run_result_t r = ctl("block", "ghost", "--reason", "x");
    cr_assert_eq(r.exit_code, 2);
    test_run_result_free(&r);
    cr_assert_eq(test_count(client, db, "services", "{\"_id\": \"ghost\"}"), 0,
                 "a switch created a service");
}

Test(ctl_schedule, switch_usage_errors)
{
    ensure_service("mail");
    static const struct {
        const char *args[6];
        const char *message;
    } bad[] = {
        {{"block", "mail"}, "--reason TEXT is required"},
        {{"block", "mail", "--reason", " "}, "--reason TEXT is required"},
        {{"block", "mail", "--kind", "k"}, "--reason TEXT is required"},
        {{"pause", "mail", "--kind", "bad kind"}, "--kind 'bad kind'"},
        {{"pause", "mail", "--kind", "*"}, "--kind '*'"},
        {{"resume", "mail", "--reason", "x"}, "unexpected argument '--reason'"},
        {{"unblock", "mail", "--reason", "x"}, "unexpected argument '--reason'"},
        {{"pause"}, "which SERVICE"},
        {{"pause", "bad name!"}, "not a valid service name"},
        {{"pause", "mail", "--frob"}, "unexpected argument '--frob'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_run_result_t r = test_ctl_run(db, NULL, bad[i].args);
        cr_assert_eq(r.exit_code, 2, "case %zu: exit %d: %s", i, r.exit_code, r.err);
        cr_assert_not_null(strstr(r.err, bad[i].message), "case %zu: want '%s' in:\n%s", i,
                           bad[i].message, r.err);
        test_run_result_free(&r);
    }
    bson_t *doc = service_doc();
    cr_assert_not(has(doc, "pause.*") || has(doc, "block.*") || has(doc, "block.k"),
                  "a refused switch was written");
    bson_destroy(doc);
}

Test(ctl_schedule, pause_resume_block_unblock)
{
    ensure_service("mail");
    test_run_result_t r;
    ctl_ok(r, "pause", "mail");
    cr_assert_not_null(strstr(r.out, "paused mail (all kinds)"), "%s", r.out);
    test_run_result_free(&r);
    ctl_ok(r, "pause", "mail", "--kind", "render", "--reason", "fonts missing");
    test_run_result_free(&r);
    ctl_ok(r, "block", "mail", "--kind", "export", "--reason", "disk full");
    cr_assert_not_null(strstr(r.out, "blocked mail kind export (reason: disk full)"), "%s", r.out);
    test_run_result_free(&r);

    bson_t *doc = service_doc();
    cr_assert(date_at(doc, "pause.*.at") > 0);
    cr_assert_not_null(strstr(str_at(doc, "pause.*.by"), "cohortctl"));
    cr_assert_str_eq(str_at(doc, "pause.render.reason"), "fonts missing");
    cr_assert_str_eq(str_at(doc, "block.export.reason"), "disk full");
    cr_assert_not(has(doc, "block.*"));
    bson_destroy(doc);

    /* status --json: the switches with kinds and reasons */
    bson_t *svc = status_entry();
    cr_assert_str_eq(str_at(svc, "paused.0.kind"), "*");
    cr_assert_str_eq(str_at(svc, "paused.1.kind"), "render");
    cr_assert_str_eq(str_at(svc, "paused.1.reason"), "fonts missing");
    cr_assert_str_eq(str_at(svc, "blocked.0.kind"), "export");
    cr_assert_str_eq(str_at(svc, "blocked.0.reason"), "disk full");
    cr_assert_not(has(svc, "blocked.1"));
    cr_assert_not_null(strstr(str_at(svc, "blocked.0.by"), "cohortctl"));
    cr_assert_eq(strlen(str_at(svc, "blocked.0.at")), 24, "at: an ISO time");
    bson_destroy(svc);

    /* status text: the state and one line per switch */
    ctl_ok(r, "status");
    cr_assert_not_null(strstr(r.out, "TIMED_OUT"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "paused"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "paused kind render: fonts missing"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "blocked kind export: disk full"), "%s", r.out);
    test_run_result_free(&r);

    ctl_ok(r, "resume", "mail");
    cr_assert_not_null(strstr(r.out, "resumed mail (all kinds)"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "still set"), "the other switches are mentioned: %s",
                       r.out);
    test_run_result_free(&r);
    ctl_ok(r, "unblock", "mail", "--kind", "export");
    test_run_result_free(&r);
    ctl_ok(r, "unblock", "mail", "--kind", "export");
    cr_assert_not_null(strstr(r.out, "nothing to do"), "%s", r.out);
    test_run_result_free(&r);
    doc = service_doc();
    cr_assert_not(has(doc, "pause.*"));
    cr_assert_not(has(doc, "block.export"));
    cr_assert(has(doc, "pause.render"), "resume without --kind leaves the kind's pause");
    bson_destroy(doc);

    ctl_ok(r, "block", "mail", "--reason", "maintenance");
    test_run_result_free(&r);
    svc = status_entry();
    cr_assert_str_eq(str_at(svc, "blocked.0.kind"), "*");
    cr_assert_str_eq(str_at(svc, "blocked.0.reason"), "maintenance");
    bson_destroy(svc);
    ctl_ok(r, "status");
    cr_assert_not_null(strstr(r.out, "blocked (all kinds): maintenance"), "%s", r.out);
    test_run_result_free(&r);

    ctl_ok(r, "unblock", "mail");
    test_run_result_free(&r);
    ctl_ok(r, "resume", "mail", "--kind", "render");
    test_run_result_free(&r);
    svc = status_entry();
    cr_assert_not(has(svc, "paused.0"));
    cr_assert_not(has(svc, "blocked.0"));
    bson_destroy(svc);
    ctl_ok(r, "status");
    cr_assert_not_null(strstr(r.out, "running"), "%s", r.out);
    test_run_result_free(&r);
}

/* ---- counts ----------------------------------------------------------------------------- */

static void set_status(const char *filter_json, const char *status)
{
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, "queue_mail");
    bson_error_t error;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &error);
    cr_assert_not_null(filter, "%s", error.message);
    bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8(status), "}");
    cr_assert(mongoc_collection_update_many(coll, filter, update, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
}

/* 3 render (1 failed), 2 export in group g1 (1 timed_out), 4 without kind (1 succeeded, in
 * group g2). */
static void fill_queue(void)
{
    test_run_result_t r;
    ctl_ok(r, "enqueue", "mail", "--count", "3", "--kind", "render");
    test_run_result_free(&r);
    ctl_ok(r, "enqueue", "mail", "--count", "2", "--kind", "export", "--group", "g1");
    test_run_result_free(&r);
    ctl_ok(r, "enqueue", "mail", "--count", "3");
    test_run_result_free(&r);
    ctl_ok(r, "enqueue", "mail", "--group", "g2");
    test_run_result_free(&r);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, "queue_mail");
    bson_error_t error;
    static const struct {
        const char *filter, *status;
    } changes[] = {{"{\"kind\": \"render\"}", "failed"},
                   {"{\"kind\": \"export\"}", "timed_out"},
                   {"{\"group\": \"g2\"}", "succeeded"}};
    for (size_t i = 0; i < 3; i++) {
        bson_t *filter = bson_new_from_json((const uint8_t *)changes[i].filter, -1, &error);
        bson_t *update = BCON_NEW("$set", "{", "status", BCON_UTF8(changes[i].status), "}");
        cr_assert(mongoc_collection_update_one(coll, filter, update, NULL, NULL, &error), "%s",
                  error.message);
        bson_destroy(update);
        bson_destroy(filter);
    }
    mongoc_collection_destroy(coll);
}

Test(ctl_schedule, counts_by_status)
{
    ensure_service("mail");
    fill_queue();
    set_status("{\"kind\": {\"$exists\": false}, \"group\": {\"$exists\": false}}", "claimed");
    test_run_result_t r;
    ctl_ok(r, "counts", "mail", "--json");
    bson_t *out = json_out(&r);
    cr_assert_str_eq(str_at(out, "by"), "status");
    cr_assert_eq(int_at(out, "counts.pending"), 3, "%s", r.out);
    cr_assert_eq(int_at(out, "counts.claimed"), 3, "%s", r.out);
    cr_assert_eq(int_at(out, "counts.succeeded"), 1, "%s", r.out);
    cr_assert_eq(int_at(out, "counts.failed"), 1, "%s", r.out);
    cr_assert_eq(int_at(out, "counts.timed_out"), 1, "%s", r.out);
    bson_destroy(out);
    test_run_result_free(&r);

    ctl_ok(r, "counts", "mail");
    cr_assert_not_null(strstr(r.out, "timed_out"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "total"), "%s", r.out);
    test_run_result_free(&r);

    /* a status JSON check of `status` too: timed_out is counted */
    bson_t *svc = status_entry();
    cr_assert_eq(int_at(svc, "counts.timed_out"), 1);
    cr_assert_eq(int_at(svc, "counts.claimed"), 3);
    bson_destroy(svc);
}

/* Finds the row of `counts --by FIELD --json` whose FIELD is `value` (NULL: null). */
static bool find_row(const bson_t *out, const char *field, const char *value, bson_t *row)
{
    bson_iter_t it, rows;
    cr_assert(bson_iter_init_find(&it, out, "rows") && BSON_ITER_HOLDS_ARRAY(&it) &&
              bson_iter_recurse(&it, &rows));
    while (bson_iter_next(&rows)) {
        uint32_t len;
        const uint8_t *data;
        cr_assert(BSON_ITER_HOLDS_DOCUMENT(&rows));
        bson_iter_document(&rows, &len, &data);
        bson_t doc;
        bson_init_static(&doc, data, len);
        bson_iter_t f;
        cr_assert(bson_iter_init_find(&f, &doc, field), "a row without '%s'", field);
        bool match = value ? BSON_ITER_HOLDS_UTF8(&f) && strcmp(bson_iter_utf8(&f, NULL), value) == 0
                           : BSON_ITER_HOLDS_NULL(&f);
        if (match) {
            bson_copy_to(&doc, row);
            return true;
        }
    }
    return false;
}

static void assert_row(const bson_t *out, const char *field, const char *value, int64_t pending,
                       int64_t succeeded, int64_t failed, int64_t timed_out)
{
    bson_t row;
    cr_assert(find_row(out, field, value, &row), "no row for %s %s", field,
              value ? value : "null");
    cr_assert_eq(int_at(&row, "pending"), pending, "%s %s: pending", field, value);
    cr_assert_eq(int_at(&row, "claimed"), 0);
    cr_assert_eq(int_at(&row, "succeeded"), succeeded, "%s %s: succeeded", field, value);
    cr_assert_eq(int_at(&row, "failed"), failed, "%s %s: failed", field, value);
    cr_assert_eq(int_at(&row, "timed_out"), timed_out, "%s %s: timed_out", field, value);
    cr_assert_eq(int_at(&row, "total"), pending + succeeded + failed + timed_out);
    bson_destroy(&row);
}

Test(ctl_schedule, counts_by_kind_and_group)
{
    fill_queue();
    test_run_result_t r;
    ctl_ok(r, "counts", "mail", "--by", "kind", "--json");
    bson_t *out = json_out(&r);
    cr_assert_str_eq(str_at(out, "by"), "kind");
    assert_row(out, "kind", "render", 2, 0, 1, 0);
    assert_row(out, "kind", "export", 1, 0, 0, 1);
    assert_row(out, "kind", NULL, 3, 1, 0, 0);
    cr_assert_not(has(out, "rows.3"), "more rows than kinds: %s", r.out);
    bson_destroy(out);
    test_run_result_free(&r);

    ctl_ok(r, "counts", "mail", "--by", "group", "--json");
    out = json_out(&r);
    assert_row(out, "group", "g1", 1, 0, 0, 1);
    assert_row(out, "group", "g2", 0, 1, 0, 0);
    assert_row(out, "group", NULL, 5, 0, 1, 0);
    cr_assert_not(has(out, "rows.3"), "more rows than groups: %s", r.out);
    bson_destroy(out);
    test_run_result_free(&r);

    ctl_ok(r, "counts", "mail", "--by", "kind");
    cr_assert_not_null(strstr(r.out, "KIND"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "(none)"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "render"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "TIMED_OUT"), "%s", r.out);
    test_run_result_free(&r);

    r = ctl("counts", "mail", "--by", "colour");
    cr_assert_eq(r.exit_code, 2);
    cr_assert_not_null(strstr(r.err, "--by 'colour' must be status, kind or group"), "%s", r.err);
    test_run_result_free(&r);
    r = ctl("counts");
    cr_assert_eq(r.exit_code, 2);
    test_run_result_free(&r);
}

Test(ctl_schedule, counts_of_an_empty_queue)
{
    test_run_result_t r;
    ctl_ok(r, "counts", "mail", "--by", "group", "--json");
    bson_t *out = json_out(&r);
    cr_assert_not(has(out, "rows.0"), "%s", r.out);
    bson_destroy(out);
    test_run_result_free(&r);
    ctl_ok(r, "counts", "mail", "--json");
    out = json_out(&r);
    cr_assert_eq(int_at(out, "counts.pending"), 0);
    bson_destroy(out);
    test_run_result_free(&r);
}

/* ---- tasks and task --------------------------------------------------------------------- */

Test(ctl_schedule, tasks_lists_in_claim_order)
{
    test_run_result_t r;
    char low[25], high[25], promoted[25];
    ctl_ok(r, "enqueue", "mail", "--priority", "-1", "--kind", "bulk");
    printed_id(&r, low);
    test_run_result_free(&r);
    ctl_ok(r, "enqueue", "mail", "--priority", "5", "--group", "g");
    printed_id(&r, high);
    test_run_result_free(&r);
    ctl_ok(r, "enqueue", "mail", "--priority", "2");
    printed_id(&r, promoted);
    test_run_result_free(&r);
    /* promoted by hand the way the primary does: priority raised, base_priority kept */
    char filter[96];
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%s\"}}", promoted);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, "queue_mail");
    bson_error_t error;
    bson_t *f = bson_new_from_json((const uint8_t *)filter, -1, &error);
    bson_t *update = BCON_NEW("$set", "{", "priority", BCON_INT32(12), "}");
    cr_assert(mongoc_collection_update_one(coll, f, update, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(update);
    bson_destroy(f);
    mongoc_collection_destroy(coll);

    ctl_ok(r, "tasks", "mail", "--json");
    bson_t *out = json_out(&r);
    cr_assert_str_eq(str_at(out, "tasks.0.id"), promoted, "%s", r.out);
    cr_assert_eq(int_at(out, "tasks.0.priority"), 12);
    cr_assert_eq(int_at(out, "tasks.0.base_priority"), 2);
    cr_assert_str_eq(str_at(out, "tasks.1.id"), high);
    cr_assert_str_eq(str_at(out, "tasks.1.group"), "g");
    cr_assert_str_eq(str_at(out, "tasks.1.status"), "pending");
    cr_assert_str_eq(str_at(out, "tasks.2.id"), low);
    cr_assert_str_eq(str_at(out, "tasks.2.kind"), "bulk");
    cr_assert_eq(int_at(out, "tasks.2.attempts"), 0);
    cr_assert_eq(strlen(str_at(out, "tasks.2.run_at")), 24, "run_at: an ISO time");
    cr_assert_not(has(out, "tasks.3"));
    bson_destroy(out);
    test_run_result_free(&r);

    ctl_ok(r, "tasks", "mail");
    cr_assert_not_null(strstr(r.out, "12 (base 2)"), "the promotion is shown: %s", r.out);
    cr_assert(strstr(r.out, promoted) < strstr(r.out, high) &&
                  strstr(r.out, high) < strstr(r.out, low),
              "not in claim order:\n%s", r.out);
    test_run_result_free(&r);

    ctl_ok(r, "tasks", "mail", "--limit", "1", "--json");
    out = json_out(&r);
    cr_assert_not(has(out, "tasks.1"), "--limit 1: %s", r.out);
    bson_destroy(out);
    test_run_result_free(&r);

    set_status("{\"kind\": \"bulk\"}", "failed");
    ctl_ok(r, "tasks", "mail", "--status", "failed", "--json");
    out = json_out(&r);
    cr_assert_str_eq(str_at(out, "tasks.0.id"), low);
    cr_assert_not(has(out, "tasks.1"));
    bson_destroy(out);
    test_run_result_free(&r);

    r = ctl("tasks", "mail", "--status", "done");
    cr_assert_eq(r.exit_code, 2);
    cr_assert_not_null(strstr(r.err, "--status 'done'"), "%s", r.err);
    test_run_result_free(&r);
    r = ctl("tasks", "mail", "--limit", "0");
    cr_assert_eq(r.exit_code, 2);
    test_run_result_free(&r);
}

Test(ctl_schedule, task_prints_the_whole_document)
{
    test_run_result_t r;
    ctl_ok(r, "enqueue", "mail", "--kind", "render", "--group", "g", "--timeout", "3s",
           "--data", "{\"page\": 4}");
    char id[25];
    printed_id(&r, id);
    test_run_result_free(&r);

    ctl_ok(r, "task", "mail", id);
    bson_t *out = json_out(&r);
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, out, "_id") && BSON_ITER_HOLDS_OID(&it), "%s", r.out);
    char printed[25];
    bson_oid_to_string(bson_iter_oid(&it), printed);
    cr_assert_str_eq(printed, id);
    cr_assert_str_eq(str_at(out, "kind"), "render");
    cr_assert_str_eq(str_at(out, "group"), "g");
    cr_assert_eq(int_at(out, "task_timeout_ms"), 3000);
    cr_assert_eq(int_at(out, "data.page"), 4);
    cr_assert(date_at(out, "run_at") > 0);
    bson_destroy(out);
    test_run_result_free(&r);

    r = ctl("task", "mail", "123");
    cr_assert_eq(r.exit_code, 2);
    cr_assert_not_null(strstr(r.err, "not a task id"), "%s", r.err);
    test_run_result_free(&r);
    r = ctl("task", "mail", "0123456789abcdef01234567");
    cr_assert_eq(r.exit_code, 1);
    cr_assert_not_null(strstr(r.err, "no task 0123456789abcdef01234567"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    test_run_result_free(&r);
    r = ctl("task", "mail");
    cr_assert_eq(r.exit_code, 2);
    test_run_result_free(&r);
}
