/*
 * isolate_wire.h - the wire protocol between a node and its child worker processes
 * (isolation = process; the supervisor is isolate.c, the child isolate_child.c).
 *
 * Each slot's child is connected to the node by one AF_UNIX stream socket, the child's
 * fds 0 and 1. Messages are BSON documents, which carry their own little-endian length in
 * their first four bytes, written back to back:
 *
 *   child -> node, once, when ready   {ready: true, handler: PATH}
 *                                     or {ready: false, error: TEXT} (then the child exits)
 *   node -> child, one per task       {task: <the claimed document>, clock_offset_ms: N}
 *   child -> node, one per task       {finish: N, error: TEXT (if any),
 *                                      retry_in_ms: N (for a retry: its delay from now)}
 *
 * When the node closes its end the child runs the handler's destroy() and exits 0. The
 * child's cluster clock is the node's: CLOCK_MONOTONIC is shared by every process of the
 * host, so the node's offset (cluster minus monotonic) makes the child's clock exact.
 */
#ifndef COHORT_ISOLATE_WIRE_H
#define COHORT_ISOLATE_WIRE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum cohort_wire_status {
    COHORT_WIRE_OK,
    COHORT_WIRE_EOF,     /* the peer hung up or exited */
    COHORT_WIRE_TIMEOUT, /* the deadline passed first */
    COHORT_WIRE_BAD      /* not a valid message (or no memory for it) */
} cohort_wire_status_t;

/* Reads one document into *doc (a new bson_t the caller destroys, set only with
 * COHORT_WIRE_OK) before `deadline_ms` (monotonic; < 0: none). `pidfd` (-1: none) ends the
 * wait when the writer has exited, even if a process it forked keeps the socket open. */
cohort_wire_status_t cohort_wire_read(int fd, int pidfd, int64_t deadline_ms, bson_t **doc);

/* Writes one document (borrowed). False if the peer is gone. */
bool cohort_wire_write(int fd, const bson_t *doc);

/* A field of a received message, or `fallback` if it is missing or of another type; the
 * string is a view into `doc`. */
const char *cohort_wire_utf8(const bson_t *doc, const char *key, const char *fallback);
int64_t cohort_wire_int(const bson_t *doc, const char *key, int64_t fallback);

#endif
