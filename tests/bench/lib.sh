# lib.sh - what the throughput benchmarks (run.sh, growth.sh) share, sourced by them: messages
# and option checks, the build of Cohort and of the bench programs (raw_loop, probe), the
# local database, a node's configuration, stopping nodes, and reading /proc.
#
# The sourcing script sets ROOT and BUILD first, and may set LOG_PREFIX (default "bench").
# bench_build sets COMMIT, RAW_LOOP, PROBE, COHORTD, COHORTCTL and HANDLER; bench_start_db
# sets and exports MONGODB_URI, and sets LOCALDB_STATE and SERVER_PID (empty when
# MONGODB_URI came from the environment). write_config reads WORKERS, TICK_MS and
# TAKEOVER_MS. Node pids go in NODE_PIDS; the EXIT trap stops them and the local database.

log() { printf '%s: %s\n' "${LOG_PREFIX:-bench}" "$*" >&2; }
die() { log "$*"; exit 1; }
# usage [STATUS]: prints the sourcing script's header comment (up to `set -euo`)
usage() {
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0" >&2
    exit "${1:-2}"
}
number() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 '$2' must be a positive whole number"; }

# bench_build: Cohort with deploy/setup.sh, and the two bench programs.
bench_build() {
    bash "$ROOT/deploy/setup.sh" "$BUILD"
    # What was built (the tree may move on while the benchmark runs).
    COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    [ -z "$(git -C "$ROOT" status --porcelain -- src include handlers 2>/dev/null)" ] \
        || COMMIT="$COMMIT + uncommitted changes in src/, include/ or handlers/"
    local bin="$BUILD/tests/bench" prog
    if [ ! -d "$bin/CMakeFiles" ]; then
        # CMake does not build them (tests/CMakeLists.txt lacks add_subdirectory(bench), or
        # COHORT_TESTS=OFF): compile them directly, every time, so they are never stale.
        log "building the bench programs with cc into $bin"
        mkdir -p "$bin"
        local flags
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

# stop_nodes: SIGTERM, then SIGKILL after STOP_WAIT_S seconds (default 15; a node whose
# commands each scan a long queue on the local server needs longer to finish its last ones)
NODE_PIDS=()
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

LOCALDB_STATE=""
bench_cleanup() {
    stop_nodes
    if [ -n "$LOCALDB_STATE" ]; then
        bash "$ROOT/deploy/localdb/localdb.sh" stop "$LOCALDB_STATE" >/dev/null 2>&1 || true
    fi
}

# bench_start_db STATE_NAME: the local database in BUILD/STATE_NAME unless MONGODB_URI is set.
bench_start_db() {
    trap bench_cleanup EXIT
    if [ -z "${MONGODB_URI:-}" ]; then
        LOCALDB_STATE="$BUILD/$1"
        mkdir -p "$LOCALDB_STATE"
        bash "$ROOT/deploy/localdb/localdb.sh" stop "$LOCALDB_STATE" >/dev/null 2>&1 || true
        MONGODB_URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$LOCALDB_STATE")"
        log "local database at $MONGODB_URI"
    else
        log "using MONGODB_URI from the environment"
    fi
    export MONGODB_URI
    SERVER_PID=""
    [ -n "$LOCALDB_STATE" ] && SERVER_PID="$(tr -dc '0-9' <"$LOCALDB_STATE/pid")"
    CLK_TCK="$(getconf CLK_TCK)"
}

# bench_server_name: where the numbers were taken, for the summary.
bench_server_name() {
    if [ -n "$LOCALDB_STATE" ]; then
        echo "the local mongo-java-server (in-memory) started by this script"
    else
        echo "MONGODB_URI from the environment"
    fi
}

# cpu_ms PID: CPU time (user + system) the process has used so far, 0 if it is not ours to see
cpu_ms() {
    local stat
    [ -n "$1" ] && stat="$(cat "/proc/$1/stat" 2>/dev/null)" || { echo 0; return; }
    # fields after "pid (comm) ": state is the 1st, utime the 12th, stime the 13th
    awk -v tck="$CLK_TCK" '{ printf "%d", ($12 + $13) * 1000 / tck }' <<<"${stat##*) }"
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

# value KEY LINE: the value of KEY=value in a result line
value() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# write_config FILE DATABASE NODE_ID [PRIMARY_TASK_COUNT [CLAIM_BATCH]]
# (an empty or missing setting is not written, so the node uses the product default)
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
