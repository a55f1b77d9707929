#!/usr/bin/env bash
# How long the dashboard's API calls take on a big queue (docs/UI.md, "On a big queue"): one
# node with a service of N pending tasks (default 1,000,000) and nothing running them
# (`handler = external`, no worker), then each call the pages make, timed R times with curl.
#
#   bash tests/bench/ui_pages.sh [--tasks N] [--repeat R]
#
# Prints a markdown table of the median and the slowest time per call, then one of each page's
# whole load: its calls in the rounds the page makes them (parallel within a round, as the
# dashboard's Promise.all does), so a page time is what the reader waits for its data. Builds with
# deploy/setup.sh; starts the local database unless MONGODB_URI is set (the local server
# scans: these times are the worst case; real MongoDB answers the same queries from indexes).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
TASKS=1000000
REPEAT=5
while [ $# -gt 0 ]; do
    case "$1" in
    --tasks) TASKS="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    *) echo "ui_pages: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
log() { printf 'ui_pages: %s\n' "$*" >&2; }

# COHORT_BENCH_NO_BUILD=1: use the binaries already in $BUILD as they are.
[ -n "${COHORT_BENCH_NO_BUILD:-}" ] || bash "$ROOT/deploy/setup.sh" "$BUILD" >/dev/null 2>&1
export MONGOC_DISABLE_SHM=1
DIR="$(mktemp -d)"
NODE=""
LOCALDB=""
cleanup() {
    [ -z "${SAMPLER:-}" ] || kill "$SAMPLER" 2>/dev/null || true
    [ -z "$NODE" ] || { kill "$NODE" 2>/dev/null; wait "$NODE" 2>/dev/null || true; }
    [ -z "$LOCALDB" ] || bash "$ROOT/deploy/localdb/localdb.sh" stop "$LOCALDB" >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT
if [ -z "${MONGODB_URI:-}" ]; then
    LOCALDB="$DIR/db"
    # No oplog: it would copy the million tasks, and every change stream getMore scans it.
    MONGODB_URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$LOCALDB" --no-oplog)"
fi
export MONGODB_URI
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
DB="bench_ui_$$"
cat >"$DIR/node.ini" <<EOF
[cluster]
database    = $DB
node_id     = bench-ui
http_listen = 127.0.0.1:$PORT

[service:big]
handler = external
EOF
CTL=("$BUILD/cohortctl" -c "$DIR/node.ini")
log "enqueueing $TASKS tasks"
start=$(date +%s)
"${CTL[@]}" enqueue big --count "$TASKS" --create --kind report >/dev/null
log "enqueued in $(($(date +%s) - start)) s"
"$BUILD/cohortd" -c "$DIR/node.ini" 2>"$DIR/node.log" &
NODE=$!
TOKEN="$("${CTL[@]}" tokens create bench --scopes read 2>/dev/null)"
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.2
done
ID="$(curl -s -H "Authorization: Bearer $TOKEN" \
    "http://127.0.0.1:$PORT/api/v1/services/big/tasks?limit=1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["id"])')"

# page|call: what each page of the dashboard asks for (docs/UI.md)
CALLS=(
    "overview|/api/v1/services"
    "overview|/api/v1/nodes"
    "overview|/api/v1/services/big/history?minutes=60"
    "service|/api/v1/services/big/counts?by=kind"
    "service|/api/v1/services/big/batches"
    "service|/api/v1/services/big/due"
    "tasks|/api/v1/services/big/tasks?status=pending&limit=50"
    "tasks|/api/v1/services/big/tasks?status=failed&limit=50"
    "task|/api/v1/services/big/tasks/$ID"
    "audit|/api/v1/audit?limit=50"
)
# The primary's measure of the queue behind those calls (the `counts` collection, docs/SCHEMA.md): each
# one it publishes while the calls run, how long it took and how often it came (pymongo).
SAMPLER_PY=python3 # Debian's python has pymongo here (tests/ui use it too)
/usr/bin/python3 -c 'import pymongo' 2>/dev/null && SAMPLER_PY=/usr/bin/python3
"$SAMPLER_PY" - "$MONGODB_URI" "$DB" >"$DIR/measures" 2>/dev/null <<'EOF' &
import signal, statistics, sys, time
try:
    import pymongo
except ImportError:
    print("(pymongo is not installed: the primary's measures were not sampled)")
    sys.exit(0)
coll = pymongo.MongoClient(sys.argv[1])[sys.argv[2]]["counts"]
seen = {}
def report(*_):
    at = sorted(seen)
    gaps = [(b - a).total_seconds() for a, b in zip(at, at[1:])]
    took = [seen[a] / 1000 for a in at]
    if took:
        print(f"The primary's measures during the calls: {len(took)}, each took median "
              f"{statistics.median(took):.2f} s, slowest {max(took):.2f} s; one every "
              f"{statistics.median(gaps) if gaps else 0:.1f} s (median).")
    sys.exit(0)
signal.signal(signal.SIGTERM, report)
while True:
    doc = coll.find_one({"_id": "big"}, {"measured_at": 1, "took_ms": 1})
    if doc and "took_ms" in doc:
        seen[doc["measured_at"]] = doc["took_ms"]
    time.sleep(0.5)
EOF
SAMPLER=$!
printf '| page | call | median (s) | slowest (s) |\n|---|---|---|---|\n'
for entry in "${CALLS[@]}"; do
    page="${entry%%|*}" path="${entry#*|}"
    times=()
    for _ in $(seq "$REPEAT"); do
        out="$(curl -s -o /dev/null -w '%{http_code} %{time_total}' \
            -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT$path")"
        [ "${out%% *}" = 200 ] || { log "$path answered ${out%% *}"; exit 1; }
        times+=("${out#* }")
    done
    python3 - "$page" "$path" "${times[@]}" <<'EOF'
import statistics, sys
page, path, *t = sys.argv[1:]
t = [float(x) for x in t]
print(f"| {page} | `{path.replace('/api/v1', '')}` | {statistics.median(t):.3f} | {max(t):.3f} |")
EOF
done
# page|rounds: a round's calls run at once, rounds one after another (js/pages/*.js).
python3 - "http://127.0.0.1:$PORT" "$TOKEN" "$REPEAT" <<'EOF'
import concurrent.futures, statistics, sys, time, urllib.error, urllib.request
base, token, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
v1 = "/api/v1/services/big"
PAGES = {
    "overview": [["/api/v1/services", "/api/v1/nodes"], [v1 + "/history?minutes=60"]],
    "service": [["/api/v1/services", v1 + "/batches", "/api/v1/nodes", v1 + "/due"],
                [v1 + "/counts?by=kind&limit=500", v1 + "/counts?by=group&limit=20"], [v1 + "/settings"]],
}
def get(path):
    req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
    try:
        urllib.request.urlopen(req, timeout=120).read()
    except urllib.error.HTTPError:
        pass  # a 404 (an older node without the call) still costs its round trip
print("\n| page (whole load) | median (s) | slowest (s) |\n|---|---|---|")
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    for page, rounds in PAGES.items():
        t = []
        for _ in range(repeat):
            start = time.monotonic()
            for calls in rounds:
                list(pool.map(get, calls))
            t.append(time.monotonic() - start)
        print(f"| {page} | {statistics.median(t):.3f} | {max(t):.3f} |")
EOF
kill "$SAMPLER" 2>/dev/null && wait "$SAMPLER" 2>/dev/null || true
printf '\n%s\n' "$(cat "$DIR/measures")"
log "commit $(git -C "$ROOT" rev-parse --short HEAD), $TASKS pending tasks, $REPEAT calls each"
