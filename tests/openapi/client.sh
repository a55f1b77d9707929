#!/usr/bin/env bash
# client.sh - proof that docs/openapi.yaml is complete enough to work from: generates a
# TypeScript client from it as a user would (openapi-typescript's types for openapi-fetch,
# from npm), compiles tests/openapi/client/worker.ts against it with tsc --strict, and runs
# that external-worker loop (long-poll claim, heartbeat, succeed, fail, a replay) against a
# real cohortd in a database of its own.
#
#   bash tests/openapi/client.sh BUILD
#
# The npm packages are installed once, pinned, into $COHORT_TOOLS_CACHE (default
# ~/.cache/cohort-test-tools); later runs take about 15 s. Skipped (77) without node and npm.
# Needs MONGODB_URI (tests/run.sh provides it). cohortd has 30 s to be ready.
set -euo pipefail

BUILD="$(cd "${1:?usage: client.sh BUILD}" && pwd)"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TOOLS="${COHORT_TOOLS_CACHE:-$HOME/.cache/cohort-test-tools}/openapi-client-2"
PACKAGES=(openapi-typescript@7.13.0 openapi-fetch@0.17.0 typescript@5.9.3 @types/node@20)
URI="${MONGODB_URI:?client.sh needs MONGODB_URI (tests/run.sh sets it)}"

if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
    echo "skipped: node and npm are needed (apt-get install nodejs npm)"
    exit 77
fi
if [ ! -x "$TOOLS/node_modules/.bin/tsc" ] || [ ! -x "$TOOLS/node_modules/.bin/openapi-typescript" ] || [ ! -d "$TOOLS/node_modules/@types/node" ]; then
    echo "client.sh: installing ${PACKAGES[*]} into $TOOLS (once)"
    mkdir -p "$TOOLS"
    npm install --prefix "$TOOLS" --no-audit --no-fund "${PACKAGES[@]}" > "$TOOLS/install.log" 2>&1 ||
        { cat "$TOOLS/install.log"; exit 1; }
fi

WORK="$(mktemp -d /tmp/cohort-openapi-client.XXXXXX)"
NODE_PID=""
cleanup() {
    if [ -n "$NODE_PID" ] && kill -0 "$NODE_PID" 2> /dev/null; then
        kill -TERM "$NODE_PID"
        wait "$NODE_PID" || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# 1. The client, generated from the document; the loop compiled against it.
"$TOOLS/node_modules/.bin/openapi-typescript" "$ROOT/docs/openapi.yaml" -o "$WORK/schema.d.ts" \
    > "$WORK/generate.log" 2>&1 || { cat "$WORK/generate.log"; exit 1; }
cp "$ROOT/tests/openapi/client/worker.ts" "$WORK/"
ln -s "$TOOLS/node_modules" "$WORK/node_modules"
cat > "$WORK/tsconfig.json" << 'JSON'
{"compilerOptions": {"strict": true, "target": "ES2022", "module": "NodeNext",
 "moduleResolution": "NodeNext", "outDir": "out", "skipLibCheck": true,
 "noUncheckedIndexedAccess": true},
 "files": ["worker.ts"]}
JSON
echo '{"type": "module"}' > "$WORK/package.json"
(cd "$WORK" && node_modules/.bin/tsc -p .) || { echo "FAIL: the loop does not compile against the generated client"; exit 1; }

# 2. A node with one external service.
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
DB="cohort_openapi_client_$$"
cat > "$WORK/node.ini" << INI
# tests/openapi/client.sh's node
[cluster]
mongodb_uri = $URI
database    = $DB
tick_ms     = 200
takeover_ms = 2000
node_id     = openapi-client-node
http_listen = 127.0.0.1:$PORT

[service:jobs]
handler = external
max_attempts = 3
INI
START=$SECONDS
"$BUILD/cohortd" -c "$WORK/node.ini" > "$WORK/node.log" 2>&1 &
NODE_PID=$!
while [ "$SECONDS" -lt $((START + 30)) ]; do
    curl -sf -m 3 "http://127.0.0.1:$PORT/readyz" > /dev/null 2>&1 && break
    sleep 0.2
done
curl -sf -m 3 "http://127.0.0.1:$PORT/readyz" > /dev/null || { echo "FAIL: cohortd is not ready after 30 s"; tail -20 "$WORK/node.log"; exit 1; }
ctl() { "$BUILD/cohortctl" -c "$WORK/node.ini" "$@"; }
WORK_TOKEN="$(ctl tokens create openapi-worker --scopes work)"
ENQUEUE_TOKEN="$(ctl tokens create openapi-producer --scopes enqueue,read)"

# 3. The loop.
status=0
node "$WORK/out/worker.js" "http://127.0.0.1:$PORT" "$WORK_TOKEN" "$ENQUEUE_TOKEN" jobs || status=$?
if [ "$status" != 0 ]; then
    echo "--- node.log"
    tail -50 "$WORK/node.log"
fi
# The database is this run's alone: dropped (pymongo if present; else left for localdb's reset).
python3 - "$URI" "$DB" << 'PY' 2> /dev/null || true
import sys
from pymongo import MongoClient
MongoClient(sys.argv[1], serverSelectionTimeoutMS=3000).drop_database(sys.argv[2])
PY
exit "$status"
