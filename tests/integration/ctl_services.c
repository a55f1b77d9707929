/*
 * ctl_services.c - cohortctl and the services a queue belongs to: `enqueue` into a service
 * no node has run is refused (exit 2, the known services named, nothing inserted) unless
 * --create makes it as a node would; `status` lists a queue that has tasks but no service
 * document, marked as such; and an interrupted `enqueue --count N` (SIGINT, SIGTERM) prints
 * exactly how many tasks it inserted and exits 130.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl.h"
#include "support.h"
#include "store/store.h"
#include "store/insert.h"
#include "store/services.h"

#define COHORTCTL COHORT_BUILD_DIR "/cohortctl"

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;

static void setup(void)
{
    db = test_db_name("ctlsvc");
    store = test_store_new(db);
    client = cohort_store_pop(store);
}

static void teardown(void)
{
    if (store) {
        cohort_store_push(store, client);
        cohort_store_destroy(store);
        test_drop_db(db);
    }
    free(db);
}

TestSuite(ctl_services, .init = setup, .fini = teardown, .timeout = 120);

#define ctl(...) test_ctl(db, __VA_ARGS__)

static int64_t queue_count(const char *service)
{
    char name[96];
    snprintf(name, sizeof name, "queue_%s", service);
    return test_count(client, db, name, "{}");
}

static bool service_exists(const char *service)
{
    bson_t doc;
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_read_service(store, client, service, &doc, &found, &error), "%s",
              error.message);
    bson_destroy(&doc);
    return found;
}

static void create_service(const char *service)
{
    bson_error_t error;
    cr_assert(test_ensure_service(store, client, service, &error), "%s", error.message);
}

Test(ctl_services, enqueue_into_an_unknown_service_is_refused_and_names_the_known_ones)
{
    create_service("mail");
    create_service("render");
    const char *const *cases[] = {
        (const char *const[]){"enqueue", "mial", NULL},
        (const char *const[]){"enqueue", "mial", "--count", "500", NULL},
        (const char *const[]){"enqueue", "mial", "--unique-key", "k", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_run_result_t r = test_ctl_run(db, NULL, cases[i]);
        cr_assert_eq(r.exit_code, 2, "case %zu: exit %d, stdout '%s'", i, r.exit_code, r.out);
        cr_assert_str_eq(r.out, "", "case %zu printed an id or a count", i);
        cr_assert_not_null(strstr(r.err, "service 'mial' does not exist"), "%s", r.err);
        cr_assert_not_null(strstr(r.err, "known services: mail, render"), "%s", r.err);
        cr_assert_not_null(strstr(r.err, "--create"), "no hint at --create: %s", r.err);
        test_run_result_free(&r);
    }
    cr_assert_eq(queue_count("mial"), 0, "a refused enqueue inserted tasks");
    cr_assert_not(service_exists("mial"));
}

/* The other commands that take a SERVICE refuse an unknown one the same way (exit 2). */
Test(ctl_services, every_command_refuses_an_unknown_service_and_names_the_known_ones)
{
    create_service("mail");
    const char *const *cases[] = {
        (const char *const[]){"pause", "mial", NULL},
        (const char *const[]){"resume", "mial", NULL},
        (const char *const[]){"block", "mial", "--reason", "r", NULL},
        (const char *const[]){"unblock", "mial", NULL},
        (const char *const[]){"settings", "get", "mial", NULL},
        (const char *const[]){"settings", "set", "mial", "tick_ms", "500", NULL},
        (const char *const[]){"data", "get", "mial", "k", NULL},
        (const char *const[]){"data", "set", "mial", "k", "1", NULL},
        /* The readers too: a typo was an empty table and exit 0 (found by a new user). */
        (const char *const[]){"tasks", "mial", NULL},
        (const char *const[]){"tasks", "mial", "--json", NULL},
        (const char *const[]){"counts", "mial", NULL},
        (const char *const[]){"task", "mial", "0123456789abcdef01234567", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_run_result_t r = test_ctl_run(db, NULL, cases[i]);
        cr_assert_eq(r.exit_code, 2, "%s: exit %d: %s", cases[i][0], r.exit_code, r.err);
        cr_assert_not_null(strstr(r.err, "service 'mial' does not exist"), "%s", r.err);
        cr_assert_not_null(strstr(r.err, "known services: mail"), "%s", r.err);
        test_run_result_free(&r);
    }
    cr_assert_not(service_exists("mial"));
}

Test(ctl_services, enqueue_into_an_empty_database_says_there_is_no_service)
{
    test_run_result_t r = ctl("enqueue", "mail");
    cr_assert_eq(r.exit_code, 2, "exit %d", r.exit_code);
    cr_assert_not_null(strstr(r.err, "known services: none yet"), "%s", r.err);
    test_run_result_free(&r);
}

Test(ctl_services, enqueue_create_makes_the_service_as_a_node_would)
{
    test_run_result_t r = ctl("enqueue", "fresh", "--create", "--count", "7", "--tracked");
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    cr_assert_str_eq(r.out, "7\n");
    test_run_result_free(&r);
    cr_assert_eq(queue_count("fresh"), 7);

    bson_t doc;
    test_read_service(store, client, "fresh", &doc);
    /* As a node makes it: the epoch floored at the server's clock in ms (issue 22: epochs
     * never start again below ones handed out before a dropped database). */
    int64_t epoch = test_doc_int(&doc, "epoch");
    int64_t wall_ms = (int64_t)time(NULL) * 1000;
    cr_expect(epoch > wall_ms - 600000 && epoch < wall_ms + 600000,
              "the created epoch %lld is not the server's clock", (long long)epoch);
    cr_expect_eq(test_doc_int(&doc, "batch_seq"), 1, "no open batch for tracked tasks");
    cr_expect(test_doc_has(&doc, "primary"));
    bson_destroy(&doc);

    /* Idempotent, and the unique index a node makes is there: a key is unique at once. */
    r = ctl("enqueue", "fresh", "--create", "--unique-key", "once");
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    test_run_result_free(&r);
    r = ctl("enqueue", "fresh", "--create", "--unique-key", "once");
    cr_assert_eq(r.exit_code, 1, "a second task with the same unique key: exit %d", r.exit_code);
    test_run_result_free(&r);
    cr_assert_eq(queue_count("fresh"), 8);

    r = ctl("status", "--json");
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    cr_assert_not_null(strstr(r.out, "\"name\" : \"fresh\", \"service_document\" : true"), "%s",
                       r.out);
    test_run_result_free(&r);
}

/* A queue written by another program (or an old cohortctl) into a name no node runs. */
static void orphan_tasks(const char *service, int64_t count)
{
    cohort_new_task_t task = {.created_by = "elsewhere", .now_ms = test_now_ms()};
    int64_t inserted = 0;
    bson_error_t error;
    cr_assert(cohort_store_insert_tasks(store, client, service, &task, count, &inserted, &error),
              "%s", error.message);
    cr_assert_eq(inserted, count);
}

Test(ctl_services, status_lists_queues_without_a_service_document)
{
    create_service("mail");
    orphan_tasks("lost", 34);
    /* an empty queue without a document is nothing to show */
    orphan_tasks("gone", 1);
    mongoc_collection_t *gone = mongoc_client_get_collection(client, db, "queue_gone");
    bson_error_t error;
    cr_assert(mongoc_collection_delete_many(gone, &(bson_t)BSON_INITIALIZER, NULL, NULL, &error),
              "%s", error.message);
    mongoc_collection_destroy(gone);

    test_run_result_t r = ctl("status", "--json");
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    bson_t *out = bson_new_from_json((const uint8_t *)r.out, -1, &error);
    cr_assert_not_null(out, "not JSON (%s): %s", error.message, r.out);
    bson_iter_t it;
    cr_assert(bson_iter_init(&it, out) && bson_iter_find_descendant(&it, "services.1.name", &it));
    cr_assert_str_eq(bson_iter_utf8(&it, NULL), "lost", "%s", r.out);
    cr_assert(bson_iter_init(&it, out) &&
              bson_iter_find_descendant(&it, "services.1.service_document", &it) &&
              BSON_ITER_HOLDS_BOOL(&it) && !bson_iter_bool(&it),
              "the queue without a document is not marked: %s", r.out);
    cr_assert(bson_iter_init(&it, out) &&
              bson_iter_find_descendant(&it, "services.1.counts.pending", &it));
    cr_assert_eq(bson_iter_as_int64(&it), 34);
    cr_assert(bson_iter_init(&it, out) &&
              bson_iter_find_descendant(&it, "services.0.service_document", &it) &&
              bson_iter_bool(&it));
    cr_assert_not(bson_iter_init(&it, out) &&
                      bson_iter_find_descendant(&it, "services.2", &it),
                  "an empty queue is listed: %s", r.out);
    bson_destroy(out);
    test_run_result_free(&r);

    r = ctl("status");
    cr_assert_eq(r.exit_code, 0);
    const char *line = strstr(r.out, "\nlost ");
    cr_assert_not_null(line, "%s", r.out);
    cr_assert_not_null(strstr(line, "(no service document)"), "%s", r.out);
    cr_assert_null(strstr(r.out, "gone"), "%s", r.out);
    test_run_result_free(&r);
}

/* ---- interrupted enqueue --------------------------------------------------------------- */

typedef struct progress {
    const char *service;
    int64_t at_least;
} progress_t;

static bool inserted_some(void *arg)
{
    progress_t *p = arg;
    return queue_count(p->service) >= p->at_least;
}

/* Starts `cohortctl enqueue SERVICE --count 100000000` with stdout and stderr into files,
 * waits until some of its tasks are in, sends `sig`; returns its exit status, its stdout and
 * stderr (caller frees). */
static int interrupt_enqueue(const char *service, int sig, char **out, char **err)
{
    char *dir = test_tmpdir("ctlsig");
    char out_path[1024], err_path[1024];
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&files, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&files, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char *const argv[] = {COHORTCTL, "--database",  db,          "enqueue", (char *)service,
                          "--count", "100000000", "--create", NULL};
    char **env = test_child_environment(NULL);
    pid_t pid;
    cr_assert_eq(posix_spawn(&pid, COHORTCTL, &files, NULL, argv, env), 0);
    posix_spawn_file_actions_destroy(&files);
    free(env);

    progress_t p = {service, 2000}; /* past the first bulk write: some progress */
    bool progressed = test_wait_until(inserted_some, &p, 60000);
    kill(pid, progressed ? sig : SIGKILL);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(progressed, "no task went in within 60 s");
    *out = test_read_file(out_path);
    *err = test_read_file(err_path);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(dir);
    cr_assert(WIFEXITED(status), "cohortctl died of signal %d instead of reporting",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return WEXITSTATUS(status);
}

static void check_interrupted(const char *service, int sig)
{
    char *out, *err;
    int rc = interrupt_enqueue(service, sig, &out, &err);
    cr_assert_eq(rc, 130, "exit %d after signal %d; stderr: %s", rc, sig, err);
    char *end;
    long long printed = strtoll(out, &end, 10);
    cr_assert(end != out && strcmp(end, "\n") == 0, "stdout is not a count: '%s'", out);
    cr_assert_eq(printed, queue_count(service), "printed %lld, but %lld tasks are in the queue",
                 printed, (long long)queue_count(service));
    cr_assert_lt(printed, 100000000);
    char said[96];
    snprintf(said, sizeof said, "interrupted after %lld of 100000000 tasks", printed);
    cr_assert_not_null(strstr(err, said), "stderr: %s", err);
    free(out);
    free(err);
}

Test(ctl_services, sigint_during_enqueue_count_prints_what_went_in)
{
    check_interrupted("bulk", SIGINT);
}

Test(ctl_services, sigterm_during_enqueue_count_prints_what_went_in)
{
    check_interrupted("bulk", SIGTERM);
}

/* `settings set` reads a value as the config file does: a duration takes a unit, a bare
 * number is milliseconds, and a count takes no unit. */
Test(ctl_services, settings_set_takes_the_config_file_s_duration_units)
{
    create_service("mail");
    static const struct {
        const char *key, *value;
        int exit_code;
        const char *printed;
    } cases[] = {
        {"takeover_ms", "5s", 0, "mail.takeover_ms = 5000"},
        {"stall_timeout_ms", "2m", 0, "mail.stall_timeout_ms = 120000"},
        {"tick_ms", "250", 0, "mail.tick_ms = 250"},
        {"takeover_ms", "soon", 2, "a duration such as 250ms"},
        {"primary_task_count", "5s", 2, "'5s' is not a number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_run_result_t r = ctl("settings", "set", "mail", cases[i].key, cases[i].value);
        cr_assert_eq(r.exit_code, cases[i].exit_code, "%s %s: exit %d: %s", cases[i].key,
                     cases[i].value, r.exit_code, r.err);
        cr_assert_not_null(strstr(cases[i].exit_code ? r.err : r.out, cases[i].printed),
                           "%s %s: %s%s", cases[i].key, cases[i].value, r.out, r.err);
        test_run_result_free(&r);
    }
}
