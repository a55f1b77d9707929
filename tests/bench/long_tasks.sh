#!/usr/bin/env bash
# Long tasks are not hoarded (issue 13, item 1): with claim_batch = auto (the default), 3 nodes
# of 2 workers first run SHORT no-op tasks, which teach them to claim in batches, then 30
# tasks of 1 s each. Six workers need 5 s for them at best; a node that prefetched tasks it
# cannot start would make the others idle and the whole take longer (target: within 6 s).
#
#   bash tests/bench/long_tasks.sh [--repeat R] [--short N] [--long N] [--long-ms MS]
#                                  [--wake-await-ms MS]
#
#   --repeat R    rounds (default 5), each on a fresh database and fresh nodes
#   --short N     short tasks run first (default 600)
#   --long N      long tasks (default 30)
#   --long-ms MS  how long each long task sleeps (default 1000)
#   --wake-await-ms MS  the nodes' wake_await_ms (default: the product's, 30 s). The local
#                 server holds a change stream's empty getMore as a replica set does and
#                 answers it as soon as a task arrives; started with --no-hold-getmore (or
#                 LOCALDB_HOLD_GETMORE=0) it answers at once, and a node then asks once per
#                 min(tick, wake_await_ms)
#
# The handler is the tests' sleeper (build/tests/handlers/test_handler_sleeper.so: each task
# sleeps its data's sleep_ms), the nodes run the product's defaults otherwise (tick 1 s). The
# long tasks are enqueued with cohortctl once all short ones succeeded; the time is from just
# before that enqueue to the last finished_at (the probe), and the tasks each node ran are
# counted from claimed_by. Prints a markdown table; node logs in BUILD/bench/long-<timestamp>/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
BENCH_NAME=long_tasks
# shellcheck source=tests/bench/lib.sh
source "$ROOT/tests/bench/lib.sh"

REPEAT=5
SHORT=600
LONG=30
LONG_MS=1000
WAKE_AWAIT_MS=
while [ $# -gt 0 ]; do
    case "$1" in
        --repeat) [ $# -ge 2 ] || usage; number "$1" "$2"; REPEAT="$2"; shift 2 ;;
        --short) [ $# -ge 2 ] || usage; number "$1" "$2"; SHORT="$2"; shift 2 ;;
        --long) [ $# -ge 2 ] || usage; number "$1" "$2"; LONG="$2"; shift 2 ;;
        --long-ms) [ $# -ge 2 ] || usage; number "$1" "$2"; LONG_MS="$2"; shift 2 ;;
        --wake-await-ms) [ $# -ge 2 ] || usage; number "$1" "$2"; WAKE_AWAIT_MS="$2"; shift 2 ;;
        -h | --help) usage 0 ;;
        *) usage ;;
    esac
done

bench_build
SLEEPER="$BUILD/tests/handlers/test_handler_sleeper.so"
[ -f "$SLEEPER" ] || die "no $SLEEPER: build with the tests (deploy/setup.sh builds them)"
OUT="$BUILD/bench/long-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
trap 'stop_nodes; database_stop' EXIT
database_start

SECONDS_LIST=()
ROWS=()
for ((round = 1; round <= REPEAT; round++)); do
    db="bench_long_$$_$round"
    dir="$OUT/round$round"
    mkdir -p "$dir"
    for i in 1 2 3; do
        printf '[cluster]\ndatabase = %s\nnode_id = long-%d\nlog_level = info\n' "$db" "$i" \
            >"$dir/node$i.ini"
        [ -z "$WAKE_AWAIT_MS" ] || printf 'wake_await_ms = %s\n' "$WAKE_AWAIT_MS" >>"$dir/node$i.ini"
        printf '\n' >>"$dir/node$i.ini"
        printf '[service:sleep]\nhandler = %s\nworkers = 2\n' "$SLEEPER" >>"$dir/node$i.ini"
    done
    "$COHORTCTL" -c "$dir/node1.ini" enqueue sleep --create --count "$SHORT" \
        --data '{"sleep_ms": 0}' >/dev/null || die "cannot enqueue the short tasks"
    for i in 1 2 3; do
        "$COHORTD" -c "$dir/node$i.ini" 2>"$dir/node$i.log" &
        NODE_PIDS+=($!)
    done
    "$PROBE" wait --database "$db" --service sleep --tasks "$SHORT" --since-ms "$(date +%s%3N)" \
        >/dev/null || die "the short tasks did not all run (round $round); logs in $dir"
    since="$(date +%s%3N)"
    "$COHORTCTL" -c "$dir/node1.ini" enqueue sleep --count "$LONG" \
        --data "{\"sleep_ms\": $LONG_MS}" >/dev/null || die "cannot enqueue the long tasks"
    line="$("$PROBE" wait --database "$db" --service sleep --tasks "$((SHORT + LONG))" \
        --since-ms "$since" --timeout-s 120)" || die "the long tasks did not all run; see $dir"
    per_node="$("$PROBE" claimed-by --database "$db" --service sleep \
        --filter "{\"data.sleep_ms\": $LONG_MS}")"
    stop_nodes
    "$PROBE" drop --database "$db" >/dev/null || true
    s="$(value seconds "$line")"
    SECONDS_LIST+=("$s")
    log "round $round: $LONG tasks of $LONG_MS ms in $s s; per node: $per_node"
    ROWS+=("| $round | $s | $per_node |")
done

stats="$(awk -v list="${SECONDS_LIST[*]}" "$AWK_STATS"'
    BEGIN { printf "%.2f s (%.2f-%.2f)", median(list), extreme(list, 0), extreme(list, 1) }')"
{
    printf '\n%d tasks of %d ms on 3 nodes x 2 workers after %d short ones, wake_await_ms %s, commit %s, %s:\n\n' \
        "$LONG" "$LONG_MS" "$SHORT" "${WAKE_AWAIT_MS:-30000 (the default)}" "$COMMIT" "$BENCH_SERVER"
    printf '| round | seconds | long tasks per node |\n|---|---|---|\n'
    printf '%s\n' "${ROWS[@]}"
    printf '\nMedian and min-max over %d rounds: %s; six workers need at least %s s\n' \
        "$REPEAT" "$stats" "$(awk -v n="$LONG" -v ms="$LONG_MS" \
        'BEGIN { printf "%.1f", int((n + 5) / 6) * ms / 1000 }')"
} | tee "$OUT/summary.md"
