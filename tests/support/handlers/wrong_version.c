/*
 * wrong_version.c - a handler built for a handler ABI newer than this cohortd knows, which
 * the loader must refuse with a message naming both versions.
 */
#include <cohort/handler.h>

#include "test_handler.h"

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION + 1,
    .name = "wrong_version",
    .process_task = test_handler_succeed,
};
