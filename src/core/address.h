/*
 * address.h - HOST:PORT as Cohort's settings write it (http_listen): one parser, libevent's.
 *
 * HOST is a numeric IPv4 address or an IPv6 address in brackets ("[::1]:9464"); PORT is
 * 1..65535. The config file checks http_listen with it and the HTTP listener binds what it
 * returns, so a value the config accepts is one the listener can use.
 * Errors are bson_error_t (core/error.h).
 */
#ifndef COHORT_ADDRESS_H
#define COHORT_ADDRESS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct cohort_address {
    struct sockaddr_storage sa; /* the address, for bind() */
    int sa_len;                 /* its length */
    char host[64];              /* HOST without brackets, for evhttp_bind_socket() */
    uint16_t port;
} cohort_address_t;

/* Parses `text` ("127.0.0.1:9464", "[::1]:9464") into `out`. False with a
 * COHORT_DOMAIN_CONFIG error ("'TEXT' must be HOST:PORT ...") if it is not one. */
bool cohort_address_parse(const char *text, cohort_address_t *out, bson_error_t *error);

#endif
