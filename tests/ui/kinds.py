#!/usr/bin/env python3
"""kinds.py - the service page's runs by kind (issue 28, "Per-kind durations (p50/p95) and
error rates", "History beyond an hour"), in headless Chromium against one node:
  - two kinds finished in the last minute with different durations, one with failures: the
    "Runs by kind" table shows each kind's p50 and p95 as duration buckets, the slow kind's
    above the fast one's, and the error rate of the failing kind;
  - the window is selectable: the last day and the last week render, each saying what
    retention backs it (the per-minute history; hourly rollups kept 8 days);
  - the overview's charts span the last week too, per hour, from the hourly rollups.

Usage: tests/ui/kinds.py BUILD_DIR [--screenshots DIR]   (MONGODB_URI as for every test)
"""

import datetime
import sys

import uifix
from uifix import cdp


def run_of(fx, kind, status, ms, ago_ms):
    """A task of `kind` that ran `ms` and ended with `status` `ago_ms` before the test began."""
    end = fx.now - datetime.timedelta(milliseconds=ago_ms)
    fx.task(status, kind=kind, claimed_at=end - datetime.timedelta(milliseconds=ms),
            finished_at=end, **({"last_error": "boom"} if status != "succeeded" else {}))


def row_of(b, kind):
    return b.eval("(() => { const r = [...document.querySelectorAll('#kinds-table tbody tr')]"
                  f".find((tr) => tr.cells[0].textContent === '{kind}');"
                  " return r ? [...r.cells].map((c) => c.textContent) : null; })()")


def wait_range(b, rng):
    b.wait(f"document.querySelector('#kinds-table[data-range={rng}]') && "
           "document.querySelector('#kinds-table tbody tr')", what=f"the {rng} table", timeout=20)


def scenario(fx):
    svc = fx.service
    # resize: 20 runs of 20 ms and one of 200 ms, none failed. report: 10 runs of 2 s, 3
    # failed after 4 s, 2 of 40 s: p50 1-3 s, p95 30-100 s, error rate 3 of 15 = 20%.
    for i in range(20):
        run_of(fx, "resize", "succeeded", 20, 100 + i)
    run_of(fx, "resize", "succeeded", 200, 50)
    for i in range(10):
        run_of(fx, "report", "succeeded", 2000, 200 + i)
    for i in range(3):
        run_of(fx, "report", "failed", 4000, 300 + i)
    for i in range(2):
        run_of(fx, "report", "succeeded", 40000, 400 + i)
    b = fx.sign_in("read")
    b.go(f"#/services/{svc}")
    try:
        wait_range(b, "hour")
    except cdp.BrowserError:
        fx.check(False, "the service page shows a 'Runs by kind' table: " +
                 (b.text("main") or "")[-300:])
        return
    resize, report = row_of(b, "resize"), row_of(b, "report")
    heads = b.eval("[...document.querySelectorAll('#kinds-table th')].map((t) => t.textContent)")
    fx.check(heads == ["kind", "finished", "failed", "error rate", "p50", "p95"],
             f"the table's columns: {heads}")
    fx.check(resize == ["resize", "21", "0", "0%", "10 ms–30 ms", "10 ms–30 ms"],
             f"resize: 21 finished, p50 and p95 in 10-30 ms: {resize}")
    fx.check(report == ["report", "15", "3", "20%", "1 s–3 s", "30 s–100 s"],
             f"report: 15 finished, 3 failed (20%), p50 1-3 s above resize's, p95 30-100 s: "
             f"{report}")
    note = b.text("#kinds-note") or ""
    fx.check("per-minute history" in note and "buckets" in note,
             f"the hour says what keeps it and that durations are buckets: {note}")
    b.eval("document.getElementById('kinds-card').scrollIntoView()")
    fx.screenshot("ui-kinds-hour.png")

    for rng, words in (("day", "per-minute history"), ("week", "hourly rollups kept 8 days")):
        b.eval("(() => { const s = document.getElementById('kinds-range');"
               f" s.value = '{rng}'; s.dispatchEvent(new Event('change')); }})()")
        try:
            wait_range(b, rng)
            row = row_of(b, "report")
            fx.check(row and row[1] == "15" and row[3] == "20%",
                     f"the {rng} counts the same runs: {row}")
        except cdp.BrowserError:
            fx.check(False, f"the {rng} table renders: {(b.text('#kinds-card') or '')[-300:]}")
        note = b.text("#kinds-note") or ""
        fx.check(f"last {rng}" in note and words in note,
                 f"the {rng} says what retention backs it: {note}")
    b.eval("document.getElementById('kinds-card').scrollIntoView()")
    fx.screenshot("ui-kinds-week.png")

    # The week's chart: per hour, from the hourly rollups (two hand-written ones, as the
    # primary writes them at each hour's end), with the retention beside the span box.
    hour = fx.now.replace(minute=0, second=0, microsecond=0)
    for back, done in ((30, 900), (3, 2400)):
        at = hour - datetime.timedelta(hours=back)
        fx.db["history_hours"].insert_one({
            "_id": f"{svc}/{int(at.timestamp() * 1000)}", "service": svc, "at": at,
            "minutes": 60, "counts": {"pending": 5}, "enqueued": done, "succeeded": done,
            "failed": 10, "timed_out": 0, "kinds": []})
    b.go("#/")
    b.wait("document.getElementById('chart-range')", what="the overview's span box")
    b.eval("(() => { const s = document.getElementById('chart-range');"
           " s.value = 'week'; s.dispatchEvent(new Event('change')); })()")
    try:
        b.wait("[...document.querySelectorAll('.chart')].every((c) => c.dataset.range === 'week')"
               " && document.querySelector('#charts').textContent.includes('last week, per hour')",
               timeout=20, what="the week chart")
        fx.check(True, "the overview charts the last week, per hour")
    except cdp.BrowserError:
        fx.check(False, "the overview charts the last week, per hour: " +
                 (b.text("#charts") or "")[:200])
    span = b.text("label.range") or ""
    fx.check("hourly rollups kept 8 days" in span, f"the span box says what keeps the week: {span}")
    b.eval("document.getElementById('charts').scrollIntoView()")
    fx.screenshot("ui-kinds-week-chart.png")


if __name__ == "__main__":
    sys.exit(uifix.run(scenario, nodes=1))
