# Shell helpers for the benchmark scripts in tests/bench/ (sourced, not run; run.sh and
# peers.sh use them). The sourcing script sets ROOT (the checkout) and BUILD (the build
# directory) and names itself in BENCH_NAME, which prefixes its log lines (on stderr).

log() { printf '%s: %s\n' "$BENCH_NAME" "$*" >&2; }
die() {
    log "$*"
    exit 1
}

# usage [STATUS]: the running script's top comment (its lines from the second to `set -euo`)
usage() {
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0" >&2
    exit "${1:-2}"
}

# bench_commit: the commit the build was made from, and whether the product's sources differ
bench_commit() {
    local commit
    commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    [ -z "$(git -C "$ROOT" status --porcelain -- src include handlers 2>/dev/null)" ] \
        || commit="$commit + uncommitted changes in src/, include/ or handlers/"
    printf '%s\n' "$commit"
}

# value KEY LINE: the value of KEY=value in a line of key=value pairs
value() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# cpu_ms PID: CPU time (user + system) the process has used so far; 0 if not ours to see
cpu_ms() {
    local stat
    [ -n "$1" ] && stat="$(cat "/proc/$1/stat" 2>/dev/null)" || {
        echo 0
        return
    }
    # fields after "pid (comm) ": state is the 1st, utime the 12th, stime the 13th
    awk -v tck="$(getconf CLK_TCK)" '{ printf "%d", ($12 + $13) * 1000 / tck }' <<<"${stat##*) }"
}

# run_rounds FUNCTION WARMUP REPEAT CONFIG...: FUNCTION ROUND CONFIG for every configuration,
# first once as round "warmup" (if WARMUP is 1: the local server is a JVM whose first runs are
# slow), then in rounds 1 to REPEAT, each in an order rotated from the round before so that no
# configuration always goes first
run_rounds() {
    local run="$1" warmup="$2" repeat="$3" round k
    shift 3
    if [ "$warmup" -eq 1 ]; then
        log "warm-up round (not recorded): the server's JIT compiles its hot paths"
        for k in "$@"; do "$run" warmup "$k"; done
    fi
    for ((round = 1; round <= repeat; round++)); do
        for ((k = 0; k < $#; k++)); do
            "$run" "$round" "${@:$(((round - 1 + k) % $# + 1)):1}"
        done
    done
}

# --- the database ------------------------------------------------------------------------

# database_start: exports MONGODB_URI, starting the local server (mongo-java-server, in
# memory) in LOCALDB_STATE = BUILD/bench-localdb unless MONGODB_URI is set already; sets
# SERVER_PID (the local server's pid, empty for a server of the environment) and
# BENCH_SERVER (what the server is, in words).
LOCALDB_STATE=""
SERVER_PID=""
database_start() {
    if [ -n "${MONGODB_URI:-}" ]; then
        log "using MONGODB_URI from the environment"
        BENCH_SERVER="MONGODB_URI from the environment"
    else
        LOCALDB_STATE="$BUILD/bench-localdb"
        mkdir -p "$LOCALDB_STATE"
        bash "$ROOT/deploy/localdb/localdb.sh" stop "$LOCALDB_STATE" >/dev/null 2>&1 || true
        MONGODB_URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$LOCALDB_STATE")"
        SERVER_PID="$(tr -dc '0-9' <"$LOCALDB_STATE/pid")"
        BENCH_SERVER="the local mongo-java-server (in memory) started by this script"
        log "local database at $MONGODB_URI"
    fi
    export MONGODB_URI
}

database_stop() {
    [ -z "$LOCALDB_STATE" ] \
        || bash "$ROOT/deploy/localdb/localdb.sh" stop "$LOCALDB_STATE" >/dev/null 2>&1 || true
}

# --- processes ---------------------------------------------------------------------------

# The Cohort nodes a run started: stop_nodes ends them.
NODE_PIDS=()

# stop_nodes: SIGTERM to every process in NODE_PIDS, SIGKILL to any still alive 15 s on
stop_nodes() {
    local pid i
    for pid in "${NODE_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${NODE_PIDS[@]}"; do
        for ((i = 0; i < 150; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "node pid $pid ignored SIGTERM for 15 s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    NODE_PIDS=()
}

# --- Cohort ------------------------------------------------------------------------------

# bench_cohort_nodes_run DIR DATABASE NODES TASKS: starts NODES cohortd processes on the
# configuration files DIR/node1.ini ... (written by the caller, with the tasks enqueued), lets
# the probe (BUILD/tests/bench/probe) wait until TASKS have succeeded, stops the nodes and
# drops DATABASE. Leaves the probe's line in BENCH_RUN_LINE and the nodes' database commands
# (from each node's final "stopped: ... db_commands=N" log line) in BENCH_RUN_COMMANDS.
bench_cohort_nodes_run() {
    local dir="$1" db="$2" nodes="$3" tasks="$4" since i stopped
    since="$(date +%s%3N)"
    for ((i = 1; i <= nodes; i++)); do
        "$BUILD/cohortd" -c "$dir/node$i.ini" 2>"$dir/node$i.log" &
        NODE_PIDS+=($!)
    done
    if ! BENCH_RUN_LINE="$("$BUILD/tests/bench/probe" wait --database "$db" --tasks "$tasks" \
        --since-ms "$since" --timeout-s 300)"; then
        stop_nodes
        tail -n 20 "$dir"/node*.log >&2 || true
        die "Cohort run failed; logs in $dir"
    fi
    stop_nodes
    BENCH_RUN_COMMANDS=0
    for ((i = 1; i <= nodes; i++)); do
        stopped="$(grep 'stopped: ' "$dir/node$i.log" | tail -n 1)"
        [ -n "$stopped" ] || die "node $i wrote no 'stopped:' line; see $dir/node$i.log"
        BENCH_RUN_COMMANDS=$((BENCH_RUN_COMMANDS + $(value db_commands "$stopped")))
    done
    "$BUILD/tests/bench/probe" drop --database "$db" || true
}
