/*
 * primacy_sampler.h - a second thread for the tests that stop and start nodes under load
 * (cluster/ops_rolling, upgrade/rolling): every CLUSTER_SAMPLE_MS it reads a service's
 * `services` document (who is primary, under which epoch, when last_active was refreshed) and,
 * if asked, enqueues one task of that service through the product's store, as cohortctl does.
 *
 * The thread has a store (and client) of its own and never asserts: the test judges what it
 * recorded once cluster_sampler_stop() has joined it.
 */
#ifndef COHORT_TEST_PRIMACY_SAMPLER_H
#define COHORT_TEST_PRIMACY_SAMPLER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"

#define CLUSTER_SAMPLE_MS 50

typedef struct cluster_sampler {
    /* set by the test before cluster_sampler_start() */
    const char *service;    /* the service sampled (and enqueued to); not owned */
    bool enqueue;           /* also enqueue one task per sample, data {"seq": N} */
    const char *created_by; /* the tasks' created_by; not owned */
    /* results, read after cluster_sampler_stop() */
    int64_t samples;
    int64_t read_errors;
    int64_t enqueued;
    int64_t enqueue_errors;
    char enqueue_error[600];
    int64_t max_sample_interval_ms; /* the longest wait between two samples (test clock) */
    int64_t max_refresh_gap_ms;     /* the longest time between refreshes of last_active
                                     * (server clock) */
    int64_t gap_at_epoch;           /* the epoch that ended that gap */
    int64_t max_vacant_ms;          /* the longest run of samples naming no primary */
    int64_t vacant_samples;
    int64_t epochs_seen; /* distinct epochs */
    /* internal */
    const char *uri, *db;
    atomic_bool stop;
    pthread_t thread;
} cluster_sampler_t;

/* Starts the thread on cluster c's database; fails the test if it cannot. */
void cluster_sampler_start(cluster_t *c, cluster_sampler_t *s);

/* Stops and joins it; its results are then stable. */
void cluster_sampler_stop(cluster_sampler_t *s);

/* Prints the results on one line to stderr, prefixed with `tag`. */
void cluster_sampler_print(const cluster_sampler_t *s, const char *tag);

/* Polls until the node's registry entry carries the pid of its running process (it has
 * pinged, so it takes part). */
bool cluster_wait_pinged_by_pid(cluster_t *c, cluster_node_t *n, int64_t timeout_ms);

#endif
