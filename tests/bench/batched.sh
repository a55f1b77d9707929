#!/usr/bin/env bash
# Cohort against the batched limit (issue 26, part 2): side by side in one run, on the local
# server as the quick-start starts it (deploy/localdb, change-stream getMores held, its
# default), the batched raw loop, the single-claim raw loop, and Cohort at its default
# settings with 1 node and with K nodes, on each queue size (see docs/BENCHMARKS.md,
# "Against the batched limit").
#
#   bash tests/bench/batched.sh [--tasks LIST] [--repeat R] [--nodes K] [--no-warmup]
#                               [--single-max N] [--timeout-s S] [--configs LIST]
#
#   --tasks LIST     comma-separated queue sizes (default 2000,20000)
#   --repeat R       rounds (default 3); each round runs every configuration on every size,
#                    in an order rotated from round to round
#   --nodes K        nodes of the multi-node configuration (default 3)
#   --single-max N   run the single-claim raw loop only on queues of at most N tasks (default
#                    2000; the local server sorts the whole queue for each of its claims, so
#                    it costs O(N^2))
#   --timeout-s S    how long a Cohort run may take before the script gives up (default 1800:
#                    3 nodes on 20,000 tasks took over 600 s under load)
#   --no-warmup      skip the warm-up round (every configuration once on the smallest size)
#   --configs LIST   run only these configurations (comma-separated names from the list
#                    below, e.g. raw-batch,cohort-3: a quick look at one case); default all
#
# The configurations, each measured from the enqueue on, in a fresh database:
#   raw-batch   raw_loop --batch 64 (one thread: find 64 due ids in claim order, updateMany
#               them to claimed under a fresh token with status: pending in the filter, read
#               back what the token won, complete them in one unordered bulk update)
#   raw-single  raw_loop --ordered (one thread: findAndModify + updateOne per task)
#   cohort-1, cohort-K  cohortd nodes whose files set only the database, node_id and the noop
#               handler: every other setting is the product default. The nodes are started
#               first and left 4 s to register and elect (an idle cluster), then
#               `cohortctl enqueue noop --count N` runs, and the probe waits for the last one.
# A raw loop's time is its insert (indexes + tasks; insert_seconds) plus its loop; Cohort's
# runs from just before the enqueue to the last finished_at. The loop-only rate of the raw
# loops (the figure issue 26 quotes) is reported beside it.
#
# Commands per task are libmongoc's APM "command started" events (the raw loop's counter;
# the nodes' stats.db_commands from each node's final `stopped:` line), without the progress
# polls. Client CPU per task: the raw loop's getrusage over its loop; the nodes' utime + stime
# from /proc at the end of the run (start-up and the idle seconds included). The server's CPU
# is /proc of the local server over the same span.
#
# Builds with deploy/setup.sh into build/ (or COHORT_BUILD_DIR), starts its own local server
# (LOCALDB_HOLD_GETMORE is cleared: the default holds), prints a markdown table and keeps
# every run's lines and node logs in BUILD/bench/batched-<timestamp>/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
BENCH_NAME=batched
# shellcheck source=tests/bench/lib.sh
. "$ROOT/tests/bench/lib.sh"

TASK_LIST=2000,20000
REPEAT=3
NODES=3
SINGLE_MAX=2000
TIMEOUT_S=1800
WARMUP=1
ONLY=
INTERVAL_MS=100
BATCH=64
while [ $# -gt 0 ]; do
    case "$1" in
        --tasks) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || usage; TASK_LIST="$2"; shift 2 ;;
        --repeat) [ $# -ge 2 ] || usage; number "$1" "$2"; REPEAT="$2"; shift 2 ;;
        --nodes) [ $# -ge 2 ] || usage; number "$1" "$2"; NODES="$2"; shift 2 ;;
        --single-max) [ $# -ge 2 ] || usage; number "$1" "$2"; SINGLE_MAX="$2"; shift 2 ;;
        --timeout-s) [ $# -ge 2 ] || usage; number "$1" "$2"; TIMEOUT_S="$2"; shift 2 ;;
        --no-warmup) WARMUP=0; shift ;;
        --configs) [ $# -ge 2 ] && [[ "$2" =~ ^[a-z0-9-]+(,[a-z0-9-]+)*$ ]] || usage; ONLY=",$2,"; shift 2 ;;
        -h | --help) usage 0 ;;
        *) usage ;;
    esac
done
[ "$NODES" -ge 2 ] || die "--nodes must be at least 2 (1 node is always measured too)"
IFS=, read -r -a SIZES <<<"$TASK_LIST"

bench_build
unset MONGODB_URI LOCALDB_HOLD_GETMORE # the quick-start's server, as it starts by default
OUT="$BUILD/bench/batched-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
printf 'round\tconfig\ttasks\ttasks_per_s\tloop_tasks_per_s\tcommands_per_task\tclient_cpu_ms\tserver_cpu_ms\tfirst_start_s\n' >"$RESULTS"
trap 'stop_nodes; database_stop' EXIT
database_start
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"

# record ROUND CONFIG TASKS RATE LOOP_RATE COMMANDS CLIENT_CPU SERVER_CPU FIRST_START
record() {
    [ "$1" = warmup ] && return 0
    local IFS=$'\t'
    printf '%s\n' "$*" >>"$RESULTS"
}

# run_raw ROUND CONFIG TASKS: the batched (raw-batch) or single-claim (raw-single) loop
run_raw() {
    local flags=(--ordered) line server rate
    [ "$2" = raw-batch ] && flags=(--batch "$BATCH")
    server="$(cpu_ms "$SERVER_PID")"
    line="$("$RAW_LOOP" --tasks "$3" --threads 1 --poll-ms "$INTERVAL_MS" "${flags[@]}" \
        --database "bench_batched_$$_$1_${2//-/_}_$3")" || die "raw loop failed (round $1, $2, $3)"
    server=$(($(cpu_ms "$SERVER_PID") - server))
    log "round $1 $2 $3: $line server_cpu_ms=$server"
    rate="$(awk -v n="$3" -v s="$(value seconds "$line")" -v i="$(value insert_seconds "$line")" \
        'BEGIN { printf "%.1f", n / (s + i) }')"
    record "$1" "$2" "$3" "$rate" "$(value tasks_per_s "$line")" \
        "$(value commands_per_task "$line")" "$(value cpu_ms "$line")" "$server" -
}

# run_cohort ROUND CONFIG TASKS NODES: Cohort at the defaults, enqueue into an idle cluster
run_cohort() {
    local round="$1" config="$2" tasks="$3" nodes="$4" i pid
    local db="bench_batched_$$_${round}_${config//-/_}_$tasks" dir="$OUT/$round-$config-$tasks"
    mkdir -p "$dir"
    for ((i = 1; i <= nodes; i++)); do
        printf '; tests/bench/batched.sh: the product defaults but for these\n[cluster]\ndatabase = %s\nnode_id = bench-%d\n\n[service:noop]\nhandler = %s\n' \
            "$db" "$i" "$HANDLER" >"$dir/node$i.ini"
    done
    local server client=0 since line
    server="$(cpu_ms "$SERVER_PID")"
    for ((i = 1; i <= nodes; i++)); do
        "$COHORTD" -c "$dir/node$i.ini" 2>"$dir/node$i.log" &
        NODE_PIDS+=($!)
    done
    sleep 4 # registered and elected: an idle cluster
    since="$(date +%s%3N)"
    "$COHORTCTL" -c "$dir/node1.ini" enqueue noop --count "$tasks" >/dev/null \
        || die "cohortctl enqueue failed (round $round, $config, $tasks)"
    if ! line="$("$PROBE" wait --database "$db" --tasks "$tasks" --since-ms "$since" \
        --interval-ms "$INTERVAL_MS" --timeout-s "$TIMEOUT_S")"; then
        stop_nodes
        tail -n 20 "$dir"/node*.log >&2 || true
        die "Cohort run failed (round $round, $config, $tasks); logs in $dir"
    fi
    server=$(($(cpu_ms "$SERVER_PID") - server))
    for pid in "${NODE_PIDS[@]}"; do
        client=$((client + $(cpu_ms "$pid")))
    done
    stop_nodes
    local commands=0 stopped
    for ((i = 1; i <= nodes; i++)); do
        stopped="$(stopped_line "$dir" "$i")"
        commands=$((commands + $(value db_commands "$stopped")))
    done
    "$PROBE" drop --database "$db" || true
    local first
    first="$(awk -v s="$(value seconds "$line")" -v a="$(value active_seconds "$line")" \
        'BEGIN { printf "%.3f", s - a }')"
    log "round $round $config $tasks: $line node_commands=$commands nodes_cpu_ms=$client server_cpu_ms=$server"
    record "$round" "$config" "$tasks" "$(value tasks_per_s "$line")" - \
        "$(awk -v c="$commands" -v n="$tasks" 'BEGIN { printf "%.3f", c / n }')" "$client" \
        "$server" "$first"
}

CONFIGS=()
for n in "${SIZES[@]}"; do
    for config in raw-batch raw-single cohort-1 "cohort-$NODES"; do
        [ "$config" != raw-single ] || [ "$n" -le "$SINGLE_MAX" ] || continue
        [ -z "$ONLY" ] || [[ "$ONLY" == *",$config,"* ]] || continue
        CONFIGS+=("$config:$n")
    done
done
[ "${#CONFIGS[@]}" -gt 0 ] || die "--configs '$ONLY' names no configuration that runs here"
run_config() {
    local config="${2%%:*}" tasks="${2##*:}"
    if [ "$1" = warmup ] && [ "$tasks" != "${SIZES[0]}" ]; then
        return 0 # the warm-up runs the smallest size only
    fi
    case "$config" in
        raw-*) run_raw "$1" "$config" "$tasks" ;;
        cohort-*) run_cohort "$1" "$config" "$tasks" "${config#cohort-}" ;;
    esac
}
log "sizes ${SIZES[*]}, $REPEAT rounds, Cohort with 1 and $NODES nodes at the defaults; results in $OUT"
run_rounds run_config "$WARMUP" "$REPEAT" "${CONFIGS[@]}"
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
{
    printf 'Run %s: `bash tests/bench/batched.sh --tasks %s --repeat %d --nodes %d --single-max %d`\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$TASK_LIST" "$REPEAT" "$NODES" "$SINGLE_MAX"
    printf 'Cohort at %s; %s cores (%s); %s; load average (1, 5, 15 min) %s at the start, %s at the end.\n\n' \
        "$COMMIT" "$(nproc)" "${CPU:-unknown CPU}" "$BENCH_SERVER" "$LOAD_START" "$LOAD_END"
} | tee "$OUT/summary.md"

awk -F'\t' -v rounds="$REPEAT" -v nodes="$NODES" -v sizes="${SIZES[*]}" "$AWK_STATS"'
NR > 1 {
    k = $2 " " $3
    add(k " rate", $4); if ($5 != "-") add(k " loop", $5); add(k " cpt", $6)
    add(k " cpu", $7 * 1000 / $3); add(k " server", $8 * 1000 / $3)
    if ($9 != "-") add(k " first", $9)
    rate[$1, k] = $4
}
END {
    printf "Medians over %d rounds (min-max). tasks/s from the enqueue (a raw loop: from its insert) to the last task done;\n", rounds
    printf "the ratio is each run against the batched raw loop of its own round and size, then the median.\n\n"
    printf "| tasks | configuration | tasks/s | min-max | vs batched limit | raw loop only, tasks/s | commands/task | client CPU ms/1000 tasks | server CPU ms/1000 tasks | enqueue to first start, s |\n"
    printf "|---|---|---|---|---|---|---|---|---|---|\n"
    ns = split(sizes, sz, " ")
    nc = split("raw-batch raw-single cohort-1 cohort-" nodes, cf, " ")
    for (s = 1; s <= ns; s++)
        for (c = 1; c <= nc; c++) {
            k = cf[c] " " sz[s]
            if (!((k " rate") in lists)) continue
            for (r = 1; r <= rounds; r++)
                if (rate[r, "raw-batch " sz[s]] > 0) add(k " ratio", rate[r, k] / rate[r, "raw-batch " sz[s]])
            printf "| %d | %s | %.0f | %.0f-%.0f | %s | %s | %.3f | %.0f | %.0f | %s |\n", sz[s], cf[c],
                median(lists[k " rate"]), extreme(lists[k " rate"], 0), extreme(lists[k " rate"], 1),
                ratio(k " ratio"), (k " loop") in lists ? sprintf("%.0f", median(lists[k " loop"])) : "-",
                median(lists[k " cpt"]), median(lists[k " cpu"]), median(lists[k " server"]),
                (k " first") in lists ? sprintf("%.2f", median(lists[k " first"])) : "-"
        }
}' "$RESULTS" | tee -a "$OUT/summary.md"
