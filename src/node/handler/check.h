/*
 * check.h - the handler half of `cohortd --check-config`: each service's handler loaded and
 * its options judged by its init(), without a database, every problem reported once at its
 * own line (check.c says how unknown keys are told from handler options).
 */
#ifndef COHORT_CHECK_H
#define COHORT_CHECK_H

#include "core/config.h"

/* Checks the handler of every service of `config` that has a readable handler file (a
 * config from cohort_config_check() may have problems of its own: those are reported
 * already). Each problem is appended to `errors` as "FILE line N: ...". */
void cohort_check_handlers(const cohort_config_t *config, cohort_config_errors_t *errors);

#endif
