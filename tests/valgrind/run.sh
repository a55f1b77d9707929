#!/usr/bin/env bash
# Runs one small cluster scenario with every cohortd under Valgrind's memcheck and fails on
# any memory error or definite leak (tests/valgrind/cohort.supp holds the few suppressions
# for third-party noise, each justified there).
#
#   bash tests/valgrind/run.sh [BUILD_DIR]      default: build/ (not a sanitizer build)
#
# Scenario: two nodes host three services - noop (a tracked generator, a journal and a
# completion log), hello (a task per tick, plus hand-enqueued tasks it must reject) and
# leaderboard (unique keys, generic data, batch callbacks every period) - with a generous
# tick and takeover for Valgrind's slowness. A tracked batch of 20 tasks is enqueued; once it
# drained and every service ran batches, both nodes get SIGTERM (step-down, drain, clean
# exit), and Valgrind reports at exit. COHORT_VALGRIND_SECONDS (default 25) is how long the
# cluster runs at least. Honours MONGODB_URI (its own database, dropped afterwards); without
# it, starts a private local database. Exit: 0 pass, 1 fail, 77 skipped (no valgrind, or a
# sanitizer build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$(cd "${1:-${COHORT_BUILD_DIR:-$ROOT/build}}" && pwd)"
SUPP="$ROOT/tests/valgrind/cohort.supp"
RUN_S="${COHORT_VALGRIND_SECONDS:-25}"

if ! command -v valgrind >/dev/null; then
    echo "valgrind: not installed (COHORT_TEST_TOOLS=1 bash deploy/setup.sh installs it): skipped" >&2
    exit 77
fi
if grep -q '^COHORT_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
    echo "valgrind: $BUILD is a sanitizer build (Valgrind cannot run ASan binaries): skipped" >&2
    exit 77
fi
for f in cohortd cohortctl handlers/cohort_noop.so handlers/cohort_hello.so \
         handlers/cohort_leaderboard.so; do
    [ -e "$BUILD/$f" ] || { echo "valgrind: $BUILD/$f is not built" >&2; exit 1; }
done

DIR="$(mktemp -d /tmp/cohort-valgrind-XXXXXX)"
DB="cohort_valgrind_$$_$RANDOM"
OWN_DB=0
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    if [ "$OWN_DB" = 1 ]; then
        bash "$ROOT/deploy/localdb/localdb.sh" stop "$DIR/db" >/dev/null 2>&1 || true
    elif /usr/bin/python3 -c 'import pymongo' 2>/dev/null; then
        /usr/bin/python3 - "$MONGODB_URI" "$DB" <<'PY' || true
import sys, pymongo
pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=3000).drop_database(sys.argv[2])
PY
    fi
    [ "${COHORT_TEST_KEEP:-0}" = 1 ] && echo "valgrind: kept $DIR" >&2 || rm -rf "$DIR"
}
trap cleanup EXIT

if [ -z "${MONGODB_URI:-}" ]; then
    MONGODB_URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$DIR/db")"
    OWN_DB=1
fi
export MONGODB_URI

fail() {
    echo "valgrind: FAILED: $*" >&2
    for f in "$DIR"/n*.log "$DIR"/vg-*.log; do
        [ -e "$f" ] || continue
        echo "---- $f (last 40 lines)" >&2
        tail -n 40 "$f" >&2
    done
    exit 1
}

# Polls `condition` (a shell command) every 500 ms for at most $2 seconds.
wait_for() {
    local condition="$1" deadline=$((SECONDS + $2))
    until eval "$condition"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.5
    done
}

write_config() {
    cat >"$DIR/$1.conf" <<CONF
[cluster]
database = $DB
tick_ms = 500
takeover_ms = 8000
shutdown_grace_ms = 20000
node_id = $1

[service:noop]
handler = $BUILD/handlers/cohort_noop.so
workers = 2
journal = $DIR/journal
completed_log = $DIR/completed
generate_per_tick = 2
generate_every = 4
generate_tracked = true

[service:hello]
handler = $BUILD/handlers/cohort_hello.so

[service:leaderboard]
handler = $BUILD/handlers/cohort_leaderboard.so
boards = 4
period_ms = 4000
work_ms = 0
CONF
}

start_node() {
    valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
        --errors-for-leak-kinds=definite --error-exitcode=99 --num-callers=30 \
        --suppressions="$SUPP" --log-file="$DIR/vg-$1.log" \
        "$BUILD/cohortd" -c "$DIR/$1.conf" >"$DIR/$1.log" 2>&1 &
    PIDS+=($!)
}

ctl() { "$BUILD/cohortctl" -c "$DIR/n1.conf" "$@"; }

# "pending claimed succeeded failed" of a service, from cohortctl status --json.
counts() {
    ctl status --json | /usr/bin/python3 -c '
import json, sys
for s in json.load(sys.stdin)["services"]:
    if s["name"] == sys.argv[1]:
        c = s["counts"]; print(c["pending"], c["claimed"], c["succeeded"], c["failed"])' "$1"
}

write_config n1
write_config n2
started=$SECONDS
start_node n1
start_node n2
echo "valgrind: 2 nodes under memcheck, database $DB, logs in $DIR" >&2

wait_for '[ "$(grep -h "became primary" "$DIR"/n*.log 2>/dev/null | grep -c "service=noop")" -ge 1 ] &&
          [ "$(grep -h "became primary" "$DIR"/n*.log 2>/dev/null | grep -c "service=leaderboard")" -ge 1 ]' 120 ||
    fail "no primary within 120 s"

ctl enqueue noop --count 20 --tracked --data '{"from": "valgrind"}' >/dev/null || fail "enqueue failed"
ctl enqueue hello --count 3 --data '{"name": 42}' >/dev/null || fail "enqueue failed"

# Everything enqueued or generated so far ran, at least two batch callbacks happened, and
# the hello tasks with a bad name were failed by their handler.
wait_for '[ -s "$DIR/completed" ] && [ "$(wc -l <"$DIR/completed")" -ge 2 ] &&
          [ "$(counts hello | cut -d" " -f4)" -ge 3 ] &&
          grep -q "rolled over" "$DIR"/n*.log' 180 ||
    fail "the cluster did not run its batches within 180 s"
left=$((RUN_S - (SECONDS - started)))
[ $left -le 0 ] || sleep "$left" # the cluster keeps working: more ticks, batches, periods

for pid in "${PIDS[@]}"; do kill -TERM "$pid"; done
status=0
for i in "${!PIDS[@]}"; do
    rc=0
    wait "${PIDS[$i]}" || rc=$?
    node="n$((i + 1))"
    if [ $rc -eq 99 ]; then
        echo "valgrind: $node: memcheck found errors (see below)" >&2
        status=1
    elif [ $rc -ne 0 ]; then
        echo "valgrind: $node: cohortd exited with status $rc" >&2
        status=1
    fi
    grep -q "ERROR SUMMARY: 0 errors" "$DIR/vg-$node.log" || status=1
done
PIDS=()
read -r pending claimed succeeded failed <<<"$(counts noop)"
echo "valgrind: noop tasks: $succeeded succeeded, $failed failed, $pending pending," \
     "$claimed claimed; batches completed: $(wc -l <"$DIR/completed")" >&2
for f in "$DIR"/vg-*.log; do
    echo "---- $(basename "$f"):" >&2
    grep -E "definitely lost|indirectly lost|possibly lost|ERROR SUMMARY" "$f" | sed 's/^==[0-9]*== //' >&2
done
[ "$claimed" = 0 ] || { echo "valgrind: $claimed noop task(s) still claimed after a clean stop" >&2; status=1; }
[ $status -eq 0 ] || fail "memory errors, definite leaks or unclean exits"
echo "valgrind: passed" >&2
