"""state.py - the dashboard never shows a wrong state (issue 28, "It must never show a wrong
state", and sign-in keeping the deep link), in headless Chromium against two nodes.

Checks: a deep link survives the sign-in page; a failed navigation (unknown page, unknown
service) shows "Loading" and then an error page of its own, never the old page under the new
URL; no literal "null" on the task list or a read-only task page; the "live" box is off on
pages that never refresh; live refresh runs one round at a time when replies take 3 s; the
chart leaves out the minute in progress; when the serving node dies every figure is marked
stale with its age and the other nodes' dashboards are offered.

Usage: state.py BUILD_DIR [--screenshots DIR]   (MONGODB_URI: the database to use)
"""

import datetime
import sys
import time

import uifix
from uifix import cdp

SLOW_FETCH = """(() => {
  window.__inflight = 0; window.__maxInflight = 0; window.__started = 0;
  const orig = window.fetch;
  window.fetch = async (...a) => {
    window.__inflight++; window.__started++;
    window.__maxInflight = Math.max(window.__maxInflight, window.__inflight);
    try { await new Promise((r) => setTimeout(r, 3000)); return await orig(...a); }
    finally { window.__inflight--; }
  };
  return true;
})()"""


def scenario(fx):
    other = fx.nodes[1]
    tid = fx.task("failed", kind="report", finished_at=fx.now, last_error="boom")

    # Sign-in keeps the deep link: a fresh browser opens a service page, signs in with a token.
    fx.browser = b = cdp.Browser()
    b.navigate(f"{fx.base}/ui/#/services/{fx.service}")
    b.wait("location.pathname === '/ui/login' && document.readyState === 'complete'",
           what="sent to the sign-in page")
    time.sleep(0.5)  # the module script attaches its submit handler
    b.eval(f"document.getElementById('token').value = '{fx.token}'")
    b.eval("document.getElementById('token-form').requestSubmit()")
    try:
        b.wait(f"location.hash === '#/services/{fx.service}' && "
               "document.querySelector('main').dataset.route", what="back on the deep link")
        fx.check(True, "sign-in comes back to the deep link")
        b.errors.clear()  # the 401 that sent it to the sign-in page is expected
    except cdp.BrowserError:
        fx.check(False, "sign-in comes back to the deep link: at " + b.eval("location.href"))

    # 1. A failed navigation never leaves the old page under the new URL.
    b.go(f"#/services/{fx.service}")
    b.eval("location.hash = '#/bogus'")
    b.wait("document.querySelector('main').textContent.includes('No such page')")
    text = b.text("main")
    fx.check(f"Service {fx.service}" not in text and b.eval("!!document.getElementById('no-page')"),
             "#/bogus shows its own error page, not the service page under it")
    b.go(f"#/services/{fx.service}")
    b.eval("location.hash = '#/services/nosuch'")
    b.wait("document.querySelector('main').dataset.route === '#/services/nosuch' || "
           "document.getElementById('status').textContent.includes('Cannot load')",
           what="the unknown service's page or its error")
    fx.check(f"Service {fx.service}" not in b.text("main")
             and b.eval("!!document.getElementById('load-error')"),
             "an unknown service shows an error page of its own: " + b.text("main")[:120])
    fx.screenshot("ui-state-error-page.png")
    b.errors.clear()  # the 404s of the unknown service are expected

    # 6. No literal null; 8. the live box is off where nothing refreshes.
    b.go(f"#/services/{fx.service}/tasks")
    fx.check("null" not in b.text("main"), "no literal null on the unfiltered task list")
    fx.check(b.eval("document.getElementById('live').disabled"),
             "the live box is off on the task list (never refreshed)")
    b.go(f"#/services/{fx.service}")
    fx.check(not b.eval("document.getElementById('live').disabled"),
             "the live box is on for the service page (refreshed)")

    # 4. The chart leaves the minute in progress out of the per-minute rates.
    b.go("#/")
    b.wait("document.querySelector('.chart canvas')", what="the chart drawn")
    fx.check(b.eval("(document.querySelector('.chart') || {dataset: {}}).dataset.partial"
                    " === 'left out'"), "the chart leaves the minute in progress out of the rates")

    # 7. An external service with due work and no live worker: a warning with the oldest's age.
    fx.db["queue_ext"].insert_many([{"status": "pending", "data": {}, "created_at": fx.now,
                                     "run_at": fx.now, "attempts": 0, "priority": 0,
                                     "base_priority": 0} for _ in range(20)])
    b.wait("[...document.querySelectorAll('#services tr')].some((r) => "
           "r.textContent.startsWith('ext'))", what="the ext service listed", timeout=20)
    try:
        b.wait("document.querySelector('#services [data-state=no-worker]')", timeout=30,
               what="the warning")
        fx.check("oldest due" in b.text("#services [data-state=no-worker]"),
                 "a service with due work and no worker shows a warning with the oldest's age")
    except cdp.BrowserError:
        row = b.eval("[...document.querySelectorAll('#services tr')].map((r) => r.textContent)"
                     ".find((t) => t.startsWith('ext'))")
        fx.check(False, f"a service with due work and no worker shows a warning: {row}")
    fx.screenshot("ui-state-overview.png")

    # History beyond an hour: the charts over the last day (the per-minute documents).
    b.eval("(() => { const s = document.getElementById('chart-range'); if (!s) return false;"
           " s.value = 'day'; s.dispatchEvent(new Event('change')); return true; })()")
    try:
        b.wait("[...document.querySelectorAll('.chart')].every((c) => c.dataset.range === 'day')"
               " && document.querySelector('#charts').textContent.includes('last day')",
               timeout=15, what="the day charts")
        fx.check(True, "the charts show the last day")
    except cdp.BrowserError:
        fx.check(False, "the charts show the last day")
    fx.screenshot("ui-state-day-chart.png")
    b.eval("(() => { const s = document.getElementById('chart-range'); if (!s) return false;"
           " s.value = 'hour'; s.dispatchEvent(new Event('change')); return true; })()")

    # 5. The takeover's own time: the new primary recorded the dead one's missing minute
    # (M-4) under its own epoch, but took over at M-3 + 14 s (the config's elected_at).
    m = fx.now.replace(second=0, microsecond=0) - datetime.timedelta(minutes=5)
    took = m + datetime.timedelta(minutes=2, seconds=14)
    fx.db["services"].insert_one({"_id": "old", "primary": "ghost-2", "epoch": 2,
                                  "last_active": fx.now, "elected_at": took, "lease_ms": 10000})
    for i, (epoch, node) in enumerate([(1, "ghost-1"), (2, "ghost-2")]):
        at = m + datetime.timedelta(minutes=i)
        fx.db["history"].insert_one({
            "_id": f"old/{int(at.timestamp() * 1000)}", "service": "old", "at": at,
            "counts": {"pending": 0}, "enqueued": 0, "succeeded": 0, "failed": 0,
            "timed_out": 0, "epoch": epoch, "primary": node})
    try:
        b.wait("[...document.querySelectorAll('#primacy tr')].some((r) => "
               "r.textContent.startsWith('old'))", timeout=15, what="the change listed")
        row = b.eval("[...document.querySelectorAll('#primacy tr')].map((r) => r.textContent)"
                     ".find((t) => t.startsWith('old'))")
    except cdp.BrowserError:
        row = b.text("#primacy") or b.text("main")[-200:]
    fx.check(row and f"{took.astimezone().strftime('%H:%M')}:14" in row,
             f"the takeover shows its own time ({took.astimezone():%H:%M:%S}): {row}")

    # 3. One round at a time when replies take 3 s, and the data's age shown.
    b.eval(SLOW_FETCH)
    b.wait("window.__started > 0", timeout=10, what="a round started")
    time.sleep(12)
    most, started = b.eval("window.__maxInflight"), b.eval("window.__started")
    fx.check(most <= 3, f"one refresh round at a time with 3 s replies ({most} in flight at most,"
             f" {started} requests in 12 s)")

    # Read-only task page: no literal null (a new document: the slowed fetch goes with it).
    b2 = fx.browser
    b2.navigate(fx.link("read"))
    b2.wait("document.getElementById('who').textContent.includes('read-only')", what="read-only")
    b2.go(f"#/services/{fx.service}/tasks/{tid}")
    fx.check("null" not in b2.text("main"), "no literal null on the read-only task page")
    b2.go(f"#/services/{fx.service}/tasks")
    fx.check("null" not in b2.text("main"), "no literal null on the read-only task list")

    fx.check_page_errors()

    # 2. The serving node dies: every figure stale with its age, other nodes offered.
    b2.eval(f"localStorage.setItem('cohort.dashboards', JSON.stringify(['{other.base}']))")
    b2.go("#/")
    fx.node.stop(kill=True)
    try:
        b2.wait("document.querySelector('main').classList.contains('stale')", timeout=20,
                what="the page marked stale")
        fx.check(True, "the page is marked stale when its node dies")
    except cdp.BrowserError:
        fx.check(False, "the page is marked stale when its node dies")
    status = b2.text("#status") or ""
    fx.check("s old" in status and other.base in (b2.eval(
        "[...document.querySelectorAll('#status a')].map((a) => a.href).join(' ')") or ""),
        "the status line gives the data's age and links to the other node: " + status[:160])
    fx.screenshot("ui-state-stale.png")


if __name__ == "__main__":
    sys.exit(uifix.run(scenario, nodes=2, extra_ini="\n[service:ext]\nhandler = external\n"))
