# Shell helpers for the benchmark scripts in tests/bench/ (sourced, not run). The sourcing
# script sets ROOT (the checkout) and BUILD (the build directory) and names itself in
# BENCH_NAME, which prefixes its log lines. Every helper logs to stderr.

log() { printf '%s: %s\n' "$BENCH_NAME" "$*" >&2; }
die() {
    log "$*"
    exit 1
}

# bench_commit: the commit the build was made from, and whether the product's sources differ
bench_commit() {
    local commit
    commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    [ -z "$(git -C "$ROOT" status --porcelain -- src include handlers 2>/dev/null)" ] \
        || commit="$commit + uncommitted changes in src/, include/ or handlers/"
    printf '%s\n' "$commit"
}

# bench_value KEY LINE: the value of KEY=value in a line of key=value pairs
bench_value() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# bench_cpu_ms PID: CPU time (user + system) the process has used so far; 0 if not ours to see
bench_cpu_ms() {
    local stat
    [ -n "$1" ] && stat="$(cat "/proc/$1/stat" 2>/dev/null)" || {
        echo 0
        return
    }
    # fields after "pid (comm) ": state is the 1st, utime the 12th, stime the 13th
    awk -v tck="$(getconf CLK_TCK)" '{ printf "%d", ($12 + $13) * 1000 / tck }' <<<"${stat##*) }"
}

# --- the database ------------------------------------------------------------------------

# bench_database_start: exports MONGODB_URI, starting the local server (mongo-java-server, in
# memory) in BUILD/bench-localdb unless MONGODB_URI is set already; sets BENCH_SERVER_PID (the
# local server's pid, empty for a server of the environment) and BENCH_SERVER (what it is).
BENCH_LOCALDB=""
BENCH_SERVER_PID=""
bench_database_start() {
    if [ -n "${MONGODB_URI:-}" ]; then
        log "using MONGODB_URI from the environment"
        BENCH_SERVER="MONGODB_URI from the environment"
    else
        BENCH_LOCALDB="$BUILD/bench-localdb"
        mkdir -p "$BENCH_LOCALDB"
        bash "$ROOT/deploy/localdb/localdb.sh" stop "$BENCH_LOCALDB" >/dev/null 2>&1 || true
        MONGODB_URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$BENCH_LOCALDB")"
        BENCH_SERVER_PID="$(tr -dc '0-9' <"$BENCH_LOCALDB/pid")"
        BENCH_SERVER="the local mongo-java-server (in memory) started by this script"
        log "local database at $MONGODB_URI"
    fi
    export MONGODB_URI
}

bench_database_stop() {
    [ -z "$BENCH_LOCALDB" ] \
        || bash "$ROOT/deploy/localdb/localdb.sh" stop "$BENCH_LOCALDB" >/dev/null 2>&1 || true
}

# --- processes ---------------------------------------------------------------------------

# The processes a run started (Cohort nodes, peers' workers): bench_stop_all ends them.
BENCH_PIDS=()

# bench_stop_all: SIGTERM to every process in BENCH_PIDS, SIGKILL to any still alive 15 s on
bench_stop_all() {
    local pid i
    for pid in "${BENCH_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${BENCH_PIDS[@]}"; do
        for ((i = 0; i < 150; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "pid $pid ignored SIGTERM for 15 s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    BENCH_PIDS=()
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
        BENCH_PIDS+=($!)
    done
    if ! BENCH_RUN_LINE="$("$BUILD/tests/bench/probe" wait --database "$db" --tasks "$tasks" \
        --since-ms "$since" --timeout-s 300)"; then
        bench_stop_all
        tail -n 20 "$dir"/node*.log >&2 || true
        die "Cohort run failed; logs in $dir"
    fi
    bench_stop_all
    BENCH_RUN_COMMANDS=0
    for ((i = 1; i <= nodes; i++)); do
        stopped="$(grep 'stopped: ' "$dir/node$i.log" | tail -n 1)"
        [ -n "$stopped" ] || die "node $i wrote no 'stopped:' line; see $dir/node$i.log"
        BENCH_RUN_COMMANDS=$((BENCH_RUN_COMMANDS + $(bench_value db_commands "$stopped")))
    done
    "$BUILD/tests/bench/probe" drop --database "$db" || true
}
