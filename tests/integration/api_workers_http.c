/*
 * api_workers_http.c - external workers whose client goes away, over real sockets: the HTTP
 * listener (node/http/http.c), the API's threads and held claims (node/http/api_pool.c) and a
 * hosted service of `handler = external`, as a node serves them.
 *
 * - A long-poll claim whose client disconnected ends: it is no longer held, and a task
 *   enqueued afterwards stays pending with attempts 0 until a live worker claims it (attempt
 *   1). Before: the abandoned claim took it under a lease nobody held, and after max_attempts
 *   such claims the task failed without ever running.
 * - A claim whose client left before the reply (it sent the request and closed at once)
 *   gives its tasks back at once: pending, attempts 0. Before: they stayed claimed until the
 *   lease ran out, and came back with an attempt counted.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_fixture.h"
#include "support.h"
#include "core/token.h"
#include "store/store.h"

#define SERVICE "ext"
#define QUEUE "queue_" SERVICE
#define CLAIMS "/api/v1/services/" SERVICE "/claims"
#define TASKS "/api/v1/services/" SERVICE "/tasks"

static test_api_fixture_t fx;
static char token[COHORT_TOKEN_TEXT_MAX];

static void setup(void)
{
    static const cohort_http_callbacks_t limits = {.api_max_body = 65536};
    test_api_fixture_open(&fx, &(test_api_setup_t){.prefix = "apiworkhttp",
                                                   .service = SERVICE,
                                                   .host = true,
                                                   .max_attempts = 3,
                                                   .max_wait_ms = 30000,
                                                   .listen = &limits});
    test_api_token(fx.store, fx.client, "worker", "work,enqueue", token);
}

static void teardown(void)
{
    test_api_fixture_close(&fx);
}

TestSuite(api_workers_http, .init = setup, .fini = teardown, .timeout = 120);

/* Sends POST `path` with `body` on a new connection and returns the socket. */
static int post(const char *path, const char *body)
{
    int fd = test_connect(fx.server.port);
    char request[2048];
    int len = snprintf(request, sizeof request,
                       "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                       "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                       "Connection: close\r\n\r\n%s",
                       path, token, strlen(body), body);
    cr_assert_eq(send(fd, request, (size_t)len, MSG_NOSIGNAL), len);
    return fd;
}

/* POST `path` with `body`; the whole answer (a static buffer), which must have `status`. */
static char *post_answer(const char *path, const char *body, int status)
{
    int fd = post(path, body);
    char *got = test_read_until_closed(fd, 10000);
    close(fd);
    cr_assert_not_null(got, "POST %s: no answer", path);
    char want[32];
    snprintf(want, sizeof want, "HTTP/1.1 %d", status);
    cr_assert(strncmp(got, want, strlen(want)) == 0, "POST %s %s: want %d, got: %.600s", path,
              body, status, got);
    return got;
}

static int64_t count(const char *filter)
{
    return test_count(fx.client, fx.db, QUEUE, filter);
}

/* Waits up to timeout_ms for the number of tasks matching `filter` to be `want`. */
static bool wait_count(const char *filter, int64_t want, int64_t timeout_ms)
{
    for (int64_t end = test_now_ms() + timeout_ms; test_now_ms() < end; test_sleep_ms(50))
        if (count(filter) == want)
            return true;
    return count(filter) == want;
}

static bool wait_held(size_t want, int64_t timeout_ms)
{
    for (int64_t end = test_now_ms() + timeout_ms; test_now_ms() < end; test_sleep_ms(20))
        if (fx.server.held == want)
            return true;
    return fx.server.held == want;
}

Test(api_workers_http, a_long_poll_whose_client_left_claims_nothing)
{
    int fd = post(CLAIMS, "{\"worker\": \"gone-1\", \"wait_ms\": 20000, \"lease_ms\": 60000}");
    cr_assert(wait_held(1, 5000), "the claim is held (nothing is due)");
    test_sleep_ms(1000);
    close(fd); /* the worker gives up its long-poll */
    bool ended = wait_held(0, 3000);

    /* A task enqueued now wakes the held claims of the service: none may take it. */
    post_answer(TASKS, "{\"data\": {\"n\": 1}}", 201);
    test_sleep_ms(1500);
    cr_assert_eq(count("{\"status\": \"pending\", \"attempts\": 0}"), 1,
                 "the task stays pending with attempts 0 (%lld claimed)",
                 (long long)count("{\"status\": \"claimed\"}"));
    cr_assert(ended, "the held claim ends when its client leaves (still %zu held 3 s later)",
              (size_t)fx.server.held);

    /* A live worker gets it, as its first attempt. */
    char *got = post_answer(CLAIMS, "{\"worker\": \"live-1\"}", 200);
    cr_assert(strstr(got, "\"attempt\" : 1"), "the live worker's claim: %.600s", got);
    cr_assert_eq(count("{\"status\": \"claimed\", \"claimed_by\": \"live-1\", \"attempts\": 1}"),
                 1);
}

Test(api_workers_http, a_claim_whose_client_left_before_the_reply_gives_its_tasks_back)
{
    for (int i = 0; i < 3; i++)
        post_answer(TASKS, "{\"data\": {}}", 201);
    /* Sent whole, then the connection closed before any reply could come. */
    int fd = post(CLAIMS, "{\"worker\": \"gone-2\", \"max\": 3, \"lease_ms\": 60000}");
    close(fd);
    /* The claim ran (it counts what it handed out before its reply goes), and its tasks came
     * back at once. */
    for (int64_t end = test_now_ms() + 5000;
         test_now_ms() < end && atomic_load(&fx.service->stats.ext_claimed) < 3;)
        test_sleep_ms(20);
    cr_assert_eq(atomic_load(&fx.service->stats.ext_claimed), 3, "the claim never ran");
    cr_assert(wait_count("{\"status\": \"pending\", \"attempts\": 0}", 3, 5000),
              "the tasks are given back with no attempt charged: %lld pending with attempts "
              "0, %lld claimed",
              (long long)count("{\"status\": \"pending\", \"attempts\": 0}"),
              (long long)count("{\"status\": \"claimed\"}"));
    cr_assert_eq(count("{\"claim_token\": {\"$exists\": true}}"), 0, "no claim left behind");

    /* A live worker then claims all three, each as its first attempt. */
    char *got = post_answer(CLAIMS, "{\"worker\": \"live-2\", \"max\": 3}", 200);
    cr_assert_null(strstr(got, "\"attempt\" : 2"), "%.800s", got);
    cr_assert_eq(count("{\"status\": \"claimed\", \"claimed_by\": \"live-2\", \"attempts\": 1}"),
                 3);
}
