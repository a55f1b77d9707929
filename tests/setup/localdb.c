/*
 * localdb.c - the local development database (deploy/localdb/localdb.sh) as nodes meet it.
 *
 * - Restarted on the same state directory without --port, it listens on the port it had (kept
 *   in the directory), so nodes started against the old URI reconnect.
 * - Its log stays quiet where nothing is wrong: a client that resets its connection (a node
 *   killed) and the non-unique indexes every node start ensures write no stack trace and no
 *   warning per connection or per index (a test run's log was 1.1 MB in 30 minutes).
 *
 * Each test starts a server of its own (a few seconds), not the suite's.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support.h"

#define LOCALDB COHORT_SOURCE_DIR "/deploy/localdb/localdb.sh"

/* localdb.sh VERB STATE: its stdout (caller frees); fails the test unless it exits 0. */
static char *localdb(const char *verb, const char *state)
{
    const char *argv[] = {"/bin/bash", LOCALDB, verb, state, NULL};
    test_run_result_t r = test_run(argv, NULL, 120000);
    cr_assert_eq(r.exit_code, 0, "localdb.sh %s %s failed:\n%s", verb, state, r.err);
    char *out = strdup(r.out);
    out[strcspn(out, "\n")] = '\0';
    test_run_result_free(&r);
    return out;
}

static void ping(const char *uri)
{
    mongoc_client_t *client = mongoc_client_new(uri);
    cr_assert(client, "bad URI from localdb.sh: '%s'", uri);
    bson_t cmd = BSON_INITIALIZER;
    BSON_APPEND_INT32(&cmd, "ping", 1);
    bson_error_t error;
    bool ok = mongoc_client_command_simple(client, "admin", &cmd, NULL, NULL, &error);
    cr_assert(ok, "ping %s: %s", uri, error.message);
    bson_destroy(&cmd);
    mongoc_client_destroy(client);
}

Test(localdb, restart_keeps_the_port, .timeout = 300)
{
    char *state = test_tmpdir("localdb-port");
    char *first = localdb("start", state);
    cr_assert(strncmp(first, "mongodb://127.0.0.1:", 20) == 0, "not a URI: '%s'", first);
    free(localdb("stop", state));
    char *second = localdb("start", state);
    cr_expect_str_eq(second, first, "restarted without --port on another port");
    ping(second);
    free(localdb("stop", state));
    free(first);
    free(second);
    free(state);
}

/* Connects to the server's port and resets the connection (SO_LINGER 0), as a killed client
 * whose kernel answers the server with a RST does. */
static void reset_connection(const char *uri)
{
    int port = atoi(strrchr(uri, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    cr_assert(connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0, "connect %s", uri);
    usleep(200 * 1000); /* the server has registered the connection */
    struct linger hard = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    close(fd);
}

static void create_index(const char *uri, const char *db)
{
    mongoc_client_t *client = mongoc_client_new(uri);
    bson_t *cmd = BCON_NEW("createIndexes", "t", "indexes", "[", "{", "key", "{", "due",
                           BCON_INT32(1), "}", "name", "due_1", "}", "]");
    bson_error_t error;
    bool ok = mongoc_client_command_simple(client, db, cmd, NULL, NULL, &error);
    cr_assert(ok, "createIndexes: %s", error.message);
    bson_destroy(cmd);
    mongoc_client_destroy(client);
}

Test(localdb, log_has_no_trace_per_connection, .timeout = 300)
{
    char *state = test_tmpdir("localdb-log");
    char *uri = localdb("start", state);
    for (int i = 0; i < 5; i++) {
        reset_connection(uri);
        create_index(uri, "localdb_log");
    }
    usleep(500 * 1000); /* the server has read the last reset */
    free(localdb("stop", state));

    char path[1200];
    snprintf(path, sizeof path, "%s/localdb.log", state);
    FILE *f = fopen(path, "r");
    cr_assert(f, "no %s", path);
    char line[4096];
    int traces = 0, warnings = 0, resets = 0;
    while (fgets(line, sizeof line, f)) {
        traces += strncmp(line, "\tat ", 4) == 0;
        warnings += strstr(line, "is not yet implemented") != NULL;
        resets += strstr(line, "closed: Connection reset") != NULL;
    }
    fclose(f);
    cr_expect(resets > 0, "no reset reached the server: the test proves nothing (see %s)", path);
    cr_expect_eq(traces, 0, "%d stack-trace lines in %s for 5 reset connections", traces, path);
    cr_expect_eq(warnings, 0, "%d index warnings in %s for 5 createIndexes", warnings, path);
    free(uri);
    free(state);
}

/* A command the server cannot carry out because of a fault of its own (the embedded server's
 * ClassCastException on an `updates` that is no array; a ConcurrentModificationException,
 * which has no message, is not reproducible on demand) is refused with a reason naming it,
 * never "Unknown error: null". Runs against the suite's server: MongoDB refuses the same
 * command with a TypeMismatch naming the field, which passes too. */
Test(localdb, a_fault_of_the_server_is_answered_with_its_name)
{
    mongoc_client_t *client = test_client();
    char *db = test_db_name("fault");
    bson_t *cmd = BCON_NEW("update", BCON_UTF8("t"), "updates", BCON_UTF8("no array"));
    bson_t reply;
    bson_error_t error;
    bool ok = mongoc_client_command_simple(client, db, cmd, NULL, &reply, &error);
    char *text = bson_as_relaxed_extended_json(&reply, NULL);
    cr_assert(!ok, "the update was accepted: %s", text);
    cr_assert(error.message[0] && strncmp(error.message, "Unknown error", 13) != 0,
              "refused without a reason of its own: %s", text);
    bson_free(text);
    bson_destroy(&reply);
    bson_destroy(cmd);
    test_drop_db(db);
    free(db);
    mongoc_client_destroy(client);
}
