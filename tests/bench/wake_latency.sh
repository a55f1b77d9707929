#!/usr/bin/env bash
# Enqueue-to-start latency of an idle cluster, with `wake = change_stream` and `wake = poll`
# side by side (see docs/BENCHMARKS.md, "Wake-ups: enqueue-to-start latency").
#
#   bash tests/bench/wake_latency.sh [--tasks N] [--nodes N] [--tick-ms MS] [--await-ms MS]
#
#   --tasks N      single enqueues per mode (default 50)
#   --nodes N      nodes per cluster (default 3)
#   --tick-ms MS   the clusters' tick_ms (default 1000)
#   --await-ms MS  wake_await_ms of the change_stream cluster (default 100; see below)
#
# Builds into build/ (or COHORT_BUILD_DIR), starts its own local database (oplog on, so
# change streams work) and two idle clusters of N nodes at once, each in a database of its
# own: one with wake = change_stream, one with wake = poll; every node hosts one service
# (noop handler, 2 workers). Then, N times, it waits a random 0.2-1.5 s and enqueues one task
# with `cohortctl enqueue` into each cluster in turn, and finally reads every task's
# claimed_at - created_at. Prints a markdown table (median, p99, max) and keeps the raw
# latencies and node logs in BUILD/bench/wake-<UTC timestamp>/.
#
# The local server holds each empty getMore as a replica set does and answers as soon as the
# insert is written, so --await-ms only bounds how long a getMore is held (pass 30000, the
# product's default, to measure what users get). With LOCALDB_HOLD_GETMORE=0 it answers each
# getMore at once, and the watcher then asks again every --await-ms: the change_stream figure
# then depends on it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
TASKS=50
NODES=3
TICK_MS=1000
AWAIT_MS=100
MODES=(change_stream poll)

log() { printf 'wake_latency: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
usage() {
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
    exit "${1:-2}"
}
number() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
while [ $# -gt 0 ]; do
    case "$1" in
        --tasks) [ $# -ge 2 ] && number "$2" || usage; TASKS="$2"; shift 2 ;;
        --nodes) [ $# -ge 2 ] && number "$2" || usage; NODES="$2"; shift 2 ;;
        --tick-ms) [ $# -ge 2 ] && number "$2" || usage; TICK_MS="$2"; shift 2 ;;
        --await-ms) [ $# -ge 2 ] && number "$2" || usage; AWAIT_MS="$2"; shift 2 ;;
        -h | --help) usage 0 ;;
        *) usage ;;
    esac
done

COHORT_TARGETS="${COHORT_TARGETS:-cohortd cohortctl cohort_noop}" \
    bash "$ROOT/deploy/setup.sh" "$BUILD" >&2
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
[ -z "$(git -C "$ROOT" status --porcelain -- src include 2>/dev/null)" ] \
    || COMMIT="$COMMIT + uncommitted changes in src/ or include/"

OUT="$BUILD/bench/wake-$(date -u +%Y%m%dT%H%M%SZ)"
STATE="$BUILD/wake-localdb"
mkdir -p "$OUT" "$STATE"
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    bash "$ROOT/deploy/localdb/localdb.sh" stop "$STATE" >/dev/null 2>&1 || true
}
trap cleanup EXIT
bash "$ROOT/deploy/localdb/localdb.sh" stop "$STATE" >/dev/null 2>&1 || true
URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$STATE")"
log "local database at $URI; results in $OUT"

# config MODE NODE: writes the node's config file and prints its path.
config() {
    local file="$OUT/$1/n$2.ini"
    cat >"$file" <<INI
[cluster]
mongodb_uri = $URI
database = wake_bench_$1
tick_ms = $TICK_MS
takeover_ms = $((TICK_MS * 4))
node_id = $1-n$2
wake = $1
wake_await_ms = $AWAIT_MS
log_level = info

[service:noop]
handler = $BUILD/handlers/cohort_noop.so
workers = 2
INI
    printf '%s\n' "$file"
}

for mode in "${MODES[@]}"; do
    mkdir -p "$OUT/$mode"
    "$BUILD/cohortctl" -c "$(config "$mode" 1)" enqueue noop --create --count 1 >/dev/null
    for ((n = 1; n <= NODES; n++)); do
        "$BUILD/cohortd" -c "$(config "$mode" "$n")" >"$OUT/$mode/n$n.log" 2>&1 &
        PIDS+=($!)
    done
done
sleep $((TICK_MS * 5 / 1000 + 2)) # registered, elected, the first task run: idle now
log "$NODES nodes per mode idle; $TASKS enqueues per mode, 0.2-1.5 s apart"

for ((i = 1; i <= TASKS; i++)); do
    for mode in "${MODES[@]}"; do
        sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 0.2 + 1.3 * r / 32767 }')"
        "$BUILD/cohortctl" -c "$OUT/$mode/n1.ini" enqueue noop >>"$OUT/$mode/ids"
    done
done
sleep $((TICK_MS * 3 / 1000 + 1)) # the last ones run on the next tick at the latest

# latency MODE: claimed_at - created_at in ms of every enqueued task, one per line.
latency() {
    local id
    while read -r id; do
        "$BUILD/cohortctl" -c "$OUT/$1/n1.ini" task noop "$id"
    done <"$OUT/$1/ids" | python3 -c '
import json, sys
from datetime import datetime
def ms(v):
    v = v["$date"] if isinstance(v, dict) else v
    if isinstance(v, dict):
        return int(v["$numberLong"])
    if isinstance(v, (int, float)):
        return int(v)
    return int(datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() * 1000)
text = sys.stdin.read()
dec, at = json.JSONDecoder(), 0
while at < len(text):
    if text[at].isspace():
        at += 1
        continue
    doc, at = dec.raw_decode(text, at)
    if "claimed_at" in doc:
        print(ms(doc["claimed_at"]) - ms(doc["created_at"]))
    else:
        print("unclaimed")
'
}

printf '| wake | tasks | median ms | p99 ms | max ms | unclaimed |\n|---|---|---|---|---|---|\n'
for mode in "${MODES[@]}"; do
    latency "$mode" >"$OUT/$mode/latency_ms"
    python3 - "$mode" "$OUT/$mode/latency_ms" <<'PY'
import statistics, sys
lines = open(sys.argv[2]).read().split()
ms = sorted(int(x) for x in lines if x != "unclaimed")
p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))] if ms else 0
med = statistics.median(ms) if ms else 0
print(f"| `{sys.argv[1]}` | {len(ms)} | {med:.0f} | {p99} | {ms[-1] if ms else 0} | "
      f"{len(lines) - len(ms)} |")
PY
done
log "commit $COMMIT; $NODES nodes per mode, tick_ms $TICK_MS, wake_await_ms $AWAIT_MS; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
