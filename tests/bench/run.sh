#!/usr/bin/env bash
# Cohort's throughput benchmark: no-op tasks per second through 1 and 3 nodes, and database
# commands per task, side by side with a raw C claim-and-complete loop against the same
# server in the same run (see docs/BENCHMARKS.md for what it measures and the results).
#
#   bash tests/bench/run.sh [--tasks N] [--repeat R] [--workers W] [--nodes K]
#                           [--primary-task-count P] [--interval-ms I] [--capped-tasks M]
#                           [--idle-seconds S] [--claim-batches LIST] [--only-batches]
#                           [--no-warmup] [--ordered]
#
#   --tasks N               tasks per run (default 2000; the local server scans the whole
#                           queue for every claim, so a run costs O(N^2): keep N small)
#   --repeat R              rounds (default 5); each round runs the four configurations
#   --workers W             worker threads per Cohort node (default 2)
#   --nodes K               nodes of the multi-node configuration (default 3)
#   --primary-task-count P  primary_task_count of the K-node cluster (default 10, the
#                           product default); the 1-node run always uses 1000000, because
#                           its lone node is the primary and would otherwise be capped at
#                           P tasks per tick (P tasks/s at tick_ms = 1000)
#   --interval-ms I         how often progress is polled (default 100), in Cohort runs by
#                           the probe and in raw runs by a thread of the raw loop, so both
#                           carry the same observation load
#   --capped-tasks M        finally run one node with the product's default primary_task_count
#                           (10) on M tasks: what a lone node does out of the box (default
#                           100; 0 skips it)
#   --idle-seconds S        finally run the K-node cluster S seconds on an empty queue to
#                           measure its per-tick commands (default 10; 0 skips it)
#   --claim-batches LIST    comma-separated claim_batch values (default 1,8,32; "none" skips
#                           them): for each k, Cohort with 1 node and with K nodes runs again
#                           with `claim_batch = k` in the service section, in the same rounds
#   --only-batches          rounds run the raw loops and the claim_batch configurations only
#                           (not Cohort at the product's default claim_batch)
#   --ordered               the raw loops claim in Cohort's claim order (raw_loop --ordered: sort
#                           {priority: -1, run_at: 1, _id: 1}, which the local server does for
#                           each claim by comparing three keys) instead of by run_at alone
#   --no-warmup             skip the warm-up round (every configuration once, not recorded:
#                           the local server is a JVM whose first runs are slow)
#
# Each round runs, in an order rotated from round to round so that no configuration always
# goes first: the raw loop with 1 thread, the raw loop with K*W threads (as many as the
# cluster's workers), Cohort with 1 node and Cohort with K nodes (claim_batch not set: the
# product default), and Cohort with 1 and K nodes at each claim_batch of LIST. Every run has a fresh
# database, dropped afterwards. A Cohort run enqueues N tasks with `cohortctl enqueue noop
# --count N` BEFORE starting the nodes (enqueueing is not timed), starts the nodes, lets
# `probe wait` poll until all N have succeeded, sends SIGTERM and reads each node's final
# `stopped: ... db_commands=N ...` log line.
#
# Builds with deploy/setup.sh into build/ (or COHORT_BUILD_DIR), starts the local database
# unless MONGODB_URI is set, prints the results table (markdown) on stdout and keeps every
# run's numbers and node logs in BUILD/bench/<timestamp>/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
BENCH_NAME=bench
# shellcheck source=tests/bench/lib.sh
. "$ROOT/tests/bench/lib.sh"

TASKS=2000
REPEAT=5
WORKERS=2
NODES=3
PRIMARY_TASK_COUNT=10
SINGLE_NODE_PRIMARY_TASK_COUNT=1000000
INTERVAL_MS=100
WARMUP=1
IDLE_SECONDS=10
CAPPED_TASKS=100
CLAIM_BATCHES=1,8,32
ONLY_BATCHES=0
RAW_ORDER=""
TICK_MS=1000
TAKEOVER_MS=10000


while [ $# -gt 0 ]; do
    case "$1" in
        --tasks) [ $# -ge 2 ] || usage; number "$1" "$2"; TASKS="$2"; shift 2 ;;
        --repeat) [ $# -ge 2 ] || usage; number "$1" "$2"; REPEAT="$2"; shift 2 ;;
        --workers) [ $# -ge 2 ] || usage; number "$1" "$2"; WORKERS="$2"; shift 2 ;;
        --nodes) [ $# -ge 2 ] || usage; number "$1" "$2"; NODES="$2"; shift 2 ;;
        --primary-task-count) [ $# -ge 2 ] || usage; number "$1" "$2"; PRIMARY_TASK_COUNT="$2"; shift 2 ;;
        --interval-ms) [ $# -ge 2 ] || usage; number "$1" "$2"; INTERVAL_MS="$2"; shift 2 ;;
        --capped-tasks) [ $# -ge 2 ] || usage; [[ "$2" =~ ^[0-9]+$ ]] || die "--capped-tasks '$2' must be a whole number"; CAPPED_TASKS="$2"; shift 2 ;;
        --idle-seconds) [ $# -ge 2 ] || usage; [[ "$2" =~ ^[0-9]+$ ]] || die "--idle-seconds '$2' must be a whole number"; IDLE_SECONDS="$2"; shift 2 ;;
        --claim-batches) [ $# -ge 2 ] || usage; CLAIM_BATCHES="$2"; shift 2 ;;
        --only-batches) ONLY_BATCHES=1; shift ;;
        --no-warmup) WARMUP=0; shift ;;
        --ordered) RAW_ORDER=--ordered; shift ;;
        -h | --help) usage 0 ;;
        *) usage ;;
    esac
done
THREADS=$((NODES * WORKERS))
[ "$NODES" -ge 2 ] || die "--nodes must be at least 2 (the 1-node cluster is always measured too)"
BATCHES=()
if [ "$CLAIM_BATCHES" != none ]; then
    IFS=, read -r -a BATCHES <<<"$CLAIM_BATCHES"
    for k in "${BATCHES[@]}"; do
        [[ "$k" =~ ^[1-9][0-9]*$ ]] && [ "$k" -le 256 ] \
            || die "--claim-batches: '$k' is not a claim_batch (1 to 256)"
    done
fi
[ "$ONLY_BATCHES" -eq 0 ] || [ "${#BATCHES[@]}" -gt 0 ] || die "--only-batches needs --claim-batches"

# --- build -----------------------------------------------------------------------------

bench_build

# --- database and output ---------------------------------------------------------------

OUT="$BUILD/bench/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
printf 'round\tconfig\ttasks_per_s\tactive_tasks_per_s\tcommands_per_task\tsteady_commands_per_task\tpoll_commands\tclaimed_by_node\tclient_cpu_ms\tserver_cpu_ms\n' >"$RESULTS"

trap 'stop_nodes; database_stop' EXIT
database_start

# --- one run of each kind --------------------------------------------------------------

# run_raw ROUND CONFIG THREADS
run_raw() {
    local line server
    server="$(cpu_ms "$SERVER_PID")"
    line="$("$RAW_LOOP" --tasks "$TASKS" --threads "$3" --poll-ms "$INTERVAL_MS" $RAW_ORDER \
        --database "bench_raw_$$_$1_$3")" \
        || die "raw loop failed (round $1, $3 threads)"
    server=$(($(cpu_ms "$SERVER_PID") - server))
    log "round $1 $2: $line server_cpu_ms=$server"
    [ "$1" = warmup ] && return 0
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$(value tasks_per_s "$line")" \
        "$(value active_tasks_per_s "$line")" "$(value commands_per_task "$line")" \
        "$(value steady_commands_per_task "$line")" "$(value poll_commands "$line")" - \
        "$(value cpu_ms "$line")" "$server" >>"$RESULTS"
}

# run_cohort ROUND CONFIG NODES [PRIMARY_TASK_COUNT [TASKS [CLAIM_BATCH]]] (empty: default)
# Rounds "warmup" and "capped" are not recorded in RESULTS; every run leaves its numbers in
# RUN_LINE (the probe's line), RUN_COMMANDS_PER_TASK and RUN_CLAIMED.
run_cohort() {
    local round="$1" config="$2" nodes="$3" i
    local db="bench_cohort_$$_${round}_${config//-/_}"
    local dir="$OUT/$round-$config"
    local ptc="$PRIMARY_TASK_COUNT"
    [ "$nodes" -eq 1 ] && ptc="$SINGLE_NODE_PRIMARY_TASK_COUNT"
    ptc="${4:-$ptc}"
    local tasks="${5:-$TASKS}"
    mkdir -p "$dir"
    for ((i = 1; i <= nodes; i++)); do
        write_config "$dir/node$i.ini" "$db" "bench-$i" "$ptc" "${6:-}"
    done
    local server client=0 pid
    server="$(cpu_ms "$SERVER_PID")" # like the raw loop's, it includes inserting the tasks
    "$COHORTCTL" -c "$dir/node1.ini" enqueue noop --count "$tasks" >/dev/null \
        || die "cohortctl enqueue failed (round $round, $config)"

    local since line
    since="$(date +%s%3N)"
    for ((i = 1; i <= nodes; i++)); do
        "$COHORTD" -c "$dir/node$i.ini" 2>"$dir/node$i.log" &
        NODE_PIDS+=($!)
    done
    if ! line="$("$PROBE" wait --database "$db" --tasks "$tasks" --since-ms "$since" \
        --interval-ms "$INTERVAL_MS" --timeout-s 300)"; then
        stop_nodes
        tail -n 20 "$dir"/node*.log >&2 || true
        die "Cohort run failed (round $round, $config); logs in $dir"
    fi
    server=$(($(cpu_ms "$SERVER_PID") - server))
    for pid in "${NODE_PIDS[@]}"; do
        client=$((client + $(cpu_ms "$pid")))
    done
    stop_nodes

    local commands=0 claimed=() stopped n
    for ((i = 1; i <= nodes; i++)); do
        stopped="$(grep 'stopped: ' "$dir/node$i.log" | tail -n 1)"
        [ -n "$stopped" ] || die "node $i wrote no 'stopped:' line; see $dir/node$i.log"
        n="$(value db_commands "$stopped")"
        commands=$((commands + n))
        claimed+=("$(value claimed "$stopped")")
    done
    "$PROBE" drop --database "$db" || true

    local per_task
    per_task="$(awk -v c="$commands" -v n="$tasks" 'BEGIN { printf "%.3f", c / n }')"
    log "round $round $config: $line node_commands=$commands commands_per_task=$per_task claimed_by_node=$(IFS=/; echo "${claimed[*]}") nodes_cpu_ms=$client server_cpu_ms=$server"
    RUN_LINE="$line"
    RUN_COMMANDS_PER_TASK="$per_task"
    RUN_CLAIMED="$(IFS=/; echo "${claimed[*]}")"
    case "$round" in warmup | capped) return 0 ;; esac
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$config" \
        "$(value tasks_per_s "$line")" "$(value active_tasks_per_s "$line")" "$per_task" \
        "$(value steady_commands_per_task "$line")" "$(value poll_commands "$line")" \
        "$(IFS=/; echo "${claimed[*]}")" "$client" "$server" >>"$RESULTS"
}

# Configurations: cohort-N runs N nodes at the product's claim_batch, cohort-N-bK at
# claim_batch = K.
CONFIGS=("raw-1" "raw-$THREADS")
[ "$ONLY_BATCHES" -eq 1 ] || CONFIGS+=("cohort-1" "cohort-$NODES")
for k in "${BATCHES[@]}"; do
    CONFIGS+=("cohort-1-b$k" "cohort-$NODES-b$k")
done
run_config() {
    local nodes batch=""
    case "$2" in
        raw-1) run_raw "$1" "$2" 1 ;;
        "raw-$THREADS") run_raw "$1" "$2" "$THREADS" ;;
        cohort-*)
            nodes="${2#cohort-}"
            if [[ "$nodes" == *-b* ]]; then
                batch="${nodes#*-b}"
                nodes="${nodes%-b*}"
            fi
            run_cohort "$1" "$2" "$nodes" "" "" "$batch"
            ;;
    esac
}

log "$TASKS tasks per run, $REPEAT rounds, raw loop with 1 and $THREADS threads, Cohort with 1 and $NODES nodes of $WORKERS workers, claim_batch: default${BATCHES[*]:+ and ${BATCHES[*]}}; results in $OUT"
run_rounds run_config "$WARMUP" "$REPEAT" "${CONFIGS[@]}"

# --- summary ---------------------------------------------------------------------------

# Where and on what the numbers were taken.
SERVER="the local mongo-java-server (in-memory) started by this script"
[ -n "$LOCALDB_STATE" ] || SERVER="MONGODB_URI from the environment"
CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
{
    printf 'Run %s: `bash tests/bench/run.sh --tasks %d --repeat %d --workers %d --nodes %d --primary-task-count %d --interval-ms %d --claim-batches %s%s`\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$TASKS" "$REPEAT" "$WORKERS" "$NODES" "$PRIMARY_TASK_COUNT" "$INTERVAL_MS" "$CLAIM_BATCHES" \
        "$([ "$ONLY_BATCHES" -eq 0 ] || echo ' --only-batches')${RAW_ORDER:+ $RAW_ORDER}"
    printf 'Cohort at %s; %s cores (%s); database: %s.\n\n' "$COMMIT" "$(nproc)" "${CPU:-unknown CPU}" "$SERVER"
} | tee "$OUT/summary.md"

# The table: medians over the rounds with min-max, and ratios to the raw loop computed per
# round (each Cohort run against the raw runs of the same round), then their median.
awk -F'\t' -v threads="$THREADS" -v nodes="$NODES" -v workers="$WORKERS" \
    -v tasks="$TASKS" -v rounds="$REPEAT" -v server_cpu="${SERVER_PID:+1}" "$AWK_STATS"'
NR > 1 {
    add($2 " rate", $3); add($2 " active", $4); add($2 " cpt", $5)
    if ($6 != "n/a") add($2 " steady", $6)
    if ($7 > 0) add($2 " poll", $7)
    rate[$1, $2] = $3
    add($2 " client cpu", $9 * 1000 / tasks)
    if (server_cpu) add($2 " server cpu", $10 * 1000 / tasks)
}
END {
    raw1 = "raw-1"; rawk = "raw-" threads; c1 = "cohort-1"; ck = "cohort-" nodes
    for (r = 1; r <= rounds; r++) {
        add(c1 " vs raw-1", rate[r, c1] / rate[r, raw1])
        add(c1 " vs raw-k", rate[r, c1] / rate[r, rawk])
        add(ck " vs raw-1", rate[r, ck] / rate[r, raw1])
        add(ck " vs raw-k", rate[r, ck] / rate[r, rawk])
        best = rate[r, raw1] > rate[r, rawk] ? rate[r, raw1] : rate[r, rawk]
        add(c1 " vs best", rate[r, c1] / best)
        add(ck " vs best", rate[r, ck] / best)
    }
    name[raw1] = "raw loop, 1 thread"
    name[rawk] = "raw loop, " threads " threads"
    name[c1] = "Cohort, 1 node x " workers " workers"
    name[ck] = "Cohort, " nodes " nodes x " workers " workers"
    printf "%d tasks per run, %d rounds; medians with min-max over the rounds.\n\n", tasks, rounds
    printf "| configuration | tasks/s | min-max | tasks/s, first claim to last finish | commands/task overall | commands/task, steady state | vs raw 1 thread | vs raw %d threads | vs the faster raw loop |\n", threads
    printf "|---|---|---|---|---|---|---|---|---|\n"
    n_configs = split(raw1 " " rawk " " c1 " " ck, order, " ")
    for (i = 1; i <= n_configs; i++) {
        c = order[i]
        if (!((c " rate") in lists)) continue # not run (--only-batches)
        vs1 = ratio(c " vs raw-1"); vsk = ratio(c " vs raw-k"); vsb = ratio(c " vs best")
        steady = (c " steady") in lists ? sprintf("%.3f", median(lists[c " steady"])) : "n/a"
        printf "| %s | %.0f | %.0f-%.0f | %.0f | %.3f | %s | %s | %s | %s |\n", name[c],
            median(lists[c " rate"]), extreme(lists[c " rate"], 0), extreme(lists[c " rate"], 1),
            median(lists[c " active"]), median(lists[c " cpt"]), steady, vs1, vsk, vsb
    }
    printf "\nRatios are medians (min-max) of per-round ratios: each Cohort run against the raw runs of its\n"
    printf "own round (the faster raw loop: whichever of the two was faster in that round). Steady state: between\n"
    printf "10%% and 90%% of the tasks done; \"n/a\" in a round where no node ticked in that window.\n"
    printf "\nCPU time per 1000 tasks (ms, medians): the client side (the raw loop process during its timed part;\n"
    printf "the Cohort nodes from start to SIGTERM) and the database server (from before inserting the tasks to the end).\n\n"
    printf "| configuration | client CPU ms / 1000 tasks | server CPU ms / 1000 tasks |\n|---|---|---|\n"
    for (i = 1; i <= n_configs; i++) {
        c = order[i]
        if (!((c " rate") in lists)) continue
        printf "| %s | %.0f | %s |\n", name[c], median(lists[c " client cpu"]),
            (c " server cpu") in lists ? sprintf("%.0f", median(lists[c " server cpu"])) : "n/a"
    }
    printf "\n"
    if ((ck " poll") in lists)
        printf "Polling progress cost a median of %d commands per %d-node run (%d per raw run with %d threads); they are in no column.\n", median(lists[ck " poll"]), nodes, median(lists[rawk " poll"]), threads
}' "$RESULTS" | tee -a "$OUT/summary.md"

# The claim_batch table: the cohort-N-bK runs of the same rounds, each against the
# claim_batch = 1 run with as many nodes in its round, and against the faster raw loop.
if [ "${#BATCHES[@]}" -gt 0 ]; then
    awk -F'\t' -v threads="$THREADS" -v nodes="$NODES" -v workers="$WORKERS" \
        -v tasks="$TASKS" -v rounds="$REPEAT" -v batches="${BATCHES[*]}" \
        -v server_cpu="${SERVER_PID:+1}" "$AWK_STATS"'
NR > 1 {
    add($2 " rate", $3); add($2 " active", $4); add($2 " cpt", $5)
    if ($6 != "n/a") add($2 " steady", $6)
    rate[$1, $2] = $3
    add($2 " client cpu", $9 * 1000 / tasks)
    if (server_cpu) add($2 " server cpu", $10 * 1000 / tasks)
}
END {
    nb = split(batches, ks, " ")
    sizes[1] = 1; sizes[2] = nodes
    printf "\nclaim_batch: Cohort with 1 and %d nodes of %d workers at each claim_batch, in the same %d rounds.\n\n", nodes, workers, rounds
    printf "| nodes | claim_batch | tasks/s | min-max | tasks/s, first claim to last finish | commands/task overall | commands/task, steady state | vs claim_batch = %d, same nodes | vs the faster raw loop | client CPU ms / 1000 tasks | server CPU ms / 1000 tasks |\n", ks[1]
    printf "|---|---|---|---|---|---|---|---|---|---|---|\n"
    for (s = 1; s <= 2; s++) {
        for (b = 1; b <= nb; b++) {
            c = "cohort-" sizes[s] "-b" ks[b]
            base = "cohort-" sizes[s] "-b" ks[1]
            for (r = 1; r <= rounds; r++) {
                add(c " vs base", rate[r, c] / rate[r, base])
                best = rate[r, "raw-1"] > rate[r, "raw-" threads] ? rate[r, "raw-1"] : rate[r, "raw-" threads]
                if (best > 0) add(c " vs best", rate[r, c] / best)
            }
            steady = (c " steady") in lists ? sprintf("%.3f", median(lists[c " steady"])) : "n/a"
            printf "| %d | %d | %.0f | %.0f-%.0f | %.0f | %.3f | %s | %s | %s | %.0f | %s |\n", sizes[s], ks[b],
                median(lists[c " rate"]), extreme(lists[c " rate"], 0), extreme(lists[c " rate"], 1),
                median(lists[c " active"]), median(lists[c " cpt"]), steady,
                b == 1 ? "-" : ratio(c " vs base"), ratio(c " vs best"), median(lists[c " client cpu"]),
                (c " server cpu") in lists ? sprintf("%.0f", median(lists[c " server cpu"])) : "n/a"
        }
    }
    printf "\nMedians over the rounds; ratios are medians (min-max) of per-round ratios.\n"
}' "$RESULTS" | tee -a "$OUT/summary.md"
fi

# --- a lone node out of the box ----------------------------------------------------------

if [ "$CAPPED_TASKS" -gt 0 ]; then
    log "capped: 1 node with primary_task_count = 10 (the default) on $CAPPED_TASKS tasks"
    run_cohort capped cohort-1-default 1 10 "$CAPPED_TASKS"
    printf '\nOne node with the default primary_task_count = 10, %d tasks: %s tasks/s, %s commands/task overall, %s at steady state.\n' \
        "$CAPPED_TASKS" "$(value tasks_per_s "$RUN_LINE")" "$RUN_COMMANDS_PER_TASK" \
        "$(value steady_commands_per_task "$RUN_LINE")" | tee -a "$OUT/summary.md"
fi

# --- idle cluster ----------------------------------------------------------------------

# What the cluster costs when there is nothing to do: per node, commands per tick, after the
# 2 start-up commands (service document, indexes) and the primary's step-down are taken out.
if [ "$IDLE_SECONDS" -gt 0 ]; then
    log "idle: $NODES nodes on an empty queue for $IDLE_SECONDS s"
    dir="$OUT/idle"
    db="bench_idle_$$"
    mkdir -p "$dir"
    started="$(date +%s%3N)"
    for ((i = 1; i <= NODES; i++)); do
        write_config "$dir/node$i.ini" "$db" "bench-$i" "$PRIMARY_TASK_COUNT"
        "$COHORTD" -c "$dir/node$i.ini" 2>"$dir/node$i.log" &
        NODE_PIDS+=($!)
    done
    sleep "$IDLE_SECONDS"
    stopping="$(date +%s%3N)"
    stop_nodes
    "$PROBE" drop --database "$db" || true
    ticks=$(((stopping - started) / TICK_MS + 1))
    {
        printf '\nIdle %d-node cluster (empty queue, %d ticks): commands per tick per node, start-up and step-down excluded:' "$NODES" "$ticks"
        for ((i = 1; i <= NODES; i++)); do
            stopped="$(grep 'stopped: ' "$dir/node$i.log" | tail -n 1)"
            role=secondary
            fixed=2
            if grep -q 'became primary' "$dir/node$i.log"; then
                role=primary
                fixed=3
            fi
            awk -v c="$(value db_commands "$stopped")" -v t="$ticks" -v f="$fixed" -v r="$role" \
                -v i="$i" 'BEGIN { printf " node %d (%s) %.2f;", i, r, (c - f) / t }'
        done
        printf '\n'
    } | tee -a "$OUT/summary.md"
fi
log "per-run numbers: $RESULTS; node logs: $OUT/*/"
