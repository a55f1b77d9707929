#!/usr/bin/env bash
# Counts on a large queue: fills queue_noop with N tasks in a realistic mix and times the
# product's count calls on it (see docs/BENCHMARKS.md, "Counts on 1,000,000 tasks").
#
#   bash tests/bench/counts.sh [--tasks N] [--repeat R]
#
#   --tasks N    tasks in the queue (default 1000000)
#   --repeat R   rounds of timings (default 5); each round times every count once
#
# Builds into build/ (or COHORT_BUILD_DIR) with deploy/setup.sh, starts its own local
# database (mongo-java-server, in memory) with LOCALDB_JAVA_OPTS (default -Xmx6g: a million
# tasks do not fit the JVM's default heap on a small machine), runs `counts fill` once, then
# `counts time` (tests/bench/counts.c: cohort_store_count_statuses, cohort_store_count_tasks
# and cohort_store_count_by for kind and group). If cohortctl has a `counts` command, it is
# timed too, as a whole process, with the product's default timeouts. Prints a markdown
# table of medians (min-max) and the server's memory; keeps the raw lines in
# BUILD/bench/counts-<UTC timestamp>/.
#
# The local server has no secondary indexes: every count here is a full scan of the
# collection. Real MongoDB would answer from claim_order {status, priority, run_at, _id},
# kind_status {kind, status} and group_status {group, status}.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
TASKS=1000000
REPEAT=5

log() { printf 'counts: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
usage() {
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
    exit "${1:-2}"
}
while [ $# -gt 0 ]; do
    case "$1" in
        --tasks) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage; TASKS="$2"; shift 2 ;;
        --repeat) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage; REPEAT="$2"; shift 2 ;;
        -h | --help) usage 0 ;;
        *) usage ;;
    esac
done

COHORT_TARGETS="${COHORT_TARGETS:-cohortctl bench_counts}" bash "$ROOT/deploy/setup.sh" "$BUILD"
COUNTS="$BUILD/tests/bench/counts"
COHORTCTL="$BUILD/cohortctl"
[ -x "$COUNTS" ] || die "$COUNTS was not built (COHORT_TESTS=OFF?)"
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
[ -z "$(git -C "$ROOT" status --porcelain -- src include 2>/dev/null)" ] \
    || COMMIT="$COMMIT + uncommitted changes in src/ or include/"

OUT="$BUILD/bench/counts-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
STATE="$BUILD/counts-localdb"
mkdir -p "$STATE"
cleanup() { bash "$ROOT/deploy/localdb/localdb.sh" stop "$STATE" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
export LOCALDB_JAVA_OPTS="${LOCALDB_JAVA_OPTS:--Xmx6g}"
# No oplog: it would copy every inserted task (memory) and nothing here watches a stream.
URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$STATE" --no-oplog)"
SERVER_PID="$(tr -dc '0-9' <"$STATE/pid")"
log "local database at $URI (pid $SERVER_PID, LOCALDB_JAVA_OPTS=$LOCALDB_JAVA_OPTS); output in $OUT"

# memory: the server's resident set now and at its peak, in MiB
memory() {
    awk '/^VmRSS|^VmHWM/ { printf "%s=%d ", $1, $2 / 1024 }' "/proc/$SERVER_PID/status"
}

DB="bench_counts_$$"
# A long socket timeout for the program: a slow scan is to be measured, not cut off (the
# product's default is 15 s).
export MONGODB_URI="$URI/?socketTimeoutMS=600000"
log "filling $DB.queue_noop with $TASKS tasks"
"$COUNTS" fill --database "$DB" --tasks "$TASKS" | tee "$OUT/fill.txt" >&2
log "server memory after the fill (MiB): $(memory)"

log "warm-up round, not recorded (the server is a JVM: its first scans are slower)"
"$COUNTS" time --database "$DB" --repeat 1 >"$OUT/warmup.txt"
log "timing the store's count calls, $REPEAT rounds"
"$COUNTS" time --database "$DB" --repeat "$REPEAT" | tee "$OUT/times.txt" >&2

# cohortctl counts, if this cohortctl has it: the whole process, default timeouts.
if MONGODB_URI="$URI" "$COHORTCTL" --database "$DB" counts noop --by status \
    >"$OUT/cohortctl-probe.txt" 2>&1; then
    for ((round = 1; round <= REPEAT; round++)); do
        for by in status kind group; do
            t0="$(date +%s%N)"
            rc=0
            MONGODB_URI="$URI" "$COHORTCTL" --database "$DB" counts noop --by "$by" \
                >"$OUT/cohortctl-$by.txt" 2>&1 || rc=$?
            t1="$(date +%s%N)"
            echo "count by=cohortctl-$by round=$round ms=$(((t1 - t0) / 1000000)) rc=$rc" \
                | tee -a "$OUT/times.txt" >&2
        done
    done
else
    log "cohortctl counts failed or is missing here ($(head -n 1 "$OUT/cohortctl-probe.txt")); timed the store calls only"
fi
MEMORY="$(memory)"
log "server memory at the end (MiB): $MEMORY"

CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
{
    printf 'Run %s: `bash tests/bench/counts.sh --tasks %d --repeat %d`\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$TASKS" "$REPEAT"
    printf 'Cohort at %s; %s cores (%s); mongo-java-server in memory, %s; %s\n\n' "$COMMIT" \
        "$(nproc)" "${CPU:-unknown CPU}" "$LOCALDB_JAVA_OPTS" "$(cat "$OUT/fill.txt")"
    awk '
    function median(list,    a, n, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function value(key,    i) { for (i = 1; i <= NF; i++) if (index($i, key "=") == 1) return substr($i, length(key) + 2); return "" }
    /^count / {
        by = value("by")
        if (!(by in seen)) { seen[by] = 1; order[++n] = by }
        ms[by] = ms[by] " " value("ms")
        lo[by] = (lo[by] == "" || value("ms") + 0 < lo[by]) ? value("ms") + 0 : lo[by]
        hi[by] = (value("ms") + 0 > hi[by]) ? value("ms") + 0 : hi[by]
        if (value("rows") != "") { rows[by] = value("rows"); total[by] = value("total") }
        if (value("rc") != "" && value("rc") != 0) failed[by]++
    }
    END {
        printf "| count | median ms | min-max ms | rows | tasks counted |\n|---|---|---|---|---|\n"
        for (i = 1; i <= n; i++) {
            b = order[i]
            printf "| %s | %.0f | %.0f-%.0f | %s | %s |\n", b, median(ms[b]), lo[b], hi[b],
                b in rows ? rows[b] : "-", b in total ? total[b] : (b in failed ? failed[b] " runs failed" : "-")
        }
    }' "$OUT/times.txt"
    printf '\nServer memory (MiB): %s\n' "$MEMORY"
} | tee "$OUT/summary.md"
