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
SERVICE = "noop"


def oid(n):
    return f"{n:024x}"


def baseline():
    """A small clean run: 2 nodes, n1 primary of epoch 1 then n2 of epoch 2; 2 tracked batches,
    2 cohortctl tasks, one poison task; one at-least-once re-run."""
    run = {"seed": 7, "nodes": 2, "duration_s": 10, "bound_s": 60, "service": SERVICE,
           "database": "x", "max_attempts": 4, "tick_ms": 200, "takeover_ms": 1500,
           "stall_timeout_ms": 3000, "external_db": False, "node_ids": ["n1", "n2"]}

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
    services = [{"_id": SERVICE, "primary": None, "epoch": 2, "batch_seq": 3, "draining": None,
                 "batches_completed": 2,
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
    completed = {"n1": ["1 2 0 2 n1"], "n2": ["2 1 0 1 n2", "1 2 0 2 n2"]}
    events = [
        {"t": 1, "kind": "fault", "fault": "kill", "node": "n1"},
        {"t": 2, "kind": "enqueue", "tag": "e1", "count": 2, "tracked": False, "poison": False,
         "rc": 0, "out": "2", "err": ""},
        {"t": 3, "kind": "enqueue", "tag": "p2", "count": 1, "tracked": False, "poison": True,
         "rc": 0, "out": oid(6), "err": ""},
        {"t": 4, "kind": "crash", "node": "n1", "rc": -6, "poison": True},
        {"t": 5, "kind": "takeover", "fault": "kill", "victim": "n1", "new": "n2", "epoch": 2,
         "ms": 1600},
        {"t": 9, "kind": "converged", "seconds": 1.5, "bound_s": 60, "detail": "ok"},
        {"t": 10, "kind": "stop", "node": "n1", "rc": 0},
    ]
    return {"run": run, "tasks": tasks, "services": services, "logs": logs,
            "journal": journal, "completed": completed, "events": events}


def write(data, workdir):
    with open(os.path.join(workdir, "run.json"), "w") as f:
        json.dump(data["run"], f)
    with open(os.path.join(workdir, "events.jsonl"), "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in data["events"])
    with open(os.path.join(workdir, "dump.json"), "w") as f:
        json.dump({"services": data["services"], "tasks": data["tasks"], "nodes": []}, f)
    for node in data["run"]["node_ids"]:
        for kind, ext in (("logs", "log"), ("journal", "journal"), ("completed", "completed")):
            with open(os.path.join(workdir, f"{node}.{ext}"), "w") as f:
                f.writelines(line + "\n" for line in data[kind].get(node, []))


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
        for row in ("faults: kill", "primacy changes", "max takeover", "violations"):
            self.assertIn(row, text)
        self.assertIn("1600 ms", text)

    def test_plain_converts_bson_values(self):
        import datetime
        when = datetime.datetime(2027, 1, 15, 8, 0, 0, 123000)
        self.assertEqual(check.plain({"a": [when]}), {"a": [1800000000123]})


if __name__ == "__main__":
    unittest.main(verbosity=1)
