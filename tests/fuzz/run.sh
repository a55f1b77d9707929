#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang into build-fuzz/ and fuzzes
# each for a while, starting from its committed corpus and its past crashes.
#
#   bash tests/fuzz/run.sh [seconds-per-target] [target...]     default: 30 s, every target
#
# Targets: config (the INI parser), task (task data through the noop, hello and leaderboard
# handlers), api (the API's route, query and body parsers), http (whole raw requests through
# libevent's evhttp, the node's listener and the API's router), tz (TZif zone files) and cron
# (cron expressions and their fire times). COHORT_FUZZ_BUILD_DIR overrides the build directory (default build-fuzz/).
# New inputs the fuzzer finds go to build-fuzz/fuzz-corpus/<target>/ (not into the tree: keep
# the committed corpus small and meaningful). On a crash the input is saved under
# build-fuzz/fuzz-artifacts/<target>/, the script prints how to replay it and exits 1: copy
# it into tests/fuzz/regressions/<target>/ so every build replays it from then on.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_PER_TARGET="${1:-30}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(config task api http tz cron)

if ! command -v clang >/dev/null; then
    echo "fuzz: clang is not installed (COHORT_TEST_TOOLS=1 bash deploy/setup.sh installs it)" >&2
    exit 1
fi

CC=clang cmake -S "$ROOT" -B "$BUILD" -DCOHORT_FUZZ=ON -DCOHORT_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fuzzers=()
for t in "${TARGETS[@]}"; do fuzzers+=("fuzz_$t"); done
cmake --build "$BUILD" -j"$(nproc)" --target "${fuzzers[@]}" >/dev/null

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
for t in "${TARGETS[@]}"; do
    seeds="$ROOT/tests/fuzz/corpus/$t"
    regressions="$ROOT/tests/fuzz/regressions/$t"
    work="$BUILD/fuzz-corpus/$t"
    artifacts="$BUILD/fuzz-artifacts/$t"
    mkdir -p "$work" "$artifacts"
    dirs=("$work" "$seeds")
    [ -d "$regressions" ] && dirs+=("$regressions")
    # The task target logs a line per hello task: silence the target's stderr (libFuzzer
    # keeps its own messages and the sanitizers' reports on a copy of it).
    quiet=()
    [ "$t" = task ] && quiet=(-close_fd_mask=2)
    echo "fuzz: $t for ${SECONDS_PER_TARGET}s (corpus ${dirs[*]})" >&2
    log="$BUILD/fuzz-$t.log"
    if "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
        -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 "${quiet[@]}" \
        -artifact_prefix="$artifacts/" "${dirs[@]}" >"$log" 2>&1; then
        grep -E '^(stat::number_of_executed_units|stat::new_units_added|Done)' "$log" |
            sed "s/^/fuzz: $t: /" >&2 || true
    else
        status=1
        tail -n 60 "$log" >&2
        echo "fuzz: $t FAILED; crashing inputs:" >&2
        ls -1 "$artifacts" >&2 || true
        echo "fuzz: replay one with $BUILD/tests/fuzz/fuzz_$t FILE, then copy it into" \
             "tests/fuzz/regressions/$t/ so every build replays it" >&2
    fi
done
exit "$status"
