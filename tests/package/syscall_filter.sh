#!/usr/bin/env bash
# tests/package/syscall_filter.sh - `isolation = process` under deploy/systemd/cohortd.service's
# system call filter (issue 27, part 4), without systemd: runs this build's cohortd under
# `strace -f` with one service in worker processes (noop), enqueues tasks and waits for them,
# stops the node with SIGTERM, and checks that every system call the node and its worker
# processes made is one the unit's SystemCallFilter= lines allow (their groups expanded by
# `systemd-analyze syscall-filter`, allow lists joined, ~deny lists removed). A call outside
# them would be refused with EPERM (SystemCallErrorNumber) under the unit. About 20 s.
# Skipped (77) without strace or systemd-analyze. Needs MONGODB_URI.
#
#   bash tests/package/syscall_filter.sh BUILD_DIR
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$(cd "${1:?usage: syscall_filter.sh BUILD_DIR}" && pwd)"
UNIT="$ROOT/deploy/systemd/cohortd.service"
say() { echo "syscall_filter: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
for tool in strace systemd-analyze; do
    command -v "$tool" >/dev/null || { say "skipped: no $tool (Debian: $tool / systemd)"; exit 77; }
done
: "${MONGODB_URI:?MONGODB_URI must point at the test database}"

WORK="$(mktemp -d /tmp/cohort-syscalls.XXXXXX)"
NODE=
cleanup() {
    local rc=$?
    [ -z "$NODE" ] || kill -KILL "$NODE" 2>/dev/null || true
    [ $rc -eq 0 ] || tail -n 30 "$WORK/cohortd.log" >&2 2>/dev/null || true
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT

# The set a filter line names: a group's members (recursively) or a single call.
expand() {
    local item
    for item in "$@"; do
        if [ "${item#@}" != "$item" ]; then
            # shellcheck disable=SC2046 # the group's words
            expand $(systemd-analyze syscall-filter "$item" </dev/null | sed -n 's/^ \{4\}\([@a-z0-9_-]\+\)$/\1/p')
        else
            echo "$item"
        fi
    done
}
allowed="$WORK/allowed"
: >"$allowed"
denied="$WORK/denied"
: >"$denied"
while IFS= read -r line; do
    value="${line#SystemCallFilter=}"
    if [ "${value#\~}" != "$value" ]; then
        # shellcheck disable=SC2086 # several names per line
        expand ${value#\~} >>"$denied"
    else
        # shellcheck disable=SC2086
        expand $value >>"$allowed"
    fi
done < <(grep '^SystemCallFilter=' "$UNIT")
sort -u -o "$allowed" "$allowed"
sort -u -o "$denied" "$denied"
comm -23 "$allowed" "$denied" >"$WORK/permitted"
[ -s "$WORK/permitted" ] || fail "the unit's filter expands to nothing: $(grep SystemCallFilter "$UNIT")"
say "the unit permits $(wc -l <"$WORK/permitted") system calls"

DB="cohort_syscalls_$$"
cat >"$WORK/cohort.ini" <<INI
[cluster]
database = $DB
tick_ms = 200
takeover_ms = 2000
shutdown_grace_ms = 5000

[service:isolated]
handler = $BUILD/handlers/cohort_noop.so
isolation = process
workers = 2
INI
MONGOC_DISABLE_SHM=1 strace -f -qq -o "$WORK/trace" "$BUILD/cohortd" -c "$WORK/cohort.ini" \
    >"$WORK/cohortd.log" 2>&1 &
STRACE=$!
for _ in $(seq 1 100); do
    NODE="$(pgrep -P "$STRACE" -x cohortd || true)"
    [ -n "$NODE" ] && break
    sleep 0.1
done
[ -n "$NODE" ] || fail "cohortd did not start under strace"
"$BUILD/cohortctl" -c "$WORK/cohort.ini" enqueue isolated --create --count 5 >/dev/null \
    || fail "cohortctl enqueue"
for _ in $(seq 1 120); do
    counts="$("$BUILD/cohortctl" -c "$WORK/cohort.ini" counts isolated --json 2>/dev/null || true)"
    grep -q '"succeeded" *: *5\b' <<<"$counts" && break
    sleep 0.5
done
grep -q '"succeeded" *: *5\b' <<<"$counts" || fail "5 tasks did not succeed in worker processes: $counts"
grep -q 'cohortd-worker\|worker process' "$WORK/cohortd.log" "$WORK/trace" \
    || fail "no worker process ran (isolation = process)"
kill -TERM "$NODE"
wait "$STRACE" || fail "cohortd did not exit cleanly on SIGTERM"
NODE=

# Every call made, by name (strace: "PID name(args" and "PID <... name resumed>").
sed -n -e 's/^[0-9]\+ \+\([a-z0-9_]\+\)(.*/\1/p' -e 's/^[0-9]\+ \+<\.\.\. \([a-z0-9_]\+\) resumed>.*/\1/p' \
    "$WORK/trace" | sort -u >"$WORK/used"
[ -s "$WORK/used" ] || fail "strace recorded no system call"
refused="$(comm -23 "$WORK/used" "$WORK/permitted" | tr '\n' ' ')"
say "the node and its workers made $(wc -l <"$WORK/used") distinct system calls"
[ -z "$refused" ] || fail "outside the unit's SystemCallFilter (EPERM under systemd): $refused"
say "ok: isolation = process stays inside the unit's system call filter"
