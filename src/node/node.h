/*
 * node.h - a running cohortd node: the event loop that ticks every tick_ms, pings the
 * database (registration and clock sync), runs each hosted service's election and primary
 * work, and shuts down cleanly on SIGTERM/SIGINT.
 */
#ifndef COHORT_NODE_H
#define COHORT_NODE_H

#include <stdbool.h>

#include "core/config.h"

/* Runs a node until SIGTERM/SIGINT. Returns the process exit code (0 on a clean stop).
 * *abandoned is set when tasks were still running after shutdown_grace_ms (their claims were
 * released): their threads are inside handler code and still use the node's memory, the
 * configuration's and the driver's, so the caller must end the process at once, without
 * freeing anything or running exit handlers (_exit()), and must not destroy `config`. It is
 * set too when change stream threads were left in their getMores (node/work/watch.h). */
int cohort_node_run(const cohort_config_t *config, bool *abandoned);

/* Writes a node id unique to this process: host-pid-random. */
void cohort_node_default_id(char *out, size_t len);

#endif
