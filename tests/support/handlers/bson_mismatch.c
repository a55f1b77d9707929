/*
 * bson_mismatch.c - a handler that says it was built against another major version of
 * libbson, which the loader must refuse in one line naming both versions.
 */
#define COHORT_HANDLER_BSON_MAJOR 99
#include <cohort/handler.h>

#include "test_handler.h"

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "bson_mismatch",
    .process_task = test_handler_succeed,
};
