#!/usr/bin/python3
"""dashboard.py - the dashboard in a real browser against a real node (label `ui`).

Usage: dashboard.py BUILD_DIR [--screenshots DIR]      (MONGODB_URI: the database server)

Starts one cohortd (noop handler, http_listen on a free port) in a fresh database, gives it
tasks in every status (some enqueued through the API and run by the node, the rest written
as a node would leave them, among them a failed task whose data holds markup), then drives
headless Chromium (tests/ui/cdp.py) through the pages:
  - sign-in: the one-time link of `cohortctl ui-link` opens /ui/ signed in; used again, it
    is refused;
  - overview: the service with its primary and counts, the node with its role;
  - service: state and switches; Pause clicked with a reason pauses the service in the
    database (who and why recorded), Resume resumes it;
  - tasks: filtered by status; keyset pages (oldest first) whose first page does not change
    when tasks arrive; the id box opens a task;
  - task: pretty JSON data shown as text (the markup in it makes no element), its history;
    Retry clicked re-queues the failed task in the database; Retry all matching (bulk) too;
  - service: the live settings table;
  - a read-only link shows everything and no action button;
  - no page raised a script error or a Content-Security-Policy violation.
With --screenshots, each page is saved there as PNG (1280x800, and the overview at phone
width). Exit 0 if every check passed, 1 otherwise, 77 if chromium is missing.
"""

import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import uifix  # noqa: E402

SERVICE = "web"


def scenario(fx):
    cdp = uifix.cdp
    # Tasks the node runs: succeeded.
    for i in range(3):
        st, _ = fx.api("POST", f"/api/v1/services/{SERVICE}/tasks",
                       {"data": {"n": i}, "kind": "mail"})
        fx.check(st == 201, f"task {i} enqueued through the API")
    # Tasks as a node leaves them, in every other status.
    now = fx.now
    later = now + datetime.timedelta(days=1)
    queue, db = fx.queue, fx.db

    failed = fx.task("failed", kind="report", group="acct:1", attempts=5,
                     finished_at=now, last_error="noop: upstream said no",
                     data={"order": 7, "note": "<img src=x id=xss onerror=alert(1)>"},
                     history=[{"node": "ui-node-1", "attempt": a, "started_at": now,
                               "ended_at": now, "outcome": "retry" if a < 5 else "failed",
                               "error": "noop: upstream said no"} for a in range(1, 6)])
    fx.task("timed_out", finished_at=now, last_error="ran past 60000 ms")
    fx.task("cancelled", finished_at=now)
    fx.task("claimed", claimed_by="ghost-node", claimed_at=now, heartbeat_at=now)
    pending = [fx.task("pending", run_at=later, data={"page": i}) for i in range(60)]
    fx.check(True, f"tasks written (failed {failed})")
    deadline = time.time() + 20
    while time.time() < deadline and queue.count_documents({"status": "succeeded"}) < 3:
        time.sleep(0.2)
    fx.check(queue.count_documents({"status": "succeeded"}) == 3, "the node ran its 3 tasks")

    base = fx.base
    fx.browser = b = cdp.Browser()

    # ---- sign-in ----
    operate_link = fx.link("operate")
    fx.check(operate_link.startswith(f"{base}/ui/login?code=cht_"), "ui-link prints a link")
    b.navigate(operate_link)
    b.wait("location.pathname === '/ui/' && document.getElementById('who')"
           " && document.getElementById('who').textContent.includes('operate')",
           what="signed in with operate")
    fx.check("code=" not in b.eval("location.href"), "the code left the address bar")
    cookie_js = b.eval("document.cookie")
    fx.check("cohort_session" not in (cookie_js or ""), "the session cookie is HttpOnly")

    # ---- overview ----
    b.wait("document.querySelector('#services') && document.querySelector('#nodes')",
           what="overview tables")
    svc_text = b.text("#services")
    fx.check(SERVICE in svc_text and "ui-node-1" in svc_text and "epoch" in svc_text,
             "overview: the service, its primary and epoch")
    fx.check("failed 1" in svc_text and "succeeded 3" in svc_text and "pending 60" in svc_text,
             f"overview: counts by status ({svc_text!r})")
    fx.check("primary of " + SERVICE in b.text("#nodes"), "overview: the node's role")
    fx.check(b.text("#services tbody tr td:nth-child(4)") == "none due",
             "overview: the oldest due pending task (none: every pending one is due tomorrow)")
    fx.check("No change of primary" in b.text("main"), "overview: no primacy change yet")
    b.wait("document.querySelector('#charts canvas')", what="the chart")
    fx.check("succeeded/min" in b.text("#charts") and "queue depth" in b.text("#charts"),
             "overview: the chart of the last hour, its series named")
    # Live: a task enqueued now shows up without a reload (polling every 2 s).
    fx.api("POST", f"/api/v1/services/{SERVICE}/tasks",
           {"data": {"live": 1}, "delay_ms": 86400000})
    b.wait("document.querySelector('#services').textContent.includes('pending 61')",
           timeout=8, what="the live count")
    fx.check(True, "overview: counts refresh by themselves")
    b.eval("document.getElementById('live').click()")  # the toggle stops it
    fx.api("POST", f"/api/v1/services/{SERVICE}/tasks",
           {"data": {"live": 2}, "delay_ms": 86400000})
    time.sleep(4.5)
    fx.check("pending 61" in b.text("#services"), "overview: the live toggle pauses refresh")
    b.eval("document.getElementById('live').click()")
    b.wait("document.querySelector('#services').textContent.includes('pending 62')",
           timeout=8, what="refresh resumed")
    fx.screenshot("overview.png")
    # Phone width: the page itself does not scroll sideways (wide tables scroll in their
    # card), and the chart follows the width.
    b.send("Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=1,
           mobile=True)
    time.sleep(0.5)
    fx.check(b.eval("document.documentElement.scrollWidth <= window.innerWidth + 1"),
             "overview at 390 px: no sideways scrolling of the page")
    fx.check(b.eval("document.querySelector('#charts canvas').getBoundingClientRect().right"
                 " <= window.innerWidth"), "overview at 390 px: the chart fits")
    fx.screenshot("overview-phone.png")
    b.send("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1,
           mobile=False)

    # ---- service: pause and resume ----
    b.go(f"#/services/{SERVICE}")
    b.wait("document.querySelector('#service-state') &&"
           " document.querySelector('#switch-controls')", what="service page")
    fx.check("No switch is set" in b.text("main"), "service: no switch at first")
    fx.check("open batch" in b.text("#batches") and "draining" in b.text("#batches"),
             "service: the tracked batches")
    b.eval("document.querySelector('#switch-controls input[name=reason]').value ="
           " 'deploy in progress'")
    b.click("#switch-controls button[data-action=Pause]")
    b.click("#switch-confirm button[data-action=confirm]")  # the question (issue 28)
    b.wait("document.querySelector('#switches') &&"
           " document.querySelector('#switches').textContent.includes('deploy in progress')",
           what="the pause shown")
    doc = db.services.find_one({"_id": SERVICE}) or {}
    sw = (doc.get("pause") or {}).get("*") or {}
    fx.check(sw.get("reason") == "deploy in progress" and
             (sw.get("by") or "").endswith(" via dashboard"),
             f"service: Pause paused it in the database, who and why recorded ({sw})")
    fx.check("paused" in b.text("#service-state"), "service: the state says paused")
    fx.screenshot("service.png")
    b.click("#switch-controls button[data-action=Resume]")
    b.wait("document.querySelector('main').textContent.includes('No switch is set')",
           what="the resume shown")
    doc = db.services.find_one({"_id": SERVICE}) or {}
    fx.check("*" not in (doc.get("pause") or {}), "service: Resume resumed it in the database")
    b.eval("document.querySelector('#switch-controls input[name=kind]').value = 'report'")
    b.eval("document.querySelector('#switch-controls input[name=reason]').value = 'disk full'")
    b.click("#switch-controls button[data-action=Block]")
    b.click("#switch-confirm button[data-action=confirm]")
    b.wait("document.querySelector('#switches') &&"
           " document.querySelector('#switches').textContent.includes('disk full')",
           what="the block shown")
    doc = db.services.find_one({"_id": SERVICE}) or {}
    fx.check(((doc.get("block") or {}).get("report") or {}).get("reason") == "disk full",
             "service: Block blocked the kind in the database")
    fx.check("kinds stopped" in b.text("#service-state"), "service: the state says kinds stopped")
    b.click("#switch-controls button[data-action=Unblock]")
    b.wait("document.querySelector('main').textContent.includes('No switch is set')",
           what="the unblock shown")
    doc = db.services.find_one({"_id": SERVICE}) or {}
    fx.check("report" not in (doc.get("block") or {}), "service: Unblock unblocked it")
    b.eval("document.querySelector('#switch-controls input[name=kind]').value = ''")

    # ---- audit: both actions, who and why ----
    b.go("#/audit")
    b.wait("document.querySelector('#audit')", what="audit page")
    audit = b.eval("[...document.querySelectorAll('#audit tbody tr')].map(r => r.textContent)")
    fx.check(len(audit) == 4 and "/unblock" in audit[0] and "/block" in audit[1]
             and "/resume" in audit[2] and "/pause" in audit[3]
             and "deploy in progress" in audit[3] and "ui " in audit[3],
             f"audit: the four actions, newest first, who and why ({audit})")
    fx.screenshot("audit.png")

    # ---- tasks: filter, keyset pages ----
    b.go(f"#/services/{SERVICE}/tasks?status=failed")
    b.wait("document.querySelector('#tasks')", what="failed tasks")
    rows = b.eval("document.querySelectorAll('#tasks tbody tr').length")
    fx.check(rows == 1 and str(failed) in b.text("#tasks"), "tasks: status=failed lists it")
    fx.check(b.eval("[...document.querySelectorAll('#bulk-actions button')]"
                 ".map(x => x.dataset.bulk).join()") == "retry,delete",
             "tasks: the bulk actions that apply to failed tasks")
    fx.screenshot("tasks.png")
    # Oldest first is chosen here (the default is newest first since issue 28; tests/ui/
    # triage.py pages that way): the keyset checks below are about new tasks at the end.
    b.go(f"#/services/{SERVICE}/tasks?status=pending&order=oldest")
    b.wait("document.querySelector('#tasks') && location.hash.includes('pending') &&"
           " document.querySelectorAll('#tasks tbody tr').length === 50", what="page 1")
    first = b.eval("[...document.querySelectorAll('#tasks tbody tr td:first-child')]"
                   ".map(td => td.textContent)")
    fx.check(first == [str(i) for i in pending[:50]], "tasks: page 1 is the 50 oldest")
    for i in range(5):  # new tasks arrive
        fx.api("POST", f"/api/v1/services/{SERVICE}/tasks",
               {"data": {"late": i}, "delay_ms": 86400000})
    b.click("#next-page")
    b.wait("location.hash.includes('after=') && document.querySelector('#tasks') &&"
           " document.querySelectorAll('#tasks tbody tr').length === 17", what="page 2")
    second = b.eval("[...document.querySelectorAll('#tasks tbody tr td:first-child')]"
                    ".map(td => td.textContent)")
    fx.check(second[:10] == [str(i) for i in pending[50:]] and len(second) == 17,
             "tasks: page 2 continues where page 1 ended, new tasks at the end")
    b.go(f"#/services/{SERVICE}/tasks?status=pending&order=oldest&first=1")
    b.wait("!location.hash.includes('after=') && document.querySelector('#tasks') &&"
           " document.querySelectorAll('#tasks tbody tr').length === 50", what="page 1 again")
    again = b.eval("[...document.querySelectorAll('#tasks tbody tr td:first-child')]"
                   ".map(td => td.textContent)")
    fx.check(again == first, "tasks: page 1 did not shift while tasks arrived")

    # ---- task page ----
    b.go(f"#/services/{SERVICE}/tasks")
    b.wait("document.querySelector('#task-filters')", what="task filters")
    b.eval(f"document.querySelector('#task-filters input[name=id]').value = '{failed}'")
    b.click("#task-filters button[type=submit]")
    b.wait("document.querySelector('#task-data') && document.querySelector('#history')",
           what="task page")
    data = b.text("#task-data")
    fx.check('"order": 7' in data and "<img src=x" in data,
             "task: the data as pretty JSON, markup shown as text")
    fx.check(b.eval("document.querySelectorAll('img, #xss').length") == 0,
             "task: the markup in the data made no element")
    fx.check(b.eval("document.querySelectorAll('#history tbody tr').length") == 5,
             "task: every attempt of its history")
    fx.check("upstream said no" in b.text("#task"), "task: its last error")
    fx.screenshot("task.png")
    b.click("#task-actions button[data-action=Retry]")
    deadline = time.time() + 10
    while time.time() < deadline and queue.find_one({"_id": failed})["status"] == "failed":
        time.sleep(0.2)
    fx.check(queue.find_one({"_id": failed})["status"] != "failed",
             "task: Retry re-queued the failed task in the database")

    # ---- bulk: dry-run count, confirmation, change ----
    other = fx.task("failed", kind="bulk", finished_at=now, last_error="x")
    b.go(f"#/services/{SERVICE}/tasks?status=failed&kind=bulk")
    b.wait("document.querySelector('#bulk-actions')", what="bulk actions")
    b.click("#bulk-actions button[data-bulk=retry]")  # confirm() is accepted
    deadline = time.time() + 10
    while time.time() < deadline and queue.find_one({"_id": other})["status"] == "failed":
        b.eval("1")  # the browser's events (the confirm() dialog) are read meanwhile
        time.sleep(0.2)
    # Re-queued: pending, or already claimed or run again by the node by now.
    fx.check(queue.find_one({"_id": other})["status"] != "failed",
             "tasks: Retry all matching re-queued the task (page says: "
             + str(b.eval("document.querySelector('.status') && "
                         "document.querySelector('.status').textContent")) + ")")

    # ---- read-only ----
    b.navigate(fx.link("read"))
    b.wait("location.pathname === '/ui/' && document.getElementById('who')"
           " && document.getElementById('who').textContent.includes('read-only')",
           what="signed in read-only")
    b.go(f"#/services/{SERVICE}")
    b.wait("document.querySelector('#service-state')", what="service page, read-only")
    fx.check(b.eval("!document.querySelector('#switch-controls')"),
             "read-only: no pause or resume")
    b.go(f"#/services/{SERVICE}/tasks/{failed}")
    b.wait("document.querySelector('#task-data')", what="task page, read-only")
    fx.check(b.eval("document.querySelectorAll('button[data-action]').length") == 0,
             "read-only: no action button on the task")
    # Succeeded tasks exist whatever the retries did, and delete applies to them.
    b.go(f"#/services/{SERVICE}/tasks?status=succeeded")
    b.wait("document.querySelector('#tasks')", what="succeeded tasks, read-only")
    fx.check(b.eval("!document.querySelector('#bulk-actions')"), "read-only: no bulk action")

    fx.check_page_errors()
    b.go(f"#/services/{SERVICE}")
    b.wait("document.querySelector('#settings-table')", what="the live settings")
    fx.check("takeover_ms" in b.text("#settings-table"), "service: the live settings")

    # ---- the link works once (the browser logs the expected 401) ----
    b.navigate(operate_link)
    b.wait("document.getElementById('login-status') &&"
           " document.getElementById('login-status').textContent.includes('Cannot sign in')",
           what="the used link refused")
    fx.check(True, "sign-in: a used link is refused")
    fx.screenshot("login.png")


if __name__ == "__main__":
    sys.exit(uifix.run(scenario, nodes=1))
