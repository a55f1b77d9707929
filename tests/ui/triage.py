#!/usr/bin/env python3
"""triage.py - the dashboard finds the failure that matters (issue 28, "Finding the failure
that matters"), in headless Chromium against one node:
  - the tasks list is newest first by default, with the total of matching tasks and each
    task's finished time; oldest first is selectable; in either order the next page
    continues where the first ended while tasks arrive (keyset);
  - a search by task data (field path and value), its bound stated;
  - views of retrying tasks (in backoff, with their next run time) and scheduled (delayed)
    tasks;
  - rows can be selected for Retry (and Cancel, Delete), beside "all matching";
  - the service page's "By group" table holds the 20 groups with the most tasks, sorted by
    count, and says how many more there are;
  - the schedules page: each schedule's spec, time zone, state, next slot, a Pause button.

Usage: tests/ui/triage.py BUILD_DIR [--screenshots DIR]   (MONGODB_URI as for every test)
"""

import datetime
import sys

import uifix
from bson import ObjectId

N_FAILED = 55  # more than a page (50)


def ids_on_page(b):
    return b.eval("[...document.querySelectorAll('#tasks tbody tr td:first-child')]"
                  ".map(td => td.textContent)")


def wait_rows(b, n, what):
    """Waits for the list to show `n` rows under the new URL (the old page stays on screen
    until the new one is drawn, so the URL alone does not say it is there)."""
    b.wait("location.hash.includes('after=') && document.querySelectorAll('#tasks tbody tr')"
           f".length === {n}", what=what)


def wait_first(b, first, what):
    b.wait("document.querySelector('#tasks tbody tr td') && document.querySelector("
           f"'#tasks tbody tr td').textContent === '{first}'", what=what)


def scenario(fx):
    svc = fx.service
    later = fx.now + datetime.timedelta(days=1)
    failed = []
    for i in range(N_FAILED):  # finished one minute apart, the newest last
        failed.append(str(fx.task("failed", last_error=f"boom {i}", attempts=5,
                                  finished_at=fx.now - datetime.timedelta(minutes=N_FAILED - i))))
    retrying = str(fx.task("pending", attempts=2, run_at=later, last_error="try again"))
    scheduled = str(fx.task("pending", attempts=0, run_at=later, not_before=later))
    b = fx.sign_in("operate")

    # ---- newest first, total, finished time ----
    b.go(f"#/services/{svc}/tasks?status=failed")
    b.wait("document.querySelector('#tasks') && document.querySelector('#tasks-total')",
           what="failed tasks, newest first")
    page1 = ids_on_page(b)
    fx.check(page1 == failed[::-1][:50], "tasks: newest first by default, the newest failure on top")
    fx.check(b.text("#tasks-total").startswith(f"{N_FAILED} task(s) match, newest first"),
             "tasks: the total of matching tasks (" + b.text("#tasks-total") + ")")
    heads = b.eval("[...document.querySelectorAll('#tasks thead th')].map(th => th.textContent)")
    fx.check("finished" in heads and "select" in heads, f"tasks: finished and select columns {heads}")
    newest = fx.queue.find_one({"_id": fx.queue.find_one(sort=[("_id", -1)],
                                                         filter={"status": "failed"})["_id"]})
    cell = b.eval("document.querySelector('#tasks tbody tr').children[6].textContent")
    fx.check(cell.startswith(str(newest["finished_at"].year)) and cell != "-",
             f"tasks: each row's finished time ({cell})")
    fx.screenshot("tasks-newest.png")
    for i in range(3):  # failures arrive while the reader looks at page 1
        fx.task("failed", last_error=f"late {i}", finished_at=fx.now)
    b.click("#next-page")
    wait_rows(b, N_FAILED - 50, "page 2, newest first")
    fx.check(ids_on_page(b) == failed[::-1][50:],
             "tasks: newest first, page 2 continues where page 1 ended while tasks arrived")

    # ---- oldest first, selectable ----
    b.go(f"#/services/{svc}/tasks")
    b.wait("document.querySelector('#task-filters select[name=order]')", what="filters")
    b.eval("document.querySelector('#task-filters select[name=status]').value = 'failed';"
           "document.querySelector('#task-filters select[name=order]').value = 'oldest'")
    b.click("#task-filters button[type=submit]")
    wait_first(b, failed[0], "oldest first")
    fx.check(ids_on_page(b) == failed[:50], "tasks: oldest first when chosen")
    b.click("#next-page")
    wait_rows(b, N_FAILED - 50 + 3, "page 2, oldest first")
    fx.check(ids_on_page(b)[:5] == failed[50:], "tasks: oldest first, page 2 continues, new at the end")

    # ---- search by task data ----
    fx.queue.update_one({"_id": ObjectId(failed[7])}, {"$set": {"data": {"customer": {"id": 42}}}})
    b.go(f"#/services/{svc}/tasks")
    b.wait("document.querySelector('#task-filters input[name=data_path]')", what="filters")
    b.eval("document.querySelector('#task-filters input[name=data_path]').value = 'customer.id';"
           "document.querySelector('#task-filters input[name=data_value]').value = '42'")
    b.click("#task-filters button[type=submit]")
    wait_first(b, failed[7], "search by data")
    fx.check(ids_on_page(b) == [failed[7]], "search: the one task whose data.customer.id is 42")
    fx.check("among the 10000 newest tasks" in b.text("#tasks-searched"),
             "search: the bound is stated (" + b.text("#tasks-searched") + ")")
    fx.screenshot("tasks-search.png")

    # ---- retrying and scheduled views ----
    b.go(f"#/services/{svc}/tasks?view=retrying")
    wait_first(b, retrying, "retrying view")
    heads = b.eval("[...document.querySelectorAll('#tasks thead th')].map(th => th.textContent)")
    fx.check(ids_on_page(b) == [retrying] and "next run" in heads,
             f"retrying view: the task in backoff, with its next run ({heads})")
    fx.check(str(later.year) in b.text("#tasks"), "retrying view: the next run time shown")
    fx.screenshot("tasks-retrying.png")
    b.go(f"#/services/{svc}/tasks?view=scheduled")
    wait_first(b, scheduled, "scheduled view")
    fx.check(ids_on_page(b) == [scheduled], "scheduled view: the delayed task only")

    # ---- row selection: retry two chosen failures ----
    b.go(f"#/services/{svc}/tasks?status=failed")
    b.wait("document.querySelector('#selection-actions') && document.querySelectorAll("
           "'#tasks tbody tr').length === 50", what="selection actions")
    chosen = b.eval("[...document.querySelectorAll('#tasks input[type=checkbox]')].slice(3, 5)"
                    ".map(c => { c.click(); return c.dataset.id; })")
    fx.check(b.text("#selected-count") == "2 selected", "selection: the count of ticked rows")
    b.click("#selection-actions button[data-selected=retry]")  # confirm() is accepted
    ok = fx.wait_db(lambda: all(fx.queue.find_one({"_id": ObjectId(i)})["status"] != "failed"
                                for i in chosen), what="selected retried")
    fx.check(ok, "selection: Retry selected re-queued exactly the ticked tasks")
    fx.check(fx.queue.count_documents({"status": "failed"}) == N_FAILED + 3 - 2,
             "selection: every other failure left alone")
    fx.screenshot("tasks-selection.png")

    # ---- By group: bounded, sorted by count ----
    fx.queue.insert_many([{"status": "succeeded", "group": f"g{i:02}", "data": {},
                           "created_at": fx.now, "run_at": fx.now, "finished_at": fx.now,
                           "attempts": 1, "priority": 0}
                          for i in range(25) for _ in range(i + 1)])
    b.go(f"#/services/{svc}")
    b.wait("document.querySelector('table.breakdown[data-by=group]')", what="service page")
    groups = b.eval("[...document.querySelectorAll('table.breakdown[data-by=group] tbody tr')]"
                    ".map(tr => tr.children[0].textContent + ':' + tr.children[1].textContent)")
    ungrouped = fx.queue.count_documents({"group": None})  # the tasks above: the most
    want = [f"(none):{ungrouped}"] + [f"g{i:02}:{i + 1}" for i in range(24, 5, -1)]
    fx.check(groups == want, f"by group: the 20 with the most tasks, by count ({groups[:3]}...)")
    more = b.eval("(document.querySelector('.breakdown-more[data-by=group]') || {}).textContent")
    fx.check(bool(more) and more.startswith("6 more groups with 21 task(s)"),
             f"by group: a note of the rest ({more})")
    fx.screenshot("service-by-group.png")

    # ---- schedules page ----
    b.click("a[href$='/schedules']")
    b.wait("document.querySelector('#schedules')", what="schedules page")
    row = b.eval("[...document.querySelector('#schedules tbody tr').children]"
                 ".map(td => td.textContent)")
    fx.check(row[0] == "nightly" and "0 3 * * *" in row[2] and row[3] == "Europe/Berlin",
             f"schedules: id, spec and time zone ({row[:4]})")
    fx.check(row[5] not in ("", "-") and row[1] in ("active", "not started"),
             f"schedules: state and next slot ({row[1]}, {row[5]})")
    fx.check(row[-1] == ("Pause" if row[1] == "active" else "not started yet"),
             f"schedules: a Pause button for an operator ({row[-1]}; tests/ui/schedules.py "
             "clicks it)")
    fx.screenshot("schedules.png")


sys.exit(uifix.run(scenario, nodes=1,
                   extra_ini="schedule.nightly = 0 3 * * * ; tz=Europe/Berlin ; catch_up=none"))
