/*
 * isolate_child.h - the entry point of a child worker process (isolation = process; the
 * node's side is isolate.h, the messages isolate_wire.h).
 */
#ifndef COHORT_ISOLATE_CHILD_H
#define COHORT_ISOLATE_CHILD_H

/* The entry point of `cohortd --worker -c FILE --service NAME --node-id ID`: reads tasks
 * from fd 0 and writes results to fd 1 until EOF. Returns the process's exit status (it
 * never exits by itself: cohortd does, with this status). */
int cohort_isolate_child_main(const char *config_path, const char *service,
                              const char *node_id);

#endif
