/*
 * address.c - HOST:PORT as http_listen takes it (src/core/address.h): numeric IPv4 or
 * bracketed IPv6 with a port 1..65535, through libevent's parser; anything else is refused
 * with a message naming the value.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/socket.h>

#include "core/address.h"

Test(address, takes_ipv4_and_bracketed_ipv6)
{
    cohort_address_t a;
    bson_error_t error;
    cr_assert(cohort_address_parse("127.0.0.1:9464", &a, &error), "%s", error.message);
    cr_assert_eq(a.sa.ss_family, AF_INET);
    cr_assert_str_eq(a.host, "127.0.0.1");
    cr_assert_eq(a.port, 9464);
    cr_assert(cohort_address_parse("0.0.0.0:1", &a, &error), "%s", error.message);
    cr_assert_eq(a.port, 1);
    cr_assert(cohort_address_parse("[::1]:65535", &a, &error), "%s", error.message);
    cr_assert_eq(a.sa.ss_family, AF_INET6);
    cr_assert_str_eq(a.host, "::1");
    cr_assert_eq(a.port, 65535);
}

Test(address, refuses_what_cannot_be_listened_on)
{
    const char *const bad[] = {"",           "9464",          ":9464",          "127.0.0.1",
                               "127.0.0.1:", "127.0.0.1:0",   "127.0.0.1:65536", "127.0.0.1:x",
                               "::1:9464",   "[::1]",         "300.1.1.1:80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cohort_address_t a;
        bson_error_t error = {0};
        cr_assert_not(cohort_address_parse(bad[i], &a, &error), "'%s' was accepted", bad[i]);
        cr_assert(strstr(error.message, "must be HOST:PORT"), "'%s': %s", bad[i], error.message);
    }
}
