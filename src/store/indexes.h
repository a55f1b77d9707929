/*
 * indexes.h - the indexes of a service's queue (queue_<service>), listed once: services.c
 * creates them at every node start and `cohortctl doctor` (store/doctor.h) checks that each
 * is there, so a new index is added in one place and checked everywhere.
 */
#ifndef COHORT_STORE_INDEXES_H
#define COHORT_STORE_INDEXES_H

#include <bson/bson.h>

/* Fills `indexes` (initialised by this call; the caller destroys it) with the queue's index
 * specs as createIndexes takes them: an array of {key, name[, unique][, sparse]}. */
void cohort_store_queue_indexes(bson_t *indexes);

#endif
