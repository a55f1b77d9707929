#!/usr/bin/env python3
"""schedules.py - a schedule's pause and resume on the dashboard, and a kind with due work and
no worker shown as such (issue 28: "a schedules page ... and pause/resume"; "a service with
work pending and no worker shows running"), in headless Chromium against one node that hosts
three services: web (a schedule, the noop handler), ext (handler = external, no external
worker) and mixed (a handler that serves only the kinds email and sms).

Checks:
  - an operator's schedules page has a Pause button per active schedule; it asks first (a
    cancelled question changes nothing), then pauses it through the API (state "paused" in the
    config document), keeps the result as a notice, and the row then offers Resume; a second
    pause of a paused schedule is a clear "no change"; the audit names the signed-in user; a
    read-only session has no button;
  - the service page of a service with due tasks and no live worker shows a warning with the
    oldest due task's age in its state, and the by-kind table marks each kind with due tasks
    that no live worker takes (no worker at all, or a handler that does not serve that kind),
    with that kind's oldest due age; a kind the handler serves is not marked; once a live
    external worker claims for the service, neither its page nor the overview warns.

Usage: tests/ui/schedules.py BUILD_DIR [--screenshots DIR]   (MONGODB_URI as for every test)
"""

import datetime
import os
import re
import sys

import uifix

NOTICES = "(document.getElementById('notices') || {textContent: ''}).textContent"
ROW = "document.querySelector('#schedules tbody tr')"


def schedule_state(fx):
    doc = fx.db.services.find_one({"_id": fx.service}) or {}
    s = (doc.get("schedules") or {}).get("nightly")
    return None if s is None else ("paused" if s.get("paused") else "active")


def click_switch(fx, b, verb, state, then):
    """Clicks `verb` (the question is accepted); checks the schedule's new `state` in the
    database, the notice, and the row's button turned to `then`."""
    b.click(f"button[data-action='{verb}:nightly']")
    fx.check(fx.wait_db(lambda: schedule_state(fx) == state, 10),
             f"{verb.capitalize()} makes the schedule {state} (config document)")
    b.wait(f"{NOTICES}.includes('{verb.capitalize()}d schedule nightly of {fx.service}') && "
           f"document.querySelector('button[data-action=\"{then}:nightly\"]')",
           what=f"the notice of {verb} and the {then.capitalize()} button")


def pause_resume(fx):
    svc = fx.service
    fx.check(fx.wait_db(lambda: schedule_state(fx) == "active", 30),
             "the primary ran the schedule (its state is in the config document)")
    b = fx.sign_in("operate")
    b.go(f"#/services/{svc}/schedules")
    b.wait(f"{ROW} && {ROW}.querySelector('button[data-action=\"pause:nightly\"]')",
           what="a Pause button on the schedule's row")
    b.dialog_answer = False  # the question is declined: nothing changes
    b.click("button[data-action='pause:nightly']")
    b.eval("new Promise((r) => setTimeout(r, 500))")
    fx.check(schedule_state(fx) == "active", "a declined question leaves the schedule active")
    b.dialog_answer = True
    click_switch(fx, b, "pause", "paused", "resume")
    fx.check("paused" in b.text("#schedules tbody tr"), "the row says paused")
    fx.screenshot("schedules-paused.png")
    b.eval("new Promise((r) => setTimeout(r, 2500))")  # a live refresh would have wiped it
    fx.check(f"Paused schedule nightly of {svc}" in b.eval(NOTICES), "the result stays")
    code, again = fx.api("POST", f"/api/v1/services/{svc}/schedules/nightly/pause")
    fx.check(code == 200 and again.get("changed") is False,
             f"a second pause says no change ({code} {again})")
    click_switch(fx, b, "resume", "active", "pause")
    code, audit = fx.api("GET", "/api/v1/audit?limit=5")
    ours = [e for e in audit.get("entries", []) if "/schedules/nightly/" in e.get("path", "")]
    clicks = [e for e in ours if e.get("via") == "session"]
    fx.check(code == 200 and len(clicks) == 2 and all(e.get("who") for e in clicks),
             "the audit records both clicks with the signed-in user "
             f"({[(e.get('who'), e.get('via'), e.get('path')) for e in ours]})")
    b.eval("document.querySelectorAll('#notices .dismiss').forEach((x) => x.click())")
    fx.screenshot("schedules.png")
    fx.sign_in("read")
    b.go(f"#/services/{svc}/schedules")
    b.wait(ROW, what="the schedules page, read-only")
    fx.check(not b.eval("!!document.querySelector('#schedules button')"),
             "a read-only session has no Pause or Resume button")


def pending(fx, service, kind, n, age_min):
    at = fx.now - datetime.timedelta(minutes=age_min)
    fx.db[f"queue_{service}"].insert_many([
        {"status": "pending", "data": {}, "created_at": at, "run_at": at, "attempts": 0,
         "priority": 0, "base_priority": 0, "weight": 1, "kind": kind} for _ in range(n)])


def aged(text, minutes):
    """Whether `text` says "oldest due N min" with N the age given, or up to 2 more (the test's
    own run time)."""
    m = re.search(r"oldest due (\d+) min", text or "")
    return bool(m) and minutes <= int(m.group(1)) <= minutes + 2


def kind_row(b, kind):
    return ("[...document.querySelectorAll('.breakdown[data-by=kind] tbody tr')].find((r) => "
            f"r.firstElementChild.textContent.startsWith('{kind}'))")


def no_worker(fx):
    b = fx.sign_in("operate")
    pending(fx, "ext", "mail", 4, 7)
    pending(fx, "mixed", "report", 3, 12)  # the handler serves email and sms only
    pending(fx, "mixed", "email", 2, 1)    # ... which it takes at once
    fx.check(fx.wait_db(lambda: fx.db["queue_mixed"].count_documents(
        {"kind": "email", "status": "succeeded"}) == 2, 30), "the mixed node runs email tasks")
    b.go("#/services/ext")
    b.wait("document.querySelector('#service-state')", what="the ext service page")
    b.wait("document.querySelector('#service-state [data-state=no-worker]')", timeout=20,
           what="the state's no-worker warning")
    fx.check(aged(b.text("#service-state [data-state=no-worker]"), 7),
             f"ext: no worker, with the oldest due age ({b.text('#service-state')})")
    b.wait(f"{kind_row(b, 'mail')} && {kind_row(b, 'mail')}.querySelector('[data-state=no-worker]')",
           what="the mail kind marked")
    fx.check(aged(b.eval(f"{kind_row(b, 'mail')}.textContent"), 7),
             "ext: kind mail has no worker, with its oldest due age")
    fx.screenshot("service-no-worker.png")
    # A live external worker takes ext's tasks (its claims name no kind): no warning there,
    # nor on the overview.
    code, got = fx.api("POST", "/api/v1/services/ext/claims",
                       {"worker": "py-1", "max": 1, "lease_ms": 120000})
    fx.check(code == 200 and len(got.get("tasks", [])) == 1, f"an external worker claims ({code})")
    b.go("#/")
    b.wait("[...document.querySelectorAll('#services tr')].some((r) => "
           "r.textContent.startsWith('ext') && / min/.test(r.textContent))",
           what="the overview's ext row with its oldest due age")
    fx.check(not b.eval("!![...document.querySelectorAll('#services tr')].find((r) => "
                        "r.textContent.startsWith('ext')).querySelector('[data-state=no-worker]')"),
             "ext with a live external worker: no warning on the overview")
    b.go("#/services/ext")
    b.wait(f"document.querySelector('#service-state') && {kind_row(b, 'mail')}",
           what="the ext service page again")
    fx.check(not b.eval("!!document.querySelector('#service-state [data-state=no-worker], "
                        ".breakdown [data-state=no-worker]')"),
             "ext with a live external worker: no warning on the service page")
    b.go("#/services/mixed")
    b.wait(f"{kind_row(b, 'report')} && {kind_row(b, 'report')}.querySelector("
           "'[data-state=no-worker]')", what="the report kind marked")
    fx.check(aged(b.eval(f"{kind_row(b, 'report')}.textContent"), 12),
             "mixed: kind report (no handler serves it) is marked with its oldest due age")
    fx.check(not b.eval(f"!!{kind_row(b, 'email')}.querySelector('[data-state=no-worker]')"),
             "mixed: kind email (served) is not marked")
    fx.check("no worker for kind report" in b.text("#service-state"),
             f"mixed: the state names the kind without a worker ({b.text('#service-state')})")
    b.eval("document.querySelector('.breakdown[data-by=kind]').scrollIntoView()")
    fx.screenshot("service-kind-no-worker.png")


def scenario(fx):
    for part in (lambda: pause_resume(fx), lambda: no_worker(fx)):
        try:  # each part is checked even when an earlier one failed (e.g. on older code)
            part()
        except uifix.cdp.BrowserError as e:
            fx.check(False, f"BrowserError: {e}")


BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else ""
sys.exit(uifix.run(scenario, nodes=1, extra_ini=f"""schedule.nightly = 0 3 * * * ; tz=Europe/Berlin ; catch_up=none

[service:ext]
handler = external

[service:mixed]
handler = {BUILD}/tests/handlers/test_handler_kinds.so
workers = 1
"""))
