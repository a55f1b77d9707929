#!/usr/bin/env bash
# Local MongoDB-compatible server (mongo-java-server) for Cohort dev and tests.
#
# usage:
#   localdb.sh start STATE_DIR [--h2 FILE] [--port N] [--no-oplog] [--no-hold-getmore]
#       Build if needed, start the server in the background and print one
#       line to stdout: mongodb://127.0.0.1:PORT
#       STATE_DIR gets: pid, port, last-port, localdb.log. Started again on
#       the same STATE_DIR without --port, it takes last-port if that is free.
#       --h2 FILE  keep data in an H2 MVStore file (survives stop/start)
#       --port N   bind port N instead of a free one
#       --no-oplog without oplog emulation: change streams are refused, as on a
#                  standalone mongod (the oplog is on by default; --oplog is
#                  accepted and changes nothing)
#       --no-hold-getmore answer an empty change-stream getMore at once (the
#                  library's behaviour) instead of holding it up to its
#                  maxTimeMS as MongoDB does (the default)
#   localdb.sh stop STATE_DIR      stop it (TERM, then KILL); idempotent
#   localdb.sh status STATE_DIR    print the URI and exit 0 if running, else exit 1
#   localdb.sh build               (re)build target/classes and target/lib
#
# Environment:
#   LOCALDB_START_TIMEOUT  seconds to wait for the server to bind (default 60)
#   LOCALDB_STOP_TIMEOUT   seconds between TERM and KILL (default 5)
#   LOCALDB_JAVA_OPTS      extra JVM options (e.g. -Xmx1g)
#   LOCALDB_OPLOG          0: as --no-oplog (for scripts that start it indirectly)
#   LOCALDB_OPLOG_WINDOW_S oplog entries older than this are dropped (default 600)
#   LOCALDB_HOLD_GETMORE   0: as --no-hold-getmore
#
# Installs default-jdk-headless and maven with apt-get if java/javac/mvn are
# missing. Everything except the URI goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TARGET="$HERE/target"
MAIN_CLASS="dev.cohort.localdb.LocalDb"
START_TIMEOUT="${LOCALDB_START_TIMEOUT:-60}"
STOP_TIMEOUT="${LOCALDB_STOP_TIMEOUT:-5}"

log() { printf 'localdb: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

usage() {
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
    exit "${1:-2}"
}

abspath() {
    case "$1" in
        /*) printf '%s\n' "$1" ;;
        *) printf '%s/%s\n' "$(pwd)" "$1" ;;
    esac
}

# --- tools -----------------------------------------------------------------

ensure_tools() {
    if command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 \
        && command -v mvn >/dev/null 2>&1; then
        return 0
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "java/mvn missing and not root (no sudo)"
        sudo=(sudo)
    fi
    log "installing default-jdk-headless and maven with apt-get"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends default-jdk-headless maven >&2
    if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
        die "java/mvn still missing after apt-get install"
    fi
}

# --- build -----------------------------------------------------------------

STAMP="$TARGET/.localdb-build-stamp"

needs_build() {
    [ -f "$STAMP" ] || return 0
    [ -f "$TARGET/classes/dev/cohort/localdb/LocalDb.class" ] || return 0
    [ -d "$TARGET/lib" ] || return 0
    compgen -G "$TARGET/lib/mongo-java-server-core-*.jar" >/dev/null || return 0
    [ -z "$(find "$HERE/pom.xml" "$HERE/src" -newer "$STAMP" -print -quit)" ] || return 0
    return 1
}

do_build() {
    local out rc=0
    out="$(mktemp)"
    (cd "$HERE" && mvn -q -B -Dstyle.color=never package -DskipTests) >"$out" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        cat "$out" >&2
        rm -f "$out"
        die "build failed (mvn exit $rc)"
    fi
    rm -f "$out"
    touch "$STAMP"
}

# build [force]: serialised with flock so parallel `start`s don't race.
build() {
    local force="${1:-}"
    ensure_tools
    mkdir -p "$TARGET"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$TARGET/.localdb-build.lock"
        flock 9
    fi
    if [ -n "$force" ] || needs_build; then
        log "building $HERE"
        do_build
    fi
    if command -v flock >/dev/null 2>&1; then
        flock -u 9
        exec 9>&-
    fi
}

# --- process helpers -------------------------------------------------------

# is_ours PID: alive and running our main class (guards against pid reuse)
is_ours() {
    local pid="$1"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    if [ -r "/proc/$pid/cmdline" ]; then
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$MAIN_CLASS"
    fi
}

read_pid() {
    local f="$1/pid"
    if [ -f "$f" ]; then
        tr -dc '0-9' <"$f" || true
    fi
}

kill_server() {
    local pid="$1" i
    is_ours "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
        is_ours "$pid" || return 0
        sleep 0.1
    done
    log "pid $pid did not exit after TERM; sending KILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        is_ours "$pid" || return 0
        sleep 0.1
    done
    log "pid $pid still alive after KILL"
    return 1
}

# port_is_free PORT: nothing accepts connections on 127.0.0.1:PORT
port_is_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# --- commands --------------------------------------------------------------

START_PID=""
START_STATE=""
STARTED=""

# EXIT trap while `start` waits: never leave a half-started server behind.
cleanup_start() {
    if [ -z "$STARTED" ] && [ -n "$START_PID" ]; then
        kill -KILL "$START_PID" 2>/dev/null || true
        wait "$START_PID" 2>/dev/null || true
        rm -f "$START_STATE/pid" "$START_STATE/port"
    fi
}

cmd_start() {
    [ $# -ge 1 ] || usage
    local state h2="" port="" oplog=1 hold=1
    [ "${LOCALDB_OPLOG:-1}" = 0 ] && oplog=""
    state="$(abspath "$1")"
    shift
    while [ $# -gt 0 ]; do
        case "$1" in
            --h2) [ $# -ge 2 ] || usage; h2="$(abspath "$2")"; shift 2 ;;
            --port) [ $# -ge 2 ] || usage; port="$2"; shift 2 ;;
            --oplog) oplog=1; shift ;;
            --no-oplog) oplog=""; shift ;;
            --no-hold-getmore) hold=""; shift ;;
            *) usage ;;
        esac
    done
    if [ -n "$port" ] && ! [[ "$port" =~ ^[0-9]+$ ]]; then
        die "invalid --port: $port"
    fi

    mkdir -p "$state"
    local old
    old="$(read_pid "$state")"
    if is_ours "$old"; then
        die "already running in $state (pid $old); run: $0 stop $state"
    fi
    rm -f "$state/pid" "$state/port"

    build

    # Restarted without --port, the server takes the port it had (kept in STATE_DIR/last-port)
    # if that is still free, so nodes started against the old URI reconnect.
    if [ -z "$port" ] && [ -s "$state/last-port" ]; then
        local last
        last="$(tr -dc '0-9' <"$state/last-port")"
        if [ -n "$last" ] && port_is_free "$last"; then
            port="$last"
        elif [ -n "$last" ]; then
            log "port $last (of the last start) is taken now: using a free one"
        fi
    fi

    local args=(--port-file "$state/port")
    [ -n "$h2" ] && args+=(--h2 "$h2")
    [ -n "$port" ] && args+=(--port "$port")
    [ -n "$oplog" ] && args+=(--oplog)
    [ -z "$hold" ] && args+=(--no-hold-getmore)

    # shellcheck disable=SC2086 # LOCALDB_JAVA_OPTS is a word list on purpose
    java ${LOCALDB_JAVA_OPTS:-} -cp "$TARGET/classes:$TARGET/lib/*" "$MAIN_CLASS" "${args[@]}" \
        </dev/null >"$state/localdb.log" 2>&1 &
    START_PID=$!
    START_STATE="$state"
    echo "$START_PID" >"$state/pid"

    # From here on, any failure or interruption must not leave the server behind.
    trap cleanup_start EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    local pid="$START_PID" i p=""
    for ((i = 0; i < START_TIMEOUT * 10; i++)); do
        if [ -s "$state/port" ]; then
            p="$(tr -dc '0-9' <"$state/port")"
            [ -n "$p" ] && break
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            local rc=0
            wait "$pid" || rc=$?
            log "server exited (status $rc) during startup; last lines of $state/localdb.log:"
            tail -n 30 "$state/localdb.log" >&2 || true
            exit 1
        fi
        sleep 0.1
    done
    if [ -z "$p" ]; then
        log "server did not bind within ${START_TIMEOUT}s; last lines of $state/localdb.log:"
        tail -n 30 "$state/localdb.log" >&2 || true
        exit 1
    fi
    STARTED=1
    trap - EXIT INT TERM
    echo "$p" >"$state/last-port"
    printf 'mongodb://127.0.0.1:%s\n' "$p"
}

cmd_stop() {
    [ $# -eq 1 ] || usage
    local state pid
    state="$(abspath "$1")"
    [ -d "$state" ] || return 0
    pid="$(read_pid "$state")"
    if [ -n "$pid" ]; then
        kill_server "$pid" || exit 1
    fi
    rm -f "$state/pid" "$state/port"
}

cmd_status() {
    [ $# -eq 1 ] || usage
    local state pid p=""
    state="$(abspath "$1")"
    pid="$(read_pid "$state")"
    is_ours "$pid" || { log "not running"; exit 1; }
    [ -s "$state/port" ] && p="$(tr -dc '0-9' <"$state/port")"
    [ -n "$p" ] || { log "running (pid $pid) but no port yet"; exit 1; }
    printf 'mongodb://127.0.0.1:%s\n' "$p"
}

[ $# -ge 1 ] || usage
cmd="$1"
shift
case "$cmd" in
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    build) [ $# -eq 0 ] || usage; build force ;;
    -h | --help | help) usage 0 ;;
    *) usage ;;
esac
