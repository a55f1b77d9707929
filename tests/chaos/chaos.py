#!/usr/bin/env python3
"""chaos.py - the chaos harness's driver (issue 5): runs a private cluster of cohortd nodes
under random faults, lets it converge, then hands the evidence to check.py.

  python3 tests/chaos/chaos.py [--build build] [--nodes 5] [--duration 120] [--seed 42]
                               [--workdir DIR] [--keep] [--bound 90]

What it does (see tests/chaos/README.md for the reasoning):
  1. starts a private local database (deploy/localdb/localdb.sh, H2 file backend, so data
     survives a database restart) on a free port, or uses MONGODB_URI if set;
  2. puts a TCP proxy (proxy.py) between each node and the database;
  3. starts N cohortd nodes with three services: noop (a journal and a completed_log per node,
     a tracked generator, crash_on = poison, batch claims, a schedule line), work (the sleeper
     test handler: long tasks and tasks that time out) and ext (handler = external), and two
     external workers (handlers/external-python/cohort_worker.py) with call journals;
  4. for --duration seconds injects random faults from a printed seed (kill -9, SIGSTOP,
     partition, slow link, database restart, clock skew, poison rounds; and what operators and
     clients do: rolling restarts by SIGTERM, live settings changes, a duplicate node_id, one
     dropped database, worker kills and freezes, dropped long-polls), logging each with its
     time in events.jsonl (the fault timeline), and enqueues tasks with cohortctl;
  5. heals everything, stops the generator (SIGHUP with generate_per_tick = 0) and waits for
     convergence (one live primary, nothing pending or claimed, every tracked batch
     completed) for at most --bound seconds, measuring the time;
  6. SIGTERMs the nodes, dumps the database into the workdir and runs check.py on it.

Exit status: 0 if the checker found no violation, 1 otherwise, 2 on a setup error. The workdir
is deleted after a clean run unless --keep; after a failing run it is always kept, and
`python3 tests/chaos/check.py WORKDIR` re-checks it.
"""
import argparse
import datetime
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

try:
    import pymongo  # Debian's python3-pymongo
except ImportError:
    # A python3 other than the system's (pyenv, a venv) lacks Debian's package: run again
    # under the system's interpreter, which has it.
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and \
            os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise SystemExit("chaos: pymongo is missing: apt-get install python3-pymongo "
                     "(or run bash deploy/setup.sh with COHORT_TEST_TOOLS=1)")

import check  # noqa: E402
from proxy import BLACKHOLE, REFUSE, Proxy, ProxyLoop  # noqa: E402

SERVICE = "noop"
WORK = "work"  # long tasks (sleeper handler): drains and timeouts
EXT = "ext"  # run by external workers over the HTTP API (handlers/external-python)
WORKERS = ("w1", "w2")
# The external workers' lease, renewed every third: long enough that a busy machine's slow
# replies do not lose it, short enough that a freeze (1.5-2.5 leases) does within a short run.
LEASE_MS = 8000
DROPPER = "dropper"  # the worker name of long-polls whose connection the driver drops
TICK_MS = 200
TAKEOVER_MS = 1500
STALL_MS = 3000
MAX_ATTEMPTS = 4
SKEW_MS = 300000
DEFAULT_BOUND_S = 90
GRACE_MS = 15000  # shutdown_grace_ms: longer than any long task, so a drain finishes them
STOP_S = GRACE_MS / 1000 + 15  # a SIGTERM stops a node within this (else SIGKILL)
# Long tasks run longer than any stall_timeout_ms the run sets plus a maintenance interval, so
# that a drain (SIGTERM) shortly after they started leaves them running past the stall timeout.
LONG_MS = (8000, 10000)
HANG_MS = 4000  # a task that times out sleeps this long ...
HANG_TIMEOUT = "1s"  # ... under this task timeout
CLAIM_BATCH = 8  # noop's batch claims: a poison task is claimed beside innocent ones
SCHEDULE = "*/2 * * * * *"  # noop's schedule line "beat": a slot every 2 s
# Live settings an operator changes (cohortctl settings set), each within the safe ranges
# (takeover_ms > tick_ms, stall_timeout_ms >= 3 tick_ms, takeover_ms/4 above the checker's
# tolerance, stall below the long tasks' length).
SETTINGS = {"tick_ms": (150, 300), "takeover_ms": (1500, 2500), "stall_timeout_ms": (3000, 4500)}

# Fault kinds and their relative weights (poison rounds and the duplicate node_id are
# scheduled separately, a few per run). drain: SIGTERM to nodes running long tasks, a rolling
# restart of 2-3 nodes in a row; settings: a live settings change. db_drop is not drawn: once
# per run (any weight above 0; 0 disables it) the whole database is dropped, at a random time
# in the middle third of the run.
WEIGHTS = {"kill": 3, "pause": 2, "partition": 3, "slow": 1, "db_restart": 2, "skew": 1,
           "drain": 3, "settings": 2, "worker_kill": 1, "worker_freeze": 1, "worker_drop": 1,
           "db_drop": 1}
WORKER_FAULTS = ("worker_kill", "worker_freeze", "worker_drop")
ONCE = ("db_drop",)  # scheduled kinds, never drawn by weight


def log(msg):
    print(f"chaos {time.strftime('%H:%M:%S')} {msg}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary(build, names):
    for name in names:
        path = os.path.join(build, name)
        if os.path.exists(path):
            return path
    raise SystemExit(f"chaos: none of {names} in {build}: build first "
                     f"(cmake -S . -B build && cmake --build build)")


class Database:
    """The private local database (H2 file), or an external one from MONGODB_URI."""

    def __init__(self, workdir, external_uri):
        self.state = os.path.join(workdir, "db")
        self.h2 = os.path.join(workdir, "db.h2")
        self.external = external_uri
        self.uri = external_uri
        self.port = None

    def start(self):
        if self.external:
            return
        port = self.port or free_port()
        for attempt in range(5):
            out = subprocess.run(
                ["bash", os.path.join(ROOT, "deploy/localdb/localdb.sh"), "start", self.state,
                 "--h2", self.h2, "--port", str(port)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180)
            if out.returncode == 0:
                self.uri = out.stdout.strip()
                self.port = port
                return
            log(f"database start failed (attempt {attempt + 1}): {out.stderr.strip()[-300:]}")
            time.sleep(1)
        raise RuntimeError("the local database does not start")

    def stop(self):
        if self.external:
            return
        subprocess.run(["bash", os.path.join(ROOT, "deploy/localdb/localdb.sh"), "stop",
                        self.state], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60)

    def host_port(self):
        rest = self.uri.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
        host = rest.split(",")[0].split("@")[-1]
        h, _, p = host.rpartition(":")
        return (h or "127.0.0.1"), int(p or 27017)


class Node:
    """One cohortd node: its files, its process, its proxy and what the harness did to it."""

    def __init__(self, run, index, files=None):
        self.run = run
        self.id = f"n{index}"
        files = files or self.id  # a duplicate of node nX writes its own files (nX-dup.*)
        self.config = os.path.join(run.workdir, f"{files}.ini")
        self.log = os.path.join(run.workdir, f"{files}.log")
        self.journal = os.path.join(run.workdir, f"{files}.journal")
        self.completed = os.path.join(run.workdir, f"{files}.completed")
        self.work_journal = os.path.join(run.workdir, f"{files}.work.journal")
        self.proc = None
        self.state = "down"  # up | down | paused | partitioned
        self.skew_ms = 0
        self.proxy = None
        self.expect_exit = False
        self.log_offset = 0  # where the current process's log starts
        self.drain_t0 = 0.0  # when the driver sent the drain's SIGTERM (monotonic)
        # A duplicate gets a port of its own, so it fails on its node_id, not on its listener.
        self.http_port = run.node_ports.setdefault(self.id, free_port()) if files == self.id \
            else free_port()

    def write_config(self, generate):
        # The schedule line goes with the generator when the faults stop (SIGHUP), so that the
        # queue can drain.
        schedule = f'schedule.beat = {SCHEDULE} ; data={{"sched": true}} ; catch_up=latest' \
            if generate else "# schedule.beat stopped"
        text = f"""# chaos harness node {self.id} (written by tests/chaos/chaos.py)
[cluster]
mongodb_uri = mongodb://127.0.0.1:{self.proxy.port}/
database = {self.run.database}
tick_ms = {TICK_MS}
takeover_ms = {TAKEOVER_MS}
shutdown_grace_ms = {GRACE_MS}
http_listen = 127.0.0.1:{self.http_port}
api_max_wait_ms = 10000
node_id = {self.id}
log_level = info

[service:{SERVICE}]
handler = {self.run.noop_so}
workers = 2
max_attempts = {MAX_ATTEMPTS}
retry_base_ms = 100
stall_timeout_ms = {STALL_MS}
succeeded_retention_ms = 0
failed_retention_ms = 0
sleep_ms = 150
fail_first_n = 1
journal = {self.journal}
completed_log = {self.completed}
generate_per_tick = {self.run.generate_per_tick if generate else 0}
generate_every = 5
generate_tracked = true
crash_on = poison
claim_batch = {CLAIM_BATCH}
{schedule}

[service:{WORK}]
handler = {self.run.sleeper_so}
workers = 2
max_attempts = {MAX_ATTEMPTS}
retry_base_ms = 100
stall_timeout_ms = {STALL_MS}
succeeded_retention_ms = 0
failed_retention_ms = 0
journal = {self.work_journal}

[service:{EXT}]
handler = external
max_attempts = {MAX_ATTEMPTS}
retry_base_ms = 100
stall_timeout_ms = {STALL_MS}
succeeded_retention_ms = 0
failed_retention_ms = 0
"""
        with open(self.config + ".tmp", "w") as f:  # a node starting now reads all or nothing
            f.write(text)
        os.replace(self.config + ".tmp", self.config)

    def start(self):
        env = dict(os.environ)
        env.pop("MONGODB_URI", None)  # it would override the proxy's address
        env.pop("COHORT_TEST_CLOCK_SKEW_MS", None)
        if self.skew_ms:
            env["COHORT_TEST_CLOCK_SKEW_MS"] = str(self.skew_ms)
        with open(self.log, "ab") as f:
            self.log_offset = f.tell()
            f.write(f"# chaos: start skew_ms={self.skew_ms} at_ms={int(time.time() * 1000)}\n"
                    .encode())
            f.flush()
            self.proc = subprocess.Popen([self.run.cohortd, "-c", self.config],
                                         stdin=subprocess.DEVNULL, stdout=f, stderr=f,
                                         env=env, start_new_session=True)
        self.state = "up"
        self.expect_exit = False

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait_ready(self, timeout=10.0):
        """Waits until the process logged its start line, which it writes after installing its
        signal handlers: a SIGHUP or SIGTERM before that would kill it with the default action
        (a race of the harness, not a fault under test)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None or " started: " in self.log_since_start():
                return
            time.sleep(0.05)

    def log_since_start(self):
        try:
            with open(self.log, "rb") as f:
                f.seek(self.log_offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


class ExtWorker:
    """An external worker (handlers/external-python/cohort_worker.py, the demo handler: it
    sleeps data.sleep_ms) with a journal of every claim and outcome and their answers."""

    def __init__(self, run, name):
        self.run = run
        self.id = name
        self.journal = os.path.join(run.workdir, f"{name}.worker.journal")
        self.log = os.path.join(run.workdir, f"{name}.worker.log")
        self.proc = None
        self.state = "down"  # up | down | frozen

    def start(self):
        urls = []
        for port in self.run.node_ports.values():
            urls += ["--url", f"http://127.0.0.1:{port}"]
        with open(self.log, "ab") as f:
            self.proc = subprocess.Popen(
                [sys.executable, self.run.worker_py, "--service", EXT, "--worker", self.id,
                 "--token-file", self.run.token_file, "--max", "2", "--wait-ms", "5000",
                 "--lease-ms", str(LEASE_MS), "--journal", self.journal] + urls,
                stdin=subprocess.DEVNULL, stdout=f, stderr=f, start_new_session=True)
        self.state = "up"
        self.run.event("worker_start", node=self.id, pid=self.proc.pid)

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)


class Run:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="cohort-chaos-"))
        os.makedirs(self.workdir, exist_ok=True)
        if os.listdir(self.workdir):
            raise SystemExit(f"chaos: --workdir {self.workdir} is not empty")
        build = os.path.abspath(args.build)
        self.cohortd = find_binary(build, ["src/cohortd", "cohortd"])
        self.cohortctl = find_binary(build, ["src/cohortctl", "cohortctl"])
        self.noop_so = find_binary(build, ["handlers/cohort_noop.so",
                                           "handlers/noop/cohort_noop.so"])
        self.sleeper_so = find_binary(build, ["tests/handlers/test_handler_sleeper.so"])
        self.database = f"chaos_{args.seed}_{os.getpid()}"
        self.generate_per_tick = 2
        self.db = Database(self.workdir, os.environ.get("MONGODB_URI"))
        self.events = open(os.path.join(self.workdir, "events.jsonl"), "a")
        self.lock = threading.Lock()
        self.nodes = []
        self.ploop = None
        self.client = None
        self.timers = []  # (due, what, node or None)
        self.db_thread = None
        self.db_down = False
        self.workers = []  # enqueue threads
        self.enqueue_seq = 0
        self.observed = None  # (primary, epoch) last seen
        self.pending_takeover = None
        self.rolling_left = 0  # drains still to come in the current rolling restart
        self.settings_set = {}  # (service, key) -> value an operator set live
        self.dup = None  # the process started with a duplicate node_id, while it runs
        self.healing = threading.Event()  # set when the faults stop
        self.node_ports = {}  # node id -> its http_listen port (a duplicate shares it)
        self.ext_workers = []
        self.worker_py = os.path.join(ROOT, "handlers/external-python/cohort_worker.py")

    # ---- bookkeeping ----------------------------------------------------------------------

    def event(self, kind, **fields):
        rec = {"t": round(time.time(), 3), "kind": kind, **fields}
        with self.lock:
            self.events.write(json.dumps(rec) + "\n")
            self.events.flush()
        return rec

    def later(self, seconds, what, node=None, **extra):
        self.timers.append((time.monotonic() + seconds, what, node, extra))

    # ---- setup ----------------------------------------------------------------------------

    def setup(self):
        self.db.start()
        log(f"database {self.db.uri} ({'external' if self.db.external else 'private, H2'}); "
            f"database name {self.database}; workdir {self.workdir}")
        self.client = pymongo.MongoClient(self.db.uri, serverSelectionTimeoutMS=1000,
                                          connectTimeoutMS=1000, socketTimeoutMS=5000)
        self.ploop = ProxyLoop()
        host, port = self.db.host_port()
        meta = {
            "seed": self.args.seed, "nodes": self.args.nodes, "duration_s": self.args.duration,
            "bound_s": self.args.bound, "service": SERVICE, "database": self.database,
            "max_attempts": MAX_ATTEMPTS, "tick_ms": TICK_MS, "takeover_ms": TAKEOVER_MS,
            "stall_timeout_ms": STALL_MS, "external_db": bool(self.db.external),
            "node_ids": [f"n{i + 1}" for i in range(self.args.nodes)],
            "work_service": WORK, "grace_ms": GRACE_MS, "long_ms": list(LONG_MS),
            "stop_s": STOP_S,
            "settings_ranges": SETTINGS, "schedule": "beat", "ext_service": EXT,
            "ext_workers": list(WORKERS), "dropped_worker": DROPPER, "lease_ms": LEASE_MS,
        }
        with open(os.path.join(self.workdir, "run.json"), "w") as f:
            json.dump(meta, f, indent=1)
        for i in range(self.args.nodes):
            node = Node(self, i + 1)
            node.proxy = Proxy(self.ploop, node.id, host, port)
            node.write_config(generate=True)
            self.nodes.append(node)
        for node in self.nodes:
            node.start()
            self.event("start", node=node.id, skew_ms=0, pid=node.proc.pid)
        rc, token, err = self.ctl(["tokens", "create", "chaos-workers", "--scopes", "work"])
        if rc != 0:
            raise RuntimeError(f"cohortctl tokens create: {err}")
        self.token_file = os.path.join(self.workdir, "worker.token")
        with open(self.token_file, "w") as f:
            f.write(token.split()[-1] + "\n")
        for name in WORKERS:
            w = ExtWorker(self, name)
            self.ext_workers.append(w)
            w.start()

    # ---- observation ----------------------------------------------------------------------

    def service_doc(self):
        try:
            return self.client[self.database]["services"].find_one({"_id": SERVICE})
        except Exception:  # the database is away: nothing observed this time
            return None

    def observe(self):
        doc = self.service_doc()
        if not doc:
            return None
        seen = (doc.get("primary"), doc.get("epoch", 0))
        if seen != self.observed:
            self.observed = seen
        pt = self.pending_takeover
        if pt and seen[1] > pt["epoch"] and seen[0] not in (None, pt["victim"]):
            ms = int((time.monotonic() - pt["t0"]) * 1000)
            self.event("takeover", fault=pt["fault"], victim=pt["victim"], new=seen[0],
                       epoch=seen[1], ms=ms)
            log(f"takeover after {pt['fault']} of {pt['victim']}: {seen[0]} epoch {seen[1]} "
                f"in {ms} ms")
            self.pending_takeover = None
        elif pt and seen[0] == pt["victim"] and seen[1] > pt["epoch"]:
            self.pending_takeover = None  # the victim took itself back: not a takeover
        return doc

    def primary(self):
        return self.observed[0] if self.observed else None

    def watch_takeover(self, node, fault):
        """Times the takeover a fault on the primary causes (not while the database is away:
        that time would be the database's, not the election's)."""
        if self.observed and node.id == self.observed[0] and not self.pending_takeover and \
                not self.db_down:
            self.pending_takeover = {"t0": time.monotonic(), "victim": node.id,
                                     "epoch": self.observed[1], "fault": fault}

    # ---- processes ------------------------------------------------------------------------

    def reap(self):
        for w in self.ext_workers:
            if w.state == "up" and w.proc.poll() is not None:
                self.event("worker_exit", node=w.id, rc=w.proc.returncode)
                log(f"worker {w.id} exited with status {w.proc.returncode}: restarting")
                w.start()
        dup = self.dup
        if dup and dup.proc.poll() is not None:
            refused = "in use by another live process" in dup.log_since_start()
            self.event("dup_exit", node=dup.id, rc=dup.proc.returncode, refused=refused)
            log(f"the duplicate {dup.id} exited with status {dup.proc.returncode}"
                f"{' (refused: node_id in use)' if refused else ''}")
            self.dup = None
        for node in self.nodes:
            if node.state == "draining" and node.proc.poll() is not None:
                seconds = round(time.monotonic() - node.drain_t0, 2)
                rc = node.proc.returncode
                if rc != 0 and "is poison (crash_on)" in node.log_since_start():
                    # a poison task it was still running crashed it during the drain
                    self.event("crash", node=node.id, rc=rc, poison=True)
                else:
                    self.event("drained", node=node.id, rc=rc, seconds=seconds)
                log(f"{node.id} drained in {seconds:.1f}s (status {rc})")
                node.state = "down"
                self.later(0.5, "restart", node)
                if self.rolling_left:
                    self.later(1.5, "drain")
                continue
            if node.state in ("up", "partitioned") and node.proc and node.proc.poll() is not None:
                rc = node.proc.returncode
                text = node.log_since_start()
                poison = "is poison (crash_on)" in text
                node.state = "down"
                if node.proxy.mode != "forward":
                    node.proxy.restore()
                if node.expect_exit:
                    continue
                if "is in use by another live process" in text:
                    # refused because a duplicate took its node_id over while it was down:
                    # right; tried again later
                    self.event("start_refused", node=node.id, rc=rc)
                    self.later(2.0, "restart", node)
                    continue
                self.event("crash", node=node.id, rc=rc, poison=poison)
                log(f"{node.id} exited with status {rc}"
                    f"{' (poison task)' if poison else ' UNEXPECTEDLY'}; restarting soon")
                self.later(self.rng.uniform(0.5, 2.0), "restart", node)

    def restart(self, node, skew_ms=None):
        if skew_ms is not None:
            node.skew_ms = skew_ms
        if node.proxy.mode != "forward":
            node.proxy.restore()
        node.start()
        self.event("start", node=node.id, skew_ms=node.skew_ms, pid=node.proc.pid)

    def kill(self, node, sig=signal.SIGKILL):
        if sig != signal.SIGKILL:
            node.wait_ready()
        node.expect_exit = True
        if node.state == "paused":
            node.signal(signal.SIGCONT)
        node.signal(sig)
        try:
            node.proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            node.signal(signal.SIGKILL)
            node.proc.wait(10)
            self.event("stop_timeout", node=node.id)
        node.state = "down"

    # ---- faults ---------------------------------------------------------------------------

    def up_nodes(self):
        return [n for n in self.nodes if n.state == "up" and n.proc.poll() is None]

    def pick_node(self):
        """A running node, the primary half of the time (never the one a duplicate of which
        runs: that duplicate must find it alive)."""
        ups = [n for n in self.up_nodes() if not (self.dup and n.id == self.dup.id)]
        if not ups:
            return None
        prim = [n for n in ups if n.id == self.primary()]
        if prim and self.rng.random() < 0.5:
            return prim[0]
        return self.rng.choice(ups)

    def inject(self):
        disrupted = sum(1 for n in self.nodes if n.state != "up")
        weights = self.args.faults
        kinds = [k for k in weights if weights[k] > 0 and k not in ONCE and
                 not (k == "db_restart" and self.db_down)]
        if not kinds:
            return
        kind = self.rng.choices(kinds, [weights[k] for k in kinds])[0]
        if kind in WORKER_FAULTS:
            self.worker_fault(kind)
            return
        if kind == "settings":
            self.settings_change()
            return
        if kind == "drain":
            self.rolling_restart()
            return
        if kind != "db_restart" and disrupted >= max(1, (len(self.nodes) - 1) // 2):
            return  # keep a majority running, so the run makes progress
        if kind == "db_restart":
            self.db_restart()
            return
        node = self.pick_node()
        if not node:
            return
        if kind == "kill":
            self.watch_takeover(node, "kill")
            self.kill(node)
            down = self.rng.uniform(1.0, 5.0)
            self.event("fault", fault="kill", node=node.id, down_s=round(down, 2),
                       was_primary=node.id == self.primary())
            log(f"kill -9 {node.id} for {down:.1f}s")
            self.later(down, "restart", node)
        elif kind == "pause":
            self.watch_takeover(node, "pause")
            length = self.rng.uniform(1.5, 4.0) * TAKEOVER_MS / 1000
            node.signal(signal.SIGSTOP)
            node.state = "paused"
            self.event("fault", fault="pause", node=node.id, length_s=round(length, 2),
                       was_primary=node.id == self.primary())
            log(f"SIGSTOP {node.id} for {length:.1f}s")
            self.later(length, "resume", node)
        elif kind == "partition":
            self.watch_takeover(node, "partition")
            mode = self.rng.choice([REFUSE, BLACKHOLE])
            length = self.rng.uniform(2.0, 8.0)
            node.proxy.cut(mode)
            node.state = "partitioned"
            self.event("fault", fault="partition", node=node.id, mode=mode,
                       length_s=round(length, 2), was_primary=node.id == self.primary())
            log(f"partition {node.id} ({mode}) for {length:.1f}s")
            self.later(length, "heal", node)
        elif kind == "slow":
            delay = self.rng.uniform(0.1, 0.4)
            length = self.rng.uniform(3.0, 8.0)
            node.proxy.slow(delay)
            self.event("fault", fault="slow", node=node.id, delay_s=round(delay, 3),
                       length_s=round(length, 2), was_primary=node.id == self.primary())
            log(f"slow {node.id}'s link by {delay * 1000:.0f} ms per chunk for {length:.1f}s")
            self.later(length, "unslow", node)
        elif kind == "skew":
            self.watch_takeover(node, "skew")
            skew = 0 if node.skew_ms else self.rng.choice([SKEW_MS, -SKEW_MS])
            # Half the time the node starts on a slow link, so that its first clock samples
            # are rejected (round trip over takeover_ms/8) while its wall clock is off.
            slow_start = self.rng.random() < 0.5
            was_primary = node.id == self.primary()
            self.kill(node, signal.SIGTERM)
            self.event("fault", fault="skew", node=node.id, skew_ms=skew,
                       slow_start=slow_start, was_primary=was_primary)
            log(f"restart {node.id} with clock skew {skew} ms"
                f"{' on a slow link for 3s' if slow_start else ''}")
            if slow_start:
                node.proxy.slow(0.25)
                self.later(3.0, "unslow", node)
            self.restart(node, skew)

    # ---- operators ------------------------------------------------------------------------

    def rolling_restart(self):
        """An operator's rolling restart: long tasks (longer than stall_timeout_ms) are
        enqueued, then 2-3 nodes are drained (SIGTERM) one after the other, each restarted once
        it exited, preferring the node running the most long tasks."""
        if self.rolling_left or any(n.state == "draining" for n in self.nodes):
            return
        self.submit_work("long", self.rng.randint(3, 5))
        self.rolling_left = self.rng.randint(2, 3)
        log(f"rolling restart of {self.rolling_left} nodes in 1.5s (long tasks enqueued)")
        self.later(1.5, "drain")

    def running_work(self):
        """node id -> how many work tasks it holds claimed (empty if the database is away)."""
        try:
            q = self.client[self.database][f"queue_{WORK}"]
            held = Counter(d.get("claimed_by") for d in
                           q.find({"status": "claimed"}, {"claimed_by": 1}))
            return dict(held)
        except Exception:
            return {}

    def drain_next(self):
        if self.rolling_left <= 0:
            return
        disrupted = sum(1 for n in self.nodes if n.state != "up")
        ups = [n for n in self.up_nodes() if not (self.dup and n.id == self.dup.id)]
        if not ups or disrupted >= max(1, (len(self.nodes) - 1) // 2):
            self.later(1.0, "drain")  # wait for the other faults to heal
            return
        self.rolling_left -= 1
        held = self.running_work()
        node = max(ups, key=lambda n: (held.get(n.id, 0), self.rng.random()))
        node.wait_ready()
        self.watch_takeover(node, "drain")
        node.expect_exit = True
        node.drain_t0 = time.monotonic()
        node.signal(signal.SIGTERM)
        node.state = "draining"
        self.event("fault", fault="drain", node=node.id, long_tasks=held.get(node.id, 0),
                   was_primary=node.id == self.primary(), rolling_left=self.rolling_left)
        log(f"drain (SIGTERM) {node.id} holding {held.get(node.id, 0)} long task(s); "
            f"{self.rolling_left} more to drain")

    def ctl(self, args, timeout=30):
        env = dict(os.environ, MONGODB_URI=self.db.uri)
        try:
            out = subprocess.run([self.cohortctl, "--database", self.database] + args, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 timeout=timeout)
            return out.returncode, out.stdout.strip(), out.stderr.strip()
        except subprocess.TimeoutExpired:
            return -1, "", "timeout"

    def settings_change(self):
        """An operator's live settings change (cohortctl settings set) within the safe
        ranges, undone (settings unset) 8-20 s later."""
        service = self.rng.choice([SERVICE, WORK])
        key = self.rng.choice(sorted(SETTINGS))
        lo, hi = SETTINGS[key]
        value = self.rng.choice([lo, (lo + hi) // 2, hi])
        undo = self.rng.uniform(8, 20)

        def work():
            rc, out, err = self.ctl(["settings", "set", service, key, str(value)])
            self.event("fault", fault="settings", service=service, key=key, value=value, rc=rc,
                       err=err[-300:])
            log(f"settings set {service} {key} {value}: rc={rc} {err[-200:]}")
            if rc == 0:
                with self.lock:
                    self.settings_set[service, key] = value
                self.healing.wait(undo)
                self.settings_unset(service, key)

        t = threading.Thread(target=work, daemon=True)
        t.start()
        self.workers.append(t)

    def settings_unset(self, service, key):
        with self.lock:
            if self.settings_set.pop((service, key), None) is None:
                return
        rc, out, err = self.ctl(["settings", "unset", service, key])
        self.event("settings_unset", service=service, key=key, rc=rc, err=err[-300:])

    def start_duplicate(self):
        """An operator's mistake: a second process started with a running node's node_id (its
        own log and journals). It must refuse to start and run nothing."""
        ups = self.pick_node()
        if not ups or self.dup:
            return
        index = int(ups.id[1:])
        dup = Node(self, index, files=f"{ups.id}-dup")
        dup.proxy = ups.proxy
        dup.write_config(generate=True)
        dup.start()
        self.dup = dup
        self.event("dup_start", node=dup.id, pid=dup.proc.pid)
        log(f"started a duplicate of {dup.id} (same node_id)")
        self.later(45.0, "dup_stop")

    def stop_duplicate(self):
        dup = self.dup
        if dup and dup.proc.poll() is None:
            dup.signal(signal.SIGKILL)
            dup.proc.wait(10)
            self.event("dup_exit", node=dup.id, rc=None, refused=False, still_running=True)
            log(f"the duplicate {dup.id} was still running: killed")
            self.dup = None

    # ---- external workers -----------------------------------------------------------------

    def worker_fault(self, kind):
        ups = [w for w in self.ext_workers if w.state == "up"]
        if kind == "worker_drop":
            self.drop_long_poll()
            return
        if not ups:
            return
        w = self.rng.choice(ups)
        if kind == "worker_kill":
            down = self.rng.uniform(1.0, 3.0)
            w.signal(signal.SIGKILL)
            w.proc.wait(10)
            w.state = "down"
            self.event("fault", fault="worker_kill", node=w.id, down_s=round(down, 2))
            log(f"kill -9 worker {w.id} for {down:.1f}s")
            self.later(down, "worker_restart", None, worker=w)
        else:  # frozen past its lease: its late outcomes must be refused (lease_lost)
            length = self.rng.uniform(1.5, 2.5) * LEASE_MS / 1000
            w.signal(signal.SIGSTOP)
            w.state = "frozen"
            self.event("fault", fault="worker_freeze", node=w.id, length_s=round(length, 2))
            log(f"SIGSTOP worker {w.id} for {length:.1f}s (lease {LEASE_MS} ms)")
            self.later(length, "worker_thaw", None, worker=w)

    def drop_long_poll(self):
        """A worker that hangs up in the middle of a long-poll: a claim for a kind nothing has
        (it waits), the connection closed after 0.5-2 s, then a task of that kind enqueued while
        the claim's wait would still run. The task must go to a live worker; a claim made for
        the gone connection (issue 23.1) shows as a claim of `dropper` taken back."""
        port = self.rng.choice(list(self.node_ports.values()))
        hold = self.rng.uniform(0.5, 2.0)
        with open(self.token_file) as f:
            token = f.read().strip()
        body = json.dumps({"worker": DROPPER, "max": 1, "wait_ms": 8000, "lease_ms": LEASE_MS,
                           "kinds": ["dropped"]}).encode()
        request = (f"POST /api/v1/services/{EXT}/claims HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        self.event("fault", fault="worker_drop", node=DROPPER, port=port, hold_s=round(hold, 2))
        log(f"long-poll on :{port} dropped after {hold:.1f}s, then a task of its kind")

        def work():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                    c.sendall(request)
                    time.sleep(hold)
            except OSError as e:
                self.event("worker_drop_error", error=str(e))
            time.sleep(0.3)
            self.submit_now(EXT, {"sleep_ms": 200}, 1, False, extra=["--kind", "dropped"])

        t = threading.Thread(target=work, daemon=True)
        t.start()
        self.workers.append(t)

    def db_restart(self):
        down = self.rng.uniform(1.0, 4.0)
        self.db_down = True
        self.pending_takeover = None
        self.event("fault", fault="db_restart", down_s=round(down, 2),
                   mode="proxies" if self.db.external else "database")
        log(f"database restart ({'all proxies' if self.db.external else 'stop + start'}), "
            f"down {down:.1f}s")

        def work():
            try:
                if self.db.external:
                    for n in self.nodes:
                        if n.state != "partitioned":
                            n.proxy.cut(REFUSE)
                    time.sleep(down)
                    for n in self.nodes:
                        if n.state != "partitioned":
                            n.proxy.restore()
                else:
                    self.db.stop()
                    time.sleep(down)
                    self.db.start()
                self.event("db_up")
            except Exception as e:  # reported, and the run fails
                self.event("setup_error", error=f"database restart: {e}")
            finally:
                self.db_down = False

        self.db_thread = threading.Thread(target=work, daemon=True)
        self.db_thread.start()

    def db_drop(self):
        """An operator drops the whole database (dropDatabase) while everything runs: every
        task, batch, schedule state, setting and node record is gone. The nodes must recreate
        their config documents and go on; tasks enqueued afterwards obey every invariant. The
        API tokens are restored at once from what the driver read just before (an operator's
        backup of them), so that the external workers keep working. The drop's wall-clock
        window (t0 before the command, t1 after it) is what the checker places runs against.

        The private database's H2 backend cannot drop anything in use (its maps stay closed and
        every later command fails "Map ... is closed"), so there the same loss is made by
        stopping the server, deleting its file and starting it again (mode "wipe": a restore
        of an empty database); an external server (MONGODB_URI) gets dropDatabase."""
        self.db_down = True  # no database restart meanwhile, nothing observed
        self.pending_takeover = None

        def work():
            try:
                db = self.client[self.database]
                tokens = list(db["tokens"].find({}))
                t0 = time.time()
                if self.db.external:
                    self.client.drop_database(self.database)
                else:
                    self.db.stop()
                    for name in os.listdir(self.workdir):
                        if name.startswith(os.path.basename(self.db.h2)):
                            os.remove(os.path.join(self.workdir, name))
                    self.db.start()
                t1 = time.time()
                if tokens:
                    db["tokens"].insert_many(tokens)
                mode = "dropDatabase" if self.db.external else "wipe"
                self.event("fault", fault="db_drop", t0=round(t0, 3), t1=round(t1, 3),
                           mode=mode, tokens_restored=len(tokens))
                log(f"dropped the database {self.database} ({mode}, {(t1 - t0) * 1000:.0f} "
                    f"ms); {len(tokens)} API token(s) restored")
            except Exception as e:  # reported, and the run fails
                self.event("setup_error", error=f"database drop: {e!r}")
            finally:
                self.db_down = False

        self.db_thread = threading.Thread(target=work, daemon=True)
        self.db_thread.start()

    def poison(self):
        """A poison round: a task that crashes every node that runs it, and right behind it
        (claimed in the same batch) innocent tasks, which must never end failed for it."""
        def work():
            self.submit_now(SERVICE, {"poison": True}, 1, False, poison=True)
            self.submit_now(SERVICE, {"innocent": True}, 10, False)

        t = threading.Thread(target=work, daemon=True)
        t.start()
        self.workers.append(t)

    def enqueue(self):
        """The regular load: noop tasks (untracked and tracked), sometimes long work tasks and
        a task that times out."""
        tracked = self.rng.random() < 0.3
        count = 1 if self.rng.random() < 0.3 else self.rng.randint(2, 20)
        self.submit(SERVICE, {}, count, tracked)
        if self.rng.random() < 0.4:
            self.submit(EXT, {"sleep_ms": self.rng.choice([100, 500, 1500])},
                        self.rng.randint(1, 3), self.rng.random() < 0.3)
        roll = self.rng.random()
        if roll < 0.3:
            self.submit_work("long", self.rng.randint(1, 3))
        elif roll < 0.45:
            self.submit_work("hang", 1)

    def submit_work(self, kind, count):
        if kind == "long":
            self.submit(WORK, {"long": True, "sleep_ms": self.rng.randint(*LONG_MS)}, count,
                        False)
        else:  # sleeps past its timeout: must end timed_out, once
            self.submit(WORK, {"hang": True, "sleep_ms": HANG_MS}, count, False,
                        extra=["--timeout", HANG_TIMEOUT])

    def submit(self, service, data, count, tracked, extra=()):
        """Enqueues in the background (cohortctl may wait out a database restart)."""
        t = threading.Thread(target=self.submit_now, args=(service, data, count, tracked),
                             kwargs={"extra": extra}, daemon=True)
        t.start()
        self.workers.append(t)

    def submit_now(self, service, data, count, tracked, poison=False, extra=()):
        t0 = round(time.time(), 3)  # when cohortctl started: a drop after it may lose its tasks
        with self.lock:
            self.enqueue_seq += 1
            tag = f"{'p' if poison else 'e'}{self.enqueue_seq}"
        data = dict(data, chaos=tag)
        cmd = ["enqueue", service, "--create", "--data", json.dumps(data)] + list(extra)
        if count > 1:
            cmd += ["--count", str(count)]
        if tracked:
            cmd.append("--tracked")
        rc, stdout, stderr = self.ctl(cmd)
        self.event("enqueue", tag=tag, service=service, count=count, tracked=tracked,
                   poison=poison, data=data, rc=rc, out=stdout[-300:], err=stderr[-300:], t0=t0)
        if poison or rc != 0:
            log(f"{'poison task' if poison else 'enqueue'} {tag} ({service}): rc={rc} "
                f"{stdout[-100:]} {stderr[-200:]}")

    def run_timers(self):
        now = time.monotonic()
        due = [t for t in self.timers if t[0] <= now]
        self.timers = [t for t in self.timers if t[0] > now]
        for _, what, node, _extra in due:
            if what == "restart" and node.state == "down":
                self.restart(node)
            elif what == "resume" and node.state == "paused":
                node.signal(signal.SIGCONT)
                node.state = "up"
                self.event("resume", node=node.id)  # the fault's real end, for the checker
            elif what == "heal" and node.state == "partitioned":
                node.proxy.restore()
                node.state = "up"
                self.event("heal", node=node.id)
            elif what == "unslow":
                node.proxy.slow(0)
                self.event("unslow", node=node.id)
            elif what == "worker_restart" and _extra["worker"].state == "down":
                _extra["worker"].start()
            elif what == "worker_thaw" and _extra["worker"].state == "frozen":
                _extra["worker"].signal(signal.SIGCONT)
                _extra["worker"].state = "up"
                self.event("resume", node=_extra["worker"].id)
            elif what == "drain":
                self.drain_next()
            elif what == "dup_stop":
                self.stop_duplicate()

    # ---- phases ---------------------------------------------------------------------------

    def chaos(self):
        end = time.monotonic() + self.args.duration
        next_fault = time.monotonic() + self.rng.uniform(3, 6)
        next_enqueue = time.monotonic() + self.rng.uniform(1, 3)
        # Poison rounds: 3 in a 2-minute run, one a minute beyond (each costs a node
        # max_attempts crashes); at random times in the first 60% of the run so they finish.
        n_poison = max(3, self.args.duration // 60)
        poison_at = sorted(time.monotonic() + self.rng.uniform(0.1, 0.6) * self.args.duration
                           for _ in range(n_poison))
        dup_at = time.monotonic() + self.rng.uniform(0.1, 0.7) * self.args.duration
        # One dropped database, in the middle third (not while the database restarts).
        drop_at = time.monotonic() + self.rng.uniform(1 / 3, 2 / 3) * self.args.duration \
            if self.args.faults.get("db_drop", 0) > 0 else None
        last_observe = 0
        while time.monotonic() < end:
            self.reap()
            self.run_timers()
            now = time.monotonic()
            if now - last_observe >= 0.25 and not self.db_down:
                self.observe()
                last_observe = now
            if now >= next_fault:
                self.inject()
                next_fault = now + self.rng.uniform(2, 6)
            if now >= next_enqueue:
                self.enqueue()
                next_enqueue = now + self.rng.uniform(1.5, 5)
            if poison_at and now >= poison_at[0]:
                poison_at.pop(0)
                self.poison()
            if dup_at and now >= dup_at:
                dup_at = None
                self.start_duplicate()
            if drop_at and now >= drop_at and not self.db_down:
                drop_at = None
                self.db_drop()
            time.sleep(0.05)

    def heal_all(self):
        self.rolling_left = 0
        self.healing.set()
        if self.db_thread:
            self.db_thread.join(240)
        for node in self.nodes:
            if node.state == "draining":
                try:
                    node.proc.wait(GRACE_MS / 1000 + 10)
                except subprocess.TimeoutExpired:
                    self.event("stop_timeout", node=node.id)
                    node.signal(signal.SIGKILL)
                    node.proc.wait(10)
        self.reap()
        self.stop_duplicate()
        for service, key in list(self.settings_set):
            self.settings_unset(service, key)
        for w in self.ext_workers:
            if w.state == "frozen":
                w.signal(signal.SIGCONT)
                w.state = "up"
                self.event("resume", node=w.id)
            elif w.state == "down":
                w.start()
        for t in self.workers:
            t.join(60)
        for node in self.nodes:
            if node.state == "paused":
                node.signal(signal.SIGCONT)
                node.state = "up"
                self.event("resume", node=node.id)
            elif node.state == "partitioned":
                node.proxy.restore()
                node.state = "up"
                self.event("heal", node=node.id)
            node.proxy.slow(0)
            self.event("unslow", node=node.id)
        self.reap()
        for node in self.nodes:
            if node.state == "down":
                self.restart(node)
        self.timers = []

    def stop_generator(self):
        """No new tasks from now on, so the queue can drain: generate_per_tick = 0 (SIGHUP)."""
        for node in self.nodes:
            node.write_config(generate=False)
        for node in self.nodes:
            node.wait_ready()
            node.signal(signal.SIGHUP)

    def converged(self):
        doc = self.observe()
        if not doc:
            return False, "database not answering"
        primary = doc.get("primary")
        owner = next((n for n in self.nodes if n.id == primary), None)
        if not owner or owner.state != "up" or owner.proc.poll() is not None:
            return False, f"primary {primary!r} not a running node"
        if any(n.state != "up" for n in self.nodes):
            return False, "a node is down"
        db = self.client[self.database]
        for service in (SERVICE, WORK, EXT):
            busy = db[f"queue_{service}"].count_documents(
                {"status": {"$in": ["pending", "claimed"]}})
            if busy:
                return False, f"{busy} {service} task(s) pending or claimed"
        q = db[f"queue_{SERVICE}"]
        seq = doc.get("batch_seq", 1)
        if doc.get("draining"):
            return False, f"batch {doc['draining']} draining"
        open_tasks = q.count_documents({"tracked": True, "batch": {"$gte": seq}})
        if open_tasks:
            return False, f"{open_tasks} tracked task(s) in the open batch {seq}"
        if doc.get("batches_completed", 0) != seq - 1:
            return False, (f"batches_completed {doc.get('batches_completed')} != "
                           f"batch_seq - 1 = {seq - 1}")
        return True, f"primary {primary} epoch {doc.get('epoch')}"

    def converge(self):
        t0 = time.monotonic()
        deadline = t0 + self.args.bound
        why = ""
        streak = 0
        while time.monotonic() < deadline:
            self.reap()
            self.run_timers()
            try:
                ok, why = self.converged()
            except Exception as e:
                ok, why = False, f"database error: {e}"
            if ok:
                streak += 1
                if streak == 3:  # stable over ~1 s (three polls) with a renewing primary
                    seconds = time.monotonic() - t0
                    self.event("converged", seconds=round(seconds, 2), bound_s=self.args.bound,
                               detail=why)
                    log(f"converged in {seconds:.1f}s (bound {self.args.bound}s): {why}")
                    return True
            else:
                streak = 0
            time.sleep(0.4)
        self.event("not_converged", bound_s=self.args.bound, detail=why)
        log(f"NOT converged within {self.args.bound}s: {why}")
        return False

    def shutdown(self):
        for w in self.ext_workers:
            w.signal(signal.SIGTERM)
            try:
                w.proc.wait(30)
            except subprocess.TimeoutExpired:
                w.signal(signal.SIGKILL)
            w.state = "stopped"
            self.event("worker_stop", node=w.id, rc=w.proc.returncode)
        for node in self.nodes:
            if node.proc and node.proc.poll() is None:
                if node.state == "paused":
                    node.signal(signal.SIGCONT)
                self.kill(node, signal.SIGTERM)
                self.event("stop", node=node.id, rc=node.proc.returncode)

    def dump(self):
        db = self.client[self.database]
        out = {
            "services": [check.plain(d) for d in db["services"].find({})],
            "tasks": [check.plain(d) for d in db[f"queue_{SERVICE}"].find({})],
            "work_tasks": [check.plain(d) for d in db[f"queue_{WORK}"].find({})],
            "ext_tasks": [check.plain(d) for d in db[f"queue_{EXT}"].find({})],
            "nodes": [check.plain(d) for d in db["nodes"].find({})],
        }
        with open(os.path.join(self.workdir, "dump.json"), "w") as f:
            json.dump(out, f)

    def cleanup(self):
        if self.dup and self.dup.proc.poll() is None:
            self.dup.signal(signal.SIGKILL)
        for w in self.ext_workers:
            w.signal(signal.SIGCONT)
            w.signal(signal.SIGKILL)
        for node in self.nodes:
            if node.proc and node.proc.poll() is None:
                node.signal(signal.SIGCONT)
                node.signal(signal.SIGKILL)
                node.proc.wait(10)
        if self.db_thread:
            self.db_thread.join(240)
        if self.client is not None and self.db.external and not self.args.keep:
            try:
                self.client.drop_database(self.database)
            except Exception:
                pass
        for node in self.nodes:
            if node.proxy:
                node.proxy.close()
        if self.ploop:
            self.ploop.close()
        self.db.stop()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"),
                   help="the build directory (default: build/)")
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--duration", type=int, default=120, help="seconds of faults")
    p.add_argument("--seed", type=int, default=None, help="default: random, printed")
    p.add_argument("--bound", type=int, default=DEFAULT_BOUND_S,
                   help=f"convergence bound in seconds (default {DEFAULT_BOUND_S})")
    p.add_argument("--workdir", help="default: a new directory under $TMPDIR")
    p.add_argument("--keep", action="store_true", help="keep the workdir after a clean run")
    p.add_argument("--faults", default="",
                   help="fault weights, e.g. skew=5,kill=1 (unnamed kinds keep their default; "
                        "0 disables one); defaults: " +
                        ",".join(f"{k}={v}" for k, v in WEIGHTS.items()))
    args = p.parse_args(argv)
    weights = dict(WEIGHTS)
    for item in filter(None, args.faults.split(",")):
        kind, _, weight = item.partition("=")
        if kind not in WEIGHTS or not weight.isdigit():
            p.error(f"--faults: '{item}' is not KIND=N with KIND one of {', '.join(WEIGHTS)}")
        weights[kind] = int(weight)
    args.faults = weights
    if args.seed is None:
        args.seed = random.SystemRandom().randint(1, 2**31 - 1)
    if args.nodes < 2:
        p.error("--nodes must be at least 2")
    return args


def main(argv):
    args = parse_args(argv)
    started = datetime.datetime.now().isoformat(timespec="seconds")
    log(f"seed {args.seed}: {args.nodes} nodes, {args.duration}s of faults, convergence bound "
        f"{args.bound}s (replay: python3 tests/chaos/chaos.py --seed {args.seed} "
        f"--nodes {args.nodes} --duration {args.duration})")
    run = Run(args)
    ok_setup = True
    try:
        run.setup()
        run.chaos()
        log("faults stop; healing every node and the database")
        run.heal_all()
        run.event("faults_stopped")
        run.stop_generator()
        run.converge()
        run.shutdown()
        run.dump()
    except Exception as e:
        ok_setup = False
        run.event("setup_error", error=repr(e))
        log(f"harness error: {e!r}")
    finally:
        run.cleanup()
        run.events.close()
    violations = check.check(run.workdir, out=sys.stdout) if ok_setup else ["harness error"]
    log(f"started {started}; seed {args.seed}; workdir {run.workdir}")
    if violations or args.keep:
        log(f"kept {run.workdir} (re-check: python3 tests/chaos/check.py {run.workdir})")
    else:
        shutil.rmtree(run.workdir, ignore_errors=True)
    if not ok_setup:
        return 2
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
