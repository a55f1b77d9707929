/*
 * support.c - test helpers (see support.h).
 */
#include "support.h"

#include "handlers/probe.h"
#include "node/primary/election.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *test_uri(void)
{
    const char *uri = getenv("MONGODB_URI");
    if (!uri || !*uri)
        cr_assert_fail("MONGODB_URI is not set: run the tests with tests/run.sh, which starts "
                       "the local database, or point MONGODB_URI at a MongoDB server");
    return uri;
}

char *test_db_name(const char *tag)
{
    static unsigned counter;
    char *name = NULL;
    unsigned rnd = (unsigned)(test_now_ms() ^ ((int64_t)getpid() << 16)) + counter++ * 7919u;
    if (asprintf(&name, "ct_%.24s_%ld_%x", tag, (long)getpid(), rnd & 0xfffffu) < 0)
        cr_assert_fail("out of memory");
    return name;
}

mongoc_client_t *test_client(void)
{
    static bool initialised;
    if (!initialised) {
        mongoc_init();
        initialised = true;
    }
    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(test_uri(), &error);
    cr_assert_not_null(uri, "bad MONGODB_URI: %s", error.message);
    mongoc_client_t *client = mongoc_client_new_from_uri_with_error(uri, &error);
    mongoc_uri_destroy(uri);
    cr_assert_not_null(client, "cannot create a client: %s", error.message);
    mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
    return client;
}

/* libmongoc allocates its counters in a constructor, before main(), in /dev/shm/mongoc-PID;
 * a process killed with SIGKILL (the cluster tests kill many) leaves its file behind, and a
 * later process that gets the same PID then warns "Falling back to malloc for counters" on
 * stderr, which tests that read stderr would take for output. Every process a test starts
 * inherits this, so none uses the shared-memory counters (Cohort counts through APM). */
__attribute__((constructor)) static void no_shared_memory_counters(void)
{
    setenv("MONGOC_DISABLE_SHM", "1", 1);
}

void test_drop_db(const char *db)
{
    mongoc_client_t *client = test_client();
    mongoc_database_t *database = mongoc_client_get_database(client, db);
    mongoc_database_drop(database, NULL);
    mongoc_database_destroy(database);
    mongoc_client_destroy(client);
}

const char *test_build_path(const char *relative)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", COHORT_BUILD_DIR, relative);
    return path;
}

char *test_tmpdir(const char *tag)
{
    char *templ = NULL;
    const char *base = getenv("TMPDIR");
    if (asprintf(&templ, "%s/cohort-%s-XXXXXX", base && *base ? base : "/tmp", tag) < 0)
        cr_assert_fail("out of memory");
    cr_assert_not_null(mkdtemp(templ), "mkdtemp failed");
    return templ;
}

int64_t test_count(mongoc_client_t *client, const char *db, const char *collection,
                   const char *filter_json)
{
    bson_error_t error;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &error);
    cr_assert_not_null(filter, "bad filter %s: %s", filter_json, error.message);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, collection);
    int64_t n = mongoc_collection_count_documents(coll, filter, NULL, NULL, NULL, &error);
    mongoc_collection_destroy(coll);
    bson_destroy(filter);
    cr_assert_geq(n, 0, "count on %s.%s failed: %s", db, collection, error.message);
    return n;
}

char *test_try_read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[8192];
    size_t n;
    while (mem && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, mem);
    fclose(f);
    if (mem)
        fclose(mem);
    return text;
}

char *test_read_file(const char *path)
{
    char *text = test_try_read_file(path);
    cr_assert_not_null(text, "cannot read %s", path);
    return text;
}

char *test_replace_all(const char *text, const char *from, const char *to)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    cr_assert_not_null(f);
    for (const char *hit; (hit = strstr(text, from)); text = hit + strlen(from)) {
        fwrite(text, 1, (size_t)(hit - text), f);
        fputs(to, f);
    }
    fputs(text, f);
    fclose(f);
    return out;
}

int64_t test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void test_sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

bool test_wait_until(bool (*predicate)(void *arg), void *arg, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        if (predicate(arg))
            return true;
        if (test_now_ms() >= deadline)
            return false;
        test_sleep_ms(20);
    }
}

/* ---- added for the unit and integration tests ------------------------------------------ */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include "core/clock.h"
#include "store/store.h"
#include "store/internal.h" /* store_collection: test_ensure_service() */
#include "store/nodes.h"
#include "store/services.h"
#include "store/services.h"

extern char **environ;

char **test_child_environment(const char *const env[])
{
    size_t n_base = 0, n_env = 0;
    while (environ[n_base])
        n_base++;
    while (env && env[n_env])
        n_env++;
    char **out = calloc(n_base + n_env + 1, sizeof *out);
    cr_assert_not_null(out, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < n_base; i++) {
        bool replaced = false;
        for (size_t j = 0; j < n_env && !replaced; j++) {
            size_t key_len = strcspn(env[j], "=");
            replaced = strncmp(environ[i], env[j], key_len) == 0 && environ[i][key_len] == '=';
        }
        if (!replaced)
            out[n++] = environ[i];
    }
    for (size_t j = 0; j < n_env; j++)
        if (strchr(env[j], '='))
            out[n++] = (char *)env[j];
    return out;
}

/* Appends what is readable on fd to *buf; false at end of file. */
static bool drain_fd(int fd, char **buf, size_t *len)
{
    char chunk[4096];
    ssize_t got = read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR)
        return true;
    if (got <= 0)
        return false;
    char *grown = realloc(*buf, *len + (size_t)got + 1);
    cr_assert_not_null(grown, "out of memory");
    memcpy(grown + *len, chunk, (size_t)got);
    *len += (size_t)got;
    grown[*len] = '\0';
    *buf = grown;
    return true;
}

test_run_result_t test_run(const char *const argv[], const char *const env[], int64_t timeout_ms)
{
    int out_pipe[2], err_pipe[2];
    cr_assert_eq(pipe2(out_pipe, O_CLOEXEC), 0, "pipe: %s", strerror(errno));
    cr_assert_eq(pipe2(err_pipe, O_CLOEXEC), 0, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
    char **child_env = test_child_environment(env);

    test_run_result_t r = {.exit_code = -1};
    int64_t started = test_now_ms();
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &actions, NULL, (char *const *)argv, child_env);
    posix_spawn_file_actions_destroy(&actions);
    free(child_env);
    close(out_pipe[1]);
    close(err_pipe[1]);
    cr_assert_eq(rc, 0, "cannot start %s: %s", argv[0], strerror(rc));

    size_t out_len = 0, err_len = 0;
    r.out = calloc(1, 1);
    r.err = calloc(1, 1);
    cr_assert(r.out && r.err, "out of memory");
    struct pollfd fds[2] = {{.fd = out_pipe[0], .events = POLLIN},
                            {.fd = err_pipe[0], .events = POLLIN}};
    int open_fds = 2;
    while (open_fds > 0) {
        int64_t left = started + timeout_ms - test_now_ms();
        if (left <= 0) {
            r.timed_out = true;
            kill(pid, SIGKILL);
            break;
        }
        if (poll(fds, 2, (int)left) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            bool more = i == 0 ? drain_fd(fds[i].fd, &r.out, &out_len)
                               : drain_fd(fds[i].fd, &r.err, &err_len);
            if (!more) {
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    close(out_pipe[0]);
    close(err_pipe[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    r.elapsed_ms = test_now_ms() - started;
    if (!r.timed_out && WIFEXITED(status))
        r.exit_code = WEXITSTATUS(status);
    return r;
}

void test_run_result_free(test_run_result_t *result)
{
    free(result->out);
    free(result->err);
    result->out = result->err = NULL;
}

char *test_write_file(const char *dir, const char *name, const char *text)
{
    char *path = NULL;
    cr_assert_geq(asprintf(&path, "%s/%s", dir, name), 0, "out of memory");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot create %s: %s", path, strerror(errno));
    size_t len = strlen(text);
    cr_assert_eq(fwrite(text, 1, len, f), len, "cannot write %s", path);
    cr_assert_eq(fclose(f), 0, "cannot write %s: %s", path, strerror(errno));
    return path;
}

cohort_store_t *test_store_new(const char *db)
{
    mongoc_init(); /* idempotent */
    bson_error_t error;
    cohort_store_t *store = cohort_store_new(test_uri(), db, "cohort-tests", &error);
    cr_assert_not_null(store, "cannot create a store on %s: %s", test_uri(), error.message);
    return store;
}

bool test_ensure_service(cohort_store_t *store, mongoc_client_t *client, const char *service,
                         bson_error_t *error)
{
    int64_t floor = 0;
    if (!cohort_store_ensure_service_after(store, client, service, 0, &floor, error))
        return false;
    mongoc_collection_t *services = store_collection(store, client, "services");
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(service), "epoch", BCON_INT64(floor), "primary",
                              BCON_NULL);
    bson_t *update = BCON_NEW("$set", "{", "epoch", BCON_INT64(0), "}");
    bool ok = mongoc_collection_update_one(services, filter, update, NULL, NULL, error);
    bson_destroy(update);
    bson_destroy(filter);
    mongoc_collection_destroy(services);
    return ok;
}

/* test_service_db_open() with the clock synced to max_rtt_ms. */
static void open_service_db(const char *prefix, const char *service, int64_t max_rtt_ms,
                            char **db, cohort_store_t **store, mongoc_client_t **client)
{
    *db = test_db_name(prefix);
    *store = test_store_new(*db);
    *client = cohort_store_pop(*store);
    test_sync_clock(*store, *client, max_rtt_ms);
    bson_error_t error;
    cr_assert(test_ensure_service(*store, *client, service, &error), "%s",
              error.message);
}

void test_service_db_open(const char *prefix, const char *service, char **db,
                          cohort_store_t **store, mongoc_client_t **client)
{
    open_service_db(prefix, service, 200, db, store, client);
}

void test_service_db_close(char **db, cohort_store_t **store, mongoc_client_t **client)
{
    if (*store) {
        cohort_store_push(*store, *client);
        cohort_store_destroy(*store);
        test_drop_db(*db);
    }
    *store = NULL;
    *client = NULL;
    free(*db);
    *db = NULL;
}

int64_t test_doc_int(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found)) {
        if (BSON_ITER_HOLDS_NUMBER(&found))
            return bson_iter_as_int64(&found);
        if (BSON_ITER_HOLDS_DATE_TIME(&found))
            return bson_iter_date_time(&found);
    }
    return INT64_MIN;
}

const char *test_doc_str(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found) &&
        BSON_ITER_HOLDS_UTF8(&found))
        return bson_iter_utf8(&found, NULL);
    return NULL;
}

bool test_doc_has(const bson_t *doc, const char *path)
{
    bson_iter_t it, found;
    return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &found);
}

void test_read_service(cohort_store_t *store, mongoc_client_t *client, const char *service,
                       bson_t *doc)
{
    bool found = false;
    bson_error_t error;
    cr_assert(cohort_store_read_service(store, client, service, doc, &found, &error), "%s",
              error.message);
    cr_assert(found, "the service document is missing");
}

void test_sync_clock(cohort_store_t *store, mongoc_client_t *client, int64_t max_rtt_ms)
{
    cohort_node_info_t info = {.node_id = "test-clock",
                               .host = "tests",
                               .pid = getpid(),
                               .version = "tests",
                               .started_at_ms = cohort_clock_realtime_ms()};
    int64_t deadline = test_now_ms() + 10000;
    bson_error_t last_error = {.message = "no sample was fast enough"};
    while (test_now_ms() < deadline) {
        bson_error_t error;
        int64_t server_ms = 0;
        int64_t sent = cohort_clock_monotonic_ms();
        bool ok = cohort_store_ping_node(store, client, &info, NULL, &server_ms, NULL, NULL, &error);
        int64_t received = cohort_clock_monotonic_ms();
        if (ok && cohort_clock_sync(server_ms, sent, received, max_rtt_ms))
            return;
        if (!ok)
            last_error = error;
        test_sleep_ms(10);
    }
    cr_assert_fail("cannot sync the cluster clock within 10 s: %s", last_error.message);
}

bool test_find_one(mongoc_client_t *client, const char *db, const char *collection,
                   const char *filter_json, bson_t *doc)
{
    bson_init(doc);
    bson_error_t error;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &error);
    cr_assert_not_null(filter, "bad filter %s: %s", filter_json, error.message);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db, collection);
    bson_t *opts = BCON_NEW("limit", BCON_INT64(1));
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *found = NULL;
    bool any = mongoc_cursor_next(cursor, &found);
    if (any)
        bson_concat(doc, found);
    bool failed = mongoc_cursor_error(cursor, &error);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    mongoc_collection_destroy(coll);
    bson_destroy(filter);
    cr_assert_not(failed, "find on %s.%s failed: %s", db, collection, error.message);
    return any;
}

static int saved_stderr = -1;
static FILE *captured_stderr;

void test_stderr_begin(void)
{
    cr_assert_eq(saved_stderr, -1, "test_stderr_begin() called twice");
    captured_stderr = tmpfile();
    cr_assert_not_null(captured_stderr, "tmpfile: %s", strerror(errno));
    fflush(stderr);
    saved_stderr = dup(2);
    cr_assert_geq(saved_stderr, 0, "dup: %s", strerror(errno));
    cr_assert_geq(dup2(fileno(captured_stderr), 2), 0, "dup2: %s", strerror(errno));
}

char *test_stderr_end(void)
{
    cr_assert_geq(saved_stderr, 0, "test_stderr_end() without test_stderr_begin()");
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    saved_stderr = -1;
    fseek(captured_stderr, 0, SEEK_END);
    long len = ftell(captured_stderr);
    rewind(captured_stderr);
    char *text = calloc(1, (size_t)(len > 0 ? len : 0) + 1);
    cr_assert_not_null(text, "out of memory");
    size_t got = len > 0 ? fread(text, 1, (size_t)len, captured_stderr) : 0;
    text[got] = '\0';
    fclose(captured_stderr);
    captured_stderr = NULL;
    return text;
}

const char *test_handler_path(const char *name)
{
    /* tests/CMakeLists.txt names the objects after their targets (test_handler_<name>.so);
     * accept the plain <name>.so too, should the build name them after their sources. */
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/tests/handlers/test_handler_%s.so", COHORT_BUILD_DIR, name);
    if (access(path, R_OK) != 0)
        snprintf(path, sizeof path, "%s/tests/handlers/%s.so", COHORT_BUILD_DIR, name);
    cr_assert_eq(access(path, R_OK), 0, "test handler '%s' is not built (%s)", name, path);
    return path;
}

cohort_service_config_t test_service_config(const char *name, const char *handler_path)
{
    return (cohort_service_config_t){
        .name = (char *)name,
        .handler_path = strdup(handler_path),
        .handler_line = 2,
        .primary_task_count = 1000,
        .workers = 1,
        .max_attempts = 5,
        .retry_base_ms = 1000,
        .stall_timeout_ms = 1800000,
        .succeeded_retention_ms = 0, /* keep: the tests inspect finished tasks */
        .failed_retention_ms = 0,
        .line = 1,
    };
}

cohort_service_t *test_service_new(const cohort_service_config_t *config, const char *node_id,
                                   int64_t takeover_ms, cohort_store_t *store,
                                   mongoc_client_t *client)
{
    /* The file settings of a cluster section with the default tick and this takeover. */
    cohort_config_t cluster = {.tick_ms = 1000, .takeover_ms = takeover_ms};
    cohort_settings_t file;
    cohort_settings_from_config(&cluster, config, &file);
    bson_error_t err;
    cohort_service_t *service = cohort_service_new(config, node_id, &file, store, client, &err);
    cr_assert_not_null(service, "cannot create service %s on %s: %s", config->name, node_id,
                       err.message);
    return service;
}

void *test_probe_symbol(const test_probe_fixture_t *fx, const char *name)
{
    void *sym = dlsym(fx->probe, name);
    cr_assert_not_null(sym, "the probe handler does not export %s", name);
    return sym;
}

void test_probe_fixture_open(test_probe_fixture_t *fx, const char *prefix, const char *service,
                             int64_t takeover_ms)
{
    *fx = (test_probe_fixture_t){0};
    open_service_db(prefix, service, cohort_election_max_rtt_ms(takeover_ms), &fx->db,
                    &fx->store, &fx->client);
    /* The services load the same object: this handle keeps its record alive and in reach. */
    fx->probe = dlopen(test_handler_path("probe"), RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(fx->probe, "cannot load the probe handler: %s", dlerror());
    ((probe_reset_fn)test_probe_symbol(fx, "probe_reset"))();
    fx->record = ((probe_record_fn)test_probe_symbol(fx, "probe_record"))();
}

void test_probe_fixture_close(test_probe_fixture_t *fx)
{
    for (size_t i = 0; i < sizeof fx->nodes / sizeof fx->nodes[0]; i++) {
        if (fx->nodes[i].service)
            cohort_service_destroy(fx->nodes[i].service, fx->client);
        free(fx->nodes[i].config.handler_path);
    }
    if (fx->probe)
        dlclose(fx->probe);
    test_service_db_close(&fx->db, &fx->store, &fx->client);
    *fx = (test_probe_fixture_t){0};
}

bool test_election_tick(cohort_election_t *e, cohort_store_t *store, mongoc_client_t *client,
                        bson_error_t *error)
{
    bson_t doc;
    bool found = false;
    bool ok = e->primary || cohort_store_read_service(store, client, e->service, &doc, &found,
                                                      error);
    if (e->primary)
        bson_init(&doc);
    ok = ok && cohort_election_tick(e, store, client, e->primary ? NULL : &doc, error);
    bson_destroy(&doc);
    return ok;
}

void test_service_tick(cohort_service_t *s, mongoc_client_t *client)
{
    bson_t doc;
    bool found = false;
    bson_error_t error;
    if (s->election.primary) {
        cohort_service_tick(s, client, NULL);
        return;
    }
    if (!cohort_store_read_service(s->store, client, s->config->name, &doc, &found, &error))
        bson_reinit(&doc); /* the tick finds the database away too */
    cohort_service_tick(s, client, &doc);
    bson_destroy(&doc);
}
