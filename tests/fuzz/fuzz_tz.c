/*
 * fuzz_tz.c - libFuzzer target for the TZif reader (core/tz.c), the largest binary parser
 * Cohort writes by hand: every input is a zone file's bytes handed to cohort_tz_parse().
 *
 * Whatever the bytes, the reader returns a zone or an error with a message (never neither),
 * and a zone it accepted answers offsets and wall-time lookups for any instant, including the
 * far past and future where its POSIX footer rule takes over, with offsets under 26 hours
 * (RFC 8536's bound for a TZif offset, which the reader enforces; POSIX rules stay under 25). The
 * sanitizers catch the rest (reads past the input, overflows, leaks). Seeds: real zone files
 * (tests/fuzz/corpus/tz/, from tzdata: with leap seconds, two versions, footers) and doctored
 * ones. Built as the other targets (tests/fuzz/CMakeLists.txt).
 */
#include <stdint.h>
#include <stdlib.h>

#include "core/tz.h"

/* The reader's bound on |UTC offset| (core/tz.c OFFSET_LIMIT, RFC 8536: under 26 hours). A
 * check of "within a day" failed in the fresh-clone run of 8ec797e on a version-1 file whose
 * type gave an offset between 24 and 26 hours: within the RFC, no real zone, and harmless to
 * the lookups below. */
#define OFFSET_BOUND (26 * 3600)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static const int64_t instants[] = {
    INT64_C(-4102444800), /* 1840 */
    INT64_C(0),
    INT64_C(1711846800), /* 2024-03-31, a European spring-forward day */
    INT64_C(1730595600), /* 2024-11-03, an American fall-back day */
    INT64_C(4102444800), /* 2100 */
    INT64_C(253402300799), /* 9999-12-31 */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bson_error_t error = {0};
    cohort_tz_t *tz = cohort_tz_parse("Fuzz/Zone", data, size, &error);
    if (!tz) {
        if (!error.message[0])
            abort(); /* refused without saying why */
        return 0;
    }
    for (size_t i = 0; i < sizeof instants / sizeof instants[0]; i++) {
        int32_t offset = cohort_tz_offset(tz, instants[i]);
        if (offset <= -OFFSET_BOUND || offset >= OFFSET_BOUND)
            abort(); /* an offset no zone has: the parser let a bad value through */
        int64_t first = 0;
        int n = cohort_tz_from_wall(tz, instants[i] + offset, &first);
        if (n < 0 || n > 2)
            abort();
    }
    cohort_tz_destroy(tz);
    return 0;
}
