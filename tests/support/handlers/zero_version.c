/*
 * zero_version.c - a handler whose abi_version was left at 0 (an uninitialised table), which
 * the loader must refuse: no ABI version 0 ever existed.
 */
#include <cohort/handler.h>

#include "test_handler.h"

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = 0,
    .name = "zero_version",
    .process_task = test_handler_succeed,
};
