/*
 * fuzz_cron.c - libFuzzer target for cron expressions (core/cron.c): every input is the text
 * of a `schedule.ID = CRON ; ...` expression handed to cohort_cron_parse().
 *
 * Whatever the text, the parser accepts it or says why. An expression it accepted must fire:
 * in UTC its next fire time after an instant exists, lies after it, is a whole second, and
 * cohort_cron_prev() finds that same time looking back from it (the scheduler's catch-up
 * relies on the two agreeing). The sanitizers catch the rest. Built as the other targets
 * (tests/fuzz/CMakeLists.txt).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cron.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256)
        return 0; /* a schedule line is short; longer inputs only slow the search */
    char text[257];
    memcpy(text, data, size);
    text[size] = '\0';

    cohort_cron_t cron;
    bson_error_t error = {0};
    if (!cohort_cron_parse(text, &cron, &error)) {
        if (!error.message[0])
            abort(); /* refused without saying why */
        return 0;
    }
    bson_error_t tz_error;
    cohort_tz_t *utc = cohort_tz_load("UTC", &tz_error);
    if (!utc)
        abort();
    const int64_t after = INT64_C(1795700000123); /* 2026-11-26, not on a whole second */
    int64_t next = 0;
    if (!cohort_cron_next(&cron, utc, after, &next))
        abort(); /* accepted, but never fires in UTC */
    if (next <= after || next % 1000 != 0)
        abort();
    int64_t prev = 0;
    if (!cohort_cron_prev(&cron, utc, after, next, &prev) || prev != next)
        abort(); /* looking back from a fire time does not find it */
    cohort_tz_destroy(utc);
    return 0;
}
