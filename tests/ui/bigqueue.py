"""bigqueue.py - the counts of a big queue on the dashboard (issue 28, page times): they come
from the snapshot the service's primary publishes (`counts`, docs/API.md "Counts of a
big queue") and the pages say how old they are; a snapshot gone stale is never shown.

A service that no node hosts gets a hand-written snapshot of 12,000 pending tasks measured
2 s ago (no primary overwrites it): the overview and the service page show its figures with
"as of N s ago", the By kind table its rows. Then the snapshot is aged past its freshness: the
overview's next round shows the queue's real count, without an age.

Usage: bigqueue.py BUILD_DIR [--screenshots DIR]   (MONGODB_URI: the database to use)
"""

import datetime
import re
import sys

import uifix

SVC = "idle"
ROW = ("[...document.querySelectorAll('tr')].find(tr => tr.querySelector("
       f"'a[href=\"#/services/{SVC}\"]'))")


def snapshot(fx, age_s):
    now = datetime.datetime.now(datetime.timezone.utc)
    counts = {st: 0 for st in ["claimed", "succeeded", "failed", "timed_out", "cancelled"]}
    counts["pending"] = 12000
    fx.db["counts"].replace_one({"_id": SVC}, {
        "_id": SVC, "measured_at": now - datetime.timedelta(seconds=age_s), "total": 12000,
        "counts": counts, "oldest_due_at": None, "every_ms": 5000, "took_ms": 100,
        "minute": {"at": now.replace(second=0, microsecond=0), "enqueued": 0, "succeeded": 0,
                   "failed": 0, "timed_out": 0},
        "kinds": {"distinct": 1, "rows": [{"kind": "report", "status": "pending",
                                           "count": 12000}]},
        "groups": {"distinct": 0, "rows": []}, "due": {"kinds": [], "more": False}},
        upsert=True)


def row_text(b, sel):
    return b.eval(f"(() => {{ const r = {ROW}; const e = r && r.querySelector('{sel}');"
                  " return e ? e.textContent : null; })()")


def scenario(fx):
    fx.ctl("enqueue", SVC, "--create", "--kind", "report")  # one real task, no node hosts it
    snapshot(fx, 2)
    b = fx.sign_in("read")
    b.wait(f"{ROW} && {ROW}.querySelector('.counts-age')", what="overview with the age")
    pending = row_text(b, "[data-status=pending]")
    age = row_text(b, ".counts-age") or ""
    fx.check(pending == "pending 12000", f"overview: the snapshot's count ({pending})")
    m = re.fullmatch(r"as of (\d+) s ago", age)
    fx.check(bool(m) and int(m.group(1)) >= 2, f"overview: the counts' age ({age})")
    fx.screenshot("overview-counts-age.png")

    b.go(f"#/services/{SVC}")
    b.wait("document.querySelector('table.breakdown[data-by=kind]')", what="service page")
    # The kind's name cell: its first text (no node hosts the service, so a due kind also
    # carries the "no worker" warning beside its name, ui/schedules).
    kind = b.eval("[...document.querySelector('table.breakdown[data-by=kind] tbody tr')"
                  ".children].map(td => td.firstChild ? td.firstChild.textContent : '')")
    fx.check(kind[:2] == ["report", "12000"], f"service page: by kind from the snapshot ({kind})")
    ages = b.eval("[...document.querySelectorAll('.counts-age')].map(e => e.textContent)")
    fx.check(len(ages) >= 2 and all(a.startswith("as of ") for a in ages),
             f"service page: the counts and the By kind table say their age ({ages})")
    fx.screenshot("service-counts-age.png")

    snapshot(fx, 60)  # its primary stopped measuring a minute ago: stale
    b.go("#/")
    ok = fx.wait_db(lambda: row_text(b, "[data-status=pending]") == "pending 1", timeout=20)
    fx.check(ok, "overview: a stale snapshot is not shown, the queue is counted instead")
    fx.check(row_text(b, ".counts-age") is None, "overview: counts measured now carry no age")


if __name__ == "__main__":
    sys.exit(uifix.run(scenario, nodes=1))
