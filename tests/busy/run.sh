#!/usr/bin/env bash
# Runs tests on a busy machine: one busy loop per core beside ctest, several times in a row.
#
#   bash tests/busy/run.sh [ROUNDS] [ctest arguments...]     default: 3 rounds of -L cluster
#
# A new user's machine is rarely quiet; the cluster tests wait on progress rather than on a
# wall-clock budget and do not bet on which node wins a race, and this is how that is shown
# (docs/OPERATING.md, "A busy machine"). Uses tests/run.sh for the set-up and the database,
# so it installs what is missing too. Exit status: non-zero if any round failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ROUNDS="${1:-3}"
[ $# -gt 0 ] && shift
[ $# -eq 0 ] && set -- -L cluster

hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
for _ in $(seq "$(nproc)"); do
    sh -c 'while :; do :; done' &
    hogs+=($!)
done
echo "busy: ${#hogs[@]} busy loops on $(nproc) cores; $ROUNDS rounds of ctest $*" >&2

failed=0
for round in $(seq "$ROUNDS"); do
    start=$(date +%s)
    if COHORT_SANITIZE=0 COHORT_FUZZ_SMOKE=0 bash "$ROOT/tests/run.sh" "$@"; then
        echo "busy: round $round passed in $(($(date +%s) - start)) s" >&2
    else
        echo "busy: round $round FAILED after $(($(date +%s) - start)) s" >&2
        failed=1
    fi
done
exit "$failed"
