/*
 * bad_kinds.c - a handler whose `kinds` list holds a name no task can have (a space): the
 * loader must refuse it, naming the kind, rather than serve fewer tasks than it declares.
 */
#include <cohort/handler.h>

#include "test_handler.h"

static const char *const kinds[] = {"mail", "bulk mail", NULL};

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "bad_kinds",
    .process_task = test_handler_succeed,
    .kinds = kinds,
};
