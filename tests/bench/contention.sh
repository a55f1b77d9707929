#!/usr/bin/env bash
# Contention at the queue head (issue 11, item 4): claim attempts per successful claim when
# 3, 10 and 20 nodes (one worker each) drain one queue of no-op tasks.
#
#   bash tests/bench/contention.sh [--tasks N] [--nodes LIST] [--claim-batch K] [--repeat R]
#
#   --tasks N        tasks per run (default 3000), enqueued before the nodes start, all due
#   --nodes LIST     comma-separated node counts (default 3,10,20)
#   --claim-batch K  the service's claim_batch (default: not set, the product default)
#   --repeat R       runs per node count (default 1)
#
# Each node counts its claim attempts in the store (store/claims.c): claims_attempted (one
# findAndModify, or one round of a batch claim), claims_empty (attempts that claimed nothing)
# and claim_candidates_lost (a batch round's candidates another node took between its find and
# its update), and prints them in its "stopped:" line with claimed= and db_commands=. The
# table gives, summed over the nodes: attempts per claimed task, empty attempts per claimed
# task, lost candidates, commands per task and tasks/s. A findAndModify whose first candidate
# is taken by another claimer at the same moment is retried inside the server (a write
# conflict), which no client counter sees; on mongo-java-server, which applies writes one at a
# time, that never happens, so there a collision shows only as waiting (tasks/s), not as
# attempts. docs/SCALING.md discusses what this means on real MongoDB.
#
# Builds with deploy/setup.sh into build/ (or COHORT_BUILD_DIR), starts the local database
# unless MONGODB_URI is set, prints a markdown table on stdout, keeps node logs in
# BUILD/bench/contention-<timestamp>/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
TASKS=3000
NODE_COUNTS=3,10,20
CLAIM_BATCH=""
REPEAT=1
TICK_MS=1000
TAKEOVER_MS=10000

log() { printf 'contention: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
usage() { sed -n '2,12p' "$0" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --tasks) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage; TASKS="$2"; shift 2 ;;
        --nodes) [[ "${2:-}" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || usage; NODE_COUNTS="$2"; shift 2 ;;
        --claim-batch) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage; CLAIM_BATCH="$2"; shift 2 ;;
        --repeat) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage; REPEAT="$2"; shift 2 ;;
        *) usage ;;
    esac
done
IFS=, read -r -a COUNTS <<<"$NODE_COUNTS"

bash "$ROOT/deploy/setup.sh" "$BUILD" >&2
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
[ -z "$(git -C "$ROOT" status --porcelain -- src include handlers 2>/dev/null)" ] \
    || COMMIT="$COMMIT + uncommitted changes in src/, include/ or handlers/"
PROBE="$BUILD/tests/bench/probe"
[ -x "$PROBE" ] || die "$PROBE is missing: build the tests (COHORT_TESTS=ON)"
OUT="$BUILD/bench/contention-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"

NODE_PIDS=()
stop_nodes() {
    local pid
    for pid in "${NODE_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${NODE_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    NODE_PIDS=()
}
LOCALDB_STATE=""
cleanup() {
    stop_nodes
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

# value KEY LINE: the value of KEY=value in a line
value() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

write_config() { # FILE DATABASE NODE_ID
    cat >"$1" <<EOF
[cluster]
database          = $2
tick_ms           = $TICK_MS
takeover_ms       = $TAKEOVER_MS
shutdown_grace_ms = 5000
node_id           = $3

[service:noop]
handler              = $BUILD/handlers/cohort_noop.so
workers              = 1
primary_task_count   = 1000000
secondary_task_count = 0
EOF
    [ -z "$CLAIM_BATCH" ] || printf 'claim_batch          = %s\n' "$CLAIM_BATCH" >>"$1"
}

# run NODES ROUND: one drain of TASKS tasks by NODES nodes; prints one table row.
run() {
    local nodes="$1" dir="$OUT/$1-nodes-$2" db="bench_contention_$$_$1_$2" i
    mkdir -p "$dir"
    for ((i = 1; i <= nodes; i++)); do write_config "$dir/node$i.ini" "$db" "c$i"; done
    "$BUILD/cohortctl" -c "$dir/node1.ini" enqueue noop --create --count "$TASKS" >/dev/null \
        || die "cohortctl enqueue failed"
    local since line
    since="$(date +%s%3N)"
    for ((i = 1; i <= nodes; i++)); do
        "$BUILD/cohortd" -c "$dir/node$i.ini" 2>"$dir/node$i.log" &
        NODE_PIDS+=($!)
    done
    line="$("$PROBE" wait --database "$db" --tasks "$TASKS" --since-ms "$since" \
        --timeout-s 600)" || { stop_nodes; die "run failed; logs in $dir"; }
    stop_nodes
    local claimed=0 attempted=0 empty=0 lost=0 commands=0 stopped
    for ((i = 1; i <= nodes; i++)); do
        stopped="$(grep 'stopped: ' "$dir/node$i.log" | tail -n 1)"
        [ -n "$stopped" ] || die "node $i wrote no 'stopped:' line; see $dir/node$i.log"
        claimed=$((claimed + $(value claimed "$stopped")))
        attempted=$((attempted + $(value claims_attempted "$stopped")))
        empty=$((empty + $(value claims_empty "$stopped")))
        lost=$((lost + $(value claim_candidates_lost "$stopped")))
        commands=$((commands + $(value db_commands "$stopped")))
    done
    "$PROBE" drop --database "$db" || true
    log "$nodes nodes, round $2: $line claimed=$claimed attempted=$attempted empty=$empty lost=$lost"
    awk -v n="$nodes" -v c="$claimed" -v a="$attempted" -v e="$empty" -v l="$lost" \
        -v k="$commands" -v t="$TASKS" -v tps="$(value tasks_per_s "$line")" \
        'BEGIN { printf "| %d | %d | %d | %.3f | %.3f | %d | %.2f | %s |\n",
                 n, c, a, a / c, e / c, l, k / t, tps }'
}

printf '\nClaim contention, %d no-op tasks, 1 worker per node, claim_batch %s, commit %s:\n\n' \
    "$TASKS" "${CLAIM_BATCH:-default}" "$COMMIT"
printf '| nodes | claimed | claim attempts | attempts per claim | empty per claim | candidates lost | commands per task | tasks/s |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for ((r = 1; r <= REPEAT; r++)); do
    for n in "${COUNTS[@]}"; do run "$n" "$r"; done
done
log "node logs in $OUT"
