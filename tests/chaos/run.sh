#!/usr/bin/env bash
# The chaos harness as CI runs it: the checker's self-test, then one short chaos run.
#
#   bash tests/chaos/run.sh BUILD_DIR SEED [chaos.py options...]
#
# SEED is a number, or `date` for today's date as YYYYMMDD (a new seed every day, the same
# all day, so a failure can be replayed). Defaults: 5 nodes, 120 s of faults. Honours
# MONGODB_URI (then a database restart is simulated by cutting every node's proxy).
# Uses the system's python3 (Debian's python3-pymongo) when there is one.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 2 ] || { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2; exit 2; }
BUILD="$1"
SEED="$2"
shift 2
[ "$SEED" = date ] && SEED="$(date -u +%Y%m%d)"

PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3

"$PYTHON" "$HERE/test_check.py" 2>&1 | tail -n 3
exec "$PYTHON" "$HERE/chaos.py" --build "$BUILD" --nodes 5 --duration 120 --seed "$SEED" "$@"
