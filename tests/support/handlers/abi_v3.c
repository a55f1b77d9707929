/*
 * abi_v3.c - a handler built for handler ABI 3 (the release before the atomic generic-data
 * calls): a newer cohortd must load it with everything ABI 3 defined, its kinds included.
 */
#include <cohort/handler.h>

#include "test_handler.h"

static const char *const kinds[] = {"mail", NULL};

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = 3,
    .name = "abi_v3",
    .process_task = test_handler_succeed,
    .kinds = kinds,
};
