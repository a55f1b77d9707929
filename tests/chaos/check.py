#!/usr/bin/env python3
"""check.py - the chaos harness's checker: reads what a run left in its workdir and asserts the
invariants of issues 5 and 22 (the guarantees in ../shared/BRIEF.md). Exit status 1 on any
violation.

  python3 tests/chaos/check.py WORKDIR

The workdir (written by chaos.py) holds:
  run.json        the run's parameters (seed, nodes, service, max_attempts, bound, ...)
  events.jsonl    what the driver did: faults, restarts, crashes, enqueues, takeovers,
                  convergence
  dump.json       the database after the run: services, tasks (queue_<service>), nodes;
                  ObjectIds as hex strings, dates as milliseconds since the epoch
  nX.log          each node's stderr (all its processes; "# chaos:" lines mark restarts)
  nX.journal      noop journal: "<task id> <node> <attempt> <started ms> <ended ms>"
  nX.work.journal sleeper journal (work service): "<task id> <node> <attempt> <group> <started>
                  <ended> <kind> <wall started> <wall ended>", written for every run
  nX.completed    noop completed_log: "<batch> <succeeded> <failed> <iterated> <node> <at ms>"
                  (the last on the cluster clock; older runs' lines have no time)
  nX-dup.*        the same files of a process started with nX's node_id
  wX.worker.journal  an external worker's calls (JSON lines: call, task, attempt, lease,
                  status, replayed, code)
  dump.json also holds work_tasks and ext_tasks (queue_work, queue_ext); events.jsonl is the
  fault timeline the re-run attribution reads (invariants 7 and 8)

A dropped database (fault db_drop, its wall-clock window t0..t1) splits the run into eras: the
database holds only the last era's tasks and batches. Tasks created before a drop may vanish
and their runs be journaled without a task; batch numbers and (if a creator raced the nodes)
epochs start again. Log lines, callbacks and enqueues are placed in an era by their time (a log
line's wall clock less its process's test skew; a callback's cluster-clock time; an enqueue's
start): one in a drop's window, or within TOL_MS of it, belongs to the era before it.

Only checks that hold under at-least-once execution are made (README.md says why each is
sound). Times from different clocks (the server's, a node's cluster clock) are compared with
a tolerance of TOL_MS.
"""
import calendar
import datetime
import json
import os
import re
import sys
from collections import Counter, defaultdict

TOL_MS = 300  # cluster-clock error: rtt/2 + 1 per node sample (rtt <= takeover_ms/8)

# The invariants, by number (a violation's tag starts with its number), for the summary.
INVARIANTS = {
    1: "one primary per epoch", 2: "no task lost or stuck", 3: "one completion per batch",
    4: "poison fails; clocks", 5: "convergence", 6: "the nodes themselves",
    7: "re-run only after a lease-taking fault", 8: "no innocent task failed",
    9: "timed out once", 10: "one task per schedule slot", 11: "external outcome from holder",
}

LOG_LINE = re.compile(
    r"^(?P<ts>\S+) (?P<level>[A-Z]+)\s+node=(?P<node>\S+)"
    r"(?: service=(?P<service>\S+))?(?: role=(?P<role>\S+))?(?: epoch=(?P<epoch>\d+))? \| "
    r"(?P<msg>.*)$")
BECAME = re.compile(r"^became primary \(epoch (\d+)")
START_MARK = re.compile(r"^# chaos: start skew_ms=(-?\d+)")


def log_ms(ts, skew_ms):
    """A log line's timestamp (UTC, ms) less its process's test skew: the real time, or None."""
    try:
        when = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return None
    return calendar.timegm(when.utctimetuple()) * 1000 + when.microsecond // 1000 - skew_ms


def oid_ms(task_id):
    """When an ObjectId was made (its first 4 bytes: seconds on its maker's wall clock), in ms;
    None for anything else."""
    try:
        return int(str(task_id)[:8], 16) * 1000 if len(str(task_id)) == 24 else None
    except ValueError:
        return None
COMPLETED = re.compile(r"^batch (\d+) completed:")


def plain(value):
    """A BSON value as JSON-friendly data: ObjectId -> hex, datetime -> ms since the epoch."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, datetime.datetime):
        return calendar.timegm(value.utctimetuple()) * 1000 + value.microsecond // 1000
    if type(value).__name__ == "ObjectId":
        return str(value)
    if type(value).__name__ == "Int64":
        return int(value)
    return value


class Evidence:
    """Everything a run left behind, parsed."""

    def __init__(self, workdir):
        self.workdir = workdir
        with open(os.path.join(workdir, "run.json")) as f:
            self.run = json.load(f)
        self.events = []
        path = os.path.join(workdir, "events.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                self.events = [json.loads(line) for line in f if line.strip()]
        dump_path = os.path.join(workdir, "dump.json")
        self.dump = None
        if os.path.exists(dump_path):
            with open(dump_path) as f:
                self.dump = json.load(f)
        self.logs = {}       # node -> [parsed line dict]
        self.journal = []    # (task, node, attempt, started, ended, file, line no)
        self.journal_bad = []
        self.completed = []  # (batch, succeeded, failed, iterated, node, at ms or None)
        self.completed_bad = []
        self.dup_journal = []  # lines a process with a duplicate node_id journaled
        self.worker_calls = []  # external workers' journals: claims and outcomes, answers
        # The dropped databases' wall-clock windows (s), in order.
        self.drops = sorted((e.get("t0", e["t"]), e.get("t1", e["t"])) for e in self.events
                            if e["kind"] == "fault" and e.get("fault") == "db_drop")
        for name in self.run.get("ext_workers", []) + [self.run.get("dropped_worker", "")]:
            for no, line in enumerate(self._lines(os.path.join(workdir,
                                                               f"{name}.worker.journal")), 1):
                try:
                    self.worker_calls.append(json.loads(line))
                except ValueError:
                    self.journal_bad.append(f"{name}.worker.journal:{no}: {line[:120]}")
        for node in self.run["node_ids"]:
            self.logs[node] = self._read_log(os.path.join(workdir, f"{node}.log"))
            self._read_journal(os.path.join(workdir, f"{node}.journal"))
            self._read_journal(os.path.join(workdir, f"{node}.work.journal"), sleeper=True)
            self._read_completed(os.path.join(workdir, f"{node}.completed"))
            for ext in ("journal", "work.journal"):
                # A duplicate's runs are runs of that node_id (journal checks) and, for the
                # duplicate check, runs of a process that should not have run
                path = os.path.join(workdir, f"{node}-dup.{ext}")
                self._read_journal(path, sleeper=ext == "work.journal")
                self.dup_journal += [f"{node}-dup.{ext}: {line}" for line in self._lines(path)]

    @staticmethod
    def _lines(path):
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()

    def _read_log(self, path):
        out = []
        skew = 0  # the current process's test clock skew ("# chaos: start" lines)
        for line in self._lines(path):
            mark = START_MARK.match(line)
            if mark:
                skew = int(mark.group(1))
            m = LOG_LINE.match(line)
            if m:
                d = m.groupdict()
                d["epoch"] = int(d["epoch"] or 0)
                d["ms"] = log_ms(d["ts"], skew) if self.drops else None  # (era() needs it)
                out.append(d)
        return out

    def era(self, ms):
        """How many drops lie before `ms` (a real time in ms; None: after them all). A time in
        a drop's window, or within TOL_MS of it, counts as before that drop."""
        if ms is None:
            return len(self.drops)
        return sum(1 for _, t1 in self.drops if ms > t1 * 1000 + TOL_MS)

    def _read_journal(self, path, sleeper=False):
        """noop's journal (5 fields), or the sleeper's (9: id node attempt group start end kind
        wall_start wall_end), read as the same (task, node, attempt, start, end)."""
        for no, line in enumerate(self._lines(path), 1):
            f = line.split()
            try:
                if sleeper and len(f) == 9:
                    f = f[:3] + f[4:6]
                if len(f) != 5 or len(f[0]) != 24:
                    raise ValueError
                self.journal.append((f[0], f[1], int(f[2]), int(f[3]), int(f[4]),
                                     os.path.basename(path), no))
            except ValueError:
                self.journal_bad.append(f"{os.path.basename(path)}:{no}: {line[:120]}")

    def _read_completed(self, path):
        for no, line in enumerate(self._lines(path), 1):
            f = line.split()
            try:
                if len(f) not in (5, 6):
                    raise ValueError
                self.completed.append((int(f[0]), int(f[1]), int(f[2]), int(f[3]), f[4],
                                       int(f[5]) if len(f) == 6 else None))
            except ValueError:
                self.completed_bad.append(f"{os.path.basename(path)}:{no}: {line[:120]}")


class Checker:
    def __init__(self, ev):
        self.ev = ev
        self.violations = []
        self.stats = {}
        self.checked = Counter()  # invariant number -> how many things were checked for it
        self.last_era = len(ev.drops)  # the database holds this era's tasks and batches
        service = ev.run["service"]
        dump = ev.dump or {"services": [], "tasks": [], "nodes": []}
        self.service_doc = next((s for s in dump["services"] if s.get("_id") == service), None)
        # The noop service's tasks, then the work service's (long tasks, timeouts): one list,
        # each task marked with its service (ids are ObjectIds, unique across collections).
        self.work = ev.run.get("work_service")
        for t in dump["tasks"]:
            t["_service"] = service
        for t in dump.get("work_tasks", []):
            t["_service"] = self.work
        self.ext = ev.run.get("ext_service")
        for t in dump.get("ext_tasks", []):
            t["_service"] = self.ext
        self.tasks = dump["tasks"] + dump.get("work_tasks", []) + dump.get("ext_tasks", [])
        self.by_id = {t["_id"]: t for t in self.tasks}
        self.primary_of = {}  # epoch -> node, from the logs
        self.skews = defaultdict(set)  # node -> clock skews it ran with (ms, nonzero)
        for e in ev.events:
            if e["kind"] == "start" and e.get("skew_ms"):
                self.skews[e["node"]].add(e["skew_ms"])

    def skew_explains(self, node, error_ms):
        """True if `error_ms` (a time of `node`'s off by that much) is about its clock skew:
        the node used its own wall clock instead of the cluster clock."""
        return any(abs(abs(error_ms) - abs(skew)) < 10000 for skew in self.skews.get(node, ()))

    def clock_or(self, invariant, node, error_ms, message):
        if self.skew_explains(node, error_ms):
            self.fail("4 clock", f"{message}; the error is {node}'s clock skew: it stamped a "
                                 f"time from its own wall clock, not the cluster clock")
        else:
            self.fail(invariant, message)

    def fail(self, invariant, message):
        self.violations.append(f"[{invariant}] {message}")

    # ---- 1. one primary per epoch; epochs only increase ------------------------------------

    def era_name(self, era):
        return f" (after drop {era})" if era else ""

    def check_epochs(self):
        """Per era (a dropped database may start epochs again when a creator other than a node
        recreates the config document): one primary per epoch, each begun once, increasing on
        each node; the tasks' epochs; fencing in time across every era."""
        acted = defaultdict(set)  # (era, epoch) -> nodes that acted as its primary
        became = []
        service = self.ev.run["service"]  # each service has its own epochs
        for node, lines in self.ev.logs.items():
            last = (0, 0)
            begun_in = {}  # epoch -> the era this node began it in
            for d in lines:
                if d["service"] != service:
                    continue
                era = self.ev.era(d["ms"])
                m = BECAME.match(d["msg"])
                if m:
                    epoch = int(m.group(1))
                    became.append((era, epoch))
                    begun_in[epoch] = era
                    if (era, epoch) <= last:
                        self.fail("1 epochs", f"{node} became primary of epoch {epoch} after "
                                              f"epoch {last[1]}{self.era_name(era)}: epochs "
                                              f"must only increase")
                    last = (era, epoch)
                if d["role"] == "primary" and d["epoch"] > 0:
                    # A primary deposed by a drop may log its old epoch after the drop: the
                    # line belongs to the era the node began that epoch in.
                    acted[begun_in.get(d["epoch"], era), d["epoch"]].add(node)
        for (era, epoch), nodes in sorted(acted.items()):
            if len(nodes) > 1:
                self.fail("1 epochs", f"epoch {epoch}{self.era_name(era)}: {len(nodes)} nodes "
                                      f"acted as primary ({', '.join(sorted(nodes))})")
            self.primary_of[era, epoch] = sorted(nodes)[0]
        for (era, epoch), n in Counter(became).items():
            if n > 1:
                self.fail("1 epochs", f"epoch {epoch}{self.era_name(era)} was begun {n} times")
        final = (self.service_doc or {}).get("epoch", 0)
        # The top epoch of the database's era comes from the epochs begun in it: a primary
        # deposed by a drop may still log its earlier epoch after the drop.
        top = max((e for (era, e) in became if era == self.last_era), default=0)
        if top > final:
            self.fail("1 epochs", f"logs show epoch {top}, the database only {final}")
        # Tasks created by primary_work carry the epoch they were created under.
        created = defaultdict(list)
        for t in self.tasks:
            epoch = t.get("epoch")
            if not epoch:
                continue
            era = self.ev.era(t.get("created_at"))
            created[era, epoch].append(t.get("created_at") or 0)
            if epoch > final and era == self.last_era:
                self.fail("1 epochs", f"task {t['_id']} has epoch {epoch} > final epoch {final}")
            owner = self.primary_of.get((era, epoch))
            if owner and t.get("created_by") != owner:
                self.fail("1 epochs", f"task {t['_id']} created by {t.get('created_by')} under "
                                      f"epoch {epoch}, whose primary was {owner}")
            elif not owner:
                self.primary_of[era, epoch] = t.get("created_by")
        self.checked[1] += len(set(acted) | set(became)) + sum(len(v) for v in created.values())
        # Fencing in time: whatever a primary of epoch E created precedes what any primary of a
        # later epoch (or era) created (a deposed primary creates nothing once its lease ran
        # out, and nothing after a drop until it is elected again).
        latest_before, latest_epoch = None, None
        for era, epoch in sorted(created):
            first = min(created[era, epoch])
            if latest_before is not None and first + TOL_MS < latest_before:
                self.fail("1 fencing", f"a task of epoch {latest_epoch} was created at "
                                       f"{latest_before}, {latest_before - first} ms after the "
                                       f"first task of epoch {epoch} (two primaries acting at "
                                       f"once)")
            last = max(created[era, epoch])
            if latest_before is None or last > latest_before:
                latest_before, latest_epoch = last, epoch
        self.stats["primacy changes"] = len(became)
        self.stats["final epoch"] = final
        if self.ev.drops:
            # An era whose first epoch is not above every epoch of the eras before it: the
            # config document was recreated below them (before 9d471f3, by `cohortctl enqueue
            # --create` or a node's start-up, at epoch 0), and an epoch was handed out twice.
            # (A primary deposed by the drop may log its old epoch in the new era: only the
            # epochs begun in an era count as its own.)
            seen, begun = defaultdict(list), defaultdict(list)
            for era, epoch in set(acted) | set(became):
                seen[era].append(epoch)
            for era, epoch in became:
                begun[era].append(epoch)
            again = 0
            for era in sorted(begun):
                before = max((e for prev in range(era) for e in seen.get(prev, [])), default=0)
                if era > 0 and before and min(begun[era]) <= before:
                    again += 1
                    self.fail("1 epochs", f"epoch {min(begun[era])} begun after drop {era} is "
                                          f"not above epoch {before}, handed out before it: "
                                          f"epochs started again")
            self.stats["epochs started again after a drop"] = again

    # ---- 2. no task lost or stuck; runs journaled; no overlapping runs ---------------------

    def before_a_drop(self, ms):
        """True if something that happened at `ms` (real time) may have been lost by a drop:
        it lies before the end of one (plus TOL_MS)."""
        return ms is not None and any(ms <= t1 * 1000 + TOL_MS for _, t1 in self.ev.drops)

    def check_tasks(self):
        if self.ev.dump is None:
            self.fail("2 tasks", "no dump.json: the database was never read")
            return
        status = Counter(t.get("status") for t in self.tasks)
        for t in self.tasks:
            final = ("succeeded", "failed", "timed_out") if t["_service"] == self.work else \
                ("succeeded", "failed")
            if t.get("status") not in final:
                self.fail("2 tasks", f"task {t['_id']} ({t.get('data')}) is {t.get('status')} "
                                     f"after the run quiesced (attempts {t.get('attempts')}, "
                                     f"claimed_by {t.get('claimed_by')})")
        # Every enqueue cohortctl confirmed is in the database, exactly as many as asked for
        # (fewer if cohortctl started before a drop ended: its tasks may have been dropped).
        by_tag = Counter((t.get("data") or {}).get("chaos") for t in self.tasks)
        dropped_tasks = dropped_runs = 0
        for e in self.ev.events:
            if e["kind"] != "enqueue":
                continue
            self.checked[2] += 1
            have = by_tag.get(e["tag"], 0)
            if have > e["count"]:
                self.fail("2 tasks", f"enqueue {e['tag']}: {have} tasks, {e['count']} enqueued")
            elif e["rc"] == 0 and have < e["count"] and \
                    self.before_a_drop(e.get("t0", e["t"]) * 1000):
                dropped_tasks += e["count"] - have
            elif e["rc"] == 0 and have != e["count"]:
                self.fail("2 tasks", f"enqueue {e['tag']}: cohortctl confirmed {e['count']} "
                                     f"task(s), the database has {have} (lost)")
        # Journal: every id a task; each (task, attempt) at most once (one claim per attempt).
        for bad in self.ev.journal_bad:
            self.fail("2 journal", f"malformed journal line {bad}")
        seen = {}
        per_task = defaultdict(list)
        for j in self.ev.journal:
            tid, node, attempt = j[0], j[1], j[2]
            per_task[tid].append(j)
            if tid not in self.by_id and self.before_a_drop(oid_ms(tid)):
                dropped_runs += 1  # created before a drop, which took it
            elif tid not in self.by_id:
                self.fail("2 tasks", f"task {tid} ran on {node} ({j[5]}:{j[6]}) but is not in "
                                     f"the database (lost)")
            if (tid, attempt) in seen:
                self.fail("2 claims", f"task {tid} attempt {attempt} ran twice ({seen[tid, attempt]} "
                                      f"and {node}): two nodes held one claim")
            seen[tid, attempt] = node
        retries = duplicates = 0
        self.checked[2] += len(self.tasks) + len(self.ev.journal)
        for t in self.tasks:
            retries += self._check_history(t, per_task.get(t["_id"], []))
            if t.get("status") == "succeeded":
                duplicates += max(0, len(per_task.get(t["_id"], [])) - 1)
        self.stats["tasks"] = len(self.tasks)
        self.stats["succeeded"] = status.get("succeeded", 0)
        self.stats["failed"] = status.get("failed", 0)
        self.stats["tracked"] = sum(1 for t in self.tasks if t.get("tracked"))
        self.stats["from cohortctl"] = sum(1 for t in self.tasks
                                           if t.get("created_by") == "cohortctl")
        self.stats["retries recorded"] = retries
        self.stats["attempts beyond the first"] = sum(max(0, (t.get("attempts") or 0) - 1)
                                                      for t in self.tasks)
        self.stats["journal lines"] = len(self.ev.journal)
        self.stats["re-runs (at-least-once)"] = duplicates
        if self.ev.drops:
            self.stats["enqueued tasks lost in a drop"] = dropped_tasks
            self.stats["journal lines of dropped tasks"] = dropped_runs

    def _check_history(self, t, runs):
        """The task's recorded runs; returns how many were retries."""
        tid = t["_id"]
        hist = t.get("history") or []
        retries = sum(1 for h in hist if h.get("outcome") == "retry")
        for h in hist:
            start, end = h.get("started_at"), h.get("ended_at")
            if start is not None and end is not None and end + TOL_MS < start:
                self.clock_or("2 history", h.get("node"), start - end,
                              f"task {tid}: attempt {h.get('attempt')} on {h.get('node')} ended "
                              f"{start - end} ms before it was claimed")
            elif start is not None and end is not None and end - start > 60000 and \
                    self.skew_explains(h.get("node"), end - start):
                self.fail("4 clock", f"task {tid}: attempt {h.get('attempt')} on {h.get('node')} "
                                     f"ended {end - start} ms after its claim, about that node's "
                                     f"clock skew: it stamped its own wall clock's time")
        if t.get("status") == "pending" and hist and t.get("run_at") is not None:
            last = hist[-1]
            ahead = t["run_at"] - (last.get("ended_at") or 0)
            late = t["run_at"] - (last.get("started_at") or 0)
            if last.get("outcome") == "retry" and ahead < 60000 and late > 60000 and \
                    self.skew_explains(last.get("node"), late):
                self.fail("4 clock", f"task {tid}: {last.get('node')} scheduled its retry at "
                                     f"run_at = claim + {late} ms (its clock skew), so the task "
                                     f"is not due for minutes")
        for a, b in zip(hist, hist[1:]):
            # What may come before a later attempt: a run that asked for a retry, or an attempt
            # that crashed (its claim was taken back: stall, node expiry, restart; or its worker
            # process died), which the store records as {event: "crashed"}.
            if a.get("outcome") != "retry" and a.get("event") != "crashed":
                self.fail("2 history", f"task {tid}: outcome {a.get('outcome')} of attempt "
                                       f"{a.get('attempt')} followed by attempt {b.get('attempt')}")
            if not (a.get("attempt", 0) < b.get("attempt", 0)):
                self.fail("2 history", f"task {tid}: attempts {a.get('attempt')} then "
                                       f"{b.get('attempt')} in its history")
            end, start = a.get("ended_at"), b.get("started_at")
            if end is not None and start is not None and start + TOL_MS < end:
                self.clock_or("2 overlap", a.get("node"), end - start,
                              f"task {tid}: attempt {b.get('attempt')} on {b.get('node')} "
                              f"started {end - start} ms before attempt {a.get('attempt')} on "
                              f"{a.get('node')} ended (both recorded)")
        if t.get("status") != "succeeded" or t["_service"] == self.ext:
            return retries  # external workers' runs: check_external
        last = hist[-1] if hist else {}
        node, attempt = last.get("node"), last.get("attempt")
        if last.get("outcome") != "succeeded":
            self.fail("2 history", f"task {tid} succeeded but its last recorded run is "
                                   f"{last.get('outcome')}")
            return retries
        if t.get("attempts") != attempt or t.get("claimed_by") != node:
            self.fail("2 history", f"task {tid}: success recorded for attempt {attempt} on {node}, "
                                   f"task says attempts {t.get('attempts')} claimed_by "
                                   f"{t.get('claimed_by')}")
        mine = [j for j in runs if j[2] == attempt]
        if len(mine) != 1 or mine[0][1] != node:
            where = ", ".join(f"{j[1]}" for j in mine) or "none"
            self.fail("2 journal", f"task {tid}: its recorded success (attempt {attempt} on "
                                   f"{node}) has {len(mine)} journal line(s) (from: {where})")
        else:
            _, _, _, started, ended, _, _ = mine[0]
            claimed = last.get("started_at", started)
            if started + TOL_MS < claimed or \
                    ended > last.get("ended_at", ended) + TOL_MS or ended + TOL_MS < started:
                self.clock_or("2 journal", node, claimed - started,
                              f"task {tid}: journaled run [{started}, {ended}] is not inside its "
                              f"recorded run [{claimed}, {last.get('ended_at')}]")
        return retries

    # ---- 3. one completion per tracked batch -----------------------------------------------

    def check_batches(self):
        doc = self.service_doc
        if not doc:
            self.fail("3 batches", "no services document")
            return
        seq = doc.get("batch_seq", 1)
        done = doc.get("batches_completed", 0)
        if doc.get("draining"):
            self.fail("3 batches", f"batch {doc['draining']} still draining after the run")
        if done != seq - 1:
            self.fail("3 batches", f"batches_completed = {done}, but {seq - 1} batches were "
                                   f"closed (batch_seq {seq})")
        for bad in self.ev.completed_bad:
            self.fail("3 batches", f"malformed completed_log line {bad}")
        # The database knows the last era's batches (a drop starts batch numbers again):
        # earlier eras' callbacks are only checked for what they say of themselves.
        lines = defaultdict(list)
        after = self.release_after_s() * 1000
        for c in self.ev.completed:
            if c[3] != c[1]:
                self.fail("3 batches", f"batch {c[0]} callback on {c[4]}: iterated {c[3]} "
                                       f"tasks, {c[1]} succeeded")
            if self.ev.era(c[5]) != self.last_era:
                continue
            lines[c[0]].append(c)
            # A primary deposed by the drop may finish a callback of its old batch numbering
            # (its completion is fenced and fails): not a batch of this era.
            stale = c[5] is not None and any(t1 * 1000 <= c[5] <= t1 * 1000 + after
                                             for _, t1 in self.ev.drops)
            if c[0] >= seq and not stale:
                self.fail("3 batches", f"callback for batch {c[0]}, never closed (batch_seq {seq})")
        counts = defaultdict(Counter)
        for t in self.tasks:
            if not t.get("tracked") or t["_service"] != self.ev.run["service"]:
                continue  # (the other services' batches are their own)
            b = t.get("batch")
            counts[b][t.get("status")] += 1
            if b is None or b >= seq:
                self.fail("3 batches", f"tracked task {t['_id']} in batch {b}, not completed "
                                       f"(batch_seq {seq})")
        for b in range(1, seq):
            if not lines[b]:
                self.fail("3 batches", f"batch {b} completed without a callback line")
                continue
            want = (counts[b]["succeeded"], counts[b]["failed"])
            if not any((c[1], c[2]) == want for c in lines[b]):
                got = ", ".join(f"{c[1]}/{c[2]} on {c[4]}" for c in lines[b])
                self.fail("3 batches", f"batch {b}: callbacks saw {got} succeeded/failed, the "
                                       f"database has {want[0]}/{want[1]}")
        recorded = Counter()  # (era, batch) -> completions logged
        for lines_of_node in self.ev.logs.values():
            for d in lines_of_node:
                m = COMPLETED.match(d["msg"]) if d["service"] == self.ev.run["service"] else None
                if m:
                    recorded[self.ev.era(d["ms"]), int(m.group(1))] += 1
        for (era, b), n in recorded.items():
            if n > 1:
                self.fail("3 batches", f"batch {b}{self.era_name(era)}: completion recorded {n} "
                                       f"times")
        self.checked[3] += len(set(recorded) | {(self.last_era, b) for b in range(1, seq)})
        last = doc.get("last_batch") or {}
        if seq > 1 and last.get("seq") != seq - 1:
            self.fail("3 batches", f"last_batch.seq = {last.get('seq')}, expected {seq - 1}")
        owner = self.primary_of.get((self.last_era, last.get("epoch")))
        if last and owner and last.get("completed_by") != owner:
            self.fail("3 batches", f"last batch completed by {last.get('completed_by')} under "
                                   f"epoch {last.get('epoch')}, whose primary was {owner}")
        self.stats["batches completed"] = done
        self.stats["callback runs"] = len(self.ev.completed)

    # ---- 4. the poison task fails after max_attempts; crashes only from poison --------------

    def check_poison(self):
        max_attempts = self.ev.run["max_attempts"]
        poison_tags = {e["tag"] for e in self.ev.events if e["kind"] == "enqueue" and e["poison"]}
        journaled = {j[0] for j in self.ev.journal}
        n_poison = 0
        for t in self.tasks:
            data = t.get("data") or {}
            if data.get("chaos") not in poison_tags:
                continue
            n_poison += 1
            tid = t["_id"]
            # attempts > max_attempts + 1 if the node failing it at claim was itself killed.
            if t.get("status") != "failed" or (t.get("attempts") or 0) <= max_attempts or \
                    "exceeds max_attempts" not in (t.get("last_error") or ""):
                self.fail("4 poison", f"poison task {tid}: status {t.get('status')}, attempts "
                                      f"{t.get('attempts')}, last_error {t.get('last_error')!r}; "
                                      f"expected failed after {max_attempts} attempts")
            if tid in journaled:
                self.fail("4 poison", f"poison task {tid} has a journaled successful run")
        exhausted = 0
        for t in self.tasks:
            if t.get("status") != "failed" or (t.get("data") or {}).get("chaos") in poison_tags:
                continue
            error = t.get("last_error") or ""
            if "exceeds max_attempts" not in error and "attempts exhausted" not in error:
                self.fail("4 poison", f"task {t['_id']} failed: {t.get('last_error')!r}")
            else:
                exhausted += 1  # judged by check_innocent: only faults may use its attempts
        crashes = [e for e in self.ev.events if e["kind"] == "crash"]
        self.checked[4] += n_poison + exhausted + len(self.tasks)  # clocks: every task's times
        self.checked[6] += len(crashes)
        for e in crashes:
            if not e.get("poison"):
                self.fail("6 crash", f"{e['node']} exited with status {e['rc']} and no poison "
                                     f"task explains it")
        self.stats["poison tasks"] = n_poison
        self.stats["poison crashes"] = sum(1 for e in crashes if e.get("poison"))
        self.stats["failed (attempts used up by faults)"] = exhausted

    # ---- 7-10. ordinary operations cost nothing (issue 22) ---------------------------------

    def lease_windows(self):
        """The fault timeline: every fault that can take a runner's lease, as (runner or None
        for every runner, kind, start s, end s, poison). A kill or a crash lasts until the
        node's next start; a pause, partition or slow link its length; a database restart until
        the database is back. Drains (SIGTERM), settings changes and duplicate node_ids are not
        here: they must take no lease."""
        events = sorted(self.ev.events, key=lambda e: e["t"])
        windows = []

        def next_event(after, kind, node=None, default=None):
            for e in events:
                if e["t"] >= after and e["kind"] == kind and (node is None or
                                                               e.get("node") == node):
                    return e["t"]
            if default is not None:
                return default
            return events[-1]["t"] if events else after

        for e in events:
            t, node = e["t"], e.get("node")
            if e["kind"] == "fault":
                f = e["fault"]
                if f == "kill":
                    windows.append((node, f, t, next_event(t, "start", node), False))
                elif f in ("pause", "partition", "slow", "worker_freeze"):
                    # until the driver really ended it (its timers may run late), at least its
                    # planned length
                    end = {"pause": "resume", "partition": "heal", "slow": "unslow",
                           "worker_freeze": "resume"}[f]
                    planned = t + e.get("length_s", 0)
                    windows.append((node, f, t, max(planned, next_event(t, end, node, planned)),
                                    False))
                elif f == "skew" and e.get("slow_start"):
                    windows.append((node, "slow", t, max(t + 3.0, next_event(t, "unslow", node,
                                                                             t + 3.0)), False))
                elif f == "db_restart":
                    windows.append((None, f, t, next_event(t, "db_up"), False))
                elif f == "db_drop":  # data loss takes every lease
                    windows.append((None, f, e.get("t0", t), e.get("t1", t), False))
                elif f == "worker_kill":
                    windows.append((node, "kill", t, next_event(t, "worker_start", node), False))
            elif e["kind"] == "crash":  # died by itself (a poison task): seen up to 1 s late
                windows.append((node, "crash", t - 1.0, next_event(t, "start", node),
                                bool(e.get("poison"))))
            elif e["kind"] == "stop_timeout":  # SIGKILLed after 15 s of a SIGTERM
                windows.append((node, "kill", t - 15.0, next_event(t, "start", node), False))
            elif e["kind"] == "worker_exit":  # died by itself
                windows.append((node, "crash", t - 1.0, next_event(t, "worker_start", node),
                                False))
        # An external worker talks to the nodes: a fault of any node may cost it a heartbeat.
        # (Not the dropped long-polls' worker: a claim for it should never have been made.)
        workers = set(self.ev.run.get("ext_workers", []))
        node_ids = set(self.ev.run["node_ids"])
        windows += [(w, kind, a, b, p) for (n, kind, a, b, p) in list(windows) if n in node_ids
                    for w in workers]
        return windows

    def release_after_s(self):
        """How long after a fault ends a lease it took may be released: the longest stall
        timeout, a maintenance interval (a third of it, at most 5 s), the longest takeover
        (node expiry) and 2 s for a busy machine."""
        ranges = self.ev.run.get("settings_ranges") or {}
        stall = max(self.ev.run.get("stall_timeout_ms", 3000),
                    (ranges.get("stall_timeout_ms") or [0, 0])[1])
        takeover = max(self.ev.run.get("takeover_ms", 1500),
                       (ranges.get("takeover_ms") or [0, 0])[1])
        return (stall + min(stall / 3, 5000) + takeover + 2000) / 1000

    def previous_run(self, runner, at_s):
        """(start of the run before the one running at `at_s`, start of that one) of node
        `runner`, from the driver's start events; None if unknown."""
        starts = sorted(e["t"] for e in self.ev.events
                        if e["kind"] == "start" and e.get("node") == runner)
        before = [t for t in starts if t <= at_s + TOL_MS / 1000]
        return (before[-2], before[-1]) if len(before) >= 2 else None

    def explaining(self, runner, at_ms, windows, poison_ok=True, restart=False):
        """The lease-taking faults that explain a claim of `runner` taken back at `at_ms`. A
        restart's release (`restart`) frees the claims of the node's previous run, whenever
        the new run gets to it: any fault that overlapped that previous run explains it."""
        at, after = at_ms / 1000, self.release_after_s()
        found = [w for w in windows if (w[0] is None or w[0] == runner) and
                 w[2] - TOL_MS / 1000 <= at <= w[3] + after and (poison_ok or not w[4])]
        run = self.previous_run(runner, at) if restart and not found else None
        if run:
            found = [w for w in windows if (w[0] is None or w[0] == runner) and
                     w[2] - TOL_MS / 1000 <= run[1] and w[3] > run[0] + TOL_MS / 1000 and
                     (poison_ok or not w[4])]
        return found

    def ordinary_near(self, runner, at_ms):
        """What the driver did to `runner` (or to every node) that takes no lease, in the
        minute before `at_ms`: the probable cause of an unexplained re-run."""
        out = []
        for e in self.ev.events:
            if not (at_ms / 1000 - 60 <= e["t"] <= at_ms / 1000 + TOL_MS / 1000):
                continue
            if e["kind"] == "fault" and e["fault"] == "drain" and e.get("node") == runner:
                out.append(f"drain (SIGTERM) at {e['t']:.1f}")
            elif e["kind"] == "fault" and e["fault"] == "skew" and e.get("node") == runner:
                out.append(f"restart (SIGTERM) at {e['t']:.1f}")
            elif e["kind"] == "dup_start" and e.get("node") == runner:
                out.append(f"a second process with its node_id started at {e['t']:.1f}")
            elif e["kind"] == "fault" and e["fault"] == "settings":
                out.append(f"settings set {e['service']} {e['key']} {e['value']} at "
                           f"{e['t']:.1f}")
        return "; ".join(out[-4:]) or "nothing"

    def unskewed(self, runner, at_ms):
        """The times `at_ms` may really be: itself, or (if `runner` ran with a skewed clock)
        that time stamped from the runner's own wall clock."""
        return [at_ms] + [at_ms - skew for skew in self.skews.get(runner, ())]

    def attribute(self, runner, at_ms, windows, poison_ok=True, why=""):
        """(explaining windows, skewed): the faults that explain a claim of `runner` taken
        back at `at_ms` (`why`: the history entry's error); skewed if only the time corrected
        by the runner's clock skew fits."""
        restart = "restarted" in (why or "")
        # Only a restart's release is stamped by the runner itself (its new process, whose
        # cluster clock may not be measured yet); a stall reset or a node's expiry is stamped
        # by the primary's cluster clock, so the runner's skew says nothing about its time.
        for i, at in enumerate(self.unskewed(runner, at_ms) if restart else [at_ms]):
            found = self.explaining(runner, at, windows, poison_ok, restart)
            if found:
                return found, i > 0
        return [], False

    def check_reruns(self):
        """7: a claim is taken back (history event "crashed": stall reset, node expiry, a
        restart's release; the attempt counted, the task runs again) only after a fault that
        took its runner's lease."""
        windows = self.lease_windows()
        taken = explained = 0
        for t in self.tasks:
            for h in t.get("history") or []:
                if h.get("event") != "crashed":
                    continue
                taken += 1
                at = h.get("at") or h.get("ended_at") or 0
                found, skewed = self.attribute(h.get("node"), at, windows, why=h.get("error"))
                if skewed:
                    self.fail("4 clock", f"task {t['_id']}: the release of attempt "
                                         f"{h.get('attempt')} on {h.get('node')} "
                                         f"({h.get('error')!r}) is stamped {at} ms, off by "
                                         f"{h.get('node')}'s clock skew: a node's own wall clock")
                if found:
                    explained += 1
                    continue
                self.fail("7 re-run", f"task {t['_id']} ({t['_service']}, {t.get('data')}): "
                                      f"attempt {h.get('attempt')} on {h.get('node')} taken back "
                                      f"at {at / 1000:.1f} ({h.get('error')!r}) with no fault that "
                                      f"took {h.get('node')}'s lease; what the driver did "
                                      f"before: {self.ordinary_near(h.get('node'), at)}")
        self.checked[7] += taken
        self.stats["claims taken back"] = taken
        self.stats["... after a lease-taking fault"] = explained

    def check_innocent(self):
        """8: a task that is not poison ends failed only if lease-taking faults other than a
        poison task's crash used up its attempts (noop and sleeper never fail on their own)."""
        windows = self.lease_windows()
        poison_tags = {e["tag"] for e in self.ev.events if e["kind"] == "enqueue" and e["poison"]}
        innocent_failed = 0
        for t in self.tasks:
            if t.get("status") != "failed" or (t.get("data") or {}).get("chaos") in poison_tags:
                continue
            self.checked[8] += 1
            blamed = []
            for h in t.get("history") or []:
                if h.get("event") != "crashed":
                    continue
                at = h.get("at") or h.get("ended_at") or 0
                if not self.attribute(h.get("node"), at, windows, False, h.get("error"))[0]:
                    why = self.attribute(h.get("node"), at, windows, why=h.get("error"))[0]
                    blamed.append(f"attempt {h.get('attempt')} on {h.get('node')} "
                                  f"({'a poison crash' if why else 'no fault'})")
            if blamed:
                innocent_failed += 1
                self.fail("8 innocent", f"task {t['_id']} ({t['_service']}, {t.get('data')}) "
                                        f"ended failed ({t.get('last_error')!r}); attempts "
                                        f"not taken by a fault of its own: "
                                        f"{', '.join(blamed)}")
        self.stats["innocent tasks failed"] = innocent_failed

    def check_timeouts(self):
        """9: a task that sleeps past its timeout ends timed_out, once: one timed_out outcome,
        the last entry of its history, and no later attempt ran; no other task times out."""
        by_task = defaultdict(list)
        for j in self.ev.journal:
            by_task[j[0]].append(j)
        n = 0
        for t in self.tasks:
            data = t.get("data") or {}
            hist = t.get("history") or []
            outs = [h for h in hist if h.get("outcome") == "timed_out"]
            if not data.get("hang"):
                if outs or t.get("status") == "timed_out":
                    self.fail("9 timeout", f"task {t['_id']} ({data}) has no timeout but timed "
                                           f"out")
                continue
            n += 1
            if t.get("status") != "timed_out" or len(outs) != 1 or hist[-1] is not outs[0]:
                story = [h.get("outcome") or h.get("event") for h in hist]
                self.fail("9 timeout", f"task {t['_id']} (sleeps past its timeout): status "
                                       f"{t.get('status')}, {len(outs)} timed_out outcome(s), "
                                       f"history {story}; expected timed_out once, last")
                continue
            later = [j for j in by_task.get(t["_id"], []) if j[2] > outs[0].get("attempt", 0)]
            if later:
                self.fail("9 timeout", f"task {t['_id']} timed out in attempt "
                                       f"{outs[0].get('attempt')} but ran again (attempt "
                                       f"{later[0][2]} on {later[0][1]})")
        self.checked[9] += len(self.tasks)
        self.stats["tasks timed out"] = n

    def check_schedule(self):
        """10: each slot of the schedule line creates exactly one task (unique key
        schedule:ID:SLOT). Slots skipped while no primary ran are allowed (catch_up = latest)."""
        sid = self.ev.run.get("schedule")
        if not sid:
            return
        prefix = f"schedule:{sid}:"
        slots = Counter(t.get("unique_key") for t in self.tasks
                        if str(t.get("unique_key") or "").startswith(prefix))
        for key, n in sorted(slots.items()):
            if n > 1:
                self.fail("10 schedule", f"slot {key[len(prefix):]} created {n} tasks")
        if not slots and self.ev.run.get("duration_s", 0) >= 30:
            self.fail("10 schedule", f"schedule {sid} created no task")
        self.checked[10] += len(slots)
        self.stats["schedule slots"] = len(slots)

    def check_external(self):
        """11: an external worker's outcome is stored only from the live lease holder: never
        for an attempt whose claim was taken back, never when the node answered it lease_lost
        or conflict, never twice for one attempt; and an outcome answered 200 is stored."""
        nodes = set(self.ev.run["node_ids"])
        answers = defaultdict(list)  # (task, attempt) -> [(worker, call, status, replayed)]
        for c in self.ev.worker_calls:
            if c.get("call") in ("succeed", "fail"):
                answers[c.get("task"), c.get("attempt")].append(
                    (c.get("worker"), c["call"], c.get("status"), c.get("replayed"),
                     c.get("code")))
        stored_n = 0
        for t in self.tasks:
            if t["_service"] != self.ext:
                continue
            hist = t.get("history") or []
            taken = {h.get("attempt") for h in hist if h.get("event") == "crashed"}
            stored = {}
            for h in hist:
                if "outcome" not in h or h.get("node") in nodes:
                    continue
                stored_n += 1
                a, w = h.get("attempt"), h.get("node")
                stored[a] = w
                if a in taken:
                    self.fail("11 external", f"task {t['_id']}: outcome {h.get('outcome')} of "
                                             f"attempt {a} stored from {w} after that claim was "
                                             f"taken back")
                refused = [x for x in answers.get((t["_id"], a), [])
                           if x[0] == w and x[2] in (409, 404)]
                if refused:
                    self.fail("11 external", f"task {t['_id']}: outcome of attempt {a} stored "
                                             f"from {w}, which was answered {refused[0][2]} "
                                             f"{refused[0][4]}")
            for (tid, a), xs in answers.items():
                if tid != t["_id"]:
                    continue
                ok = [x for x in xs if x[2] == 200 and not x[3]]
                if len({x[0] for x in ok}) > 1:
                    self.fail("11 external", f"task {tid}: attempt {a} answered 200 to "
                                             f"{', '.join(sorted({x[0] for x in ok}))}")
                for x in ok:
                    if a in stored and stored[a] != x[0]:
                        self.fail("11 external", f"task {tid}: {x[0]}'s {x[1]} of attempt {a} "
                                                 f"answered 200, the stored outcome is "
                                                 f"{stored[a]}'s")
                    elif a not in stored and len(hist) < 10:  # 10: the history kept per task
                        self.fail("11 external", f"task {tid}: {x[0]}'s {x[1]} of attempt {a} "
                                                 f"answered 200 but not stored")
        self.checked[11] += stored_n + len(answers)
        self.stats["external outcomes stored"] = stored_n
        self.stats["external outcomes refused (lease lost)"] = sum(
            1 for c in self.ev.worker_calls if c.get("status") == 409)

    def check_duplicate(self):
        """6: a process started with a running node's node_id refuses to start, runs nothing."""
        starts = [e for e in self.ev.events if e["kind"] == "dup_start"]
        exits = [e for e in self.ev.events if e["kind"] == "dup_exit"]
        def original_died(e):
            """When the original node died (kill, crash) after the duplicate started, if it
            did before the duplicate exited: from then on the duplicate may rightly start."""
            start = max((s["t"] for s in starts if s["node"] == e["node"] and s["t"] <= e["t"]),
                        default=None)
            deaths = [x["t"] for x in self.ev.events if x.get("node") == e["node"] and
                      start is not None and start <= x["t"] <= e["t"] and
                      (x["kind"] in ("crash", "stop_timeout") or
                       (x["kind"] == "fault" and x["fault"] == "kill"))]
            return min(deaths) if deaths else None

        died = {e["node"]: original_died(e) for e in exits}
        for e in exits:
            if died.get(e["node"]) is not None:
                continue  # the original died while the duplicate waited: it may start
            if not e.get("refused") or e.get("rc") in (0, None):
                still = ", still running after 45 s" if e.get("still_running") else ""
                self.fail("6 duplicate", f"a second process with node_id {e['node']} did not "
                                         f"refuse to start (status {e.get('rc')}{still})")
        if len(exits) < len(starts):
            self.fail("6 duplicate", "a process with a duplicate node_id never exited")
        ran = []
        for line in self.ev.dup_journal:
            f = line.split(": ", 1)[1].split()
            start = int(f[3] if len(f) == 5 else f[4]) / 1000
            node = line.split("-dup.", 1)[0]
            if died.get(node) is None or start + TOL_MS / 1000 < died[node]:
                ran.append(line)
        for line in ran[:5]:
            self.fail("6 duplicate", f"a process with a duplicate node_id ran a task while the "
                                     f"node it duplicates was alive: {line}")
        self.checked[6] += len(starts)
        self.stats["duplicate node_ids"] = len(starts)

    # ---- 5. convergence; the harness itself -------------------------------------------------

    def check_run(self):
        self.checked[5] += 1
        self.checked[6] += sum(1 for e in self.ev.events if e["kind"] in ("stop", "drained"))
        conv = [e for e in self.ev.events if e["kind"] == "converged"]
        if not conv:
            why = next((e["detail"] for e in self.ev.events if e["kind"] == "not_converged"),
                       "no convergence recorded")
            self.fail("5 convergence", f"not converged within {self.ev.run['bound_s']} s: {why}")
        else:
            self.stats["convergence"] = f"{conv[-1]['seconds']} s (bound {conv[-1]['bound_s']} s)"
        for e in self.ev.events:
            if e["kind"] == "setup_error":
                self.fail("harness", e["error"])
            elif e["kind"] == "stop_timeout":
                self.fail("6 shutdown", f"{e['node']} did not exit within "
                                        f"{self.ev.run.get('stop_s', 15)} s of a signal")
            elif e["kind"] in ("stop", "drained") and e.get("rc") != 0:
                self.fail("6 shutdown", f"{e['node']} exited with status {e.get('rc')} on SIGTERM")
        faults = Counter(e["fault"] for e in self.ev.events if e["kind"] == "fault")
        faults["poison"] = sum(1 for e in self.ev.events if e["kind"] == "enqueue" and e["poison"])
        self.stats["faults"] = dict(sorted(faults.items()))
        takeovers = [e["ms"] for e in self.ev.events if e["kind"] == "takeover"]
        self.stats["takeovers measured"] = len(takeovers)
        self.stats["max takeover"] = f"{max(takeovers)} ms" if takeovers else "-"
        self.stats["enqueues (cohortctl)"] = sum(1 for e in self.ev.events
                                                 if e["kind"] == "enqueue")
        lost = sum(1 for lines in self.ev.logs.values() for d in lines
                   if "outcome not recorded" in d["msg"])
        self.stats["lost claims (logged)"] = lost

    def run(self):
        self.check_epochs()
        self.check_tasks()
        self.check_batches()
        self.check_poison()
        self.check_reruns()
        self.check_innocent()
        self.check_timeouts()
        self.check_schedule()
        self.check_external()
        self.check_duplicate()
        self.check_run()
        by = Counter()
        for v in self.violations:
            tag = v[1:].split()[0]
            by[int(tag) if tag.isdigit() else tag] += 1
        self.stats["invariants"] = {n: (self.checked[n], by[n]) for n in INVARIANTS}
        other = sum(n for k, n in by.items() if k not in INVARIANTS)
        if other:
            self.stats["invariants"]["harness"] = (0, other)
        return self.violations


def summary(ev, stats, violations):
    rows = [("seed", ev.run["seed"]), ("nodes", ev.run["nodes"]),
            ("fault duration", f"{ev.run['duration_s']} s")]
    for kind, n in stats.get("faults", {}).items():
        rows.append((f"faults: {kind}", n))
    for key in ("poison crashes", "tasks", "succeeded", "failed", "poison tasks",
                "failed (attempts used up by faults)", "tracked", "from cohortctl",
                "enqueues (cohortctl)", "journal lines", "re-runs (at-least-once)",
                "retries recorded", "attempts beyond the first", "lost claims (logged)",
                "claims taken back", "... after a lease-taking fault", "innocent tasks failed",
                "tasks timed out", "schedule slots", "duplicate node_ids",
                "external outcomes stored", "external outcomes refused (lease lost)",
                "batches completed", "callback runs", "primacy changes", "final epoch",
                "takeovers measured", "max takeover", "convergence",
                "enqueued tasks lost in a drop", "journal lines of dropped tasks",
                "epochs started again after a drop"):
        if key in stats:
            rows.append((key, stats[key]))
    for n, (checked, failed) in stats.get("invariants", {}).items():
        name = f"{n} {INVARIANTS[n]}" if n in INVARIANTS else n
        rows.append((f"inv {name}", f"{checked} checked, {failed} violations"))
    rows.append(("violations", len(violations)))
    width = max(len(k) for k, _ in rows)
    vwidth = max([24] + [len(str(v)) for _, v in rows])
    lines = ["+" + "-" * (width + 2) + "+" + "-" * (vwidth + 2) + "+"]
    for k, v in rows:
        lines.append(f"| {k:<{width}} | {str(v):<{vwidth}} |")
    lines.append(lines[0])
    return "\n".join(lines)


def check(workdir, out=sys.stdout):
    """Checks a workdir; prints the summary and the violations; returns the violations."""
    ev = Evidence(workdir)
    checker = Checker(ev)
    violations = checker.run()
    print(summary(ev, checker.stats, violations), file=out)
    for v in violations[:200]:
        print(f"VIOLATION {v}", file=out)
    if len(violations) > 200:
        print(f"... and {len(violations) - 200} more", file=out)
    out.flush()
    return violations


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__, file=sys.stderr)
        return 2
    return 1 if check(argv[1]) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
