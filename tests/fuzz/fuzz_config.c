/*
 * fuzz_config.c - libFuzzer target for the configuration parser: every input is a config
 * file's text handed to cohort_config_load_string(), exactly as cohortd reads a file.
 *
 * Whatever the bytes, the loader must either return a config or a non-empty list of
 * problems (never both, never neither), and each problem must be a non-empty message; the
 * sanitizers catch everything else (overflows, leaks, undefined behaviour). Relative handler
 * paths resolve against the build's handlers directory, so seeds naming cohort_noop.so get
 * past the readability check and reach the cross-key validation.
 *
 * Built two ways (tests/fuzz/CMakeLists.txt): with -fsanitize=fuzzer under COHORT_FUZZ, or
 * with replay.c as main() so every build replays the corpus and the regressions as a test.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    unsetenv("MONGODB_URI"); /* it would override mongodb_uri: keep runs reproducible */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* a NUL inside the input ends the text, as reading a file would not */

    cohort_config_errors_t errors = {0};
    cohort_config_t *config =
        cohort_config_load_string(text, "fuzz.conf", COHORT_FUZZ_HANDLER_DIR, &errors);
    if (config && errors.count > 0)
        abort(); /* a config despite problems */
    if (!config && errors.count == 0)
        abort(); /* refused without saying why */
    for (size_t i = 0; i < errors.count; i++)
        if (!errors.messages[i] || !errors.messages[i][0])
            abort();
    if (config) {
        for (size_t i = 0; i < config->n_services; i++)
            if (!cohort_config_find_service(config, config->services[i].name))
                abort();
        cohort_config_destroy(config);
    }
    cohort_config_errors_clear(&errors);
    free(text);
    return 0;
}
