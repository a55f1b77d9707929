#!/usr/bin/env bash
# Runs Cohort's whole test suite: unit, integration and cluster tests.
#
#   bash tests/run.sh [ctest arguments...]     e.g. bash tests/run.sh -L unit
#
# Installs what is missing, builds into build/, starts the local MongoDB-compatible server
# on a free port (unless MONGODB_URI points at a MongoDB already), runs ctest against it and
# stops the server. Exit status is ctest's.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"

bash "$ROOT/deploy/setup.sh" "$BUILD"

if [ -z "${MONGODB_URI:-}" ]; then
    STATE="$BUILD/test-localdb"
    mkdir -p "$STATE"
    bash "$ROOT/deploy/localdb/localdb.sh" stop "$STATE" >/dev/null 2>&1 || true
    MONGODB_URI="$(bash "$ROOT/deploy/localdb/localdb.sh" start "$STATE")"
    export MONGODB_URI
    trap 'bash "$ROOT/deploy/localdb/localdb.sh" stop "$STATE" >/dev/null 2>&1 || true' EXIT
    echo "tests: local database at $MONGODB_URI" >&2
else
    echo "tests: using MONGODB_URI from the environment" >&2
fi

cd "$BUILD"
ctest --output-on-failure --timeout 600 "$@"
