#!/usr/bin/env bash
# run.sh - the rolling-upgrade tests (label upgrade; tests/upgrade/README.md):
#
#   bash tests/upgrade/run.sh BUILD_DIR TEST_BINARY [criterion arguments...]
#
# Builds the previous release (PREVIOUS below: the git tag, or its commit id where a clone has
# no tags) from this checkout's own history with `git archive`, into
# BUILD_DIR/upgrade-old/<commit>/: its cohortd, cohortctl and noop handler with its own CMake
# (build/handlers/cohort_noop.so), and its hello handler with the compile line of its
# docs/HANDLERS.md against its include/ (handlers/hello.so). The
# build is kept, keyed by the commit, so a re-run does not build again. Then runs the test
# binary with COHORT_UPGRADE_OLD pointing at that directory.
#
# Exit 77 (skipped, with the reason on stderr) if the source tree is not a git checkout or its
# history lacks the previous release (a tarball, a shallow clone).
set -euo pipefail

PREVIOUS=v0.2.0
PREVIOUS_COMMIT=39923d6eaa3604e71d386ae7f5911e9e2344f8cc

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$(cd "$1" && pwd)"
TEST="$2"
shift 2

skip() {
    echo "upgrade: SKIPPED: $*" >&2
    exit 77
}

# safe.directory: in CI the checkout belongs to another user than the container's root, and git
# refuses to read such a repository without it.
git() { command git -c safe.directory="$SRC" -C "$SRC" "$@"; }
command -v git >/dev/null || skip "git is not installed"

top="$(git rev-parse --show-toplevel 2>/dev/null || true)"
[ -n "$top" ] && [ "$(cd "$top" && pwd -P)" = "$(cd "$SRC" && pwd -P)" ] ||
    skip "$SRC is not a git checkout (a tarball?): the previous release cannot be taken from its history"
commit="$(git rev-parse --verify -q "$PREVIOUS^{commit}" ||
    git rev-parse --verify -q "$PREVIOUS_COMMIT^{commit}" || true)"
[ -n "$commit" ] ||
    skip "this clone has neither the tag $PREVIOUS nor its commit $PREVIOUS_COMMIT (a shallow clone? git fetch --unshallow --tags)"

OLD="$BUILD/upgrade-old/$commit"
mkdir -p "$BUILD/upgrade-old"
# One build at a time (ctest -j may start both upgrade tests together).
exec 9>"$BUILD/upgrade-old/lock"
flock 9
if [ ! -f "$OLD/built" ]; then
    started=$(date +%s)
    echo "upgrade: building $PREVIOUS ($commit) into $OLD" >&2
    rm -rf "$OLD"
    mkdir -p "$OLD/src" "$OLD/handlers"
    git archive "$commit" | tar -x -C "$OLD/src"
    cmake -S "$OLD/src" -B "$OLD/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOHORT_TESTS=OFF \
        >"$OLD/cmake.log" 2>&1 || { cat "$OLD/cmake.log" >&2; exit 1; }
    cmake --build "$OLD/build" -j2 --target cohortd cohortctl cohort_noop >>"$OLD/cmake.log" 2>&1 ||
        { tail -40 "$OLD/cmake.log" >&2; exit 1; }
    # A handler author's build against the release's header: the compile line of its
    # docs/HANDLERS.md ("From a checkout without installing").
    # shellcheck disable=SC2046 # pkg-config's flags are words
    (cd "$OLD/src" && cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -Iinclude \
        -o "$OLD/handlers/hello.so" handlers/hello/hello.c $(pkg-config --cflags --libs libbson-1.0))
    echo "$PREVIOUS $commit built in $(($(date +%s) - started)) s" >"$OLD/built"
fi
flock -u 9
echo "upgrade: previous release: $(cat "$OLD/built") (cached in $OLD)" >&2
"$OLD/build/cohortd" --version >&2 || true

export COHORT_UPGRADE_OLD="$OLD"
exec "$TEST" "$@"
