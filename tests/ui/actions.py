#!/usr/bin/python3
"""actions.py - the dashboard never loses feedback or acts without asking (issue 28, label `ui`).

Usage: actions.py BUILD_DIR [--screenshots DIR]      (MONGODB_URI: the database server)

On one node (tests/ui/uifix.py), through headless Chromium signed in with an operate link:
  - Pause of the whole service asks first (in the page) and needs a reason; its result stays
    on screen through live refreshes and navigation until dismissed;
  - the switch's author is the signed-in person "USER@HOST via dashboard";
  - Block of a kind no task has warns and asks, and Cancel stops nothing;
  - each switch has its own Resume/Unblock button; Resume with an empty kind box while only a
    kind is paused says so (never "Resumed") and resumes nothing;
  - a task page offers only the actions its status allows; the "deleted" result survives the
    move to the task list;
  - the history shows operator retries and cancels as events (who, when) and a crashed
    attempt with its outcome, time and error, and its error column stays readable at 400 px;
  - the audit page shows the dashboard's actions as the person (dashboard) and cohortctl's as
    USER@HOST (cohortctl).
"""

import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import uifix  # noqa: E402

SERVICE = "web"
NOTICES = "(document.getElementById('notices') || {textContent: ''}).textContent"


def switch(fx, which, kind):
    return ((fx.db.services.find_one({"_id": SERVICE}) or {}).get(which) or {}).get(kind)


def scenario(fx):
    now = fx.now
    t = now - datetime.timedelta(minutes=5)
    failed = fx.task("failed", kind="report", finished_at=now, last_error="boom", history=[
        {"node": "ui-node-1", "attempt": 1, "started_at": t, "ended_at": t, "outcome": "retry",
         "error": "first try failed"},
        {"event": "crashed", "node": "ghost-node", "attempt": 2, "at": t,
         "error": "no heartbeat for 30000 ms", "counted": False},
        {"event": "retried", "by": "cohortctl ann@ops-box", "at": t, "from": "failed"},
        {"event": "cancelled", "by": "bob via dashboard", "at": t},
        {"node": "ui-node-1", "attempt": 3, "started_at": now, "ended_at": now,
         "outcome": "failed",
         "error": "noop: the upstream at 10.0.0.7 said no; connection reset by peer after 30 s"}])
    pending = fx.task("pending", kind="report", run_at=now + datetime.timedelta(days=1))
    done = fx.task("succeeded", kind="report", finished_at=now)
    b = fx.sign_in("operate")
    for part in (lambda: pause_asks(fx, b), lambda: switch_buttons(fx, b),
                 lambda: block_warns(fx, b), lambda: task_page(fx, b, failed, pending, done),
                 lambda: cohortctl_audit(fx, b)):
        try:  # each part is checked even when an earlier one failed (e.g. on older code)
            part()
        except uifix.cdp.BrowserError as e:
            fx.check(False, f"BrowserError: {e}")
            api_reset(fx)


def api_reset(fx):
    """No switch left by a part that failed half-way."""
    for which in ("pause", "block"):
        for kind in list((fx.db.services.find_one({"_id": SERVICE}) or {}).get(which) or {}):
            undo = "resume" if which == "pause" else "unblock"
            fx.api("POST", f"/api/v1/services/{SERVICE}/{undo}",
                   {} if kind == "*" else {"kind": kind})


def pause_asks(fx, b):
    b.go(f"#/services/{SERVICE}")
    b.wait("document.querySelector('#switch-controls')", what="service page")
    # ---- pausing the whole service asks, with a reason ----
    b.click("#switch-controls button[data-action=Pause]")
    fx.check(b.eval("!!document.getElementById('switch-confirm')"),
             "Pause of the whole service asks first")
    fx.check(switch(fx, "pause", "*") is None, "nothing paused before the answer")
    b.click("#switch-confirm button[data-action=confirm]")
    fx.check(b.eval("!!document.getElementById('switch-confirm')") and
             "reason is required" in b.text("#switch-confirm"),
             "the whole service needs a reason")
    fx.check(switch(fx, "pause", "*") is None, "no reason: still not paused")
    fx.screenshot("actions-confirm.png")
    b.eval("document.querySelector('#switch-confirm input[name=confirm-reason]').value ="
           " 'db failover'")
    b.click("#switch-confirm button[data-action=confirm]")
    b.wait(f"{NOTICES}.includes('Paused {SERVICE}')", what="the pause's result")
    sw = switch(fx, "pause", "*") or {}
    fx.check(sw.get("reason") == "db failover", f"paused with the reason ({sw})")
    fx.check((sw.get("by") or "").endswith(" via dashboard") and
             not (sw.get("by") or "").startswith("api token"),
             f"the author is the signed-in person via the dashboard ({sw.get('by')})")

    # ---- the result stays through refreshes and navigation until dismissed ----
    time.sleep(5)  # two live refresh rounds (every 2 s)
    fx.check(f"Paused {SERVICE}" in b.eval(NOTICES), "the result outlives live refreshes")
    b.go("#/audit")
    fx.check(f"Paused {SERVICE}" in b.eval(NOTICES), "the result outlives navigation")
    fx.check("(dashboard)" in b.text("#audit"), "the audit shows the action as the dashboard's")
    b.click("#notices .dismiss")
    fx.check(f"Paused {SERVICE}" not in b.eval(NOTICES), "dismissed, the result goes")



def switch_buttons(fx, b):
    # ---- a Resume button per switch; an empty kind box never claims a kind's resume ----
    fx.api("POST", f"/api/v1/services/{SERVICE}/pause", {"reason": "x"})
    b.go(f"#/services/{SERVICE}")
    b.wait("document.querySelector('#switches button[data-action=\"resume:*\"]')",
           what="the switch's own Resume")
    b.click("#switches button[data-action=\"resume:*\"]")
    b.wait(f"{NOTICES}.includes('Resumed {SERVICE}')", what="the resume's result")
    fx.check(switch(fx, "pause", "*") is None, "the switch's own Resume resumed the service")
    st, _ = fx.api("POST", f"/api/v1/services/{SERVICE}/pause", {"kind": "report"})
    fx.check(st == 200, "kind report paused through the API")
    b.wait("document.querySelector('#switches button[data-action=\"resume:report\"]')",
           what="the kind's own Resume (live refresh)")
    b.eval("document.querySelectorAll('#notices .dismiss').forEach((x) => x.click())")
    b.click("#switch-controls button[data-action=Resume]")
    b.wait(f"{NOTICES}.includes('Resume failed')", what="Resume with an empty box refused")
    fx.check("report" in b.eval(NOTICES) and f"Resumed {SERVICE}" not in b.eval(NOTICES),
             f"the empty box says the kind stays paused ({b.eval(NOTICES)!r})")
    fx.check(switch(fx, "pause", "report") is not None, "the kind is still paused")
    st, body = fx.api("POST", f"/api/v1/services/{SERVICE}/resume", {})
    fx.check(st == 200 and isinstance(body, dict) and body.get("changed") is False,
             f"the API's resume of a switch not set answers changed: false ({body})")
    entry = fx.db.audit.find_one({"path": f"/api/v1/services/{SERVICE}/resume"},
                                 sort=[("_id", -1)]) or {}
    fx.check(entry.get("changed") is False, f"the audit records it as no change ({entry})")
    b.go("#/audit")
    fx.check("no change" in (b.text("#audit") or ""), "the audit page shows 'no change'")
    b.go(f"#/services/{SERVICE}")
    b.wait("document.querySelector('#switches button[data-action=\"resume:report\"]')",
           what="the kind's own Resume again")
    b.click("#switches button[data-action=\"resume:report\"]")
    b.wait(f"{NOTICES}.includes('Resumed kind report')", what="the kind's resume")
    fx.check(switch(fx, "pause", "report") is None, "its own Resume resumed the kind")



def block_warns(fx, b):
    # ---- blocking a kind nobody has warns ----
    b.go(f"#/services/{SERVICE}")
    b.eval("document.querySelector('#switch-controls input[name=kind]').value = 'reprot'")
    b.click("#switch-controls button[data-action=Block]")
    fx.check("'reprot'" in (b.text("#switch-warning") or ""), "Block of an unknown kind warns")
    b.click("#switch-confirm button[data-action=cancel-confirm]")
    fx.check(switch(fx, "block", "reprot") is None and
             not b.eval("!!document.getElementById('switch-confirm')"),
             "answered Cancel, nothing is blocked")



def task_page(fx, b, failed, pending, done):
    # ---- only the actions that apply ----
    def offered(task_id):
        b.go(f"#/services/{SERVICE}/tasks/{task_id}")
        return sorted(b.eval("[...document.querySelectorAll('#task-actions button')]"
                             ".map((x) => x.dataset.action)"))
    fx.check(offered(pending) == ["Cancel"], f"pending: only Cancel ({offered(pending)})")
    got = offered(failed)
    fx.check(got == ["Delete", "Retry"], f"failed: Retry and Delete ({got})")

    # ---- the history: events with who and when, a crash with its outcome ----
    rows = b.eval("[...document.querySelectorAll('#history tbody tr')]"
                  ".map((r) => [...r.cells].map((c) => c.textContent))")
    text = " | ".join(" ".join(r) for r in rows)
    fx.check(any("retried by operator" in r[1] and "cohortctl ann@ops-box" in r[2] and
                 r[4] not in ("", "-") for r in rows), f"an operator retry, who and when ({text})")
    fx.check(any("cancelled by operator" in r[1] and "bob via dashboard" in r[2] for r in rows),
             "an operator cancel, who")
    fx.check(any("crashed" in r[1] and "ghost-node" in r[2] and r[4] not in ("", "-") and
                 "no heartbeat" in r[5] for r in rows), "a crashed attempt: outcome, time, error")
    fx.check(not any(all(c.strip() in ("", "-") for c in r[1:]) for r in rows),
             "no row of '-' only")
    b.eval("document.querySelectorAll('#notices .dismiss').forEach((x) => x.click());"
           " document.getElementById('history').scrollIntoView()")
    fx.screenshot("actions-history.png")
    b.send("Emulation.setDeviceMetricsOverride", width=400, height=800, deviceScaleFactor=1,
           mobile=True)
    time.sleep(0.3)
    width = b.eval("Math.max(...[...document.querySelectorAll('#history tbody tr')]"
                   ".map((r) => r.cells[5].getBoundingClientRect().width))")
    fx.check(width >= 100, f"at 400 px the error column keeps its width ({width} px)")
    fx.screenshot("actions-history-400.png")
    b.send("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1,
           mobile=False)

    # ---- "deleted" survives the move to the list ----
    b.go(f"#/services/{SERVICE}/tasks/{done}")
    b.click("#task-actions button[data-action=Delete]")
    b.wait(f"location.hash === '#/services/{SERVICE}/tasks' && {NOTICES}.includes('deleted')",
           what="deleted, on the task list")
    fx.check(fx.queue.find_one({"_id": done}) is None, "the task is deleted")
    time.sleep(2.5)
    fx.check(f"Task {done} of {SERVICE} deleted" in b.eval(NOTICES),
             "the 'deleted' result is still on the list page")



def cohortctl_audit(fx, b):
    # ---- cohortctl actions are on the audit page ----
    fx.ctl("pause", SERVICE, "--kind", "mail", "--reason", "from the shell")
    b.go("#/audit")
    audit = b.text("#audit") or ""
    fx.check(f"cohortctl pause {SERVICE} --kind mail" in audit and "(cohortctl)" in audit,
             f"the audit page shows cohortctl's pause ({audit[:300]!r})")
    b.eval("document.querySelectorAll('#notices .dismiss').forEach((x) => x.click())")
    fx.screenshot("audit.png")


sys.exit(uifix.run(scenario, nodes=1))
