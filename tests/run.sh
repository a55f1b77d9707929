#!/usr/bin/env bash
# Runs Cohort's whole test suite: unit, integration and cluster tests.
#
#   bash tests/run.sh [ctest arguments...]     e.g. bash tests/run.sh -L unit
#
# Installs what is missing, builds into build/, starts the local MongoDB-compatible server
# on a free port (unless MONGODB_URI points at a MongoDB already), runs ctest against it,
# then (with no ctest arguments, or COHORT_SANITIZE=1) builds again with AddressSanitizer
# and UndefinedBehaviorSanitizer into build-asan/ and runs the unit and integration tests
# there too. COHORT_SANITIZE=0 skips that pass. A full run then fuzzes each libFuzzer target
# for 30 s (COHORT_FUZZ_SMOKE=0 skips it). The ctest pass includes the chaos runs (label
# chaos) and a valgrind scenario (label valgrind). Exit status: non-zero if any test failed.
#
#   bash tests/run.sh --coverage [ctest arguments...]
#
# builds with gcov instrumentation into build-coverage/ (COHORT_BUILD_DIR overrides), runs
# ctest there (by default every label but long, chaos, valgrind and setup: -LE, overridden by
# any ctest arguments), and reports the line and branch coverage of src/ with gcovr into
# build-coverage/coverage/ (summary.txt, summary.json, index.html). No sanitizer or fuzz pass.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COVERAGE=0
if [ "${1:-}" = --coverage ]; then
    COVERAGE=1
    shift
fi
# (an if, not `[ ... ] && echo` inside the substitution: its status 1 would end the script
# under set -e)
SUFFIX=""
if [ "$COVERAGE" = 1 ]; then SUFFIX=-coverage; fi
BUILD="${COHORT_BUILD_DIR:-$ROOT/build$SUFFIX}"

if [ "$COVERAGE" = 1 ]; then
    # -O0 (Debug) so that lines and branches map to the source; atomic counters, since the
    # node's threads run the same code at once.
    FLAGS="--coverage -fprofile-update=atomic"
    COHORT_TEST_TOOLS=1 bash "$ROOT/deploy/setup.sh" "$BUILD" -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$FLAGS" \
        -DCMAKE_SHARED_LINKER_FLAGS="$FLAGS" -DCMAKE_MODULE_LINKER_FLAGS="$FLAGS"
    find "$BUILD" -name '*.gcda' -delete # counts of this run only
else
    COHORT_TEST_TOOLS=1 bash "$ROOT/deploy/setup.sh" "$BUILD"
fi

if [ -z "${MONGODB_URI:-}" ]; then
    STATE="$BUILD/test-localdb"
    mkdir -p "$STATE"
    bash "$ROOT/deploy/localdb/localdb.sh" stop "$STATE" >/dev/null 2>&1 || true
    MONGODB_URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$STATE")"
    export MONGODB_URI
    trap 'bash "$ROOT/deploy/localdb/localdb.sh" stop "$STATE" >/dev/null 2>&1 || true' EXIT
    echo "tests: local database at $MONGODB_URI" >&2
else
    echo "tests: using MONGODB_URI from the environment" >&2
fi

if [ "$COVERAGE" = 1 ]; then
    # A node killed with SIGKILL writes no counts; those its clean exits write are enough.
    [ $# -gt 0 ] || set -- -LE 'long|chaos|valgrind|setup'
    status=0
    (cd "$BUILD" && ctest --output-on-failure --timeout 900 "$@") || status=$?
    REPORT="$BUILD/coverage"
    rm -rf "$REPORT" && mkdir -p "$REPORT"
    echo "tests: coverage of src/ (gcovr; details in $REPORT/index.html)" >&2
    gcovr --root "$ROOT" --filter "$ROOT/src/" --object-directory "$BUILD" \
        --txt "$REPORT/lines.txt" --json-summary-pretty --json-summary "$REPORT/summary.json" \
        --html-details "$REPORT/index.html" "$BUILD" >&2
    python3 "$ROOT/tests/coverage/summary.py" "$REPORT/summary.json" | tee "$REPORT/summary.txt"
    exit "$status"
fi

SANITIZE="${COHORT_SANITIZE:-$([ $# -eq 0 ] && echo 1 || echo 0)}"

status=0
(cd "$BUILD" && ctest --output-on-failure --timeout 600 "$@") || status=$?

if [ "$SANITIZE" = 1 ]; then
    echo "tests: AddressSanitizer + UndefinedBehaviorSanitizer pass (unit and integration)" >&2
    ASAN_BUILD="${BUILD}-asan"
    bash "$ROOT/deploy/setup.sh" "$ASAN_BUILD" -DCOHORT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
    # Criterion reports a test passed before its process exits, and LeakSanitizer reports at
    # exit: a leak would not fail the test. So every sanitizer report goes to a file in
    # SAN_LOGS (log_path), and any report there fails this pass.
    SAN_LOGS="$ASAN_BUILD/sanitizer-reports"
    rm -rf "$SAN_LOGS" && mkdir -p "$SAN_LOGS"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0}:log_path=$SAN_LOGS/asan"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}:log_path=$SAN_LOGS/ubsan"
    (cd "$ASAN_BUILD" && ctest --output-on-failure --timeout 600 -L 'unit|integration') || status=$?
    if [ -n "$(ls -A "$SAN_LOGS")" ]; then
        echo "tests: sanitizer reports (leaks, memory errors, undefined behaviour):" >&2
        for f in "$SAN_LOGS"/*; do echo "---- $f" >&2; cat "$f" >&2; done
        status=1
    fi
fi

# Fuzz smoke run: each libFuzzer target for COHORT_FUZZ_SECONDS (30) s from its committed
# corpus (a full run, or COHORT_FUZZ_SMOKE=1).
if [ "${COHORT_FUZZ_SMOKE:-$([ $# -eq 0 ] && echo 1 || echo 0)}" = 1 ]; then
    echo "tests: fuzz smoke run" >&2
    COHORT_FUZZ_BUILD_DIR="${BUILD}-fuzz" bash "$ROOT/tests/fuzz/run.sh" "${COHORT_FUZZ_SECONDS:-30}" || status=$?
fi
exit "$status"
