#!/usr/bin/env bash
# External workers' throughput beside the in-process handler, on the same server in one run
# (docs/BENCHMARKS.md, "External workers"): no-op tasks per second through 3 nodes, run
#   in-process   by the nodes' own workers (the noop handler, 2 workers a node, the product's
#                defaults otherwise), and
#   ext-max1     by 4 Python external workers (handlers/external-python/cohort_worker.py)
#   ext-max16    claiming 1 or 16 tasks per call over the HTTP API, from a service of
#                `handler = external` on the same 3 nodes.
#
#   bash tests/bench/external.sh [--tasks N] [--repeat R] [--workers W]
#
#   --tasks N    tasks per run (default 2000; the local server scans the queue for every
#                claim, so keep N small)
#   --repeat R   rounds (default 3); each round runs the three configurations, in an order
#                rotated from round to round
#   --workers W  external workers (default 4)
#
# A run enqueues N tasks before anything starts (not timed), starts the nodes (and the
# workers), and tests/bench/probe waits until all N have succeeded: tasks/s counts from the
# start to the last finished_at. One warm-up round (not recorded) goes first: the local server
# is a JVM. Prints a markdown table of medians and min-max; keeps every run's logs in
# BUILD/bench/external-<timestamp>/. Builds with deploy/setup.sh; starts the local database
# unless MONGODB_URI is set.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
TASKS=2000
REPEAT=3
EXT_WORKERS=4

log() { printf 'external: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
    --tasks) TASKS="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --workers) EXT_WORKERS="$2"; shift 2 ;;
    *) die "unknown argument '$1' (see the top of $0)" ;;
    esac
done

bash "$ROOT/deploy/setup.sh" "$BUILD"
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
COHORTD="$BUILD/cohortd"
COHORTCTL="$BUILD/cohortctl"
PROBE="$BUILD/tests/bench/probe"
WORKER="$ROOT/handlers/external-python/cohort_worker.py"
[ -x "$PROBE" ] || die "$PROBE is missing: build the tests (deploy/setup.sh builds them)"
export MONGOC_DISABLE_SHM=1

OUT="$BUILD/bench/external-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
: >"$RESULTS"

PIDS=()
stop_all() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    PIDS=()
}
LOCALDB_STATE=""
cleanup() {
    stop_all
    [ -z "$LOCALDB_STATE" ] || bash "$ROOT/deploy/localdb/localdb.sh" stop "$LOCALDB_STATE" \
        >/dev/null 2>&1 || true
}
trap cleanup EXIT
if [ -z "${MONGODB_URI:-}" ]; then
    LOCALDB_STATE="$BUILD/bench-localdb"
    mkdir -p "$LOCALDB_STATE"
    bash "$ROOT/deploy/localdb/localdb.sh" stop "$LOCALDB_STATE" >/dev/null 2>&1 || true
    MONGODB_URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$LOCALDB_STATE")"
fi
export MONGODB_URI

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# write_config FILE DB NODE PORT SERVICE HANDLER
write_config() {
    cat >"$1" <<EOF
; Written by tests/bench/external.sh for one run.
[cluster]
database          = $2
tick_ms           = 1000
takeover_ms       = 10000
shutdown_grace_ms = 5000
node_id           = $3
http_listen       = 127.0.0.1:$4

[service:$5]
handler           = $6
EOF
}

# run ROUND CONFIG: one run; appends "round config tasks_per_s" to RESULTS
run() {
    local round="$1" config="$2" i
    local db="bench_ext_$$_${round}_${config//-/_}" dir="$OUT/$round-$config"
    local service=ext handler=external max=0
    case "$config" in
    in-process) service=noop handler="$BUILD/handlers/cohort_noop.so" ;;
    ext-max1) max=1 ;;
    ext-max16) max=16 ;;
    esac
    mkdir -p "$dir"
    local ports=() urls=()
    for i in 1 2 3; do
        ports+=("$(free_port)")
        urls+=(--url "http://127.0.0.1:${ports[$((i - 1))]}")
        write_config "$dir/node$i.ini" "$db" "bench-$i" "${ports[$((i - 1))]}" "$service" \
            "$handler"
    done
    "$COHORTCTL" -c "$dir/node1.ini" enqueue "$service" --count "$TASKS" --create >/dev/null \
        || die "enqueue failed ($round $config)"
    if [ "$max" -gt 0 ]; then
        "$COHORTCTL" -c "$dir/node1.ini" tokens create bench --scopes work >"$dir/token" \
            2>/dev/null || die "tokens create failed"
    fi
    local since line
    since="$(date +%s%3N)"
    for i in 1 2 3; do
        "$COHORTD" -c "$dir/node$i.ini" 2>"$dir/node$i.log" &
        PIDS+=($!)
    done
    if [ "$max" -gt 0 ]; then
        for ((i = 1; i <= EXT_WORKERS; i++)); do
            # Each worker starts at another node, so the claims spread over the three.
            local rot=("${urls[@]:$((2 * (i % 3)))}" "${urls[@]:0:$((2 * (i % 3)))}")
            python3 "$WORKER" "${rot[@]}" --service ext --worker "w$i" --token-file "$dir/token" \
                --max "$max" --wait-ms 1000 2>"$dir/worker$i.log" &
            PIDS+=($!)
        done
    fi
    line="$("$PROBE" wait --database "$db" --service "$service" --tasks "$TASKS" \
        --since-ms "$since" --timeout-s 600)" || { stop_all; die "run failed: logs in $dir"; }
    stop_all
    "$PROBE" drop --database "$db" || true
    local rate
    rate="$(sed -n 's/.* tasks_per_s=\([^ ]*\).*/\1/p' <<<" $line")"
    log "round $round $config: $rate tasks/s"
    [ "$round" = warmup ] || printf '%s\t%s\t%s\n' "$round" "$config" "$rate" >>"$RESULTS"
}

CONFIGS=(in-process ext-max1 ext-max16)
log "commit $COMMIT; $TASKS tasks; $REPEAT rounds; $EXT_WORKERS external workers; logs in $OUT"
for c in "${CONFIGS[@]}"; do run warmup "$c"; done
for ((r = 1; r <= REPEAT; r++)); do
    for ((k = 0; k < ${#CONFIGS[@]}; k++)); do
        run "$r" "${CONFIGS[$(((k + r) % ${#CONFIGS[@]}))]}"
    done
done

# The table: median and min-max per configuration, and the ratio of medians to in-process.
python3 - "$RESULTS" "$COMMIT" "$TASKS" "$REPEAT" "$EXT_WORKERS" <<'EOF'
import statistics, sys
path, commit, tasks, repeat, workers = sys.argv[1:]
rates = {}
for line in open(path):
    _, config, rate = line.split()
    rates.setdefault(config, []).append(float(rate))
base = statistics.median(rates["in-process"])
print(f"Commit {commit}, {tasks} no-op tasks, {repeat} rounds, 3 nodes; "
      f"{workers} Python workers for the external runs.\n")
print("| configuration | tasks/s (median) | min-max | vs in-process |")
print("|---|---|---|---|")
names = {"in-process": "in-process noop handler, 3 nodes x 2 workers",
         "ext-max1": f"{workers} Python external workers, max 1",
         "ext-max16": f"{workers} Python external workers, max 16"}
for config in ("in-process", "ext-max1", "ext-max16"):
    r = rates[config]
    m = statistics.median(r)
    print(f"| {names[config]} | {m:.0f} | {min(r):.0f}-{max(r):.0f} | {m / base:.2f} |")
EOF
