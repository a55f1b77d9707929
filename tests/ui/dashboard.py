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
  - tasks: filtered by status; keyset pages whose first page does not change when tasks
    arrive; the id box opens a task;
  - task: pretty JSON data shown as text (the markup in it makes no element), its history;
    Retry clicked re-queues the failed task in the database; Retry all matching (bulk) too;
  - service: the live settings table;
  - a read-only link shows everything and no action button;
  - no page raised a script error or a Content-Security-Policy violation.
With --screenshots, each page is saved there as PNG (1280x800, and the overview at phone
width). Exit 0 if every check passed, 1 otherwise, 77 if chromium is missing.
"""

import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import cdp
    import pymongo
    from bson import ObjectId
except ImportError as e:
    print(f"SKIP: {e} (COHORT_TEST_TOOLS=1 bash deploy/setup.sh installs it)")
    sys.exit(77)

SERVICE = "web"
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
    return cond


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, method, path, token=None, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read()
            try:
                return r.status, json.loads(raw or b"null")
            except ValueError:
                return r.status, raw.decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    shots = None
    if "--screenshots" in sys.argv:
        shots = os.path.abspath(sys.argv[sys.argv.index("--screenshots") + 1])
        os.makedirs(shots, exist_ok=True)
    if not cdp.find_chromium():
        print("SKIP: no chromium (COHORT_TEST_TOOLS=1 bash deploy/setup.sh installs it)")
        return 77
    uri = os.environ.get("MONGODB_URI", "mongodb://127.0.0.1:27017")
    dbname = f"ui_test_{os.getpid()}_{int(time.time())}"
    mongo = pymongo.MongoClient(uri)
    db = mongo[dbname]
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="cohort-ui-test-")
    ini = os.path.join(tmp, "node.ini")
    with open(ini, "w") as f:
        f.write(f"""[cluster]
mongodb_uri = {uri}
database    = {dbname}
tick_ms     = 500
takeover_ms = 3000
node_id     = ui-node-1
http_listen = 127.0.0.1:{port}
log_level   = info

[service:{SERVICE}]
handler = {build}/handlers/cohort_noop.so
workers = 1
""")
    log = open(os.path.join(tmp, "node.log"), "w")
    node = subprocess.Popen([f"{build}/cohortd", "-c", ini], stdout=log, stderr=log)
    browser = None
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if http(port, "GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            check(False, "the node is ready within 30 s")
            return 1
        ctl = [f"{build}/cohortctl", "-c", ini]
        token = subprocess.run(ctl + ["tokens", "create", "uitest", "--scopes", "admin"],
                               check=True, capture_output=True, text=True).stdout.strip()
        # Tasks the node runs: succeeded.
        for i in range(3):
            st, _ = http(port, "POST", f"/api/v1/services/{SERVICE}/tasks", token,
                         {"data": {"n": i}, "kind": "mail"})
            check(st == 201, f"task {i} enqueued through the API")
        # Tasks as a node leaves them, in every other status.
        now = datetime.datetime.now(datetime.timezone.utc)
        later = now + datetime.timedelta(days=1)
        queue = db[f"queue_{SERVICE}"]

        def task(status, **extra):
            doc = {"status": status, "data": {"order": 42}, "created_at": now, "run_at": now,
                   "attempts": 1, "priority": 0, "base_priority": 0, "created_by": "uitest"}
            doc.update(extra)
            return queue.insert_one(doc).inserted_id

        failed = task("failed", kind="report", group="acct:1", attempts=5,
                      finished_at=now, last_error="noop: upstream said no",
                      data={"order": 7, "note": "<img src=x id=xss onerror=alert(1)>"},
                      history=[{"node": "ui-node-1", "attempt": a, "started_at": now,
                                "ended_at": now, "outcome": "retry" if a < 5 else "failed",
                                "error": "noop: upstream said no"} for a in range(1, 6)])
        task("timed_out", finished_at=now, last_error="ran past 60000 ms")
        task("cancelled", finished_at=now)
        task("claimed", claimed_by="ghost-node", claimed_at=now, heartbeat_at=now)
        pending = [task("pending", run_at=later, data={"page": i}) for i in range(60)]
        check(True, f"tasks written (failed {failed})")
        deadline = time.time() + 20
        while time.time() < deadline and queue.count_documents({"status": "succeeded"}) < 3:
            time.sleep(0.2)
        check(queue.count_documents({"status": "succeeded"}) == 3, "the node ran its 3 tasks")

        def link(scopes):
            r = subprocess.run(ctl + ["ui-link", "--scopes", scopes], check=True,
                               capture_output=True, text=True)
            return r.stdout.strip()

        base = f"http://127.0.0.1:{port}"
        browser = cdp.Browser()
        b = browser

        # ---- sign-in ----
        operate_link = link("operate")
        check(operate_link.startswith(f"{base}/ui/login?code=cht_"), "ui-link prints a link")
        b.navigate(operate_link)
        b.wait("location.pathname === '/ui/' && document.getElementById('who')"
               " && document.getElementById('who').textContent.includes('operate')",
               what="signed in with operate")
        check("code=" not in b.eval("location.href"), "the code left the address bar")
        cookie_js = b.eval("document.cookie")
        check("cohort_session" not in (cookie_js or ""), "the session cookie is HttpOnly")

        # ---- overview ----
        b.wait("document.querySelector('#services') && document.querySelector('#nodes')",
               what="overview tables")
        svc_text = b.text("#services")
        check(SERVICE in svc_text and "ui-node-1" in svc_text and "epoch" in svc_text,
              "overview: the service, its primary and epoch")
        check("failed 1" in svc_text and "succeeded 3" in svc_text and "pending 60" in svc_text,
              f"overview: counts by status ({svc_text!r})")
        check("primary of " + SERVICE in b.text("#nodes"), "overview: the node's role")
        check(b.text("#services tbody tr td:nth-child(4)") == "none due",
              "overview: the oldest due pending task (none: every pending one is due tomorrow)")
        check("No change of primary" in b.text("main"), "overview: no primacy change yet")
        b.wait("document.querySelector('#charts canvas')", what="the chart")
        check("succeeded/min" in b.text("#charts") and "queue depth" in b.text("#charts"),
              "overview: the chart of the last hour, its series named")
        # Live: a task enqueued now shows up without a reload (polling every 2 s).
        http(port, "POST", f"/api/v1/services/{SERVICE}/tasks", token,
             {"data": {"live": 1}, "delay_ms": 86400000})
        b.wait("document.querySelector('#services').textContent.includes('pending 61')",
               timeout=8, what="the live count")
        check(True, "overview: counts refresh by themselves")
        b.eval("document.getElementById('live').click()")  # the toggle stops it
        http(port, "POST", f"/api/v1/services/{SERVICE}/tasks", token,
             {"data": {"live": 2}, "delay_ms": 86400000})
        time.sleep(4.5)
        check("pending 61" in b.text("#services"), "overview: the live toggle pauses refresh")
        b.eval("document.getElementById('live').click()")
        b.wait("document.querySelector('#services').textContent.includes('pending 62')",
               timeout=8, what="refresh resumed")
        if shots:
            b.screenshot(os.path.join(shots, "overview.png"))
        # Phone width: the page itself does not scroll sideways (wide tables scroll in their
        # card), and the chart follows the width.
        b.send("Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=1,
               mobile=True)
        time.sleep(0.5)
        check(b.eval("document.documentElement.scrollWidth <= window.innerWidth + 1"),
              "overview at 390 px: no sideways scrolling of the page")
        check(b.eval("document.querySelector('#charts canvas').getBoundingClientRect().right"
                     " <= window.innerWidth"), "overview at 390 px: the chart fits")
        if shots:
            b.screenshot(os.path.join(shots, "overview-phone.png"))
        b.send("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1,
               mobile=False)

        # ---- service: pause and resume ----
        b.go(f"#/services/{SERVICE}")
        b.wait("document.querySelector('#service-state') &&"
               " document.querySelector('#switch-controls')", what="service page")
        check("No switch is set" in b.text("main"), "service: no switch at first")
        check("open batch" in b.text("#batches") and "draining" in b.text("#batches"),
              "service: the tracked batches")
        b.eval("document.querySelector('#switch-controls input[name=reason]').value ="
               " 'deploy in progress'")
        b.click("#switch-controls button[data-action=Pause]")
        b.wait("document.querySelector('#switches') &&"
               " document.querySelector('#switches').textContent.includes('deploy in progress')",
               what="the pause shown")
        doc = db.services.find_one({"_id": SERVICE}) or {}
        sw = (doc.get("pause") or {}).get("*") or {}
        check(sw.get("reason") == "deploy in progress" and "ui " in (sw.get("by") or ""),
              f"service: Pause paused it in the database, who and why recorded ({sw})")
        check("paused" in b.text("#service-state"), "service: the state says paused")
        if shots:
            b.screenshot(os.path.join(shots, "service.png"))
        b.click("#switch-controls button[data-action=Resume]")
        b.wait("document.querySelector('main').textContent.includes('No switch is set')",
               what="the resume shown")
        doc = db.services.find_one({"_id": SERVICE}) or {}
        check("*" not in (doc.get("pause") or {}), "service: Resume resumed it in the database")
        b.eval("document.querySelector('#switch-controls input[name=kind]').value = 'report'")
        b.eval("document.querySelector('#switch-controls input[name=reason]').value = 'disk full'")
        b.click("#switch-controls button[data-action=Block]")
        b.wait("document.querySelector('#switches') &&"
               " document.querySelector('#switches').textContent.includes('disk full')",
               what="the block shown")
        doc = db.services.find_one({"_id": SERVICE}) or {}
        check(((doc.get("block") or {}).get("report") or {}).get("reason") == "disk full",
              "service: Block blocked the kind in the database")
        check("kinds stopped" in b.text("#service-state"), "service: the state says kinds stopped")
        b.click("#switch-controls button[data-action=Unblock]")
        b.wait("document.querySelector('main').textContent.includes('No switch is set')",
               what="the unblock shown")
        doc = db.services.find_one({"_id": SERVICE}) or {}
        check("report" not in (doc.get("block") or {}), "service: Unblock unblocked it")
        b.eval("document.querySelector('#switch-controls input[name=kind]').value = ''")

        # ---- audit: both actions, who and why ----
        b.go("#/audit")
        b.wait("document.querySelector('#audit')", what="audit page")
        audit = b.eval("[...document.querySelectorAll('#audit tbody tr')].map(r => r.textContent)")
        check(len(audit) == 4 and "/unblock" in audit[0] and "/block" in audit[1]
              and "/resume" in audit[2] and "/pause" in audit[3]
              and "deploy in progress" in audit[3] and "ui " in audit[3],
              f"audit: the four actions, newest first, who and why ({audit})")
        if shots:
            b.screenshot(os.path.join(shots, "audit.png"))

        # ---- tasks: filter, keyset pages ----
        b.go(f"#/services/{SERVICE}/tasks?status=failed")
        b.wait("document.querySelector('#tasks')", what="failed tasks")
        rows = b.eval("document.querySelectorAll('#tasks tbody tr').length")
        check(rows == 1 and str(failed) in b.text("#tasks"), "tasks: status=failed lists it")
        check(b.eval("[...document.querySelectorAll('#bulk-actions button')]"
                     ".map(x => x.dataset.bulk).join()") == "retry,delete",
              "tasks: the bulk actions that apply to failed tasks")
        if shots:
            b.screenshot(os.path.join(shots, "tasks.png"))
        b.go(f"#/services/{SERVICE}/tasks?status=pending")
        b.wait("document.querySelector('#tasks') && location.hash.includes('pending') &&"
               " document.querySelectorAll('#tasks tbody tr').length === 50", what="page 1")
        first = b.eval("[...document.querySelectorAll('#tasks tbody tr td:first-child')]"
                       ".map(td => td.textContent)")
        check(first == [str(i) for i in pending[:50]], "tasks: page 1 is the 50 oldest")
        for i in range(5):  # new tasks arrive
            http(port, "POST", f"/api/v1/services/{SERVICE}/tasks", token,
                 {"data": {"late": i}, "delay_ms": 86400000})
        b.click("#next-page")
        b.wait("location.hash.includes('after=') && document.querySelector('#tasks') &&"
               " document.querySelectorAll('#tasks tbody tr').length === 17", what="page 2")
        second = b.eval("[...document.querySelectorAll('#tasks tbody tr td:first-child')]"
                        ".map(td => td.textContent)")
        check(second[:10] == [str(i) for i in pending[50:]] and len(second) == 17,
              "tasks: page 2 continues where page 1 ended, new tasks at the end")
        b.go(f"#/services/{SERVICE}/tasks?status=pending&first=1")
        b.wait("!location.hash.includes('after=') && document.querySelector('#tasks') &&"
               " document.querySelectorAll('#tasks tbody tr').length === 50", what="page 1 again")
        again = b.eval("[...document.querySelectorAll('#tasks tbody tr td:first-child')]"
                       ".map(td => td.textContent)")
        check(again == first, "tasks: page 1 did not shift while tasks arrived")

        # ---- task page ----
        b.go(f"#/services/{SERVICE}/tasks")
        b.wait("document.querySelector('#task-filters')", what="task filters")
        b.eval(f"document.querySelector('#task-filters input[name=id]').value = '{failed}'")
        b.click("#task-filters button[type=submit]")
        b.wait("document.querySelector('#task-data') && document.querySelector('#history')",
               what="task page")
        data = b.text("#task-data")
        check('"order": 7' in data and "<img src=x" in data,
              "task: the data as pretty JSON, markup shown as text")
        check(b.eval("document.querySelectorAll('img, #xss').length") == 0,
              "task: the markup in the data made no element")
        check(b.eval("document.querySelectorAll('#history tbody tr').length") == 5,
              "task: every attempt of its history")
        check("upstream said no" in b.text("#task"), "task: its last error")
        if shots:
            b.screenshot(os.path.join(shots, "task.png"))
        b.click("#task-actions button[data-action=Retry]")
        deadline = time.time() + 10
        while time.time() < deadline and queue.find_one({"_id": failed})["status"] == "failed":
            time.sleep(0.2)
        check(queue.find_one({"_id": failed})["status"] != "failed",
              "task: Retry re-queued the failed task in the database")

        # ---- bulk: dry-run count, confirmation, change ----
        other = task("failed", kind="bulk", finished_at=now, last_error="x")
        b.go(f"#/services/{SERVICE}/tasks?status=failed&kind=bulk")
        b.wait("document.querySelector('#bulk-actions')", what="bulk actions")
        b.click("#bulk-actions button[data-bulk=retry]")  # confirm() is accepted
        deadline = time.time() + 10
        while time.time() < deadline and queue.find_one({"_id": other})["status"] == "failed":
            b.eval("1")  # the browser's events (the confirm() dialog) are read meanwhile
            time.sleep(0.2)
        # Re-queued: pending, or already claimed or run again by the node by now.
        check(queue.find_one({"_id": other})["status"] != "failed",
              "tasks: Retry all matching re-queued the task (page says: "
              + str(b.eval("document.querySelector('.status') && "
                             "document.querySelector('.status').textContent")) + ")")

        # ---- read-only ----
        b.navigate(link("read"))
        b.wait("location.pathname === '/ui/' && document.getElementById('who')"
               " && document.getElementById('who').textContent.includes('read-only')",
               what="signed in read-only")
        b.go(f"#/services/{SERVICE}")
        b.wait("document.querySelector('#service-state')", what="service page, read-only")
        check(b.eval("!document.querySelector('#switch-controls')"),
              "read-only: no pause or resume")
        b.go(f"#/services/{SERVICE}/tasks/{failed}")
        b.wait("document.querySelector('#task-data')", what="task page, read-only")
        check(b.eval("document.querySelectorAll('button[data-action]').length") == 0,
              "read-only: no action button on the task")
        # Succeeded tasks exist whatever the retries did, and delete applies to them.
        b.go(f"#/services/{SERVICE}/tasks?status=succeeded")
        b.wait("document.querySelector('#tasks')", what="succeeded tasks, read-only")
        check(b.eval("!document.querySelector('#bulk-actions')"), "read-only: no bulk action")

        check(not b.errors, "no script error or CSP violation: " + "; ".join(b.errors))
        b.go(f"#/services/{SERVICE}")
        b.wait("document.querySelector('#settings-table')", what="the live settings")
        check("takeover_ms" in b.text("#settings-table"), "service: the live settings")

        # ---- the link works once (the browser logs the expected 401) ----
        b.navigate(operate_link)
        b.wait("document.getElementById('login-status') &&"
               " document.getElementById('login-status').textContent.includes('Cannot sign in')",
               what="the used link refused")
        check(True, "sign-in: a used link is refused")
        if shots:
            b.screenshot(os.path.join(shots, "login.png"))
    except Exception as e:  # a step that could not run fails the test, with its reason
        check(False, f"{type(e).__name__}: {e}")
        if browser:
            try:
                print("  page status:", browser.text("#status") or browser.text("#login-status"))
                print("  page text:", (browser.text("main") or "")[:500])
            except Exception:
                pass
            print("  browser errors:", browser.errors)
    finally:
        if browser:
            browser.close()
        node.terminate()
        try:
            node.wait(timeout=15)
        except subprocess.TimeoutExpired:
            node.kill()
        log.close()
        mongo.drop_database(dbname)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed; node log: {tmp}/node.log")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
