/*
 * fuzz_api.c - libFuzzer target for the HTTP API's request parsing (node/http/api_parse.h): the
 * route (method and path), the query strings of the listing and the counts, the cursor, and
 * every JSON body (a task, a batch's tasks, pause/resume), with no database. The whole raw
 * request, through libevent and the node's listener, is fuzz_http.c's.
 *
 * Input: the first byte chooses what the rest is.
 *   byte % 8 == 0  a path; bits 3-5 of the byte choose the method (GET, POST, DELETE, PUT,
 *                  PATCH, HEAD, OPTIONS, TRACE)
 *   byte % 8 == 1  the query string of GET .../tasks, then of GET .../counts (as by=)
 *   byte % 8 == 2  a task body (POST .../tasks)
 *   byte % 8 == 3  a batch body: each element of its "tasks" array parsed as a task
 *   byte % 8 == 4  a pause body, then the same as a resume body, a claim body and each
 *                  lease call's body (heartbeat, succeed, fail, release)
 *   byte % 8 == 5  a tasks:bulk body (api_ops.h)
 *   byte % 8 == 6  a settings body (PATCH .../settings)
 *   byte % 8 == 7  both: the same body as bulk and as settings
 *
 * The checks beyond the sanitizers' are api_checks.c's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_checks.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* The payload as a NUL-terminated string (cut at an embedded NUL, as C headers would be). */
static char *text_of(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return NULL;
    memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

static void fuzz_route(uint8_t selector, const char *path)
{
    static const char *const methods[] = {"GET",   "POST", "DELETE",  "PUT",
                                          "PATCH", "HEAD", "OPTIONS", "TRACE"};
    cohort_api_route_t route;
    cohort_api_error_t err = {0};
    fuzz_check_route(methods[(selector >> 3) & 7], path, &route, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 20)
        return 0;
    uint8_t selector = data[0];
    uint8_t what = selector % 8;
    const char *payload = (const char *)data + 1;
    size_t len = size - 1;
    if (what <= 1) {
        char *text = text_of(data + 1, len);
        if (!text)
            return 0;
        if (what == 0)
            fuzz_route(selector, text);
        else
            fuzz_check_queries(text);
        free(text);
        return 0;
    }
    bson_t body;
    cohort_api_error_t err = {0};
    if (!cohort_api_parse_object(payload, len, what == 4, &body, &err)) {
        fuzz_check_refusal(&err);
    } else if (what == 2) {
        fuzz_check_task(&body, "");
    } else if (what == 3) {
        fuzz_check_batch(&body);
    } else if (what == 4) {
        fuzz_check_switch(&body);
        fuzz_check_worker(&body);
    } else {
        if (what != 6)
            fuzz_check_bulk(&body);
        if (what != 5)
            fuzz_check_settings(&body);
    }
    bson_destroy(&body);
    return 0;
}
