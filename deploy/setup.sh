#!/usr/bin/env bash
# Installs what building and running Cohort needs (Debian packages), then builds it.
#
#   deploy/setup.sh [BUILD_DIR] [extra cmake -D options...]
#   deploy/setup.sh --packages      prints the Debian packages it would ensure, and exits
#
# COHORT_TARGETS="a b" builds only those targets (default: everything, tests included).
# COHORT_TEST_TOOLS=1 also installs what only the test suite uses: clang (libFuzzer),
# valgrind, python3-pymongo (the chaos harness) and prometheus (promtool checks /metrics; the
# package also starts a Prometheus server on systemd hosts, so only the tests install it),
# chromium and python3-websocket (the dashboard's browser tests, tests/ui/, drive headless
# Chromium over the DevTools protocol), strace (isolation = process under the systemd unit's
# system call filter, tests/package/), python3-jsonschema, and nodejs and npm where the
# commands are missing (tests/openapi: the API's document checked, and a client generated
# from it). dpkg-dev and file: `cpack -G DEB`
# names the package's dependencies with dpkg-shlibdeps (README.md, "Install"). gcovr: the
# coverage report of tests/run.sh --coverage.
# Idempotent: installs only missing packages, and re-runs CMake and make incrementally.
# Used by deploy/local-cluster.sh and tests/run.sh, so a fresh machine needs nothing else.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
shift || true

PACKAGES=(build-essential cmake pkg-config libmongoc-dev libbson-dev libevent-dev
          libcriterion-dev libinih-dev libsystemd-dev python3-yaml default-jdk-headless maven
          tzdata dpkg-dev file)
if [ "${COHORT_TEST_TOOLS:-0}" = 1 ]; then
    PACKAGES+=(clang libclang-rt-14-dev valgrind python3 python3-pymongo prometheus chromium
               python3-websocket fonts-dejavu-core strace python3-jsonschema gcovr git)
    # Node.js and npm by command, not by package: a machine may have them from elsewhere
    # (NodeSource's nodejs bundles npm, and Debian's npm cannot be installed beside it).
    command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
    command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
fi
if [ "$BUILD" = --packages ]; then
    printf '%s\n' "${PACKAGES[@]}"
    exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >&2
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
targets=()
for t in ${COHORT_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD" -j "$(nproc)" "${targets[@]}" >&2
# The local database: built now so the first start is quick.
bash "$ROOT/deploy/localdb/localdb.sh" build >&2
