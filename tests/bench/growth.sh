#!/usr/bin/env bash
# How Cohort's cost grows: with the number of nodes, and with the length of the queue (see
# docs/BENCHMARKS.md, "How cost grows"). Side by side with the raw C claim-and-complete loop
# (tests/bench/raw_loop.c --ordered: Cohort's claim filter and sort, nothing else) on the same
# server in the same run, so that growth which comes from
# the server (the local mongo-java-server scans the whole collection for every claim) shows up
# in both columns, and growth which is Cohort's in its column only.
#
#   bash tests/bench/growth.sh [--tasks N] [--nodes LIST] [--queues LIST] [--claims K]
#                              [--queue-nodes Q] [--workers W] [--primary-task-count P]
#                              [--repeat R] [--interval-ms I] [--no-warmup]
#
#   --tasks N               tasks per run of the node series (default 1000)
#   --nodes LIST            node counts of the node series (default 1,2,3,5; "none" skips it),
#                           each at the product defaults (no claim_batch, no
#                           primary_task_count in the configuration unless -P is given)
#   --queues LIST           pending tasks in the queue series (default 1000,10000,100000;
#                           "none" skips it)
#   --claims K              tasks completed out of each queue of the queue series (default
#                           300): the rate of claiming from a queue of that length, not the
#                           time to drain it (on the local server every claim scans the whole
#                           queue, so K = 1000 from 100,000 takes about 15 minutes)
#   --queue-nodes Q         nodes of the queue series (default 3)
#   --workers W             worker threads per node (default 2); the raw loop runs as many
#                           threads as the nodes have workers in all
#   --primary-task-count P  write primary_task_count = P into every node's configuration
#                           (default: not written, so the product default applies)
#   --repeat R              rounds (default 1); tables show medians (min-max when R > 1)
#   --interval-ms I         how often progress is polled (default 100), by the probe in
#                           Cohort runs and by a thread of the raw loop in raw runs
#   --no-warmup             skip the warm-up (one raw and one Cohort run of the node series'
#                           first size, not recorded: the local server is a JVM whose first
#                           runs are slow)
#
# A Cohort run enqueues the tasks with `cohortctl enqueue noop --count N` (not timed), starts
# the nodes, and lets `probe wait` poll until the run's tasks have succeeded. In the queue
# series it then reads each node's VmHWM and VmRSS from /proc before SIGTERM: a node's memory
# must not grow with the queue (guarantee 5, bounded memory). Commands per task are the nodes'
# own (their `stopped: ... db_commands=N` log lines, start-up included) over the tasks they
# completed; "steady" counts only between 10% and 90% of the run's tasks done.
#
# Builds with deploy/setup.sh into build/ (or COHORT_BUILD_DIR), starts the local database
# unless MONGODB_URI is set, prints markdown tables on stdout, and keeps every run's lines
# and node logs in BUILD/bench/growth-<timestamp>/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
BENCH_NAME=growth
# shellcheck source=tests/bench/lib.sh
source "$ROOT/tests/bench/lib.sh"

TASKS=1000
NODE_LIST=1,2,3,5
QUEUE_LIST=1000,10000,100000
CLAIMS=300
QUEUE_NODES=3
WORKERS=2
PRIMARY_TASK_COUNT=""
REPEAT=1
INTERVAL_MS=100
WARMUP=1
TICK_MS=1000
TAKEOVER_MS=10000
STOP_WAIT_S=180

while [ $# -gt 0 ]; do
    case "$1" in
        --tasks) [ $# -ge 2 ] || usage; number "$1" "$2"; TASKS="$2"; shift 2 ;;
        --nodes) [ $# -ge 2 ] || usage; NODE_LIST="$2"; shift 2 ;;
        --queues) [ $# -ge 2 ] || usage; QUEUE_LIST="$2"; shift 2 ;;
        --claims) [ $# -ge 2 ] || usage; number "$1" "$2"; CLAIMS="$2"; shift 2 ;;
        --queue-nodes) [ $# -ge 2 ] || usage; number "$1" "$2"; QUEUE_NODES="$2"; shift 2 ;;
        --workers) [ $# -ge 2 ] || usage; number "$1" "$2"; WORKERS="$2"; shift 2 ;;
        --primary-task-count) [ $# -ge 2 ] || usage; number "$1" "$2"; PRIMARY_TASK_COUNT="$2"; shift 2 ;;
        --repeat) [ $# -ge 2 ] || usage; number "$1" "$2"; REPEAT="$2"; shift 2 ;;
        --interval-ms) [ $# -ge 2 ] || usage; number "$1" "$2"; INTERVAL_MS="$2"; shift 2 ;;
        --no-warmup) WARMUP=0; shift ;;
        -h | --help) usage 0 ;;
        *) usage ;;
    esac
done

# list NAME TEXT MAX: the comma-separated positive numbers of TEXT ("none": none), in LIST_OUT
list() {
    LIST_OUT=()
    [ "$2" = none ] && return 0
    IFS=, read -r -a LIST_OUT <<<"$2"
    [ "${#LIST_OUT[@]}" -gt 0 ] || die "$1: empty list"
    local v
    for v in "${LIST_OUT[@]}"; do
        [[ "$v" =~ ^[1-9][0-9]*$ ]] && [ "$v" -le "$3" ] || die "$1: '$v' is not a number from 1 to $3"
    done
}
list --nodes "$NODE_LIST" 64
NODES=("${LIST_OUT[@]}")
list --queues "$QUEUE_LIST" 10000000
QUEUES=("${LIST_OUT[@]}")

# Expected duration, from a first run on 2 shared cores (docs/BENCHMARKS.md): a node run
# costs ~6 s of start and stop plus its tasks at ~150/s; a queue run costs inserting the queue (~4,000/s) and
# claiming K of it, where every claim scans the whole queue on the local server (~3 us per
# task in the queue for the raw loop, twice that for Cohort).
estimate=0
for n in "${NODES[@]}"; do
    estimate=$((estimate + 2 * (6 + TASKS / 150)))
done
for q in "${QUEUES[@]}"; do
    k=$((CLAIMS < q ? CLAIMS : q))
    estimate=$((estimate + 2 * (6 + q / 4000 + k / 150) + k * q * 9 / 1000000))
done
estimate=$((estimate * REPEAT + WARMUP * 2 * (6 + TASKS / 150)))
log "expected duration on 2 shared cores: about $((estimate / 60 + 1)) min (--repeat $REPEAT)"

bench_build
OUT="$BUILD/bench/growth-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
printf 'round\tseries\tsize\tconfig\ttasks_per_s\tcommands_per_task\tsteady_commands_per_task\tclaimed_by_node\thwm_kb\trss_kb\n' >"$RESULTS"
trap 'stop_nodes; database_stop' EXIT
database_start

# record ROUND SERIES SIZE CONFIG RATE CPT STEADY CLAIMED HWM RSS (not the warm-up's)
record() {
    [ "$1" != warmup ] || return 0
    (IFS=$'\t'; echo "$*") >>"$RESULTS"
}

# run_raw ROUND SERIES SIZE TASKS CLAIMS THREADS
run_raw() {
    local line
    line="$("$RAW_LOOP" --tasks "$4" --claims "$5" --threads "$6" --poll-ms "$INTERVAL_MS" --ordered \
        --database "growth_raw_$$_$1_$2_$3")" || die "raw loop failed ($2 $3, round $1)"
    log "round $1 $2 $3 raw: $line"
    record "$1" "$2" "$3" raw "$(value tasks_per_s "$line")" "$(value commands_per_task "$line")" \
        "$(value steady_commands_per_task "$line")" - - -
}

# run_cohort ROUND SERIES SIZE TASKS CLAIMS NODES
run_cohort() {
    local db="growth_cohort_$$_$1_$2_$3" dir="$OUT/$1-$2-$3" i line pid
    mkdir -p "$dir"
    write_config "$dir/enqueue.ini" "$db" growth-enqueue
    "$COHORTCTL" -c "$dir/enqueue.ini" enqueue noop --count "$4" >/dev/null \
        || die "cohortctl enqueue failed ($2 $3, round $1)"
    local since
    since="$(date +%s%3N)"
    start_nodes "$dir" "$db" "$6" "$PRIMARY_TASK_COUNT"
    if ! line="$("$PROBE" wait --database "$db" --tasks "$5" --since-ms "$since" \
        --interval-ms "$INTERVAL_MS" --timeout-s 900)"; then
        stop_nodes
        tail -n 20 "$dir"/node*.log >&2 || true
        die "Cohort run failed ($2 $3, round $1); logs in $dir"
    fi
    # Memory before SIGTERM: the largest over the nodes.
    local hwm=0 rss=0 v
    for pid in "${NODE_PIDS[@]}"; do
        v="$(memory_kb "$pid" VmHWM)"; [ "$v" -gt "$hwm" ] && hwm="$v"
        v="$(memory_kb "$pid" VmRSS)"; [ "$v" -gt "$rss" ] && rss="$v"
    done
    stop_nodes
    local commands=0 succeeded=0 claimed=() stopped
    for ((i = 1; i <= $6; i++)); do
        stopped="$(stopped_line "$dir" "$i")"
        commands=$((commands + $(value db_commands "$stopped")))
        succeeded=$((succeeded + $(value succeeded "$stopped")))
        claimed+=("$(value claimed "$stopped")")
    done
    "$PROBE" drop --database "$db" || true
    local cpt
    cpt="$(awk -v c="$commands" -v n="$succeeded" 'BEGIN { printf "%.3f", n ? c / n : 0 }')"
    log "round $1 $2 $3 cohort: $line node_commands=$commands succeeded=$succeeded commands_per_task=$cpt claimed_by_node=$(IFS=/; echo "${claimed[*]}") max_hwm_kb=$hwm max_rss_kb=$rss"
    record "$1" "$2" "$3" cohort "$(value tasks_per_s "$line")" "$cpt" \
        "$(value steady_commands_per_task "$line")" "$(IFS=/; echo "${claimed[*]}")" "$hwm" "$rss"
}

log "node series: ${NODES[*]:-none} nodes on $TASKS tasks; queue series: ${QUEUES[*]:-none} pending, $CLAIMS claimed by $QUEUE_NODES nodes; $WORKERS workers per node; $REPEAT round(s); results in $OUT"
if [ "$WARMUP" -eq 1 ]; then
    n="${NODES[0]:-$QUEUE_NODES}"
    log "warm-up (not recorded): the server's JIT compiles its hot paths"
    run_raw warmup nodes "$n" "$TASKS" "$TASKS" $((n * WORKERS))
    run_cohort warmup nodes "$n" "$TASKS" "$TASKS" "$n"
fi
for ((round = 1; round <= REPEAT; round++)); do
    for n in "${NODES[@]}"; do
        run_raw "$round" nodes "$n" "$TASKS" "$TASKS" $((n * WORKERS))
        run_cohort "$round" nodes "$n" "$TASKS" "$TASKS" "$n"
    done
    for q in "${QUEUES[@]}"; do
        k=$((CLAIMS < q ? CLAIMS : q))
        run_raw "$round" queue "$q" "$q" "$k" $((QUEUE_NODES * WORKERS))
        run_cohort "$round" queue "$q" "$q" "$k" "$QUEUE_NODES"
    done
done

# --- summary ---------------------------------------------------------------------------

CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
{
    printf 'Run %s: `bash tests/bench/growth.sh --tasks %d --nodes %s --queues %s --claims %d --queue-nodes %d --workers %d%s --repeat %d --interval-ms %d%s`\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$TASKS" "$NODE_LIST" "$QUEUE_LIST" "$CLAIMS" \
        "$QUEUE_NODES" "$WORKERS" "${PRIMARY_TASK_COUNT:+ --primary-task-count $PRIMARY_TASK_COUNT}" \
        "$REPEAT" "$INTERVAL_MS" "$([ "$WARMUP" -eq 1 ] || echo ' --no-warmup')"
    printf 'Cohort at %s; %s cores (%s); database: %s.\n' "$COMMIT" "$(nproc)" \
        "${CPU:-unknown CPU}" "$BENCH_SERVER"
} | tee "$OUT/summary.md"

awk -F'\t' -v workers="$WORKERS" -v tasks="$TASKS" -v claims="$CLAIMS" \
    -v qnodes="$QUEUE_NODES" "$AWK_STATS"'
function spread(list, fmt,    a, n, i, lo, hi) {
    n = split(list, a, " ")
    if (n == 0) return "n/a"
    if (a[1] == "n/a" || a[1] == "-") return a[1]
    lo = hi = a[1]
    for (i = 2; i <= n; i++) { if (a[i] + 0 < lo + 0) lo = a[i]; if (a[i] + 0 > hi + 0) hi = a[i] }
    if (n == 1) return sprintf(fmt, a[1])
    return sprintf(fmt " (" fmt "-" fmt ")", median(list), lo, hi)
}
NR > 1 {
    k = $2 SUBSEP $3
    if (!(k in seen)) { seen[k] = 1; order[++n_rows] = k }
    add(k SUBSEP $4 SUBSEP "rate", $5)
    add(k SUBSEP $4 SUBSEP "cpt", $6)
    if ($7 != "n/a") add(k SUBSEP $4 SUBSEP "steady", $7)
    if ($4 == "cohort") {
        add(k SUBSEP "ratio", $5 / rate[$1, $2, $3])
        claimed[k] = $8
        add(k SUBSEP "hwm", $9 / 1024); add(k SUBSEP "rss", $10 / 1024)
    } else {
        rate[$1, $2, $3] = $5
    }
}
function row(k, series,    size) {
    split(k, parts, SUBSEP); size = parts[2]
    if (series == "nodes")
        printf "| %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", size, size * workers,
            spread(lists[k SUBSEP "cohort" SUBSEP "rate"], "%.0f"),
            spread(lists[k SUBSEP "raw" SUBSEP "rate"], "%.0f"),
            spread(lists[k SUBSEP "ratio"], "%.2f"),
            spread(lists[k SUBSEP "cohort" SUBSEP "cpt"], "%.3f"),
            spread(lists[k SUBSEP "cohort" SUBSEP "steady"], "%.3f"),
            spread(lists[k SUBSEP "raw" SUBSEP "cpt"], "%.3f"), claimed[k]
    else
        printf "| %d | %s | %s | %s | %s | %s | %s | %s |\n", size,
            spread(lists[k SUBSEP "cohort" SUBSEP "rate"], "%.1f"),
            spread(lists[k SUBSEP "raw" SUBSEP "rate"], "%.1f"),
            spread(lists[k SUBSEP "ratio"], "%.2f"),
            spread(lists[k SUBSEP "cohort" SUBSEP "cpt"], "%.3f"),
            spread(lists[k SUBSEP "cohort" SUBSEP "steady"], "%.3f"),
            spread(lists[k SUBSEP "hwm"], "%.1f"), spread(lists[k SUBSEP "rss"], "%.1f")
}
END {
    header = 0
    for (i = 1; i <= n_rows; i++) {
        split(order[i], parts, SUBSEP)
        if (parts[1] != "nodes") continue
        if (!header++) {
            printf "\nNodes: %d no-op tasks per run, %d workers per node, the ordered raw loop with as many threads.\n\n", tasks, workers
            printf "| nodes | workers in all | Cohort tasks/s | raw loop tasks/s | Cohort / raw | Cohort commands/task | Cohort commands/task, steady | raw commands/task | claimed by node |\n"
            printf "|---|---|---|---|---|---|---|---|---|\n"
        }
        row(order[i], "nodes")
    }
    header = 0
    for (i = 1; i <= n_rows; i++) {
        split(order[i], parts, SUBSEP)
        if (parts[1] != "queue") continue
        if (!header++) {
            printf "\nQueue length: the first %d tasks claimed and completed out of a queue of N pending, %d nodes x %d workers and the ordered raw loop with %d threads. Node memory: the largest over the nodes, read before SIGTERM.\n\n", claims, qnodes, workers, qnodes * workers
            printf "| pending tasks | Cohort tasks/s | raw loop tasks/s | Cohort / raw | Cohort commands/task | Cohort commands/task, steady | node VmHWM MiB | node VmRSS MiB |\n"
            printf "|---|---|---|---|---|---|---|---|\n"
        }
        row(order[i], "queue")
    }
}' "$RESULTS" | tee -a "$OUT/summary.md"
log "per-run numbers: $RESULTS; node logs: $OUT/*/"
