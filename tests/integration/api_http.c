/*
 * api_http.c - the HTTP listener's limits over real sockets (node/http/http.c on a loop thread,
 * with the API behind it): a body over api_max_body answers the API's JSON 413 whether it is
 * announced by Content-Length, sent chunked or sent after Expect: 100-continue; headers over
 * 8 KiB are refused; a client dribbling its headers is cut at the request deadline; past
 * http_max_connections a new connection closes the oldest idle one (one being answered
 * stays); 1,000 idle connections leave
 * /healthz answering within a second and are all closed at the deadline.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_server.h"
#include "support.h"
#include "core/token.h"
#include "store/store.h"

#define SERVICE "web"
#define TASKS "/api/v1/services/" SERVICE "/tasks"
#define MAX_BODY 2048

static char *db;
static cohort_store_t *store;
static mongoc_client_t *client;
static char token[COHORT_TOKEN_TEXT_MAX];

static void setup(void)
{
    test_service_db_open("apihttp", SERVICE, &db, &store, &client);
    test_api_token(store, client, "root", "admin", token);
}

static void teardown(void)
{
    test_service_db_close(&db, &store, &client);
}

TestSuite(api_http, .init = setup, .fini = teardown, .timeout = 120);

static void send_all(int fd, const char *text, size_t len)
{
    cr_assert_eq(send(fd, text, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* The head of a POST to .../tasks with `extra` header lines (each ending \r\n). */
static size_t post_head(char *out, size_t len, const char *extra)
{
    return (size_t)snprintf(out, len,
                            "POST " TASKS " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                            "%s\r\n",
                            token, extra);
}

/* Asserts `got` is the API's JSON 413. */
static void assert_json_413(const char *got, const char *what)
{
    cr_assert_not_null(got, "%s: no answer", what);
    cr_assert(strncmp(got, "HTTP/1.1 413", 12) == 0, "%s: want 413, got: %.300s", what, got);
    cr_assert(strstr(got, "Content-Type: application/json"), "%s: not JSON: %.400s", what, got);
    cr_assert(strstr(got, "\"code\" : \"too_large\"") && strstr(got, "api_max_body"),
              "%s: not the API's error: %.600s", what, got);
    cr_assert_null(strstr(got, "<HTML>"), "%s: evhttp's page leaked: %.600s", what, got);
}

static const cohort_http_callbacks_t limits = {.api_max_body = MAX_BODY};

Test(api_http, a_body_over_the_limit_gets_the_json_413)
{
    test_api_server_t s;
    test_api_server_start(&s, store, &limits, 0);
    char head[512], body[5000];
    memset(body, ' ', sizeof body);

    /* announced by Content-Length: refused before it is read */
    int fd = test_connect(s.port);
    size_t len = post_head(head, sizeof head, "Content-Length: 5000\r\n");
    send_all(fd, head, len);
    send(fd, body, sizeof body, MSG_NOSIGNAL); /* the server may close before it is all read */
    assert_json_413(test_read_until_closed(fd, 30000), "Content-Length");
    close(fd);

    /* Expect: 100-continue: refused instead of the 100 */
    fd = test_connect(s.port);
    len = post_head(head, sizeof head, "Content-Length: 5000\r\nExpect: 100-continue\r\n");
    send_all(fd, head, len);
    assert_json_413(test_read_until_closed(fd, 30000), "Expect: 100-continue");
    close(fd);

    /* chunked: refused once the chunks pass the limit */
    fd = test_connect(s.port);
    len = post_head(head, sizeof head, "Transfer-Encoding: chunked\r\n");
    send_all(fd, head, len);
    for (int i = 0; i < 5; i++) {
        char chunk[1100];
        int n = snprintf(chunk, sizeof chunk, "400\r\n");
        memset(chunk + n, ' ', 0x400);
        memcpy(chunk + n + 0x400, "\r\n", 2);
        send(fd, chunk, (size_t)n + 0x400 + 2, MSG_NOSIGNAL);
    }
    assert_json_413(test_read_until_closed(fd, 30000), "chunked");
    close(fd);

    /* A keep-alive connection: one task created, then an oversized request: its 413 follows
     * the first answer whole. */
    fd = test_connect(s.port);
    const char *task = "{\"data\": {\"n\": 1}}";
    char first[1024];
    int n = snprintf(first, sizeof first,
                     "POST " TASKS " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     token, strlen(task), task);
    send_all(fd, first, (size_t)n);
    len = post_head(head, sizeof head, "Content-Length: 9999\r\n");
    send_all(fd, head, len);
    char *got = test_read_until_closed(fd, 30000);
    cr_assert(got && strncmp(got, "HTTP/1.1 201", 12) == 0, "the first answer: %.300s", got);
    char *second = strstr(got + 12, "HTTP/1.1 ");
    cr_assert_not_null(second, "no second answer: %.800s", got);
    assert_json_413(second, "after a keep-alive request");
    close(fd);
    cr_assert_eq(test_count(client, db, "queue_" SERVICE, "{}"), 1);

    /* Within the limit, chunked: served */
    fd = test_connect(s.port);
    len = post_head(head, sizeof head, "Transfer-Encoding: chunked\r\nConnection: close\r\n");
    send_all(fd, head, len);
    char chunked[128];
    n = snprintf(chunked, sizeof chunked, "%zx\r\n%s\r\n0\r\n\r\n", strlen(task), task);
    send_all(fd, chunked, (size_t)n);
    got = test_read_until_closed(fd, 30000);
    cr_assert(got && strncmp(got, "HTTP/1.1 201", 12) == 0, "chunked within the limit: %.300s",
              got);
    close(fd);
    cr_assert_eq(test_count(client, db, "queue_" SERVICE, "{}"), 2);
    test_api_server_stop(&s);
}

Test(api_http, headers_over_8_kib_are_refused)
{
    test_api_server_t s;
    test_api_server_start(&s, store, &limits, 0);
    int fd = test_connect(s.port);
    char *big = malloc(9 * 1024);
    memset(big, 'a', 9 * 1024 - 1);
    big[9 * 1024 - 1] = '\0';
    char head[10 * 1024];
    int n = snprintf(head, sizeof head,
                     "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\nConnection: close\r\n\r\n",
                     big);
    free(big);
    send(fd, head, (size_t)n, MSG_NOSIGNAL);
    char *got = test_read_until_closed(fd, 30000);
    cr_assert_not_null(got, "a 9 KiB header held the connection open");
    cr_assert(strncmp(got, "HTTP/1.1 400", 12) == 0 || got[0] == '\0',
              "want 400 or a closed connection, got: %.200s", got);
    close(fd);

    /* 7 KiB of headers are fine */
    fd = test_connect(s.port);
    char pad[7 * 1024];
    memset(pad, 'a', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    n = snprintf(head, sizeof head,
                 "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\nConnection: close\r\n\r\n", pad);
    send_all(fd, head, (size_t)n);
    got = test_read_until_closed(fd, 30000);
    cr_assert(got && strncmp(got, "HTTP/1.1 200", 12) == 0, "%.200s", got);
    close(fd);
    test_api_server_stop(&s);
}

/* GET /healthz on a new connection; the status line's code, or 0 with no answer in time. */
static int healthz(int port, int64_t timeout_ms, int64_t *took_ms)
{
    int64_t start = test_now_ms();
    int fd = test_connect(port);
    const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send(fd, req, strlen(req), MSG_NOSIGNAL);
    char *got = test_read_until_closed(fd, timeout_ms);
    close(fd);
    if (took_ms)
        *took_ms = test_now_ms() - start;
    return got && strncmp(got, "HTTP/1.1 ", 9) == 0 ? atoi(got + 9) : 0;
}

Test(api_http, a_client_dribbling_its_headers_is_cut_at_the_deadline)
{
    const cohort_http_callbacks_t quick = {.api_max_body = MAX_BODY, .request_deadline_ms = 1500};
    test_api_server_t s;
    test_api_server_start(&s, store, &quick, 0);
    int fd = test_connect(s.port);
    const char *head = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    int64_t start = test_now_ms();
    bool closed = false;
    /* one byte every 100 ms: evhttp's idle timeout (10 s) never fires */
    for (size_t i = 0; head[i] && !closed; i++) {
        if (send(fd, head + i, 1, MSG_NOSIGNAL) != 1)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        closed = poll(&p, 1, 100) > 0;
    }
    closed = closed || test_closed_within(fd, 5000);
    int64_t took = test_now_ms() - start;
    cr_assert(closed, "a dribbling client kept its connection for %lld ms", (long long)took);
    cr_assert(took >= 1400 && took <= 1500 + 1000, "cut after %lld ms, want 1500 (+ the sweep)",
              (long long)took);
    close(fd);
    /* A request sent whole within the deadline is served, on a connection kept alive past it
     * between requests only while one is served. */
    cr_assert_eq(healthz(s.port, 1000, NULL), 200);
    test_api_server_stop(&s);
}

Test(api_http, past_the_cap_a_new_connection_closes_the_oldest)
{
    const cohort_http_callbacks_t capped = {.api_max_body = MAX_BODY, .max_connections = 8};
    test_api_server_t s;
    test_api_server_start(&s, store, &capped, 0);
    int fds[30];
    for (int i = 0; i < 30; i++)
        fds[i] = test_connect(s.port);
    int64_t took = 0;
    cr_assert_eq(healthz(s.port, 1000, &took), 200, "no /healthz past the cap");
    /* the 23 oldest went (30 idle and the health check, 8 allowed); the newest 7 stay */
    for (int i = 0; i < 23; i++)
        cr_assert(test_closed_within(fds[i], 2000), "connection %d of 30 is still open", i);
    for (int i = 23; i < 30; i++)
        cr_assert_not(test_closed_within(fds[i], 50), "connection %d of 30 was closed", i);
    test_sleep_ms(300); /* two sweeps */
    cr_assert_leq(s.connections, 8, "%zu connections open", (size_t)s.connections);
    for (int i = 0; i < 30; i++)
        close(fds[i]);
    test_api_server_stop(&s);
}

/* Reads `fd` to its end; the bytes read (fails the test if it stalls for 30 s). */
static size_t read_all(int fd)
{
    size_t got = 0;
    char buf[65536];
    int64_t deadline = test_now_ms() + 30000;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        cr_assert(poll(&p, 1, (int)(deadline - test_now_ms())) > 0, "stalled at %zu bytes",
                  got);
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            return got;
        got += (size_t)n;
    }
}

Test(api_http, a_connection_being_answered_is_not_closed_for_the_cap)
{
    enum { BIG = 32 << 20 }; /* far more than the sockets buffer: the reply waits on the client */
    const cohort_http_callbacks_t capped = {.api_max_body = MAX_BODY, .max_connections = 4};
    test_api_server_t s;
    test_api_server_start(&s, store, &capped, BIG);
    int busy = test_connect(s.port);
    const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send_all(busy, req, strlen(req));
    test_sleep_ms(300); /* the reply is being written, and stuck */
    int idle[12];
    for (int i = 0; i < 12; i++)
        idle[i] = test_connect(s.port);
    for (int i = 0; i < 8; i++)
        cr_assert(test_closed_within(idle[i], 2000), "idle connection %d is still open", i);
    /* The busy one still gets its whole reply. */
    size_t got = read_all(busy);
    cr_assert_gt(got, (size_t)BIG, "the busy connection was cut after %zu of %d bytes", got, BIG);
    close(busy);
    for (int i = 0; i < 12; i++)
        close(idle[i]);
    test_api_server_stop(&s);
}

Test(api_http, when_every_connection_is_busy_the_new_one_goes)
{
    enum { BIG = 16 << 20 };
    const cohort_http_callbacks_t capped = {.api_max_body = MAX_BODY, .max_connections = 2};
    test_api_server_t s;
    test_api_server_start(&s, store, &capped, BIG);
    const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    int busy[2];
    for (int i = 0; i < 2; i++) {
        busy[i] = test_connect(s.port);
        send_all(busy[i], req, strlen(req));
    }
    test_sleep_ms(300);
    int late = test_connect(s.port);
    cr_assert(test_closed_within(late, 2000), "a connection past the cap stayed open");
    close(late);
    for (int i = 0; i < 2; i++) {
        size_t got = read_all(busy[i]);
        cr_assert_gt(got, (size_t)BIG, "busy connection %d was cut after %zu bytes", i, got);
        close(busy[i]);
    }
    test_api_server_stop(&s);
}

/* /healthz beside 1,000 idle connections: within a second, or three under AddressSanitizer,
 * which slows the loop's accepting and closing of the burst that much on 2 cores. */
#ifdef __SANITIZE_ADDRESS__
#define HEALTHZ_BOUND_MS 3000
#else
#define HEALTHZ_BOUND_MS 1000
#endif

Test(api_http, a_thousand_idle_connections_leave_healthz_answering)
{
    const cohort_http_callbacks_t node = {.api_max_body = MAX_BODY, .request_deadline_ms = 3000};
    test_api_server_t s;
    test_api_server_start(&s, store, &node, 0);
    enum { N = 1000 };
    static int fds[N];
    /* connect() completes in the kernel: the listener's backlog (SOMAXCONN) holds the burst
     * until the loop accepts it */
    for (int i = 0; i < N; i++)
        fds[i] = test_connect(s.port);
    /* Measured first, asserted after the server stopped: a failed assertion must not leave
     * its loop thread running into the test's teardown. */
    int status[3];
    int64_t took[3];
    for (int round = 0; round < 3; round++)
        status[round] = healthz(s.port, HEALTHZ_BOUND_MS, &took[round]);
    for (int round = 0; round < 3; round++) {
        if (status[round] != 200 || took[round] > HEALTHZ_BOUND_MS) {
            for (int i = 0; i < N; i++)
                close(fds[i]);
            test_api_server_stop(&s);
            cr_assert_fail("/healthz answered %d after %lld ms in round %d (bound %d ms)",
                           status[round], (long long)took[round], round, HEALTHZ_BOUND_MS);
        }
    }
    test_sleep_ms(300);
    cr_assert_leq(s.connections, 256, "%zu connections open past the default cap",
                  (size_t)s.connections);
    /* all of them closed: the oldest by the cap, the rest at the deadline */
    int64_t start = test_now_ms();
    for (int i = 0; i < N; i++)
        cr_assert(test_closed_within(fds[i], 5000 - (test_now_ms() - start)),
                  "idle connection %d is open after %lld ms", i,
                  (long long)(test_now_ms() - start));
    for (int i = 0; i < N; i++)
        close(fds[i]);
    test_sleep_ms(300);
    cr_assert_eq(s.connections, 0, "%zu connections still counted", (size_t)s.connections);
    test_api_server_stop(&s);
}
