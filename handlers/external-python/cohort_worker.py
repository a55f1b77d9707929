#!/usr/bin/env python3
"""cohort_worker.py - an external Cohort worker in Python (standard library only).

It runs a service's tasks outside the nodes, over the HTTP API (docs/API.md, "External
workers"): claim with long-poll, heartbeat while a task runs, then succeed or fail. A lease
token names one claim; an outcome sent after the lease was lost is refused (409 lease_lost)
and changes nothing, and one sent twice (a retry after a dropped connection) is answered
200 "replayed" without a second effect.

    python3 cohort_worker.py --url http://127.0.0.1:9464 --service jobs --worker py-1 \\
        [--url http://other-node:9464 ...] [--max 4] [--wait-ms 20000] [--lease-ms 30000] \\
        [--kinds mail,sms] [--handler module:function] [--journal FILE]

The token comes from --token-file FILE or the environment variable COHORT_TOKEN (a token
with the `work` scope: cohortctl tokens create NAME --scopes work). With several --url, a
node that does not answer is skipped for the next one.

The handler is a function taking the task (a dict: id, data, attempt, kind, group) and
returning a dict (the task's result) to succeed; raising Retry (or any exception) fails the
attempt to be retried after the service's backoff, raising Fail fails it for good. While it
runs, task["cancel_requested"] becomes True once an operator cancelled the running task
(cohortctl cancel SERVICE ID): a long handler may look and stop (raise Fail). Without
--handler the demo handler runs: it sleeps data["sleep_ms"] milliseconds, then fails if
data["fail"] is true, and returns {"slept_ms": ...}.

SIGTERM or SIGINT: no more claims; tasks claimed but not started are released (back to
pending, the attempt not counted), the running one finishes, then the worker exits 0.
"""

import argparse
import importlib
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request


class Retry(Exception):
    """Fail this attempt; the task runs again after the service's backoff."""


class Fail(Exception):
    """Fail the task for good (no retry)."""


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class Unreachable(Exception):
    pass


def demo_handler(task):
    data = task.get("data") or {}
    ms = int(data.get("sleep_ms", 0))
    if ms > 0:
        time.sleep(ms / 1000.0)
    if data.get("fail"):
        raise Fail(data.get("fail") if isinstance(data.get("fail"), str) else "asked to fail")
    return {"slept_ms": ms}


class Client:
    """The API's calls, with failover between nodes. Thread-safe (no shared connection)."""

    def __init__(self, urls, token, timeout_s=10.0):
        self.urls = [u.rstrip("/") for u in urls]
        self.token = token
        self.timeout_s = timeout_s
        self.current = 0
        self.lock = threading.Lock()

    def call(self, path, body, timeout_s=None):
        """POSTs `body` to every node in turn until one answers; returns (status, reply)."""
        data = json.dumps(body).encode()
        tried = 0
        while True:
            with self.lock:
                base = self.urls[self.current]
            request = urllib.request.Request(
                base + "/api/v1" + path, data=data, method="POST",
                headers={"Authorization": "Bearer " + self.token,
                         "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=timeout_s or self.timeout_s) as r:
                    return r.status, json.loads(r.read() or b"{}")
            except urllib.error.HTTPError as e:
                try:
                    err = json.loads(e.read() or b"{}").get("error", {})
                except ValueError:
                    err = {}
                if e.code == 503:  # that node's database is away: try another
                    pass
                else:
                    raise ApiError(e.code, err.get("code", "?"), err.get("message", ""))
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            with self.lock:
                if self.urls[self.current] == base:
                    self.current = (self.current + 1) % len(self.urls)
            tried += 1
            if tried % len(self.urls) == 0:
                time.sleep(0.2)
            if tried >= 50 * len(self.urls):
                raise Unreachable("no node answered " + path)


class Worker:
    def __init__(self, args, handler, token):
        self.args = args
        self.handler = handler
        self.client = Client(args.url, token, timeout_s=max(10.0, args.wait_ms / 1000.0 + 10))
        self.stopping = threading.Event()
        self.held = {}  # lease token -> [task, renew_at (monotonic)]
        self.held_lock = threading.Lock()
        self.journal_lock = threading.Lock()
        self.journal = open(args.journal, "a", buffering=1) if args.journal else None

    def record(self, **entry):
        if not self.journal:
            return
        entry["worker"] = self.args.worker
        entry["at"] = time.time()
        with self.journal_lock:
            self.journal.write(json.dumps(entry) + "\n")

    def log(self, message):
        print(f"{self.args.worker}: {message}", file=sys.stderr, flush=True)

    # ---- leases -------------------------------------------------------------------------

    def hold(self, task):
        with self.held_lock:
            self.held[task["lease"]["token"]] = [task, self.renew_at()]

    def drop(self, token):
        with self.held_lock:
            self.held.pop(token, None)

    def renew_at(self):
        return time.monotonic() + self.args.lease_ms / 3000.0

    def heartbeats(self):
        """Extends every held lease once a third of it has passed."""
        while True:
            time.sleep(0.1)
            now = time.monotonic()
            with self.held_lock:
                due = [(t, e[0]) for t, e in self.held.items() if e[1] <= now]
            for token, task in due:
                try:
                    _, reply = self.client.call(f"/leases/{token}/heartbeat",
                                                {"lease_ms": self.args.lease_ms})
                    if reply.get("cancel_requested"):
                        task["cancel_requested"] = True
                    with self.held_lock:
                        if token in self.held:
                            self.held[token][1] = self.renew_at()
                except ApiError as e:
                    self.log(f"task {task['id']}: heartbeat refused ({e}); dropping it")
                    self.record(call="heartbeat", task=task["id"], attempt=task["attempt"],
                                lease=token, status=e.status, code=e.code)
                    self.drop(token)
                except Unreachable as e:
                    self.log(f"heartbeat: {e}")
            if self.stopping.is_set() and not self.held:
                return

    # ---- outcomes -----------------------------------------------------------------------

    def report(self, task, call, body):
        token = task["lease"]["token"]
        try:
            status, reply = self.client.call(f"/leases/{token}/{call}", body)
            self.record(call=call, task=task["id"], attempt=task["attempt"], lease=token,
                        status=status, replayed=bool(reply.get("replayed")),
                        result=reply.get("status"))
        except ApiError as e:
            self.log(f"task {task['id']} attempt {task['attempt']}: {call} refused: {e}")
            self.record(call=call, task=task["id"], attempt=task["attempt"], lease=token,
                        status=e.status, code=e.code)
        except Unreachable as e:
            self.log(f"task {task['id']}: {call}: {e} (the lease runs out; it runs again)")
        finally:
            self.drop(token)

    def run_task(self, task):
        try:
            result = self.handler(task)
            self.report(task, "succeed", {"result": result if isinstance(result, dict) else {}})
        except Fail as e:
            self.report(task, "fail", {"error": str(e)[:4000] or "failed", "retry": False})
        except Exception as e:  # a bug or a transient failure: retried with backoff
            self.report(task, "fail", {"error": f"{type(e).__name__}: {e}"[:4000],
                                       "retry": True})

    # ---- the loop -----------------------------------------------------------------------

    def claim(self):
        body = {"worker": self.args.worker, "max": self.args.max,
                "wait_ms": self.args.wait_ms, "lease_ms": self.args.lease_ms}
        if self.args.kinds:
            body["kinds"] = self.args.kinds.split(",")
        _, reply = self.client.call(f"/services/{self.args.service}/claims", body)
        tasks = reply.get("tasks", [])
        for task in tasks:
            self.hold(task)
            self.record(call="claim", task=task["id"], attempt=task["attempt"],
                        lease=task["lease"]["token"], status=200)
        return tasks

    def run(self):
        beat = threading.Thread(target=self.heartbeats, daemon=True)
        beat.start()
        idle_since = time.monotonic()
        while not self.stopping.is_set():
            try:
                tasks = self.claim()
            except ApiError as e:
                self.log(f"claim refused: {e}")
                if e.status in (400, 401, 403, 404, 409):
                    return 2
                time.sleep(1)
                continue
            except Unreachable as e:
                self.log(str(e))
                continue
            if tasks:
                idle_since = time.monotonic()
            elif self.args.exit_when_idle and \
                    time.monotonic() - idle_since > self.args.exit_when_idle:
                break
            for i, task in enumerate(tasks):
                if self.stopping.is_set():  # give back what was not started
                    for rest in tasks[i:]:
                        self.report(rest, "release", {})
                    break
                self.run_task(task)
        self.stopping.set()
        beat.join()
        return 0


def load_handler(spec):
    if not spec:
        return demo_handler
    module, _, function = spec.partition(":")
    return getattr(importlib.import_module(module), function or "handle")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", action="append", required=True,
                   help="a node's http_listen, e.g. http://127.0.0.1:9464 (repeat for failover)")
    p.add_argument("--service", required=True)
    p.add_argument("--worker", required=True, help="this worker's name, 1-64 of [A-Za-z0-9_.-]")
    p.add_argument("--token-file", help="a file holding the token (else $COHORT_TOKEN)")
    p.add_argument("--max", type=int, default=1, help="tasks per claim (1-100)")
    p.add_argument("--wait-ms", type=int, default=20000, help="long-poll wait per claim")
    p.add_argument("--lease-ms", type=int, default=30000, help="lease per task, renewed at 1/3")
    p.add_argument("--kinds", help="comma-separated kinds to claim (default: any)")
    p.add_argument("--handler", help="module:function (default: the demo handler)")
    p.add_argument("--journal", help="append one JSON line per call's outcome (for tests)")
    p.add_argument("--exit-when-idle", type=float, default=0,
                   help="exit after this many seconds without a task (0: never)")
    args = p.parse_args(argv)
    token = os.environ.get("COHORT_TOKEN", "")
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    if not token:
        p.error("no token: give --token-file or set COHORT_TOKEN")
    worker = Worker(args, load_handler(args.handler), token)

    def stop(signum, frame):
        worker.log(f"{signal.Signals(signum).name}: finishing the running task, then exiting")
        worker.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return worker.run()


if __name__ == "__main__":
    sys.exit(main())
