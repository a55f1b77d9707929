/*
 * route_probe.c - asks the API's router (cohort_api_resolve(), node/http/api.h) about requests
 * and prints its verdict, so tests/openapi/contract.py can compare the router with
 * docs/openapi.yaml. Reads "METHOD PATH" lines on stdin; prints "STATUS ALLOW" for each:
 * 200 when the router takes the request, else the status it refuses it with (404, 405, 400),
 * and the Allow header it would send ("-" if none). No database, no network.
 */
#include <stdio.h>
#include <string.h>

#include "node/http/api.h"

int main(void)
{
    char line[1024];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *path = strchr(line, ' ');
        if (!path) {
            fprintf(stderr, "route_probe: want 'METHOD PATH', got '%s'\n", line);
            return 2;
        }
        *path++ = '\0';
        cohort_api_route_t route;
        cohort_api_error_t err = {.status = 500};
        int status = cohort_api_resolve(line, path, &route, &err) ? 200 : err.status;
        printf("%d %s\n", status, route.allow ? route.allow : "-");
    }
    return 0;
}
