/*
 * errors.h - Cohort's one error type (core/error.h) as the node layer spells it.
 *
 * The handler ABI (include/cohort/handler.h, which must not change) already calls its own
 * error struct cohort_error_t, and every file of this layer sees that header. So the node
 * layer writes the one error type by its real name, bson_error_t (core/error.h's
 * cohort_error_t is a typedef of it: the same domain, code and message), and takes the
 * domains, codes and cohort_error_set()/_prefix()/_nomem() from core/error.h with its
 * typedef name moved aside. Once core/error.h names its typedef differently, this header
 * reduces to the include.
 */
#ifndef COHORT_NODE_ERRORS_H
#define COHORT_NODE_ERRORS_H

#include <bson/bson.h>

#define cohort_error_t cohort_core_error_t
#include "core/error.h"
#undef cohort_error_t

#endif
