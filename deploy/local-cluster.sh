#!/usr/bin/env bash
# Runs a local 3-node Cohort cluster with the shipped noop handler and shows tasks flowing.
#
#   bash deploy/local-cluster.sh [--nodes N] [--duration SECONDS] [--failover] [--leaderboard]
#   bash deploy/local-cluster.sh --build-only
#
# Installs what is missing and builds (deploy/setup.sh), starts the local MongoDB-compatible
# server on a free port unless MONGODB_URI is set, starts N cohortd nodes (default 3) whose
# primary generates 30 tasks per tick for all nodes to process, and prints the cluster status
# every 2 s until Ctrl-C (or --duration). Each node serves the dashboard (/ui/) and the API on
# its own http_listen (127.0.0.1:9465 and up, the first free ports); the script prints a
# one-time sign-in link (cohortctl ui-link). --failover kills the primary with SIGKILL after
# 10 s and restarts it later, so you can watch another node take over with a higher epoch.
# --leaderboard runs the leaderboard handler instead (200 boards rolled over every 15 s) and,
# at the end, checks that every board of every period was rolled over.
# --build-only installs and builds (everything `cmake --install` needs), then exits.
# Node logs and configs are in .cohort/cluster/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
NODES=3
DURATION=0
FAILOVER=0
LEADERBOARD=0
BUILD_ONLY=0
while (($#)); do
    case "$1" in
        --nodes) NODES="$2"; shift 2 ;;
        --duration) DURATION="$2"; shift 2 ;;
        --failover) FAILOVER=1; shift ;;
        --leaderboard) LEADERBOARD=1; shift ;;
        --build-only) BUILD_ONLY=1; shift ;;
        -h|--help) sed -n '2,16s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "local-cluster: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

COHORT_TARGETS=cohort_runtime bash "$ROOT/deploy/setup.sh" "$BUILD"
if ((BUILD_ONLY)); then
    echo "local-cluster: built into $BUILD (cmake --install $BUILD installs it)"
    exit 0
fi

STATE="$ROOT/.cohort/cluster"
mkdir -p "$STATE"
PIDS=()
DB_STARTED=0
cleanup() {
    trap - EXIT INT TERM
    echo
    echo "local-cluster: stopping ${#PIDS[@]} node(s)..."
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if ((LEADERBOARD)); then verify_leaderboard; fi
    if ((DB_STARTED)); then bash "$ROOT/deploy/localdb/localdb.sh" stop "$STATE/db" >/dev/null 2>&1 || true; fi
    echo "local-cluster: done. Logs: $STATE/node-*.log"
}

# Every (period, board) in the journal, how many periods completed, and re-runs (a task whose
# node died mid-run runs again: at-least-once; its journal line then shows attempt > 1).
verify_leaderboard() {
    echo "local-cluster: leaderboard check"
    awk '{ if (!(($1 " " $2) in seen)) { seen[$1 " " $2] = 1; boards[$1]++; pairs++ }
           if ($4 > 1) reruns++ }
         END {
           for (p in boards) printf "  period %s: %d distinct boards rolled over\n", p, boards[p]
           printf "  %d (period, board) pairs, %d re-runs after a node died mid-task\n", pairs, reruns + 0
         }' "$STATE/journal.txt" | sort
    grep -h "rolled over:" "$STATE"/node-*.log | sed 's/^.*| /  /' | sort | uniq -c
    SERVICE=leaderboards
    echo "  last_rollover = $("$BUILD/cohortctl" -c "$STATE/node-1.ini" data get "$SERVICE" last_rollover 2>&1)" \
        "(completed batches: $(grep -h "batch [0-9]* completed" "$STATE"/node-*.log | wc -l))"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

if [ -z "${MONGODB_URI:-}" ]; then
    mkdir -p "$STATE/db"
    bash "$ROOT/deploy/localdb/localdb.sh" stop "$STATE/db" >/dev/null 2>&1 || true
    MONGODB_URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$STATE/db")"
    DB_STARTED=1
fi
export MONGODB_URI
export MONGOC_DISABLE_SHM=1 # libmongoc's shared-memory counters (unused): deploy/systemd says why
DATABASE="cohort_demo_$(date +%s)"
echo "local-cluster: database $DATABASE at $MONGODB_URI"

service_section() {
    if ((LEADERBOARD)); then
        cat <<INI
[service:leaderboards]
handler   = $BUILD/handlers/cohort_leaderboard.so
workers   = 4
boards    = 200
period_ms = 15000
work_ms   = 100
stall_timeout_ms = 5000
journal   = $STATE/journal.txt
INI
    else
        cat <<INI
[service:demo]
handler           = $BUILD/handlers/cohort_noop.so
workers           = 2
generate_per_tick = 30
sleep_ms          = 20
journal           = $STATE/journal.txt
INI
    fi
}

# A free local port from $1 up (bash's /dev/tcp: a refused connection means free).
free_port() {
    local p="$1"
    while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
    echo "$p"
}
HTTP_PORTS=()
next_port=9465
for ((i = 1; i <= NODES; i++)); do
    HTTP_PORTS[$i]=$(free_port "$next_port")
    next_port=$((HTTP_PORTS[i] + 1))
done

start_node() {
    local i="$1"
    # The URI is in the file too, so the cohortctl commands printed below work in another
    # shell without MONGODB_URI; the file may hold credentials, so only its owner reads it.
    install -m 0600 /dev/null "$STATE/node-$i.ini"
    cat > "$STATE/node-$i.ini" <<INI
[cluster]
mongodb_uri = $MONGODB_URI
database    = $DATABASE
tick_ms     = 1000
takeover_ms = 5000
node_id     = node-$i
log_level   = info
http_listen = 127.0.0.1:${HTTP_PORTS[$i]}

$(service_section)
INI
    "$BUILD/cohortd" -c "$STATE/node-$i.ini" >>"$STATE/node-$i.log" 2>&1 &
    PIDS[$i]=$!
}

: > "$STATE/journal.txt"
for ((i = 1; i <= NODES; i++)); do : > "$STATE/node-$i.log"; start_node "$i"; done
echo "local-cluster: $NODES nodes started (logs in $STATE); Ctrl-C to stop"
# The link names the last node: the first usually becomes the primary, the one --failover kills.
if link=$("$BUILD/cohortctl" -c "$STATE/node-1.ini" ui-link --scopes operate --ttl 30m \
          --url "http://127.0.0.1:${HTTP_PORTS[$NODES]}" 2>/dev/null); then
    echo "local-cluster: open the dashboard (a one-time link, valid 30 min; any node serves it):"
    echo
    echo "    $link"
    echo
    echo "  Every node serves it: once signed in, http://127.0.0.1:${HTTP_PORTS[1]}/ui/ works too"
    echo "  (the session is in the database); if the node behind the page is killed, its refresh"
    echo "  fails until it is back. Another link: $BUILD/cohortctl -c $STATE/node-1.ini ui-link"
fi

started=$(date +%s)
killed=""
while :; do
    # Leaderboard failover waits for a rollover to begin: look often, print every 2 s.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.2
        if ((FAILOVER && LEADERBOARD)) && [ -z "$killed" ] && [ "$(grep -h "begins:" "$STATE"/node-*.log | wc -l)" -ge 2 ]; then break; fi
    done
    now=$(date +%s)
    elapsed=$((now - started))
    echo
    echo "=== t+${elapsed}s ==="
    "$BUILD/cohortctl" -c "$STATE/node-1.ini" status || true
    echo "tasks processed per node (from the journal):"
    awk -v col=$((LEADERBOARD ? 3 : 2)) '{print "  " $col}' "$STATE/journal.txt" | sort | uniq -c | sort -k2
    grep -h -E "became primary|lost primacy|stepped down|rolled over:|begins:" "$STATE"/node-*.log | sort | tail -n 4 | sed 's/^/  /'
    if ((FAILOVER && LEADERBOARD)) && [ -z "$killed" ]; then
        line=$(grep -h "begins:" "$STATE"/node-*.log | sort | sed -n 2p)
        if [ -n "$line" ]; then
            primary=$(sed -n 's/.*node=node-\([0-9]*\) .*/\1/p' <<<"$line")
            echo ">>> failover demo: kill -9 node-$primary, the primary, in the middle of a rollover"
            kill -KILL "${PIDS[$primary]}" 2>/dev/null || true
            wait "${PIDS[$primary]}" 2>/dev/null || true
            killed="$primary"; killed_at=$elapsed
        fi
    fi
    if ((FAILOVER && !LEADERBOARD)) && [ -z "$killed" ] && ((elapsed >= 10)); then
        primary=$("$BUILD/cohortctl" -c "$STATE/node-1.ini" status --json | sed -n 's/.*"node_id" : "node-\([0-9]*\)".*/\1/p')
        if [ -n "$primary" ]; then
            echo ">>> failover demo: kill -9 node-$primary (the primary); another node takes over within takeover_ms"
            kill -KILL "${PIDS[$primary]}" 2>/dev/null || true
            wait "${PIDS[$primary]}" 2>/dev/null || true
            killed="$primary"; killed_at=$elapsed
        fi
    fi
    if [ -n "$killed" ] && [ "$killed" != done ] && ((elapsed >= killed_at + 12)); then
        echo ">>> failover demo: restarting node-$killed"
        start_node "$killed"; killed=done
    fi
    if ((DURATION > 0 && elapsed >= DURATION)); then break; fi
done
