#!/usr/bin/env bash
# The query plan of each claim and count Cohort's store sends (tests/bench/explain.c; see
# docs/BENCHMARKS.md, "Query plans"): against a real deployment, every row must say "ok".
#
#   MONGODB_URI=mongodb://HOST/?replicaSet=RS bash tests/bench/explain.sh [--tasks N] [--keep]
#
#   --tasks N   tasks in the scratch queue it fills (default 10000)
#   --keep      keep the scratch database (cohort_explain_<time>) instead of dropping it
#
# It works in a scratch database of its own, never in a service's: it creates the queue's
# indexes as a node does, fills it, runs the store's calls and explains the commands they
# sent. Without MONGODB_URI it starts the local mongo-java-server, which has no `explain`:
# the rows then show the exact commands but no plans, and the exit status is 3. Exit status
# 1: some plan scans the collection, sorts in memory or misses its index ("CHECK" rows).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
BENCH_NAME=explain
# shellcheck source=tests/bench/lib.sh
source "$ROOT/tests/bench/lib.sh"

ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --tasks) [ $# -ge 2 ] || usage; number "$1" "$2"; ARGS+=(--tasks "$2"); shift 2 ;;
        --keep) ARGS+=(--keep); shift ;;
        -h | --help) usage 0 ;;
        *) usage ;;
    esac
done

COHORT_TARGETS="${COHORT_TARGETS:-bench_explain}" bash "$ROOT/deploy/setup.sh" "$BUILD"
EXPLAIN="$BUILD/tests/bench/explain"
[ -x "$EXPLAIN" ] || die "$EXPLAIN was not built (COHORT_TESTS=OFF?)"
trap 'stop_nodes; database_stop' EXIT
database_start
"$EXPLAIN" "${ARGS[@]}"
