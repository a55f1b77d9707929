#!/usr/bin/env bash
# Peers side by side: the same N no-op tasks through Agenda 5 (Node.js), JobRunr (Java, its
# MongoDB storage provider) and Cohort at its defaults, on the same server in one run (see
# docs/BENCHMARKS.md, "Peers side by side").
#
#   bash tests/bench/peers.sh [--tasks N] [--repeat R] [--agenda-concurrency C]
#                             [--agenda-process-every-ms P] [--jobrunr-workers W]
#                             [--no-warmup]
#
#   --tasks N                    tasks per run (default 2000)
#   --repeat R                   rounds (default 3); each round runs the three, in an order
#                                rotated from round to round
#   --agenda-concurrency C       Agenda's maxConcurrency, defaultConcurrency and the job's
#                                concurrency (default 50)
#   --agenda-process-every-ms P  Agenda's processEvery (default 1000, Cohort's tick)
#   --jobrunr-workers W          JobRunr's worker count (default 0: JobRunr's own default,
#                                8 per CPU on Java 17's platform threads)
#   --no-warmup                  skip the warm-up round (each once, not recorded: the local
#                                server and JobRunr are JVMs whose first runs are slow)
#
# The configurations:
#   agenda   Agenda 5.0.0 (tests/bench/peers/agenda/: pinned in package.json, installed with
#            `npm install --no-audit --no-fund` into BUILD/bench-peers-cache/agenda); its
#            no-op job defined as an async function with the settings above; lockLimit 0 (no
#            limit, Agenda's default) and every other setting at Agenda's default.
#   jobrunr  JobRunr (tests/bench/peers/jobrunr/: a Maven project built with `mvn -q package`
#            into BUILD/bench-peers-cache/jobrunr) with MongoDBStorageProvider and the MongoDB
#            Java sync driver, a BackgroundJobServer with JobRunr's standard configuration.
#   cohort   3 cohortd nodes with the noop handler and nothing set but the database, the node
#            id and the handler: every other setting (workers, tick_ms, takeover_ms,
#            claim_batch, ...) is the product's default.
# Every run gets a fresh database, dropped afterwards. Its N tasks are enqueued first and not
# timed (Agenda: agenda.now per job; JobRunr: its bulk BackgroundJob.enqueue of a stream;
# Cohort: cohortctl enqueue --count N). Then the clock starts and the workers start in new
# processes; tasks/s counts from that start to the last task's completion, as
# tests/bench/run.sh does for Cohort. "First start to last finish" leaves process start-up out.
# A peer that cannot run against the server is reported as "not runnable against the local
# server: <reason>", with no figure.
#
# Builds Cohort with deploy/setup.sh into build/ (or COHORT_BUILD_DIR), starts the local
# database unless MONGODB_URI is set, prints the table (markdown) and keeps the raw results,
# versions and logs in BUILD/bench/peers-<UTC timestamp>/. Needs node and npm (Agenda), java
# and mvn (JobRunr); it downloads Agenda and JobRunr from their registries, so it is not part
# of ctest or CI.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${COHORT_BUILD_DIR:-$ROOT/build}"
BENCH_NAME=peers
# shellcheck source=tests/bench/lib.sh
. "$ROOT/tests/bench/lib.sh"

TASKS=2000
REPEAT=3
AGENDA_CONCURRENCY=50
AGENDA_PROCESS_EVERY_MS=1000
JOBRUNR_WORKERS=0
WARMUP=1
NODES=3

whole() { [[ "$2" =~ ^[0-9]+$ ]] || die "$1 '$2' must be a whole number"; }
while [ $# -gt 0 ]; do
    case "$1" in
        --tasks | --repeat | --agenda-concurrency | --agenda-process-every-ms | --jobrunr-workers)
            [ $# -ge 2 ] || usage
            whole "$1" "$2"
            case "$1" in
                --tasks) TASKS="$2" ;;
                --repeat) REPEAT="$2" ;;
                --agenda-concurrency) AGENDA_CONCURRENCY="$2" ;;
                --agenda-process-every-ms) AGENDA_PROCESS_EVERY_MS="$2" ;;
                --jobrunr-workers) JOBRUNR_WORKERS="$2" ;;
            esac
            shift 2
            ;;
        --no-warmup) WARMUP=0; shift ;;
        -h | --help) usage 0 ;;
        *) usage ;;
    esac
done
for n in "$TASKS" "$REPEAT" "$AGENDA_CONCURRENCY" "$AGENDA_PROCESS_EVERY_MS"; do
    [ "$n" -gt 0 ] || die "--tasks, --repeat and the Agenda settings must be at least 1"
done

OUT="$BUILD/bench/peers-$(date -u +%Y%m%dT%H%M%SZ)"
CACHE="$BUILD/bench-peers-cache"
PEERS="$ROOT/tests/bench/peers"
mkdir -p "$OUT" "$CACHE"
RESULTS="$OUT/results.tsv"
printf '%s\t' round config tasks_per_s active_tasks_per_s commands_per_task >"$RESULTS"
printf 'server_cpu_ms_per_1000\n' >>"$RESULTS"
VERSIONS="$OUT/versions.txt"
: >"$VERSIONS"

# not_runnable CONFIG REASON: CONFIG gets no figure and no further run
not_runnable() {
    log "$1 is not runnable against the local server: $2"
    printf '%s\n' "$2" >"$OUT/not-runnable-$1"
}
runnable() { [ ! -e "$OUT/not-runnable-$1" ]; }

# --- build and install -------------------------------------------------------------------

COHORT_TARGETS="${COHORT_TARGETS:-cohortd cohortctl cohort_noop bench_probe}" \
    bash "$ROOT/deploy/setup.sh" "$BUILD"
COMMIT="$(bench_commit)"
[ -x "$BUILD/tests/bench/probe" ] || die "$BUILD/tests/bench/probe is missing (COHORT_TESTS=OFF?)"

# Agenda: installed again only when package.json changed.
AGENDA_DIR="$CACHE/agenda"
install_agenda() {
    command -v node >/dev/null && command -v npm >/dev/null || {
        not_runnable agenda "node and npm are needed (Debian: apt-get install nodejs npm)"
        return
    }
    mkdir -p "$AGENDA_DIR"
    if ! cmp -s "$PEERS/agenda/package.json" "$AGENDA_DIR/package.json" \
        || [ ! -d "$AGENDA_DIR/node_modules/agenda" ]; then
        log "installing Agenda into $AGENDA_DIR"
        cp "$PEERS/agenda/package.json" "$AGENDA_DIR/package.json"
        (cd "$AGENDA_DIR" && npm install --no-audit --no-fund >"$OUT/npm-install.log" 2>&1) || {
            rm -f "$AGENDA_DIR/package.json"
            not_runnable agenda "npm install failed: $(tail -n 1 "$OUT/npm-install.log")"
            return
        }
    fi
    printf '%s node=%s\n' "$(agenda versions)" "$(node --version)" >>"$VERSIONS"
}
agenda() { NODE_PATH="$AGENDA_DIR/node_modules" node "$PEERS/agenda/bench.js" "$@"; }

JOBRUNR_DIR="$CACHE/jobrunr"
build_jobrunr() {
    command -v java >/dev/null && command -v mvn >/dev/null || {
        not_runnable jobrunr "java and mvn are needed"
        return
    }
    log "building the JobRunr program into $JOBRUNR_DIR"
    (cd "$PEERS/jobrunr" && mvn -q -B -Dstyle.color=never package -Dpeers.out="$JOBRUNR_DIR" \
        >"$OUT/mvn-package.log" 2>&1) || {
        not_runnable jobrunr "mvn package failed: $(grep -m 1 ERROR "$OUT/mvn-package.log")"
        return
    }
    jobrunr versions >>"$VERSIONS"
}
jobrunr() { java -cp "$JOBRUNR_DIR/classes:$JOBRUNR_DIR/lib/*" dev.cohort.bench.JobRunrBench "$@"; }

install_agenda
build_jobrunr

trap 'stop_nodes; database_stop' EXIT
database_start

# --- one run of each -----------------------------------------------------------------------

# record ROUND CONFIG LINE COMMANDS SERVER_CPU_MS: one result row (warm-up rounds are not kept)
record() {
    local per_task per_1000
    per_task="$(awk -v c="$4" -v n="$TASKS" 'BEGIN { printf "%.3f", c / n }')"
    per_1000="$(awk -v c="$5" -v n="$TASKS" 'BEGIN { printf "%.0f", c * 1000 / n }')"
    log "round $1 $2: $3 commands_per_task=$per_task server_cpu_ms_per_1000=$per_1000"
    [ "$1" = warmup ] && return 0
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$(value tasks_per_s "$3")" \
        "$(value active_tasks_per_s "$3")" "$per_task" "$per_1000" >>"$RESULTS"
}

# first_error LOG: the error a peer's program reported (its "bench:" line), or the log's last line
first_error() { grep -m 1 'bench:' "$1" || tail -n 1 "$1"; }

# run_peer ROUND CONFIG: Agenda or JobRunr; a failure makes the peer not runnable, with the
# error its program reported (the server's, when it was the server's)
run_peer() {
    local round="$1" config="$2" db="bench_peers_$$_$1_$2" dir="$OUT/$1-$2" since server line
    local opts=(--workers "$JOBRUNR_WORKERS")
    [ "$config" = jobrunr ] \
        || opts=(--concurrency "$AGENDA_CONCURRENCY" --process-every-ms "$AGENDA_PROCESS_EVERY_MS")
    mkdir -p "$dir"
    if ! "$config" enqueue --database "$db" --tasks "$TASKS" >"$dir/enqueue.out" \
        2>"$dir/enqueue.log"; then
        not_runnable "$config" "$(first_error "$dir/enqueue.log")"
        "$BUILD/tests/bench/probe" drop --database "$db" || true
        return
    fi
    grep -q '^schema=workaround' "$dir/enqueue.out" && touch "$OUT/workaround-$config"
    server="$(cpu_ms "$SERVER_PID")"
    since="$(date +%s%3N)"
    if ! line="$("$config" work --database "$db" --tasks "$TASKS" --since-ms "$since" \
        "${opts[@]}" 2>"$dir/work.log")"; then
        not_runnable "$config" "$(first_error "$dir/work.log")"
        "$BUILD/tests/bench/probe" drop --database "$db" || true
        return
    fi
    server=$(($(cpu_ms "$SERVER_PID") - server))
    "$BUILD/tests/bench/probe" drop --database "$db" || true
    record "$round" "$config" "$line" "$(value commands "$line")" "$server"
}

# run_cohort ROUND: 3 nodes, nothing set but the database, the node id and the handler
run_cohort() {
    local round="$1" db="bench_peers_$$_$1_cohort" dir="$OUT/$1-cohort" i server
    mkdir -p "$dir"
    for ((i = 1; i <= NODES; i++)); do
        cat >"$dir/node$i.ini" <<INI
; Written by tests/bench/peers.sh: the product's defaults but for these.
[cluster]
database = $db
node_id  = bench-$i

[service:noop]
handler = $BUILD/handlers/cohort_noop.so
INI
    done
    "$BUILD/cohortctl" -c "$dir/node1.ini" enqueue noop --count "$TASKS" >/dev/null \
        || die "cohortctl enqueue failed (round $round)"
    server="$(cpu_ms "$SERVER_PID")"
    bench_cohort_nodes_run "$dir" "$db" "$NODES" "$TASKS"
    server=$(($(cpu_ms "$SERVER_PID") - server))
    record "$round" cohort "$BENCH_RUN_LINE" "$BENCH_RUN_COMMANDS" "$server"
}

run_config() {
    runnable "$2" || return 0
    case "$2" in
        cohort) run_cohort "$1" ;;
        *) run_peer "$1" "$2" ;;
    esac
}

CONFIGS=(agenda jobrunr cohort)
log "$TASKS tasks per run, $REPEAT rounds; Agenda concurrency $AGENDA_CONCURRENCY," \
    "processEvery $AGENDA_PROCESS_EVERY_MS ms; JobRunr workers ${JOBRUNR_WORKERS/#0/default};" \
    "Cohort $NODES nodes at the defaults; results in $OUT"
run_rounds run_config "$WARMUP" "$REPEAT" "${CONFIGS[@]}"

# --- summary -------------------------------------------------------------------------------

CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
{
    printf 'Run %s: `bash tests/bench/peers.sh --tasks %d --repeat %d' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$TASKS" "$REPEAT"
    printf ' --agenda-concurrency %d --agenda-process-every-ms %d --jobrunr-workers %d`\n' \
        "$AGENDA_CONCURRENCY" "$AGENDA_PROCESS_EVERY_MS" "$JOBRUNR_WORKERS"
    printf 'Cohort at %s; %s cores (%s); database: %s.\n' "$COMMIT" "$(nproc)" \
        "${CPU:-unknown CPU}" "$BENCH_SERVER"
    printf 'Versions: %s.\n\n' "$(tr '\n' ' ' <"$VERSIONS" | sed 's/ $//; s/ /, /g')"
} | tee "$OUT/summary.md"
python3 - "$RESULTS" "$OUT" "$TASKS" "$REPEAT" "$NODES" "$AGENDA_CONCURRENCY" \
    "$AGENDA_PROCESS_EVERY_MS" "$JOBRUNR_WORKERS" <<'EOF' | tee -a "$OUT/summary.md"
import os, statistics, sys
results, out, tasks, repeat, nodes, conc, every, jr_workers = sys.argv[1:]
rows = [line.rstrip("\n").split("\t") for line in open(results)][1:]
runs = {}  # config -> round -> row
for r in rows:
    runs.setdefault(r[1], {})[r[0]] = r

def spread(values, fmt="%.0f"):
    return f"{fmt % statistics.median(values)}", f"{fmt % min(values)}-{fmt % max(values)}"

jr_setting = f"{jr_workers} workers" if jr_workers != "0" else "JobRunr's default workers"
names = {
    "agenda": f"Agenda 5, concurrency {conc}, processEvery {every} ms",
    "jobrunr": f"JobRunr, MongoDB storage, {jr_setting}",
    "cohort": f"Cohort, {nodes} nodes at the defaults",
}
print(f"{tasks} no-op tasks per run, {repeat} rounds; medians with min-max over the rounds.\n")
print("| configuration | tasks/s | min-max | tasks/s, first start to last finish | "
      "commands/task | server CPU ms / 1000 tasks | vs Agenda |")
print("|---|---|---|---|---|---|---|")
for config in ("agenda", "jobrunr", "cohort"):
    reason_file = os.path.join(out, f"not-runnable-{config}")
    if os.path.exists(reason_file):
        reason = open(reason_file).read().strip().replace("|", "\\|")
        print(f"| {names[config]} | not runnable against the local server: {reason} "
              "| | | | | |")
        continue
    by_round = runs.get(config, {})
    if not by_round:
        continue
    rate, rate_range = spread([float(r[2]) for r in by_round.values()])
    active, _ = spread([float(r[3]) for r in by_round.values()])
    cpt, _ = spread([float(r[4]) for r in by_round.values()], "%.2f")
    cpu, _ = spread([float(r[5]) for r in by_round.values()])
    ratios = [float(r[2]) / float(runs["agenda"][k][2])
              for k, r in by_round.items() if k in runs.get("agenda", {})]
    vs = (f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
          if ratios else "-")
    if config == "jobrunr" and os.path.exists(os.path.join(out, "workaround-jobrunr")):
        names[config] += " (schema workaround, see below)"
    print(f"| {names[config]} | {rate} | {rate_range} | {active} | {cpt} | {cpu} | {vs} |")
print("\nvs Agenda: median (min-max) of per-round ratios of tasks/s. commands/task: commands the"
      "\nworkers sent (Agenda and JobRunr counted by their drivers' command monitoring, progress"
      "\npolling included for JobRunr; Cohort's nodes by their own count), over the tasks.")
if os.path.exists(os.path.join(out, "workaround-jobrunr")):
    print("\nJobRunr's schema: its migration M007 fails on the local server (dropIndexes with"
          "\nindex \"*\" answers IndexNotFound: mongo-java-server 1.46 walks every index of the"
          "\ndatabase, not the collection's), so the program made M007's indexes itself and"
          "\nopened the storage with DatabaseOptions.SKIP_CREATE.")
EOF
log "raw results: $RESULTS; logs: $OUT/*/"
