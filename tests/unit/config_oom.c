/*
 * config_oom.c - out of memory while loading a config is reported, never swallowed.
 *
 * Fault injection in the manner of SQLite's: this test is linked with the allocation
 * functions wrapped (tests/CMakeLists.txt: --wrap=malloc,...), so the Nth allocation made
 * by the loader can be made to fail. For every N up to the number the load needs, the load
 * must either refuse the file with a problem (a message or an unrecorded one) or, if the
 * failing allocation was never reached, return the whole config. A config that loads with
 * a service, a kind or a handler option missing is the bug this test exists for.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

#define NOOP_SO COHORT_BUILD_DIR "/handlers/cohort_noop.so"

static long fail_at; /* 0: allocations succeed; N: the Nth after arming fails */
static long calls;

static bool fail_now(void)
{
    return fail_at > 0 && ++calls == fail_at;
}

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_vasprintf(char **out, const char *fmt, va_list ap);

void *__wrap_malloc(size_t size)
{
    return fail_now() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
    return fail_now() ? NULL : __real_realloc(p, size);
}

char *__wrap_strdup(const char *s)
{
    return fail_now() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return fail_now() ? NULL : __real_strndup(s, n);
}

int __wrap_vasprintf(char **out, const char *fmt, va_list ap)
{
    return fail_now() ? -1 : __real_vasprintf(out, fmt, ap);
}

int __wrap_asprintf(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = __wrap_vasprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

static const char text[] = "[cluster]\n"
                           "database = oom\n"
                           "node_id = node-1\n"
                           "http_listen = 127.0.0.1:9464\n"
                           "[service:a]\n"
                           "handler = " NOOP_SO "\n"
                           "kind.mail.priority = 5\n"
                           "kind.sms.task_timeout_ms = 1000\n"
                           "sleep_ms = 1\n"
                           "[service:b]\n"
                           "handler = " NOOP_SO "\n"
                           "fail_first_n = 2\n";

/* The parts of a loaded config that an allocation stands behind. */
static void expect_whole(const cohort_config_t *c)
{
    cr_assert_eq(c->n_services, 2);
    cr_expect_str_eq(c->database, "oom");
    cr_expect_str_eq(c->node_id, "node-1");
    cr_expect_str_eq(c->http_listen, "127.0.0.1:9464");
    cr_expect_str_eq(c->mongodb_uri, "mongodb://127.0.0.1:27017");
    cr_expect_str_eq(c->services[0].name, "a");
    cr_expect_str_eq(c->services[0].handler_path, NOOP_SO);
    cr_expect_eq(c->services[0].n_kinds, 2);
    cr_expect_eq(c->services[0].n_options, 1);
    cr_expect_str_eq(c->services[1].name, "b");
    cr_expect_eq(c->services[1].n_options, 1);
}

Test(config_oom, every_failed_allocation_refuses_the_file)
{
    unsetenv("MONGODB_URI");
    cohort_config_errors_t errors = {0};
    long refused = 0;
    for (long n = 1;; n++) {
        calls = 0;
        fail_at = n;
        cohort_config_t *c = cohort_config_load_string(text, "oom.ini", NULL, &errors);
        fail_at = 0;
        if (calls < n) {
            /* the load needed fewer than n allocations: nothing failed */
            cr_assert_not_null(c, "a load without a failure refused the file: %s",
                               errors.count ? errors.messages[0] : "");
            cr_assert_eq(errors.count + errors.unrecorded, 0);
            expect_whole(c);
            cohort_config_destroy(c);
            break;
        }
        cr_expect_null(c, "allocation %ld failed, yet the config loaded", n);
        cr_expect_gt(errors.count + errors.unrecorded, 0,
                     "allocation %ld failed without a problem reported", n);
        if (errors.count > 0)
            cr_expect_not_null(strstr(errors.messages[0], "out of memory"),
                               "allocation %ld: '%s' does not say out of memory", n,
                               errors.messages[0]);
        cohort_config_destroy(c);
        cohort_config_errors_clear(&errors);
        refused++;
        cr_assert_lt(n, 10000, "the load never finished");
    }
    cr_expect_gt(refused, 20, "too few allocations were failed to test anything (%ld)", refused);
}
