/*
 * address.c - HOST:PORT through libevent's evutil_parse_sockaddr_port (see address.h).
 */
#include "core/address.h"

#include <arpa/inet.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <string.h>

#include "core/error.h"

bool cohort_address_parse(const char *text, cohort_address_t *out, bson_error_t *error)
{
    memset(out, 0, sizeof *out);
    out->sa_len = (int)sizeof out->sa;
    /* libevent also takes a bare address (port 0): Cohort needs a port to listen on. */
    bool ok = evutil_parse_sockaddr_port(text, (struct sockaddr *)&out->sa, &out->sa_len) == 0;
    const void *addr = NULL;
    if (ok && out->sa.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&out->sa;
        out->port = ntohs(in->sin_port);
        addr = &in->sin_addr;
    } else if (ok && out->sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&out->sa;
        out->port = ntohs(in6->sin6_port);
        addr = &in6->sin6_addr;
    }
    if (!addr || out->port == 0 ||
        !evutil_inet_ntop(out->sa.ss_family, addr, out->host, sizeof out->host)) {
        bson_set_error(error, COHORT_DOMAIN_CONFIG, COHORT_CODE_INVALID,
                       "'%s' must be HOST:PORT (e.g. 127.0.0.1:9464)", text);
        return false;
    }
    return true;
}
