/*
 * ctl_ops.c - cohortctl's changes to tasks end to end against the local database: `retry`,
 * `cancel` and `delete` of one task by id and of many by filters. Each happy path with what
 * it writes (status, attempts, history entries); each refusal (a pending task deleted, a
 * claimed one cancelled, an unknown id or service, a bad filter) exits 2 naming the reason and
 * changes nothing; --dry-run prints the count and changes nothing; bulk changes cross more
 * than one page (COHORT_OPERATOR_PAGE); `status` and `counts` count cancelled tasks; a
 * cancelled task gives up its coalesce key and keeps its unique key; tracked tasks of a batch
 * whose callback has not run are not deleted; `tasks` shows the last error.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "support.h"
#include "store/store.h"
#include "store/nodes.h"
#include "store/operator.h"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    test_service_db_open("ctlops", "mail", &db, &store, &client);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(ctl_ops, .init = setup, .fini = teardown, .timeout = 120);

#define ctl(...) test_ctl(db, __VA_ARGS__)

/* Runs cohortctl, asserts it succeeded and printed `want`. */
#define ctl_prints(want, ...)                                                                    \
    do {                                                                                        \
        test_run_result_t r_ = ctl(__VA_ARGS__);                                                \
        cr_assert_eq(r_.exit_code, 0, "cohortctl exit %d; stderr:\n%s", r_.exit_code, r_.err); \
        cr_assert_str_eq(r_.out, want);                                                         \
        test_run_result_free(&r_);                                                              \
    } while (0)

/* Runs cohortctl, asserts it was refused (exit 2, nothing on stdout) with `part` in the
 * message. */
#define ctl_refused(part, ...)                                                                  \
    do {                                                                                        \
        test_run_result_t r_ = ctl(__VA_ARGS__);                                                \
        cr_assert_eq(r_.exit_code, 2, "exit %d, want 2; stdout '%s', stderr:\n%s", r_.exit_code, \
                     r_.out, r_.err);                                                           \
        cr_assert_not_null(strstr(r_.err, part), "the message lacks '%s':\n%s", part, r_.err);  \
        cr_assert_str_eq(r_.out, "");                                                           \
        test_run_result_free(&r_);                                                              \
    } while (0)

static int64_t count(const char *filter)
{
    return test_count(client, db, "queue_mail", filter);
}

/* Enqueues one task with the extra flags (NULL-terminated) and puts its id in id[25]. */
static void enqueue(char id[25], const char *const flags[])
{
    const char *args[16] = {"enqueue", "mail"};
    size_t n = 2;
    for (size_t i = 0; flags && flags[i] && n < 15; i++)
        args[n++] = flags[i];
    test_run_result_t r = test_ctl_run(db, NULL, args);
    cr_assert_eq(r.exit_code, 0, "enqueue: %s", r.err);
    cr_assert(strlen(r.out) == 25 && r.out[24] == '\n', "want an id: '%s'", r.out);
    memcpy(id, r.out, 24);
    id[24] = '\0';
    test_run_result_free(&r);
}

/* $set on every task `filter_json` matches, as a node (or another program) would write. */
static void set_fields(const char *filter_json, const char *set_json)
{
    bson_error_t error;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &error);
    cr_assert_not_null(filter, "%s", error.message);
    bson_t *set = bson_new_from_json((const uint8_t *)set_json, -1, &error);
    cr_assert_not_null(set, "%s", error.message);
    bson_t *update = BCON_NEW("$set", BCON_DOCUMENT(set));
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, "queue_mail");
    cr_assert(mongoc_collection_update_many(coll, filter, update, NULL, NULL, &error), "%s",
              error.message);
    mongoc_collection_destroy(coll);
    bson_destroy(update);
    bson_destroy(set);
    bson_destroy(filter);
}

static void set_task(const char *id, const char *set_json)
{
    char filter[96];
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%s\"}}", id);
    set_fields(filter, set_json);
}

/* A task as a node leaves it after its last attempt failed: 5 attempts, a run in history. */
static void make_failed(const char *id, const char *status)
{
    char set[512];
    snprintf(set, sizeof set,
             "{\"status\": \"%s\", \"attempts\": 5, \"last_error\": \"smtp down\", "
             "\"finished_at\": {\"$date\": 1000}, \"history\": [{\"node\": \"n1\", "
             "\"attempt\": 5, \"outcome\": \"%s\", \"error\": \"smtp down\"}]}",
             status, status);
    set_task(id, set);
}

static bool read_task(const char *id, bson_t *doc)
{
    char filter[96];
    snprintf(filter, sizeof filter, "{\"_id\": {\"$oid\": \"%s\"}}", id);
    return test_find_one(client, db, "queue_mail", filter, doc);
}

static const char *status_of(const char *id, char *buf, size_t len)
{
    bson_t doc;
    cr_assert(read_task(id, &doc), "task %s is gone", id);
    snprintf(buf, len, "%s", test_doc_str(&doc, "status") ? test_doc_str(&doc, "status") : "?");
    bson_destroy(&doc);
    return buf;
}

#define assert_status(id, want)                                                                 \
    do {                                                                                        \
        char s_[32];                                                                            \
        cr_assert_str_eq(status_of(id, s_, sizeof s_), want, "task %s", id);                    \
    } while (0)

/* The operator's history entry at `path` ("history.1"): its event, by and a recent date. */
static void assert_operator_entry(const bson_t *doc, const char *path, const char *event)
{
    char key[64];
    snprintf(key, sizeof key, "%s.event", path);
    cr_assert_str_eq(test_doc_str(doc, key) ? test_doc_str(doc, key) : "(none)", event);
    snprintf(key, sizeof key, "%s.by", path);
    cr_assert(test_doc_str(doc, key) && strncmp(test_doc_str(doc, key), "cohortctl ", 10) == 0,
              "%s: who did it is not recorded", key);
    snprintf(key, sizeof key, "%s.at", path);
    int64_t server_now = 0;
    bson_error_t error;
    cr_assert(cohort_store_server_time(store, client, &server_now, &error), "%s", error.message);
    int64_t age = server_now - test_doc_int(doc, key);
    cr_assert(age >= 0 && age < 60000, "%s is %lld ms old", key, (long long)age);
}

/* ---- retry ------------------------------------------------------------------------------ */

Test(ctl_ops, retry_puts_a_failed_task_back_with_its_history)
{
    char id[25], other[25];
    enqueue(id, NULL);
    enqueue(other, NULL);
    make_failed(id, "failed");
    make_failed(other, "failed");
    ctl_prints("1\n", "retry", "mail", id);

    bson_t doc;
    cr_assert(read_task(id, &doc));
    cr_assert_str_eq(test_doc_str(&doc, "status"), "pending");
    cr_assert_eq(test_doc_int(&doc, "attempts"), 0, "the attempts start again");
    cr_assert_not(test_doc_has(&doc, "finished_at"));
    cr_assert_str_eq(test_doc_str(&doc, "last_error"), "smtp down", "the last error is kept");
    cr_assert_str_eq(test_doc_str(&doc, "history.0.outcome"), "failed", "the history is kept");
    assert_operator_entry(&doc, "history.1", "retried");
    cr_assert_str_eq(test_doc_str(&doc, "history.1.from"), "failed");
    int64_t server_now = 0;
    bson_error_t error;
    cr_assert(cohort_store_server_time(store, client, &server_now, &error), "%s", error.message);
    cr_assert_leq(test_doc_int(&doc, "run_at"), server_now, "a retried task is due at once");
    bson_destroy(&doc);
    assert_status(other, "failed");
}

Test(ctl_ops, retry_by_status_and_kind)
{
    char a[25], b[25], c[25], d[25];
    enqueue(a, (const char *const[]){"--kind", "send", NULL});
    enqueue(b, (const char *const[]){"--kind", "send", NULL});
    enqueue(c, (const char *const[]){"--kind", "render", NULL});
    enqueue(d, (const char *const[]){"--kind", "send", NULL});
    make_failed(a, "timed_out");
    make_failed(b, "failed");
    make_failed(c, "timed_out");
    ctl_prints("1\n", "retry", "mail", "--status", "timed_out", "--kind", "send");
    assert_status(a, "pending");
    assert_status(b, "failed");
    assert_status(c, "timed_out");
    ctl_prints("1\n", "retry", "mail", "--status", "timed_out");
    assert_status(c, "pending");
    ctl_prints("0\n", "retry", "mail", "--status", "timed_out");
}

/* Sets the service's open batch, as a primary closing and completing batches would. */
static void set_open_batch(int64_t seq)
{
    mongoc_collection_t *services = mongoc_client_get_collection(client, db, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8("mail"));
    bson_t *update = BCON_NEW("$set", "{", "batch_seq", BCON_INT64(seq), "}");
    bson_error_t error;
    cr_assert(mongoc_collection_update_one(services, filter, update, NULL, NULL, &error), "%s",
              error.message);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
}

Test(ctl_ops, a_retried_tracked_task_of_a_completed_batch_joins_the_open_one)
{
    char done[25], open[25];
    enqueue(done, (const char *const[]){"--tracked", NULL}); /* batch 1 */
    make_failed(done, "failed");
    set_open_batch(3); /* batches 1 and 2 completed */
    enqueue(open, (const char *const[]){"--tracked", NULL}); /* batch 3 */
    make_failed(open, "failed");
    ctl_prints("2\n", "retry", "mail", "--status", "failed");
    bson_t doc;
    cr_assert(read_task(done, &doc));
    cr_assert_eq(test_doc_int(&doc, "batch"), 3, "a completed batch's task must join the open one");
    bson_destroy(&doc);
    cr_assert(read_task(open, &doc));
    cr_assert_eq(test_doc_int(&doc, "batch"), 3);
    bson_destroy(&doc);
}

Test(ctl_ops, retry_refusals_change_nothing)
{
    char pending[25], claimed[25], failed[25];
    enqueue(pending, NULL);
    enqueue(claimed, NULL);
    enqueue(failed, NULL);
    set_task(claimed, "{\"status\": \"claimed\", \"claimed_by\": \"n1\", \"attempts\": 1}");
    make_failed(failed, "failed");
    ctl_refused("is pending", "retry", "mail", pending);
    ctl_refused("is claimed", "retry", "mail", claimed);
    ctl_refused("no task 0123456789abcdef01234567", "retry", "mail", "0123456789abcdef01234567");
    ctl_refused("not a task id", "retry", "mail", "12345");
    ctl_refused("does not exist", "retry", "nosuch", failed);
    ctl_refused("not a valid service name", "retry", "bad name!", failed);
    ctl_refused("give an ID or --status", "retry", "mail");
    ctl_refused("not both", "retry", "mail", failed, "--status", "failed");
    ctl_refused("--status succeeded", "retry", "mail", "--status", "succeeded");
    ctl_refused("--status pending", "retry", "mail", "--status", "pending");
    ctl_refused("--status 'done'", "retry", "mail", "--status", "done");
    ctl_refused("unexpected argument '--group'", "retry", "mail", "--status", "failed", "--group",
                "g");
    ctl_refused("--limit", "retry", "mail", "--status", "failed", "--limit", "0");
    ctl_refused("not a valid kind", "retry", "mail", "--status", "failed", "--kind", "a b");
    assert_status(pending, "pending");
    assert_status(claimed, "claimed");
    assert_status(failed, "failed");
    cr_assert_eq(count("{\"history.event\": {\"$exists\": true}}"), 0);
}

/* ---- cancel ----------------------------------------------------------------------------- */

Test(ctl_ops, cancel_ends_a_pending_task_and_asks_a_claimed_one_to_stop)
{
    char pending[25], claimed[25], done[25];
    enqueue(pending, NULL);
    enqueue(claimed, NULL);
    enqueue(done, NULL);
    set_task(claimed, "{\"status\": \"claimed\", \"claimed_by\": \"n1\", \"attempts\": 1}");
    set_task(done, "{\"status\": \"succeeded\"}");

    /* A running task is asked to stop instead (its claimer reads cancel_requested). */
    test_run_result_t asked = ctl("cancel", "mail", claimed);
    cr_assert_eq(asked.exit_code, 0, "stderr: %s", asked.err);
    cr_assert(strstr(asked.err, "claimed by n1): cancel requested"), "%s", asked.err);
    test_run_result_free(&asked);
    bson_t asked_doc;
    read_task(claimed, &asked_doc);
    cr_assert_str_eq(test_doc_str(&asked_doc, "status"), "claimed");
    cr_assert(test_doc_has(&asked_doc, "cancel_requested"));
    bson_destroy(&asked_doc);
    ctl_refused("is succeeded", "cancel", "mail", done);
    ctl_refused("no task", "cancel", "mail", "0123456789abcdef01234567");
    ctl_refused("which tasks?", "cancel", "mail");
    ctl_refused("--status claimed", "cancel", "mail", "--status", "claimed");
    ctl_refused("unexpected argument '--older-than'", "cancel", "mail", "--older-than", "1d");
    assert_status(claimed, "claimed");

    ctl_prints("1\n", "cancel", "mail", pending);
    bson_t doc;
    cr_assert(read_task(pending, &doc));
    cr_assert_str_eq(test_doc_str(&doc, "status"), "cancelled");
    cr_assert(test_doc_int(&doc, "finished_at") > 0, "a cancelled task is finished (purged)");
    cr_assert(strstr(test_doc_str(&doc, "last_error"), "cancelled by cohortctl "), "%s",
              test_doc_str(&doc, "last_error"));
    assert_operator_entry(&doc, "history.0", "cancelled");
    bson_destroy(&doc);
    ctl_refused("is cancelled", "cancel", "mail", pending);
    assert_status(claimed, "claimed");
}

Test(ctl_ops, cancel_by_kind_and_group_pending_only)
{
    char a[25], b[25], c[25], d[25];
    enqueue(a, (const char *const[]){"--kind", "send", NULL});
    enqueue(b, (const char *const[]){"--kind", "send", "--group", "g1", NULL});
    enqueue(c, (const char *const[]){"--kind", "send", NULL});
    enqueue(d, (const char *const[]){"--kind", "render", "--group", "g1", NULL});
    set_task(c, "{\"status\": \"claimed\", \"claimed_by\": \"n1\", \"attempts\": 1}");
    ctl_prints("1\n", "cancel", "mail", "--group", "g1", "--kind", "send");
    assert_status(b, "cancelled");
    assert_status(d, "pending");
    ctl_prints("1\n", "cancel", "mail", "--kind", "send");
    assert_status(a, "cancelled");
    assert_status(c, "claimed");
    ctl_prints("1\n", "cancel", "mail", "--status", "pending");
    assert_status(d, "cancelled");
}

Test(ctl_ops, a_cancelled_task_gives_up_its_coalesce_key_and_keeps_its_unique_key)
{
    char coalesced[25], unique[25], again[25];
    enqueue(coalesced, (const char *const[]){"--coalesce-key", "reindex", NULL});
    enqueue(unique, (const char *const[]){"--unique-key", "once", NULL});
    ctl_prints("1\n", "cancel", "mail", coalesced);
    ctl_prints("1\n", "cancel", "mail", unique);
    /* new work with the key is a new task, not folded into the cancelled one */
    enqueue(again, (const char *const[]){"--coalesce-key", "reindex", NULL});
    cr_assert_str_neq(again, coalesced);
    assert_status(again, "pending");
    assert_status(coalesced, "cancelled");
    /* a unique key stays taken while the task exists, as for any finished task */
    test_run_result_t r = ctl("enqueue", "mail", "--unique-key", "once");
    cr_assert_neq(r.exit_code, 0, "a second task with a cancelled task's unique key: %s", r.out);
    test_run_result_free(&r);
    ctl_prints("1\n", "delete", "mail", unique);
    enqueue(again, (const char *const[]){"--unique-key", "once", NULL});
    assert_status(again, "pending");
}

/* ---- delete ----------------------------------------------------------------------------- */

Test(ctl_ops, delete_takes_final_tasks_only)
{
    char pending[25], claimed[25], failed[25], old[25], recent[25];
    enqueue(pending, NULL);
    enqueue(claimed, NULL);
    enqueue(failed, NULL);
    enqueue(old, NULL);
    enqueue(recent, NULL);
    set_task(claimed, "{\"status\": \"claimed\", \"claimed_by\": \"n1\", \"attempts\": 1}");
    make_failed(failed, "failed");
    set_task(old, "{\"status\": \"succeeded\", \"finished_at\": {\"$date\": 1000}}");
    int64_t server_now = 0;
    bson_error_t error;
    cr_assert(cohort_store_server_time(store, client, &server_now, &error), "%s", error.message);
    char set[128];
    snprintf(set, sizeof set, "{\"status\": \"succeeded\", \"finished_at\": {\"$date\": %lld}}",
             (long long)(server_now - 60000));
    set_task(recent, set);

    ctl_refused("is pending", "delete", "mail", pending);
    ctl_refused("is claimed", "delete", "mail", claimed);
    ctl_refused("--status pending", "delete", "mail", "--status", "pending");
    ctl_refused("--status claimed", "delete", "mail", "--status", "claimed");
    ctl_refused("give an ID or --status", "delete", "mail", "--older-than", "1d");
    ctl_refused("--older-than", "delete", "mail", "--status", "failed", "--older-than", "soon");
    ctl_refused("no task", "delete", "mail", "0123456789abcdef01234567");
    cr_assert_eq(count("{}"), 5, "a refused delete deleted something");

    ctl_prints("1\n", "delete", "mail", failed);
    bson_t doc;
    cr_assert_not(read_task(failed, &doc), "the deleted task is still there");
    bson_destroy(&doc);
    ctl_prints("1\n", "delete", "mail", "--status", "succeeded", "--older-than", "1h");
    cr_assert_not(read_task(old, &doc));
    bson_destroy(&doc);
    assert_status(recent, "succeeded");
    ctl_prints("1\n", "delete", "mail", "--status", "succeeded");
    cr_assert_eq(count("{}"), 2);
    assert_status(pending, "pending");
    assert_status(claimed, "claimed");
}

Test(ctl_ops, delete_leaves_tracked_tasks_of_a_batch_not_completed_yet)
{
    test_run_result_t r = ctl("enqueue", "mail", "--tracked", "--count", "2");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    test_run_result_free(&r);
    set_fields("{}", "{\"status\": \"failed\", \"finished_at\": {\"$date\": 1000}}");
    char id[25];
    enqueue(id, (const char *const[]){"--tracked", NULL});
    make_failed(id, "failed");
    ctl_refused("whose completion callback has not run", "delete", "mail", id);
    ctl_prints("0\n", "delete", "mail", "--status", "failed");
    cr_assert_eq(count("{}"), 3);
    /* once the batch completed (batch 2 open, nothing draining) they go */
    set_open_batch(2);
    ctl_prints("1\n", "delete", "mail", id);
    ctl_prints("2\n", "delete", "mail", "--status", "failed");
}

/* ---- dry runs and many pages ------------------------------------------------------------ */

Test(ctl_ops, dry_run_prints_the_count_and_changes_nothing)
{
    char pending[25], failed[25];
    enqueue(pending, NULL);
    enqueue(failed, NULL);
    make_failed(failed, "failed");
    ctl_prints("1\n", "retry", "mail", failed, "--dry-run");
    ctl_prints("1\n", "retry", "mail", "--status", "failed", "--dry-run");
    ctl_prints("1\n", "cancel", "mail", pending, "--dry-run");
    ctl_prints("1\n", "cancel", "mail", "--status", "pending", "--dry-run");
    ctl_prints("1\n", "delete", "mail", failed, "--dry-run");
    ctl_prints("1\n", "delete", "mail", "--status", "failed", "--dry-run");
    ctl_refused("is pending", "delete", "mail", pending, "--dry-run");
    assert_status(pending, "pending");
    assert_status(failed, "failed");
    cr_assert_eq(count("{\"history.event\": {\"$exists\": true}}"), 0);
}

Test(ctl_ops, bulk_changes_cross_several_pages)
{
    const int64_t n = 2 * COHORT_OPERATOR_PAGE + COHORT_OPERATOR_PAGE / 2;
    const int64_t some = COHORT_OPERATOR_PAGE + COHORT_OPERATOR_PAGE / 5;
    char total[32], part[32], rest[32];
    snprintf(total, sizeof total, "%lld", (long long)n);
    snprintf(part, sizeof part, "%lld", (long long)some);
    test_run_result_t r = ctl("enqueue", "mail", "--count", total);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    test_run_result_free(&r);
    set_fields("{}", "{\"status\": \"failed\", \"attempts\": 5, \"finished_at\": {\"$date\": 1}}");

    strcat(total, "\n");
    snprintf(rest, sizeof rest, "%lld\n", (long long)(n - some));
    ctl_prints(total, "retry", "mail", "--status", "failed", "--dry-run");
    ctl_prints(total, "retry", "mail", "--status", "failed");
    cr_assert_eq(count("{\"status\": \"pending\", \"attempts\": 0, \"history.event\": "
                       "\"retried\"}"),
                 n);
    char limited[32];
    snprintf(limited, sizeof limited, "%lld\n", (long long)some);
    ctl_prints(limited, "cancel", "mail", "--status", "pending", "--limit", part);
    cr_assert_eq(count("{\"status\": \"cancelled\"}"), some);
    ctl_prints(limited, "delete", "mail", "--status", "cancelled");
    ctl_prints(rest, "cancel", "mail", "--status", "pending");
    ctl_prints(rest, "delete", "mail", "--status", "cancelled");
    cr_assert_eq(count("{}"), 0);
}

/* ---- what other commands show ----------------------------------------------------------- */

Test(ctl_ops, status_and_counts_include_cancelled)
{
    char a[25], b[25];
    enqueue(a, NULL);
    enqueue(b, NULL);
    ctl_prints("1\n", "cancel", "mail", a);
    test_run_result_t r = ctl("status", "--json");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    bson_error_t error;
    bson_t *out = bson_new_from_json((const uint8_t *)r.out, -1, &error);
    cr_assert_not_null(out, "%s: %s", error.message, r.out);
    cr_assert_eq(test_doc_int(out, "services.0.counts.cancelled"), 1, "%s", r.out);
    cr_assert_eq(test_doc_int(out, "services.0.counts.pending"), 1, "%s", r.out);
    bson_destroy(out);
    test_run_result_free(&r);

    r = ctl("status");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "CANCELLED"), "%s", r.out);
    test_run_result_free(&r);

    r = ctl("counts", "mail", "--json");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    out = bson_new_from_json((const uint8_t *)r.out, -1, &error);
    cr_assert_not_null(out, "%s: %s", error.message, r.out);
    cr_assert_eq(test_doc_int(out, "counts.cancelled"), 1, "%s", r.out);
    bson_destroy(out);
    test_run_result_free(&r);
}

Test(ctl_ops, tasks_shows_the_attempt_and_the_last_error)
{
    char id[25];
    enqueue(id, NULL);
    make_failed(id, "failed");
    test_run_result_t r = ctl("tasks", "mail", "--json");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    bson_error_t error;
    bson_t *out = bson_new_from_json((const uint8_t *)r.out, -1, &error);
    cr_assert_not_null(out, "%s: %s", error.message, r.out);
    cr_assert_str_eq(test_doc_str(out, "tasks.0.last_error"), "smtp down", "%s", r.out);
    cr_assert_eq(test_doc_int(out, "tasks.0.attempts"), 5, "%s", r.out);
    bson_destroy(out);
    test_run_result_free(&r);
    r = ctl("tasks", "mail");
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "LAST_ERROR"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "smtp down"), "%s", r.out);
    test_run_result_free(&r);
}
