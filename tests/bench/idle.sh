#!/usr/bin/env bash
# What an idle cluster costs the database: MongoDB commands per node per tick, for clusters of
# 1, 3, 10 and 20 nodes, each with 1 and with 5 services, on an empty queue (docs/BENCHMARKS.md,
# "Idle cost"; issue 11's budget: at most 1 per tick for a secondary, 2 plus the maintenance
# cadence for a primary).
#
#   bash tests/bench/idle.sh [--nodes LIST] [--services LIST] [--seconds S] [--warmup S]
#                            [--wake MODE]
#
#   --nodes LIST     comma-separated cluster sizes (default 1,3,10,20)
#   --services LIST  comma-separated service counts (default 1,5)
#   --seconds S      how long each cluster is measured (default 30)
#   --warmup S       how long each cluster runs before that (default 15: start-up, indexes,
#                    the first elections and the first maintenance are not idle cost)
#   --wake MODE      the nodes' `wake` setting (default: not written, the product default)
#
# Every node runs the noop handler with 1 worker per service, tick_ms = 1000 and takeover_ms
# = 10000 (the defaults). The measurement: `probe idle` reads each node's stats.ticks and
# stats.db_commands (written together by its ping) before and after the window; a node's
# figure is its commands divided by its ticks in between: everything the node sent (ticks,
# heartbeat and lease threads, change streams), nothing the probe sent. A node counts as a
# primary if it leads at least one service at the end.
#
# Builds with deploy/setup.sh into build/ (or COHORT_BUILD_DIR), starts the local database
# unless MONGODB_URI is set, prints a markdown table on stdout and keeps the node logs and
# raw lines in BUILD/bench/idle-<timestamp>/. Takes about (warmup + seconds + 5) s per cell:
# 7 minutes at the defaults.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
NODE_LIST=1,3,10,20
SERVICE_LIST=1,5
SECONDS_MEASURED=30
WARMUP=15
WAKE=""

BENCH_NAME=idle
# shellcheck source=tests/bench/lib.sh
source "$ROOT/tests/bench/lib.sh"
list() { [[ "$2" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "$1 '$2' must be a list like 1,3"; }
while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) [ $# -ge 2 ] || usage; list "$1" "$2"; NODE_LIST="$2"; shift 2 ;;
        --services) [ $# -ge 2 ] || usage; list "$1" "$2"; SERVICE_LIST="$2"; shift 2 ;;
        --seconds) [ $# -ge 2 ] || usage; list "$1" "$2"; SECONDS_MEASURED="$2"; shift 2 ;;
        --warmup) [ $# -ge 2 ] || usage; list "$1" "$2"; WARMUP="$2"; shift 2 ;;
        --wake) [ $# -ge 2 ] || usage; WAKE="$2"; shift 2 ;;
        -h | --help) usage 0 ;;
        *) usage ;;
    esac
done

bash "$ROOT/deploy/setup.sh" "$BUILD"
COMMIT="$(bench_commit)"
PROBE="$BUILD/tests/bench/probe"
[ -x "$PROBE" ] || die "no $PROBE: build with the tests (deploy/setup.sh builds them)"
OUT="$BUILD/bench/idle-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
trap 'stop_nodes; database_stop' EXIT
database_start

# write_config FILE DATABASE NODE_ID SERVICES
write_config() {
    {
        printf '[cluster]\ndatabase = %s\nnode_id = %s\ntick_ms = 1000\ntakeover_ms = 10000\n' \
            "$2" "$3"
        printf 'shutdown_grace_ms = 2000\nlog_level = info\n'
        [ -z "$WAKE" ] || printf 'wake = %s\n' "$WAKE"
        for ((s = 1; s <= $4; s++)); do
            printf '\n[service:svc%d]\nhandler = %s\nworkers = 1\n' "$s" \
                "$BUILD/handlers/cohort_noop.so"
        done
    } >"$1"
}

# median and max of the numbers on stdin ("-" if none)
stats() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { printf "- | -"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.2f | %.2f", m, v[NR] }'
}

ROWS=()
IFS=, read -r -a NODES_TO_RUN <<<"$NODE_LIST"
IFS=, read -r -a SERVICES_TO_RUN <<<"$SERVICE_LIST"
for nodes in "${NODES_TO_RUN[@]}"; do
    for services in "${SERVICES_TO_RUN[@]}"; do
        db="bench_idle_$$_${nodes}_${services}"
        dir="$OUT/n${nodes}-s${services}"
        mkdir -p "$dir"
        log "$nodes node(s), $services service(s): $WARMUP s warm-up, $SECONDS_MEASURED s measured"
        for ((i = 1; i <= nodes; i++)); do
            write_config "$dir/node$i.ini" "$db" "idle-$i" "$services"
            "$BUILD/cohortd" -c "$dir/node$i.ini" 2>"$dir/node$i.log" &
            NODE_PIDS+=($!)
        done
        sleep "$WARMUP"
        "$PROBE" idle --database "$db" --seconds "$SECONDS_MEASURED" >"$dir/probe.txt"
        stop_nodes
        "$PROBE" drop --database "$db" >/dev/null || true
        field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
        measured="$(grep -c '^node ' "$dir/probe.txt" || true)"
        [ "$measured" -eq "$nodes" ] || die "only $measured of $nodes nodes pinged; see $dir"
        secondaries="$(awk '$3 == "primary_of=0"' "$dir/probe.txt" | field per_tick | stats)"
        primaries="$(awk '$3 != "primary_of=0"' "$dir/probe.txt" | field per_tick | stats)"
        total="$(field commands <"$dir/probe.txt" | awk -v s="$SECONDS_MEASURED" \
            '{ c += $1 } END { printf "%.1f", c / s }')"
        ROWS+=("| $nodes | $services | $secondaries | $primaries | $total |")
    done
done

{
    printf '\nIdle cost on commit %s, %s s measured per cell after %s s of warm-up, wake = %s:\n\n' \
        "$COMMIT" "$SECONDS_MEASURED" "$WARMUP" "${WAKE:-default}"
    printf '| nodes | services | secondary: commands/tick, median | max | primary: median | max | cluster commands/s |\n'
    printf '|---|---|---|---|---|---|---|\n'
    printf '%s\n' "${ROWS[@]}"
} | tee "$OUT/summary.md"
log "node logs and probe lines: $OUT"
