/*
 * init_fails.c - a handler whose init() always refuses its configuration, so the tests can
 * check that the refusal reaches the operator with the handler's own message. With the
 * option `silent = yes` it refuses without setting a message.
 */
#include <string.h>

#include <cohort/handler.h>

#include "test_handler.h"

static bool init(cohort_ctx_t *ctx, const cohort_option_t *options, size_t n_options, void **state)
{
    (void)state;
    for (size_t i = 0; i < n_options; i++)
        if (strcmp(options[i].key, "silent") == 0)
            return false;
    cohort_ctx_set_error(ctx, "init_fails: refusing service '%s' on purpose (%zu option(s))",
                         cohort_ctx_service(ctx), n_options);
    return false;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION,
    .name = "init_fails",
    .init = init,
    .process_task = test_handler_succeed,
};
