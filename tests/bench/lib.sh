# Shell helpers for the benchmark scripts in tests/bench/ (sourced, not run; run.sh, peers.sh,
# growth.sh, profile.sh, explain.sh and batched.sh use them). The sourcing script sets ROOT (the checkout) and BUILD (the build
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

# number OPTION VALUE: dies unless VALUE is a positive whole number
number() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 '$2' must be a positive whole number"; }

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

# memory_kb PID FIELD: VmHWM or VmRSS of a live process, in kB (0 if it is gone)
memory_kb() {
    awk -v f="$2:" '$1 == f { print $2; found = 1 } END { if (!found) print 0 }' \
        "/proc/$1/status" 2>/dev/null || echo 0
}

# AWK_STATS: awk functions the summaries share, to put before an awk program: median(list)
# and extreme(list, want_max) of a space-separated list, add(key, v) appending v to lists[key],
# ratio(key): lists[key]'s median and min-max as percentages.
AWK_STATS='
function median(list,    a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    if (n == 0) return "n/a"
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function extreme(list, want_max,    a, n, i, v) {
    n = split(list, a, " ")
    v = a[1]
    for (i = 2; i <= n; i++)
        if ((want_max && a[i] + 0 > v + 0) || (!want_max && a[i] + 0 < v + 0)) v = a[i]
    return v
}
function add(key, v) { lists[key] = (key in lists) ? lists[key] " " v : v }
function ratio(key) {
    if (!(key in lists)) return "-"
    return sprintf("%.0f%% (%.0f-%.0f%%)", 100 * median(lists[key]), 100 * extreme(lists[key], 0),
                   100 * extreme(lists[key], 1))
}
'

# --- building ----------------------------------------------------------------------------

# bench_build: Cohort with deploy/setup.sh and the two bench programs; sets COMMIT (what was
# built: the tree may move on while the benchmark runs), RAW_LOOP, PROBE, COHORTD, COHORTCTL
# and HANDLER.
bench_build() {
    bash "$ROOT/deploy/setup.sh" "$BUILD"
    COMMIT="$(bench_commit)"
    local bin="$BUILD/tests/bench" prog flags
    if [ ! -d "$bin/CMakeFiles" ]; then
        # CMake does not build them (tests/CMakeLists.txt lacks add_subdirectory(bench), or
        # COHORT_TESTS=OFF): compile them directly, every time, so they are never stale.
        log "building the bench programs with cc into $bin"
        mkdir -p "$bin"
        read -r -a flags <<<"$(pkg-config --cflags --libs libmongoc-1.0)"
        for prog in raw_loop probe; do
            cc -std=gnu11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$bin/$prog" \
                "$ROOT/tests/bench/$prog.c" "$ROOT/tests/bench/bench_common.c" \
                "${flags[@]}" -pthread
        done
    fi
    RAW_LOOP="$bin/raw_loop"
    PROBE="$bin/probe"
    COHORTD="$BUILD/cohortd"
    COHORTCTL="$BUILD/cohortctl"
    HANDLER="$BUILD/handlers/cohort_noop.so"
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

# stop_nodes: SIGTERM to every process in NODE_PIDS, SIGKILL to any still alive STOP_WAIT_S
# seconds on (default 15; a node whose commands each scan a long queue on the local server
# needs longer to finish its last ones)
stop_nodes() {
    local pid i
    for pid in "${NODE_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${NODE_PIDS[@]}"; do
        for ((i = 0; i < ${STOP_WAIT_S:-15} * 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "node pid $pid ignored SIGTERM for ${STOP_WAIT_S:-15} s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    NODE_PIDS=()
}

# --- Cohort ------------------------------------------------------------------------------

# write_config FILE DATABASE NODE_ID [PRIMARY_TASK_COUNT [CLAIM_BATCH]]: one node's
# configuration for the noop service (WORKERS workers, TICK_MS, TAKEOVER_MS); an empty or
# missing setting is not written, so the node uses the product default.
write_config() {
    cat >"$1" <<EOF
; Written by tests/bench for one benchmark run. The server is MONGODB_URI's.
[cluster]
database          = $2
tick_ms           = $TICK_MS
takeover_ms       = $TAKEOVER_MS
shutdown_grace_ms = 5000
node_id           = $3
log_level         = info

[service:noop]
handler              = $HANDLER
workers              = $WORKERS
secondary_task_count = 0
EOF
    if [ -n "${4:-}" ]; then
        printf 'primary_task_count   = %s\n' "$4" >>"$1"
    fi
    if [ -n "${5:-}" ]; then
        printf 'claim_batch          = %s\n' "$5" >>"$1"
    fi
}

# start_nodes DIR DATABASE COUNT [PRIMARY_TASK_COUNT [CLAIM_BATCH]]: writes DIR/nodeI.ini and
# starts COUNT nodes (ids bench-I) logging to DIR/nodeI.log; their pids go in NODE_PIDS.
start_nodes() {
    local i
    for ((i = 1; i <= $3; i++)); do
        write_config "$1/node$i.ini" "$2" "bench-$i" "${4:-}" "${5:-}"
    done
    for ((i = 1; i <= $3; i++)); do
        "$COHORTD" -c "$1/node$i.ini" 2>"$1/node$i.log" &
        NODE_PIDS+=($!)
    done
}

# stopped_line DIR I: node I's final `stopped: ...` log line, or dies
stopped_line() {
    local line
    line="$(grep 'stopped: ' "$1/node$2.log" | tail -n 1)"
    [ -n "$line" ] || die "node $2 wrote no 'stopped:' line; see $1/node$2.log"
    printf '%s\n' "$line"
}

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
