#!/usr/bin/env bash
# Where a Cohort node's CPU goes while it runs no-op tasks: one run of K nodes on N tasks
# (tests/bench/run.sh's Cohort run) with `perf record` attached to every node, then the
# shares by library and the top functions (see docs/BENCHMARKS.md, "Unbatched claims").
#
#   bash tests/bench/profile.sh [--tasks N] [--nodes K] [--workers W] [--claim-batch B]
#                               [--primary-task-count P] [--top T]
#
#   --tasks N               tasks (default 4000)
#   --nodes K               nodes (default 3)
#   --workers W             workers per node (default 2)
#   --claim-batch B         claim_batch (default 1; 0: not written, the product default)
#   --primary-task-count P  primary_task_count (default: not written, the product default)
#   --top T                 functions listed (default 25)
#
# Needs perf (linux-tools) and permission to profile the nodes (perf_event_paranoid <= 2 for
# one's own processes). Prints the run's rate and commands per task, the CPU of the nodes and
# of the server per 1,000 tasks, and perf's tables; keeps perf.data in
# BUILD/bench/profile-<timestamp>/. perf's own sampling slows the nodes a little.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
BENCH_NAME=profile
# shellcheck source=tests/bench/lib.sh
source "$ROOT/tests/bench/lib.sh"

TASKS=4000
NODES=3
WORKERS=2
CLAIM_BATCH=1
PRIMARY_TASK_COUNT=""
TOP=25
INTERVAL_MS=100
TICK_MS=1000
TAKEOVER_MS=10000
while [ $# -gt 0 ]; do
    case "$1" in
        --tasks) [ $# -ge 2 ] || usage; number "$1" "$2"; TASKS="$2"; shift 2 ;;
        --nodes) [ $# -ge 2 ] || usage; number "$1" "$2"; NODES="$2"; shift 2 ;;
        --workers) [ $# -ge 2 ] || usage; number "$1" "$2"; WORKERS="$2"; shift 2 ;;
        --claim-batch) [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || usage; CLAIM_BATCH="$2"; shift 2 ;;
        --primary-task-count) [ $# -ge 2 ] || usage; number "$1" "$2"; PRIMARY_TASK_COUNT="$2"; shift 2 ;;
        --top) [ $# -ge 2 ] || usage; number "$1" "$2"; TOP="$2"; shift 2 ;;
        -h | --help) usage 0 ;;
        *) usage ;;
    esac
done
[ "$CLAIM_BATCH" != 0 ] || CLAIM_BATCH=""
command -v perf >/dev/null || die "perf is not installed (apt-get install linux-perf)"

bench_build
OUT="$BUILD/bench/profile-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
trap 'stop_nodes; database_stop' EXIT
database_start

db="profile_$$"
write_config "$OUT/enqueue.ini" "$db" profile-enqueue
"$COHORTCTL" -c "$OUT/enqueue.ini" enqueue noop --count "$TASKS" >/dev/null
server="$(cpu_ms "$SERVER_PID")"
since="$(date +%s%3N)"
start_nodes "$OUT" "$db" "$NODES" "$PRIMARY_TASK_COUNT" "$CLAIM_BATCH"
perf record -q -F 999 -g -o "$OUT/perf.data" -p "$(IFS=,; echo "${NODE_PIDS[*]}")" \
    2>"$OUT/perf.log" &
PERF_PID=$!
line="$("$PROBE" wait --database "$db" --tasks "$TASKS" --since-ms "$since" \
    --interval-ms "$INTERVAL_MS" --timeout-s 600)" || die "the run failed; logs in $OUT"
kill -INT "$PERF_PID" 2>/dev/null || true
wait "$PERF_PID" 2>/dev/null || true
server=$(($(cpu_ms "$SERVER_PID") - server))
client=0
for pid in "${NODE_PIDS[@]}"; do
    client=$((client + $(cpu_ms "$pid")))
done
stop_nodes
commands=0
for ((i = 1; i <= NODES; i++)); do
    commands=$((commands + $(value db_commands "$(stopped_line "$OUT" "$i")")))
done
"$PROBE" drop --database "$db" || true

printf 'Run %s: `bash tests/bench/profile.sh --tasks %d --nodes %d --workers %d --claim-batch %s%s`, Cohort at %s.\n\n' \
    "$(date -u +%Y-%m-%dT%H:%MZ)" "$TASKS" "$NODES" "$WORKERS" "${CLAIM_BATCH:-0}" \
    "${PRIMARY_TASK_COUNT:+ --primary-task-count $PRIMARY_TASK_COUNT}" "$COMMIT"
awk -v r="$(value tasks_per_s "$line")" -v c="$commands" -v n="$TASKS" -v cl="$client" \
    -v sv="$server" 'BEGIN { printf "%.0f tasks/s, %.3f commands/task, nodes %.0f ms and server %.0f ms CPU per 1,000 tasks\n\n", r, c / n, cl * 1000 / n, sv * 1000 / n }'
echo '```'
perf report -i "$OUT/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | head -n 12
echo
perf report -i "$OUT/perf.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | head -n "$TOP"
echo '```'
