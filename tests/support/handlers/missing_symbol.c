/*
 * missing_symbol.c - a shared object that looks like a handler but does not export the
 * `cohort_handler` symbol (its table has another name), for the loader's error tests.
 */
#include <cohort/handler.h>

#include "test_handler.h"

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler_misspelt = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "missing_symbol",
    .process_task = test_handler_succeed,
};
