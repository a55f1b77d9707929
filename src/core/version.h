/*
 * version.h - what this build is, in the three numbers an operator upgrading a cluster needs:
 * its release (COHORT_VERSION, a semantic version set once in CMakeLists.txt), the database
 * schema version it writes, and the oldest schema version it can still serve. The handler
 * ABI's range is include/cohort/handler.h's (1..COHORT_HANDLER_ABI_VERSION).
 *
 * The schema version is recorded in the database (cohort_meta, store/meta.h; docs/SCHEMA.md):
 * a node refuses a database newer than COHORT_SCHEMA_VERSION and serves any version from
 * COHORT_SCHEMA_VERSION_OLDEST up. A release that changes the layout raises
 * COHORT_SCHEMA_VERSION and ships the migration to it (docs/OPERATING.md#upgrading).
 */
#ifndef COHORT_CORE_VERSION_H
#define COHORT_CORE_VERSION_H

#ifndef COHORT_VERSION
#define COHORT_VERSION "0.0.0" /* a build outside CMake */
#endif

/* Version 1: the layout of every release up to 0.2.0 (docs/SCHEMA.md), also what a database
 * without cohort_meta (written before schema versions existed) counts as. Version 2 (0.3.0):
 * every task carries `weight` (store/migrate.c). */
#define COHORT_SCHEMA_VERSION 2
#define COHORT_SCHEMA_VERSION_OLDEST 1

/* The feature levels (cohort_meta {_id: "features"}, store/meta.h): behaviour a node of an
 * older release would break stays off until `cohortctl upgrade finish` raises the cluster's
 * level, which it does only when every live node knows it. A node publishes the highest it
 * knows (COHORT_FEATURE_LEVEL) and follows the cluster's. Level N goes with schema version N.
 *   1: everything up to 0.2.0.
 *   2 (0.3.0): claims filter on weight as a plain range (every task carries one: migration 2). */
#define COHORT_FEATURE_LEVEL 2
#define COHORT_LEVEL_TASK_WEIGHT 2

#endif
