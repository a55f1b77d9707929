/*
 * no_init.c - a minimal valid handler with no init(): it takes no options, so a service that
 * gives it some must be refused with the offending key and its line.
 */
#include <cohort/handler.h>

#include "test_handler.h"

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "no_init",
    .process_task = test_handler_succeed,
};
