#!/usr/bin/env python3
"""test_check.py - the chaos checker's self-test: a clean synthetic run must pass, and each
doctored copy of it (a duplicated epoch, a lost task, a stuck task, a double claim, ...) must
be reported. Proves every check of check.py can fail. Stdlib only, no database.

  python3 tests/chaos/test_check.py
"""
import copy
import io
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import check  # noqa: E402

T0 = 1_800_000_000_000  # ms
T0S = T0 / 1000  # the driver's events are in seconds
SERVICE = "noop"


def oid(n):
    return f"{n:024x}"


def baseline():
    """A small clean run: 2 nodes, n1 primary of epoch 1 then n2 of epoch 2; 2 tracked batches,
    2 cohortctl tasks, one poison task; one at-least-once re-run."""
    run = {"seed": 7, "nodes": 2, "duration_s": 10, "bound_s": 60, "service": SERVICE,
           "database": "x", "max_attempts": 4, "tick_ms": 200, "takeover_ms": 1500,
           "stall_timeout_ms": 3000, "external_db": False, "node_ids": ["n1", "n2"],
           "work_service": "work", "schedule": "beat", "ext_service": "ext",
           "ext_workers": ["w1", "w2"], "dropped_worker": "dropper",
           "settings_ranges": {"stall_timeout_ms": [3000, 4500], "takeover_ms": [1500, 2500]}}

    def task(n, node, epoch, batch, created, runs, status="succeeded", data=None, **extra):
        hist = []
        for i, (rnode, start, end, outcome) in enumerate(runs, 1):
            hist.append({"node": rnode, "attempt": i, "started_at": start, "ended_at": end,
                         "outcome": outcome})
        t = {"_id": oid(n), "status": status, "data": data or {"seq": n}, "tracked": batch is not None,
             "created_at": created, "created_by": node, "attempts": len(runs),
             "claimed_by": runs[-1][0] if runs else None, "history": hist}
        if batch is not None:
            t["batch"] = batch
        if epoch:
            t["epoch"] = epoch
        t.update(extra)
        return t

    tasks = [
        task(1, "n1", 1, 1, T0 + 100, [("n1", T0 + 200, T0 + 300, "retry"),
                                       ("n2", T0 + 500, T0 + 600, "succeeded")]),
        task(2, "n1", 1, 1, T0 + 110, [("n2", T0 + 210, T0 + 290, "succeeded")]),
        task(3, "n2", 2, 2, T0 + 5000, [("n1", T0 + 5100, T0 + 5200, "succeeded")]),
        task(4, "cohortctl", 0, None, T0 + 120, [("n1", T0 + 700, T0 + 800, "succeeded")],
             data={"chaos": "e1"}),
        task(5, "cohortctl", 0, None, T0 + 120, [("n2", T0 + 700, T0 + 800, "succeeded")],
             data={"chaos": "e1"}),
        task(6, "cohortctl", 0, None, T0 + 130, [], status="failed",
             data={"chaos": "p2", "poison": True},
             last_error="attempt 5 exceeds max_attempts 4: earlier runs never reported an outcome"),
    ]
    tasks[5]["attempts"] = 5
    tasks[5]["history"] = [{"node": "n1", "attempt": 5, "started_at": T0 + 9000,
                            "ended_at": T0 + 9001, "outcome": "failed"}]
    tasks[5]["claimed_by"] = "n1"
    # A schedule slot's task (its unique key), run by n1.
    tasks.append(task(8, "n2", 0, None, T0 + 2000, [("n1", T0 + 2100, T0 + 2200, "succeeded")],
                      data={"sched": True}, unique_key="schedule:beat:2027-01-15T08:00:02Z"))
    # The work service: a long task drained by n1 without losing it, one that timed out once.
    work_tasks = [
        task(9, "cohortctl", 0, None, T0 + 30000, [("n1", T0 + 30100, T0 + 36100, "succeeded")],
             data={"chaos": "e3", "long": True, "sleep_ms": 6000}),
        task(10, "cohortctl", 0, None, T0 + 30000, [("n2", T0 + 30100, T0 + 31100, "timed_out")],
             status="timed_out", data={"chaos": "e4", "hang": True, "sleep_ms": 4000}),
    ]
    # The ext service: a task run by the external worker w1.
    ext_tasks = [task(12, "cohortctl", 0, None, T0 + 20000,
                      [("w1", T0 + 20100, T0 + 20600, "succeeded")], data={"chaos": "e5"})]
    lease = f"l1.ext.{oid(12)}.1.x"
    worker_journal = {"w1": [
        {"call": "claim", "task": oid(12), "attempt": 1, "lease": lease, "status": 200,
         "worker": "w1", "at": T0S + 20.1},
        {"call": "succeed", "task": oid(12), "attempt": 1, "lease": lease, "status": 200,
         "replayed": False, "result": "succeeded", "worker": "w1", "at": T0S + 20.6}]}
    services = [{"_id": SERVICE, "primary": None, "epoch": 2, "batch_seq": 3, "draining": None,
                 "batches_completed": 2, "schedules": {"beat": {"created": 1, "existed": 0}},
                 "last_batch": {"seq": 2, "succeeded": 1, "failed": 0, "completed_by": "n2",
                                "epoch": 2}}]
    logs = {
        "n1": ["# chaos: start skew_ms=0 at_ms=0",
               "2027-01-15T08:00:00.100Z INFO  node=n1 service=noop role=primary epoch=1 | "
               "became primary (epoch 1, previous primary: none)",
               "2027-01-15T08:00:01.000Z INFO  node=n1 service=noop role=primary epoch=1 | "
               "batch 1 completed: 2 succeeded, 0 failed",
               "2027-01-15T08:00:04.000Z WARN  node=n1 service=noop role=secondary epoch=1 | "
               "lost primacy of epoch 1: another node took over or an operator cleared it"],
        "n2": ["2027-01-15T08:00:04.500Z INFO  node=n2 service=noop role=primary epoch=2 | "
               "became primary (epoch 2, previous primary: n1)",
               "2027-01-15T08:00:06.000Z INFO  node=n2 service=noop role=primary epoch=2 | "
               "batch 2 completed: 1 succeeded, 0 failed"],
    }
    journal = {
        "n1": [f"{oid(3)} n1 1 {T0 + 5110} {T0 + 5190}", f"{oid(4)} n1 1 {T0 + 710} {T0 + 790}",
               f"{oid(2)} n1 0 {T0 + 150} {T0 + 160}"],  # a re-run whose outcome was lost
        "n2": [f"{oid(1)} n2 2 {T0 + 510} {T0 + 590}", f"{oid(2)} n2 1 {T0 + 220} {T0 + 280}",
               f"{oid(5)} n2 1 {T0 + 710} {T0 + 790}"],
    }
    journal["n1"].append(f"{oid(8)} n1 1 {T0 + 2110} {T0 + 2190}")
    work_journal = {  # the sleeper's lines: id node attempt group start end kind wall wall
        "n1": [f"{oid(9)} n1 1 - {T0 + 30110} {T0 + 36090} - {T0 + 30110} {T0 + 36090}"],
        "n2": [f"{oid(10)} n2 1 - {T0 + 30110} {T0 + 34110} - {T0 + 30110} {T0 + 34110}"],
    }
    completed = {"n1": ["1 2 0 2 n1"], "n2": ["2 1 0 1 n2", "1 2 0 2 n2"]}
    events = [
        {"t": T0S + 1, "kind": "fault", "fault": "kill", "node": "n1"},
        {"t": T0S + 2, "kind": "enqueue", "tag": "e1", "count": 2, "tracked": False,
         "poison": False, "rc": 0, "out": "2", "err": ""},
        {"t": T0S + 2.5, "kind": "start", "node": "n1", "skew_ms": 0},
        {"t": T0S + 3, "kind": "enqueue", "tag": "p2", "count": 1, "tracked": False,
         "poison": True, "rc": 0, "out": oid(6), "err": ""},
        {"t": T0S + 4, "kind": "crash", "node": "n1", "rc": -6, "poison": True},
        {"t": T0S + 5, "kind": "takeover", "fault": "kill", "victim": "n1", "new": "n2",
         "epoch": 2, "ms": 1600},
        {"t": T0S + 5.5, "kind": "start", "node": "n1", "skew_ms": 0},
        {"t": T0S + 8, "kind": "dup_start", "node": "n2", "pid": 9},
        {"t": T0S + 14, "kind": "dup_exit", "node": "n2", "rc": 1, "refused": True},
        {"t": T0S + 19, "kind": "enqueue", "tag": "e5", "service": "ext", "count": 1,
         "tracked": False, "poison": False, "rc": 0, "out": oid(12), "err": ""},
        {"t": T0S + 29, "kind": "enqueue", "tag": "e3", "service": "work", "count": 1,
         "tracked": False, "poison": False, "rc": 0, "out": oid(9), "err": ""},
        {"t": T0S + 29, "kind": "enqueue", "tag": "e4", "service": "work", "count": 1,
         "tracked": False, "poison": False, "rc": 0, "out": oid(10), "err": ""},
        {"t": T0S + 31, "kind": "fault", "fault": "drain", "node": "n1", "long_tasks": 1},
        {"t": T0S + 36.5, "kind": "drained", "node": "n1", "rc": 0, "seconds": 5.5},
        {"t": T0S + 37, "kind": "start", "node": "n1", "skew_ms": 0},
        {"t": T0S + 38, "kind": "fault", "fault": "settings", "service": "work",
         "key": "stall_timeout_ms", "value": 4500, "rc": 0},
        {"t": T0S + 49, "kind": "converged", "seconds": 1.5, "bound_s": 60, "detail": "ok"},
        {"t": T0S + 50, "kind": "stop", "node": "n1", "rc": 0},
    ]
    return {"run": run, "tasks": tasks, "work_tasks": work_tasks, "ext_tasks": ext_tasks,
            "worker_journal": worker_journal, "services": services,
            "logs": logs, "journal": journal, "work_journal": work_journal,
            "completed": completed, "events": events, "dup_journal": []}


def event(data, kind):
    """The first event of `kind` in the baseline (to doctor it)."""
    return next(e for e in data["events"] if e["kind"] == kind)


def write(data, workdir):
    with open(os.path.join(workdir, "run.json"), "w") as f:
        json.dump(data["run"], f)
    with open(os.path.join(workdir, "events.jsonl"), "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in data["events"])
    with open(os.path.join(workdir, "dump.json"), "w") as f:
        json.dump({"services": data["services"], "tasks": data["tasks"],
                   "work_tasks": data.get("work_tasks", []),
                   "ext_tasks": data.get("ext_tasks", []), "nodes": []}, f)
    for name, calls in data.get("worker_journal", {}).items():
        with open(os.path.join(workdir, f"{name}.worker.journal"), "w") as f:
            f.writelines(json.dumps(c) + "\n" for c in calls)
    for node in data["run"]["node_ids"]:
        for kind, ext in (("logs", "log"), ("journal", "journal"), ("completed", "completed"),
                          ("work_journal", "work.journal")):
            with open(os.path.join(workdir, f"{node}.{ext}"), "w") as f:
                f.writelines(line + "\n" for line in data.get(kind, {}).get(node, []))
    if data.get("dup_journal"):
        with open(os.path.join(workdir, "n2-dup.journal"), "w") as f:
            f.writelines(line + "\n" for line in data["dup_journal"])


class CheckerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="chaos-check-test-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def violations(self, data):
        write(data, self.dir)
        return check.check(self.dir, out=io.StringIO())

    def assertReports(self, data, *fragments):
        found = self.violations(data)
        for fragment in fragments:
            self.assertTrue(any(fragment in v for v in found),
                            f"expected a violation with {fragment!r}, got {found}")

    def test_clean_run_passes(self):
        self.assertEqual(self.violations(baseline()), [])

    def test_two_nodes_primary_in_one_epoch(self):
        d = baseline()
        d["logs"]["n1"].append("2027-01-15T08:00:05.000Z INFO  node=n1 service=noop "
                               "role=primary epoch=2 | batch 3 drained")
        self.assertReports(d, "epoch 2: 2 nodes acted as primary")

    def test_epoch_going_backwards(self):
        d = baseline()
        d["logs"]["n2"].append("2027-01-15T08:00:07.000Z INFO  node=n2 service=noop "
                               "role=primary epoch=1 | became primary (epoch 1, previous: n1)")
        self.assertReports(d, "epochs must only increase", "epoch 1 was begun 2 times")

    def test_task_created_under_someone_elses_epoch(self):
        d = baseline()
        d["tasks"][2]["created_by"] = "n1"
        self.assertReports(d, "created by n1 under epoch 2, whose primary was n2")

    def test_deposed_primary_still_creating(self):
        d = baseline()
        d["tasks"][1]["created_at"] = T0 + 6000  # epoch 1 task after epoch 2's first
        self.assertReports(d, "two primaries acting at once")

    def test_lost_task(self):
        d = baseline()
        del d["tasks"][4]  # confirmed by cohortctl, gone from the database
        self.assertReports(d, "enqueue e1: cohortctl confirmed 2 task(s), the database has 1")
        d = baseline()
        del d["tasks"][1]  # ran (journal) but vanished
        self.assertReports(d, f"task {oid(2)} ran on")

    def test_stuck_task(self):
        d = baseline()
        d["tasks"][3]["status"] = "claimed"
        self.assertReports(d, "is claimed after the run quiesced")

    def test_one_claim_run_by_two_nodes(self):
        d = baseline()
        d["journal"]["n1"].append(f"{oid(1)} n1 2 {T0 + 510} {T0 + 590}")
        self.assertReports(d, "attempt 2 ran twice")

    def test_success_not_journaled_or_journaled_elsewhere(self):
        d = baseline()
        d["journal"]["n2"] = d["journal"]["n2"][1:]
        self.assertReports(d, "has 0 journal line(s)")
        d = baseline()
        d["tasks"][0]["history"][1]["node"] = "n1"
        d["tasks"][0]["claimed_by"] = "n1"
        self.assertReports(d, "has 1 journal line(s) (from: n2)")

    def test_a_crashed_attempt_may_precede_the_next(self):
        d = baseline()
        d["tasks"][0]["history"][0] = {"event": "crashed", "node": "n1", "attempt": 1,
                                       "at": T0 + 3500, "error": "stalled"}
        self.assertEqual(self.violations(d), [])

    def test_a_failed_attempt_may_not_precede_another(self):
        d = baseline()
        d["tasks"][0]["history"][0]["outcome"] = "failed"
        self.assertReports(d, "outcome failed of attempt 1 followed by attempt 2")

    def test_overlapping_recorded_runs(self):
        d = baseline()
        d["tasks"][0]["history"][0]["ended_at"] = T0 + 1500
        self.assertReports(d, "started 1000 ms before attempt 1 on n1 ended")

    def test_time_from_a_skewed_wall_clock(self):
        d = baseline()
        d["events"].append({"t": 1.5, "kind": "start", "node": "n1", "skew_ms": -300000})
        d["tasks"][0]["history"][0]["ended_at"] = T0 + 300 - 300000
        self.assertReports(d, "[4 clock] task", "ended 299900 ms before it was claimed")

    def test_retry_scheduled_on_a_skewed_wall_clock(self):
        d = baseline()
        d["events"].append({"t": 1.5, "kind": "start", "node": "n2", "skew_ms": 300000})
        t = d["tasks"][1]
        t.update(status="pending", run_at=T0 + 210 + 300200)
        t["history"][0].update(outcome="retry", ended_at=T0 + 210 + 300100)
        self.assertReports(d, "is pending after the run", "ended 300100 ms after its claim",
                           "scheduled its retry at run_at = claim + 300200 ms")

    def test_batch_completed_twice_or_never(self):
        d = baseline()
        d["logs"]["n2"].append("2027-01-15T08:00:06.500Z INFO  node=n2 service=noop "
                               "role=primary epoch=2 | batch 2 completed: 1 succeeded, 0 failed")
        d["services"][0]["batches_completed"] = 3
        self.assertReports(d, "batch 2: completion recorded 2 times", "batches_completed = 3")
        d = baseline()
        d["completed"]["n2"] = ["1 2 0 2 n2"]
        self.assertReports(d, "batch 2 completed without a callback line")

    def test_batch_callback_missed_a_task(self):
        d = baseline()
        d["tasks"][2]["batch"] = 1  # a third task in batch 1, after its callbacks saw 2
        self.assertReports(d, "batch 1: callbacks saw")
        d = baseline()
        d["tasks"][2]["batch"] = 3  # never completed
        self.assertReports(d, "in batch 3, not completed")

    def test_poison_that_did_not_fail(self):
        d = baseline()
        d["tasks"][5]["status"] = "succeeded"
        self.assertReports(d, "poison task")
        d = baseline()
        d["tasks"][5]["attempts"] = 2
        self.assertReports(d, "expected failed after 4 attempts")

    def test_other_failure_and_unexplained_crash(self):
        d = baseline()
        d["tasks"][3]["status"] = "failed"
        d["tasks"][3]["last_error"] = "handler reported a permanent failure"
        d["events"].append({"t": 6, "kind": "crash", "node": "n2", "rc": 1, "poison": False})
        self.assertReports(d, "failed: 'handler reported", "no poison task explains it")

    # ---- issue 22: ordinary operations cost nothing -----------------------------------------

    @staticmethod
    def rerun_long_task(d, at_ms, node="n1"):
        """The long task's attempt 1 on `node` taken back at `at_ms` (stall reset) and run
        again by n2."""
        t = d["work_tasks"][0]
        t["history"] = [{"event": "crashed", "node": node, "attempt": 1, "at": at_ms,
                         "error": "stalled"},
                        {"node": "n2", "attempt": 2, "started_at": at_ms + 100,
                         "ended_at": at_ms + 6100, "outcome": "succeeded"}]
        t.update(attempts=2, claimed_by="n2")
        d["work_journal"]["n2"].append(f"{oid(9)} n2 2 - {at_ms + 110} {at_ms + 6090} - 0 0")

    def test_rerun_after_a_drain_is_reported(self):
        d = baseline()
        self.rerun_long_task(d, T0 + 35000)
        self.assertReports(d, f"[7 re-run] task {oid(9)}", "attempt 1 on n1 taken back",
                           "drain (SIGTERM) at")

    def test_rerun_after_a_settings_change_is_reported(self):
        d = baseline()
        self.rerun_long_task(d, T0 + 41000, node="n2")
        self.assertReports(d, "attempt 1 on n2 taken back", "settings set work stall_timeout_ms")

    def test_rerun_after_a_lease_taking_fault_is_not_reported(self):
        for fault in ({"fault": "pause", "length_s": 4.5}, {"fault": "partition", "length_s": 3},
                      {"fault": "slow", "length_s": 5}):
            d = baseline()
            d["events"].append(dict(fault, t=T0S + 32, kind="fault", node="n1"))
            self.rerun_long_task(d, T0 + 35000)
            self.assertEqual(self.violations(d), [], fault)
        d = baseline()  # a kill: until the node's next start, then the release time
        d["events"].append({"t": T0S + 33, "kind": "fault", "fault": "kill", "node": "n1"})
        d["events"].append({"t": T0S + 35, "kind": "start", "node": "n1"})
        self.rerun_long_task(d, T0 + 44000)
        self.assertEqual(self.violations(d), [])
        d = baseline()  # a database restart takes every runner's lease
        d["events"].append({"t": T0S + 33, "kind": "fault", "fault": "db_restart"})
        d["events"].append({"t": T0S + 36, "kind": "db_up"})
        self.rerun_long_task(d, T0 + 40000, node="n2")
        self.assertEqual(self.violations(d), [])

    def test_release_stamped_with_a_skewed_clock(self):
        d = baseline()  # n1 (5 minutes ahead) killed at +33: its restart's release, off by 5 min
        d["events"].append({"t": T0S + 32, "kind": "start", "node": "n1", "skew_ms": 300000})
        d["events"].append({"t": T0S + 33, "kind": "fault", "fault": "kill", "node": "n1"})
        d["events"].append({"t": T0S + 35, "kind": "start", "node": "n1", "skew_ms": 300000})
        self.rerun_long_task(d, T0 + 336000)
        d["work_tasks"][0]["history"][0]["error"] = "released: its node restarted while running it"
        found = self.violations(d)
        self.assertTrue(any("[4 clock]" in v and "off by n1's clock skew" in v for v in found),
                        found)
        self.assertFalse(any("[7 re-run]" in v for v in found), found)

    def test_stall_reset_is_stamped_by_the_primary_not_the_runner(self):
        d = baseline()  # n1 ran 5 minutes ahead earlier; killed at +33 and back; its claim is
        # reset as stalled at +334 by the primary (cluster clock): the kill 300 s before, seen
        # through n1's old skew, must not make it a skewed stamp (the 26eda68 run's 5 cases)
        d["events"].append({"t": T0S + 32, "kind": "start", "node": "n1", "skew_ms": 300000})
        d["events"].append({"t": T0S + 33, "kind": "fault", "fault": "kill", "node": "n1"})
        d["events"].append({"t": T0S + 35, "kind": "start", "node": "n1", "skew_ms": 0})
        self.rerun_long_task(d, T0 + 334000)
        found = self.violations(d)
        self.assertFalse(any("[4 clock]" in v for v in found), found)
        self.assertTrue(any("[7 re-run]" in v for v in found), found)

    def test_a_fault_ended_late_by_the_driver_still_explains(self):
        d = baseline()  # a 2 s pause at +22 that the driver only ended at +30 (timers ran late)
        d["events"].append({"t": T0S + 22, "kind": "fault", "fault": "pause", "node": "n1",
                            "length_s": 2})
        d["events"].append({"t": T0S + 30, "kind": "resume", "node": "n1"})
        self.rerun_long_task(d, T0 + 39000)
        self.assertEqual(self.violations(d), [])

    def test_restart_release_after_a_fault_of_the_previous_run(self):
        d = baseline()  # database down at +31..+33 while n1 drained; n1 back at +37 releases
        d["events"].append({"t": T0S + 31.5, "kind": "fault", "fault": "db_restart"})
        d["events"].append({"t": T0S + 33, "kind": "db_up"})
        t = d["work_tasks"][0]
        self.rerun_long_task(d, T0 + 47000)  # 14 s after the database came back
        t["history"][0]["error"] = "released: its node restarted while running it"
        self.assertEqual([v for v in self.violations(d) if "re-run" in v], [])
        d["events"] = [e for e in d["events"] if e.get("fault") != "db_restart"]
        self.assertReports(d, "attempt 1 on n1 taken back")  # a drain alone explains nothing

    def test_rerun_long_after_a_fault_is_reported(self):
        d = baseline()  # the pause ended 20 s before: it cannot explain the reset
        d["events"].append({"t": T0S + 12, "kind": "fault", "fault": "pause", "node": "n1",
                            "length_s": 3})
        self.rerun_long_task(d, T0 + 35000)
        self.assertReports(d, "attempt 1 on n1 taken back")

    @staticmethod
    def fail_innocent(d, times_ms):
        """noop task 4 ends failed after its attempts were taken back at `times_ms` on n1."""
        t = d["tasks"][3]
        t["history"] = [{"event": "crashed", "node": "n1", "attempt": i, "at": at,
                         "error": "node expired"} for i, at in enumerate(times_ms, 1)]
        n = len(times_ms) + 1
        t["history"].append({"node": "n2", "attempt": n, "started_at": times_ms[-1] + 100,
                             "ended_at": times_ms[-1] + 101, "outcome": "failed"})
        t.update(status="failed", attempts=n, claimed_by="n2",
                 last_error=f"attempt {n} exceeds max_attempts 4: earlier runs never reported "
                            f"an outcome")

    def test_innocent_task_failed_by_a_poison_neighbour(self):
        d = baseline()  # the poison task crashed n1 at +4: its restart, then 10.5 s of release
        self.fail_innocent(d, [T0 + 14000, T0 + 14500, T0 + 15000, T0 + 15500])
        self.assertReports(d, f"[8 innocent] task {oid(4)}", "attempt 1 on n1 (a poison crash)")
        d = baseline()  # no fault at all
        self.fail_innocent(d, [T0 + 44000, T0 + 44500, T0 + 45000, T0 + 45500])
        self.assertReports(d, "attempt 4 on n1 (no fault)")

    def test_innocent_task_failed_by_faults_of_its_own_is_allowed(self):
        d = baseline()  # within the kill of n1 at +1 (restarted at +2.5)
        self.fail_innocent(d, [T0 + 3000, T0 + 3200, T0 + 3400, T0 + 3600])
        self.assertEqual(self.violations(d), [])

    def test_timeout_not_once(self):
        d = baseline()
        t = d["work_tasks"][1]
        t["history"].append({"node": "n1", "attempt": 2, "started_at": T0 + 32000,
                             "ended_at": T0 + 33000, "outcome": "timed_out"})
        t["attempts"] = 2
        self.assertReports(d, "[9 timeout]", "2 timed_out outcome(s)")
        d = baseline()
        d["work_tasks"][1]["status"] = "succeeded"
        self.assertReports(d, "status succeeded, 1 timed_out outcome(s)")
        d = baseline()  # recorded once, but its attempt 2 ran anyway
        d["work_journal"]["n1"].append(
            f"{oid(10)} n1 2 - {T0 + 32000} {T0 + 36000} - 0 0")
        self.assertReports(d, "timed out in attempt 1 but ran again (attempt 2 on n1)")
        d = baseline()
        d["work_tasks"][0]["status"] = "timed_out"
        self.assertReports(d, f"task {oid(9)}", "has no timeout but timed out")

    def test_schedule_slot_twice(self):
        d = baseline()
        twin = copy.deepcopy(d["tasks"][6])
        twin["_id"] = oid(11)
        twin["history"][0]["node"] = twin["claimed_by"] = "n2"
        d["tasks"].append(twin)
        d["journal"]["n2"].append(f"{oid(11)} n2 1 {T0 + 2110} {T0 + 2190}")
        self.assertReports(d, "[10 schedule] slot 2027-01-15T08:00:02Z created 2 tasks")
        d = baseline()
        del d["tasks"][6]["unique_key"]
        d["run"]["duration_s"] = 60
        self.assertReports(d, "schedule beat created no task")

    def test_duplicate_node_id_that_ran(self):
        d = baseline()
        event(d, "dup_exit").update(rc=None, refused=False, still_running=True)
        self.assertReports(d, "[6 duplicate] a second process with node_id n2 did not refuse",
                           "still running")
        d = baseline()
        d["dup_journal"] = [f"{oid(5)} n2 1 {T0 + 9000} {T0 + 9100}"]
        self.assertReports(d, "a process with a duplicate node_id ran a task while the node")
        # ... but once the original died (here killed at +10), the duplicate may start
        d["events"].append({"t": T0S + 10, "kind": "fault", "fault": "kill", "node": "n2"})
        event(d, "dup_exit").update(rc=0, refused=False)
        d["dup_journal"] = [f"{oid(5)} n2 1 {T0 + 12000} {T0 + 12100}"]
        self.assertEqual([v for v in self.violations(d) if "duplicate" in v], [])

    def test_drain_that_did_not_exit_cleanly(self):
        d = baseline()
        event(d, "drained")["rc"] = -9
        self.assertReports(d, "[6 shutdown] n1 exited with status -9 on SIGTERM")

    @staticmethod
    def freeze_w1(d):
        """w1 frozen past its lease at +20.2: its claim of task 12 taken back at +24, w2 runs
        attempt 2."""
        d["events"].append({"t": T0S + 20.2, "kind": "fault", "fault": "worker_freeze",
                            "node": "w1", "length_s": 6})
        t = d["ext_tasks"][0]
        t["history"] = [{"event": "crashed", "node": "w1", "attempt": 1, "at": T0 + 24000,
                         "error": "lease expired"},
                        {"node": "w2", "attempt": 2, "started_at": T0 + 24100,
                         "ended_at": T0 + 24600, "outcome": "succeeded"}]
        t.update(attempts=2, claimed_by="w2")
        calls = d["worker_journal"]["w1"]
        calls[1].update(status=409, code="lease_lost", at=T0S + 26.2)
        del calls[1]["replayed"], calls[1]["result"]
        d["worker_journal"]["w2"] = [
            {"call": "succeed", "task": oid(12), "attempt": 2, "lease": "l1.ext.b", "status": 200,
             "replayed": False, "result": "succeeded", "worker": "w2", "at": T0S + 24.6}]

    def test_external_worker_frozen_past_its_lease_is_allowed(self):
        d = baseline()
        self.freeze_w1(d)
        self.assertEqual(self.violations(d), [])

    def test_external_outcome_from_a_lost_lease(self):
        d = baseline()  # the late outcome of the frozen w1 stored after its claim was taken
        self.freeze_w1(d)
        d["ext_tasks"][0]["history"].append(
            {"node": "w1", "attempt": 1, "started_at": T0 + 20100, "ended_at": T0 + 26200,
             "outcome": "succeeded"})
        self.assertReports(d, f"[11 external] task {oid(12)}: outcome succeeded of attempt 1 "
                              f"stored from w1 after that claim was taken back",
                           "which was answered 409 lease_lost")
        d = baseline()  # two workers told their outcome of one attempt was stored
        d["worker_journal"]["w2"] = [dict(d["worker_journal"]["w1"][1], worker="w2")]
        self.assertReports(d, "attempt 1 answered 200 to w1, w2",
                           "w2's succeed of attempt 1 answered 200, the stored outcome is w1's")
        d = baseline()  # answered 200, never stored
        d["ext_tasks"][0]["history"][0]["attempt"] = 2
        d["ext_tasks"][0]["attempts"] = 2
        self.assertReports(d, "w1's succeed of attempt 1 answered 200 but not stored")

    def test_claim_of_a_dropped_long_poll_is_reported(self):
        d = baseline()  # the connection dropped at +30: a hang-up takes no lease
        d["events"].append({"t": T0S + 30, "kind": "fault", "fault": "worker_drop",
                            "node": "dropper", "hold_s": 1})
        t = d["ext_tasks"][0]
        t["history"].insert(0, {"event": "crashed", "node": "dropper", "attempt": 1,
                                "at": T0 + 19900, "error": "lease expired"})
        t["history"][1]["attempt"] = 2
        t["attempts"] = 2
        for c in d["worker_journal"]["w1"]:
            c["attempt"] = 2
        self.assertReports(d, "[7 re-run]", "attempt 1 on dropper taken back")

    # ---- one dropped database per run (issue 22) ----------------------------------------------

    @staticmethod
    def drop(d, at_s=25.0):
        """The database dropped at T0 + at_s (its command took 200 ms)."""
        d["events"].append({"t": T0S + at_s + 0.2, "kind": "fault", "fault": "db_drop",
                            "t0": T0S + at_s, "t1": T0S + at_s + 0.2, "tokens_restored": 1})

    def test_rerun_across_a_drop_is_accepted(self):
        d = baseline()  # the long task (enqueued after the drop) taken back 7.8 s after it
        self.drop(d)
        self.rerun_long_task(d, T0 + 33000)
        self.assertEqual(self.violations(d), [])

    def test_the_same_rerun_without_a_drop_is_reported(self):
        d = baseline()
        self.rerun_long_task(d, T0 + 33000)
        self.assertReports(d, f"[7 re-run] task {oid(9)}", "attempt 1 on n1 taken back")

    def test_task_enqueued_after_a_drop_run_twice_is_reported(self):
        d = baseline()  # taken back 20 s after the drop: the drop explains nothing any more
        self.drop(d)
        self.rerun_long_task(d, T0 + 45000, node="n2")
        self.assertReports(d, f"[7 re-run] task {oid(9)}", "attempt 1 on n2 taken back")
        d = baseline()  # one claim journaled by two nodes after the drop
        self.drop(d)
        d["work_journal"]["n1"].append(f"{oid(10)} n1 1 - {T0 + 30120} {T0 + 34100} - 0 0")
        self.assertReports(d, f"[2 claims] task {oid(10)} attempt 1 ran twice")

    def test_tasks_created_before_a_drop_may_vanish(self):
        before = f"{int(T0S + 10):08x}" + "0" * 16  # an ObjectId made 15 s before the drop
        after = f"{int(T0S + 27):08x}" + "0" * 16  # ... and one made 2 s after it
        d = baseline()
        d["journal"]["n1"].append(f"{before} n1 1 {T0 + 24000} {T0 + 24150}")
        d["events"].append({"t": T0S + 24.9, "t0": T0S + 24.5, "kind": "enqueue", "tag": "e9",
                            "count": 3, "tracked": True, "poison": False, "rc": 0, "out": "3",
                            "err": ""})
        lost = copy.deepcopy(d)
        self.drop(d)
        self.assertEqual(self.violations(d), [])
        self.assertReports(lost, f"task {before} ran on n1", "enqueue e9: cohortctl confirmed 3")
        d["journal"]["n2"].append(f"{after} n2 1 {T0 + 27500} {T0 + 27650}")
        d["events"][-2].update(t0=T0S + 25.6, t=T0S + 26)  # cohortctl started after the drop
        self.assertReports(d, f"task {after} ran on n2", "enqueue e9: cohortctl confirmed 3")

    def test_batches_start_again_after_a_drop(self):
        d = baseline()  # after the drop n2 begins epoch 3 and completes batch 1 again
        d["logs"]["n2"] += [
            "2027-01-15T08:00:26.000Z INFO  node=n2 service=noop role=primary epoch=3 | "
            "became primary (epoch 3, previous primary: none)",
            "2027-01-15T08:00:40.000Z INFO  node=n2 service=noop role=primary epoch=3 | "
            "batch 1 completed: 2 succeeded, 0 failed"]
        d["services"][0]["epoch"] = 3
        d["completed"]["n1"] = [f"1 2 0 2 n1 {T0 + 1000}", f"2 5 0 5 n1 {T0 + 24000}"]
        d["completed"]["n2"] = [f"2 1 0 1 n2 {T0 + 45000}", f"1 2 0 2 n2 {T0 + 40000}"]
        undropped = copy.deepcopy(d)
        self.drop(d)
        self.assertEqual(self.violations(d), [])
        self.assertReports(undropped, "batch 1: completion recorded 2 times")
        d["completed"]["n2"].append(f"3 1 0 1 n2 {T0 + 46000}")  # after the drop: strict
        self.assertReports(d, "callback for batch 3, never closed")

    def test_epochs_started_again_after_a_drop(self):
        d = baseline()  # after the drop n2 begins epoch 1 again (the document recreated at 0)
        d["logs"]["n2"] += [
            "2027-01-15T08:00:26.000Z INFO  node=n2 service=noop role=primary epoch=1 | "
            "became primary (epoch 1, previous primary: none)"]
        d["services"][0]["epoch"] = 1
        self.drop(d)
        self.assertReports(d, "epoch 1 begun after drop 1 is not above epoch 2")
        write(d, self.dir)
        out = io.StringIO()
        check.check(self.dir, out=out)
        self.assertRegex(out.getvalue(), r"epochs started again after a drop +\| 1 ")

    def test_deposed_primary_logging_its_old_epoch_after_a_drop(self):
        d = baseline()  # n2, primary of epoch 2, logs it after the drop; n1 begins epoch 3
        d["logs"]["n2"].append(
            "2027-01-15T08:00:25.800Z INFO  node=n2 service=noop role=primary epoch=2 | "
            "2 other live node(s) serve the service")
        d["logs"]["n1"].append(
            "2027-01-15T08:00:27.000Z INFO  node=n1 service=noop role=primary epoch=3 | "
            "became primary (epoch 3, previous primary: none)")
        d["services"][0]["epoch"] = 3
        self.drop(d)
        self.assertEqual(self.violations(d), [])
        d["services"][0]["epoch"] = 2  # the database behind the epochs begun in its era
        self.assertReports(d, "logs show epoch 3, the database only 2")
        d["logs"]["n1"][-1] = d["logs"]["n1"][-1].replace("3", "1")  # epochs started again:
        d["services"][0]["epoch"] = 1  # one violation, not also n2's stale epoch 2 (26eda68)
        found = self.violations(d)
        self.assertEqual(len(found), 1, found)
        self.assertIn("epoch 1 begun after drop 1 is not above epoch 2", found[0])

    def test_deposed_primary_logging_its_old_epoch_after_a_drop(self):
        d = baseline()  # n2 (epoch 2) deposed by the drop logs epoch 2 after it; n1 begins 1
        d["logs"]["n2"].append("2027-01-15T08:00:27.000Z WARN  node=n2 service=noop "
                               "role=primary epoch=2 | renewing primacy failed")
        d["logs"]["n1"].append("2027-01-15T08:00:26.000Z INFO  node=n1 service=noop "
                               "role=primary epoch=1 | became primary (epoch 1, previous "
                               "primary: none)")
        d["services"][0]["epoch"] = 1
        self.drop(d)
        found = self.violations(d)
        self.assertFalse(any("logs show epoch" in v or "nodes acted" in v for v in found), found)
        d["logs"]["n1"].append("2027-01-15T08:00:28.000Z INFO  node=n1 service=noop "
                               "role=primary epoch=2 | became primary (epoch 2, previous "
                               "primary: n1)")  # the new era's epoch 2: the database has 1
        self.assertReports(d, "logs show epoch 2, the database only 1")

    def test_no_convergence(self):
        d = baseline()
        d["events"] = [e for e in d["events"] if e["kind"] != "converged"]
        d["events"].append({"t": 9, "kind": "not_converged", "bound_s": 60,
                            "detail": "3 task(s) pending or claimed"})
        self.assertReports(d, "not converged within 60 s: 3 task(s) pending")

    def test_summary_table(self):
        write(baseline(), self.dir)
        out = io.StringIO()
        check.check(self.dir, out=out)
        text = out.getvalue()
        for row in ("faults: kill", "primacy changes", "max takeover", "violations",
                    "inv 7 re-run only after a lease-taking fault"):
            self.assertIn(row, text)
        self.assertIn("1600 ms", text)

    def test_plain_converts_bson_values(self):
        import datetime
        when = datetime.datetime(2027, 1, 15, 8, 0, 0, 123000)
        self.assertEqual(check.plain({"a": [when]}), {"a": [1800000000123]})


if __name__ == "__main__":
    unittest.main(verbosity=1)
