#!/usr/bin/env bash
# tests/package/run.sh - the Debian package end to end (issue 27, part 2), on this machine:
#   1. builds cohort_<version>_<arch>.deb (cmake/package.cmake) in BUILD/package-deb;
#   2. installs it with dpkg -i and checks what it put where (binaries in /usr/bin, handlers,
#      header, pkg-config file, man pages, completions, unit, /etc/cohort/cohort.ini as a
#      conffile, the `cohort` system user, Depends naming the Debian library packages);
#   3. builds a handler against the installed header with `pkg-config cohort-handler`;
#   4. runs /usr/bin/cohortd as user cohort on a copy of the packaged example config (its
#      database renamed, the handler added; MONGODB_URI from the environment), enqueues a task
#      with /usr/bin/cohortctl and waits for the handler to run it;
#   5. dpkg -r (binaries gone, config kept), then dpkg -P (config and user gone).
# The package is purged on every exit, failure included, so the machine ends as it began.
# Needs root (dpkg) and MONGODB_URI; exits 77 (skipped) without root or dpkg, or if a package
# named cohort is installed already, or a user `cohort` or /etc/cohort exists (purging the
# package would remove them).
#
#   bash tests/package/run.sh BUILD_DIR
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)"
say() { echo "package: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

if [ "$(id -u)" != 0 ]; then
    say "skipped: installing a .deb needs root (CI runs as root); run as root to test it"
    exit 77
fi
if ! command -v dpkg >/dev/null || ! command -v dpkg-shlibdeps >/dev/null; then
    say "skipped: no dpkg / dpkg-shlibdeps (Debian: dpkg-dev): not a Debian system"
    exit 77
fi
if dpkg-query -W -f='${Status}' cohort 2>/dev/null | grep -q 'installed\|config-files'; then
    say "skipped: a package named cohort is already on this machine; remove it first"
    exit 77
fi
if getent passwd cohort >/dev/null || getent group cohort >/dev/null || [ -e /etc/cohort ]; then
    say "skipped: a user or group cohort, or /etc/cohort, exists already (purging would remove it)"
    exit 77
fi
: "${MONGODB_URI:?MONGODB_URI must point at the test database (tests/run.sh sets it)}"

PKG_BUILD="$BUILD/package-deb"
WORK="$(mktemp -d /tmp/cohort-package.XXXXXX)"
chmod 0755 "$WORK"
NODE_PID=
cleanup() {
    local rc=$?
    if [ -n "$NODE_PID" ] && kill -0 "$NODE_PID" 2>/dev/null; then
        kill -TERM "$NODE_PID" 2>/dev/null || true
        wait "$NODE_PID" 2>/dev/null || true
    fi
    if dpkg-query -W cohort >/dev/null 2>&1; then
        dpkg -P cohort >/dev/null 2>&1 || say "could not purge the package: dpkg -P cohort"
    fi
    [ $rc -eq 0 ] || { say "cohortd's log:"; tail -n 40 "$WORK/cohortd.log" >&2 2>/dev/null || true; }
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT

# 1. The package, as README.md says to build it.
say "building the package in $PKG_BUILD"
cmake -S "$ROOT" -B "$PKG_BUILD" -DCMAKE_INSTALL_PREFIX=/usr -DCOHORT_PACKAGE=ON \
    -DCOHORT_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$WORK/build.log" 2>&1 \
    || { cat "$WORK/build.log" >&2; fail "cmake configure"; }
cmake --build "$PKG_BUILD" -j2 --target cohort_runtime >>"$WORK/build.log" 2>&1 \
    || { tail -n 40 "$WORK/build.log" >&2; fail "build"; }
rm -f "$PKG_BUILD"/cohort_*.deb
(cd "$PKG_BUILD" && cpack -G DEB) >>"$WORK/build.log" 2>&1 \
    || { tail -n 40 "$WORK/build.log" >&2; fail "cpack -G DEB"; }
VERSION="$(sed -n 's/^project(cohort VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")"
DEB="$PKG_BUILD/cohort_${VERSION}_$(dpkg --print-architecture).deb"
[ -f "$DEB" ] || fail "no $DEB (found: $(ls "$PKG_BUILD"/*.deb 2>/dev/null))"
depends="$(dpkg-deb -f "$DEB" Depends)"
say "Depends: $depends"
for lib in libmongoc-1.0-0 libbson-1.0-0 libevent-2.1-7 libinih1 adduser; do
    grep -q "\b$lib\b" <<<"$depends" || fail "Depends lacks $lib: $depends"
done

# 2. Installed.
dpkg -i "$DEB" >"$WORK/dpkg.log" 2>&1 || {
    cat "$WORK/dpkg.log" >&2
    say "dpkg -i could not satisfy the dependencies; trying apt-get install"
    apt-get install -y "$DEB" >>"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "install"; }
}
HANDLERS=/usr/lib/cohort/handlers # not multiarch: CMakeLists.txt, COHORT_PACKAGE
for f in /usr/bin/cohortd /usr/bin/cohortctl "$HANDLERS/cohort_noop.so" \
    "$HANDLERS/cohort_hello.so" "$HANDLERS/cohort_leaderboard.so" \
    /usr/include/cohort/handler.h /usr/lib/pkgconfig/cohort-handler.pc \
    /usr/share/man/man1/cohortd.1 /usr/share/man/man1/cohortctl.1 \
    /usr/share/bash-completion/completions/cohortd \
    /usr/share/bash-completion/completions/cohortctl \
    /usr/lib/systemd/system/cohortd.service /etc/cohort/cohort.ini; do
    [ -e "$f" ] || fail "the package did not install $f"
done
grep -qx '/etc/cohort/cohort.ini' /var/lib/dpkg/info/cohort.conffiles \
    || fail "/etc/cohort/cohort.ini is not a conffile"
grep -q '^ExecStart=/usr/bin/cohortd ' /usr/lib/systemd/system/cohortd.service \
    || fail "the packaged unit does not start /usr/bin/cohortd"
getent passwd cohort >/dev/null || fail "postinst did not create the cohort user"
[ "$(getent passwd cohort | cut -d: -f7)" = /usr/sbin/nologin ] || fail "cohort has a login shell"
# Idempotent: configuring again finds the user and succeeds.
dpkg-reconfigure cohort >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive \
    /var/lib/dpkg/info/cohort.postinst configure >/dev/null || fail "postinst configure twice"
/usr/bin/cohortd --check-config -c /etc/cohort/cohort.ini >"$WORK/check.log" 2>&1 \
    || { cat "$WORK/check.log" >&2; fail "the packaged example config does not pass --check-config"; }

# 3. A handler built against the installed header, as docs/HANDLERS.md shows.
cat >"$WORK/packaged.c" <<'C'
#include <cohort/handler.h>

static cohort_outcome_t run(cohort_ctx_t *ctx, void *state, cohort_task_t *task)
{
    (void)state;
    cohort_log(ctx, COHORT_LOG_INFO, "packaged handler ran task %s", cohort_task_id(task));
    return COHORT_TASK_SUCCEEDED;
}

COHORT_HANDLER_EXPORT const cohort_handler_t cohort_handler = {
    .abi_version = COHORT_HANDLER_ABI_VERSION, .name = "packaged", .process_task = run};
C
# shellcheck disable=SC2046 # the flags are words
cc -shared -fPIC -Wall -Werror -o "$WORK/packaged.so" "$WORK/packaged.c" \
    $(pkg-config --cflags --libs cohort-handler) || fail "building a handler with pkg-config"
[ "$(pkg-config --variable=handlerdir cohort-handler)" = "$HANDLERS" ] \
    || fail "pkg-config's handlerdir is not $HANDLERS"

# 4. The packaged cohortd, as the packaged user, on the packaged config (copied: own database,
# the handler above added).
DB="cohort_package_$$"
sed "s/^database *=.*/database = $DB/" /etc/cohort/cohort.ini >"$WORK/cohort.ini"
printf '\n[service:packaged]\nhandler = %s/packaged.so\n' "$WORK" >>"$WORK/cohort.ini"
chmod 0644 "$WORK/cohort.ini" "$WORK/packaged.so"
MONGODB_URI="$MONGODB_URI" MONGOC_DISABLE_SHM=1 \
    setpriv --reuid=cohort --regid=cohort --init-groups \
    /usr/bin/cohortd -c "$WORK/cohort.ini" >"$WORK/cohortd.log" 2>&1 &
NODE_PID=$!
/usr/bin/cohortctl -c "$WORK/cohort.ini" enqueue packaged --create --data '{"from":"package"}' \
    >"$WORK/enqueue.log" 2>&1 || { cat "$WORK/enqueue.log" >&2; fail "cohortctl enqueue"; }
for _ in $(seq 1 120); do
    grep -q 'packaged handler ran task' "$WORK/cohortd.log" && break
    kill -0 "$NODE_PID" 2>/dev/null || fail "cohortd exited"
    sleep 0.5
done
grep -q 'packaged handler ran task' "$WORK/cohortd.log" || fail "the task did not run within 60 s"
for _ in $(seq 1 40); do
    counts="$(/usr/bin/cohortctl -c "$WORK/cohort.ini" counts packaged --json)"
    grep -q '"succeeded" *: *1\b' <<<"$counts" && break
    sleep 0.5
done
grep -q '"succeeded" *: *1\b' <<<"$counts" || fail "the task is not succeeded: $counts"
kill -TERM "$NODE_PID"
wait "$NODE_PID" || fail "cohortd did not stop cleanly on SIGTERM"
NODE_PID=
say "cohortd from /usr/bin ran a task through a handler built with pkg-config"

# 5. Removed, then purged.
dpkg -r cohort >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -r"; }
[ ! -e /usr/bin/cohortd ] || fail "dpkg -r left /usr/bin/cohortd"
[ -f /etc/cohort/cohort.ini ] || fail "dpkg -r removed the configuration (it must keep it)"
dpkg -P cohort >"$WORK/dpkg.log" 2>&1 || { cat "$WORK/dpkg.log" >&2; fail "dpkg -P"; }
[ ! -e /etc/cohort ] || fail "dpkg -P left /etc/cohort"
! getent passwd cohort >/dev/null || fail "dpkg -P left the cohort user"
! getent group cohort >/dev/null || fail "dpkg -P left the cohort group"
say "installed, used, removed and purged: ok"
