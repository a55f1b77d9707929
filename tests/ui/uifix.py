"""uifix.py - what every browser test of the dashboard (label `ui`) stands on.

A test script does:

    import uifix
    def scenario(fx):              # fx: a uifix.Fixture, the node(s) already ready
        b = fx.sign_in("operate")  # headless Chromium signed in through `cohortctl ui-link`
        fx.check(..., "what it shows")
    sys.exit(uifix.run(scenario, nodes=1))

run() reads the command line (BUILD_DIR [--screenshots DIR]) and MONGODB_URI, starts the
nodes (noop handler, http_listen on free ports) in a fresh database, calls the scenario, and
always cleans up: the browser, the nodes, the database. A step that raises fails the test with
its reason and the page's text. Exit 0 if every check passed, 1 otherwise, 77 if chromium or a
Python module is missing.
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
except ImportError as e:  # the caller's run() turns this into a skip
    cdp = None
    IMPORT_ERROR = e
else:
    IMPORT_ERROR = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, method, path, token=None, body=None, timeout=10):
    """One request to a node; returns (status, parsed JSON or text)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            try:
                return r.status, json.loads(raw or b"null")
            except ValueError:
                return r.status, raw.decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


class Node:
    """One cohortd process of the fixture: its id, port, config file and log."""

    def __init__(self, fx, index, extra_ini):
        self.node_id = f"ui-node-{index}"
        self.port = free_port()
        self.ini = os.path.join(fx.tmp, f"{self.node_id}.ini")
        self.log_path = os.path.join(fx.tmp, f"{self.node_id}.log")
        self.extra_ini = extra_ini
        self.fx = fx
        self.proc = None
        self.log = None
        with open(self.ini, "w") as f:
            f.write(f"""[cluster]
mongodb_uri = {fx.uri}
database    = {fx.dbname}
tick_ms     = 500
takeover_ms = 3000
node_id     = {self.node_id}
http_listen = 127.0.0.1:{self.port}
log_level   = info

[service:{fx.service}]
handler = {fx.build}/handlers/cohort_noop.so
workers = 1
{extra_ini}
""")

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready_within=30):
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen([f"{self.fx.build}/cohortd", "-c", self.ini],
                                     stdout=self.log, stderr=self.log)
        deadline = time.time() + ready_within
        while time.time() < deadline:
            try:
                if http(self.port, "GET", "/readyz", timeout=2)[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.2)
        return False

    def stop(self, kill=False):
        if not self.proc:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        self.log.close()


class Fixture:
    """The nodes, the database, the admin token and the browser of one test run."""

    def __init__(self, build, shots, service="web"):
        self.build = build
        self.shots = shots
        self.service = service
        self.uri = os.environ.get("MONGODB_URI", "mongodb://127.0.0.1:27017")
        self.dbname = f"ui_test_{os.getpid()}_{int(time.time())}"
        self.mongo = pymongo.MongoClient(self.uri)
        self.db = self.mongo[self.dbname]
        self.tmp = tempfile.mkdtemp(prefix="cohort-ui-test-")
        self.nodes = []
        self.browser = None
        self.token = None
        self.failures = []
        self.page_errors_checked = False
        self.now = datetime.datetime.now(datetime.timezone.utc)

    # ---- checks ----
    def check(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            self.failures.append(what)
        return cond

    def check_page_errors(self):
        """No script error or CSP violation so far. run() checks it at the end unless the
        scenario did (a scenario that provokes an expected error checks before it)."""
        self.page_errors_checked = True
        errors = self.browser.errors if self.browser else []
        return self.check(not errors, "no script error or CSP violation: " + "; ".join(errors))

    def screenshot(self, name):
        """Saves the page as docs-ready PNG when --screenshots was given."""
        if self.shots and self.browser:
            self.browser.screenshot(os.path.join(self.shots, name))

    # ---- the cluster ----
    @property
    def node(self):
        return self.nodes[0]

    @property
    def port(self):
        return self.nodes[0].port

    @property
    def base(self):
        return self.nodes[0].base

    @property
    def queue(self):
        return self.db[f"queue_{self.service}"]

    def ctl(self, *args, check=True):
        """Runs cohortctl on the first node's config; returns its stdout."""
        r = subprocess.run([f"{self.build}/cohortctl", "-c", self.node.ini, *args], check=check,
                           capture_output=True, text=True)
        return r.stdout.strip()

    def start_nodes(self, count, extra_ini=""):
        for i in range(count):
            node = Node(self, len(self.nodes) + 1, extra_ini)
            self.nodes.append(node)
            if not node.start():
                raise RuntimeError(f"{node.node_id} not ready within 30 s ({node.log_path})")
        if self.token is None:
            self.token = self.ctl("tokens", "create", "uitest", "--scopes", "admin")

    def api(self, method, path, body=None, node=None):
        return http((node or self.node).port, method, path, self.token, body)

    def task(self, status, **extra):
        """Writes a task as a node would leave it; returns its id."""
        doc = {"status": status, "data": {"order": 42}, "created_at": self.now,
               "run_at": self.now, "attempts": 1, "priority": 0, "base_priority": 0,
               "weight": 1, "created_by": "uitest"}
        doc.update(extra)
        return self.queue.insert_one(doc).inserted_id

    def wait_db(self, cond, timeout=20, what="the database"):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if cond():
                return True
            if self.browser:
                self.browser.eval("1")  # reads the browser's events (dialogs) meanwhile
            time.sleep(0.2)
        return False

    # ---- the browser ----
    def link(self, scopes, node=None):
        """A one-time sign-in link of `cohortctl ui-link` (for the first node by default)."""
        args = ["ui-link", "--scopes", scopes]
        out = self.ctl(*args)
        if node is not None and node is not self.node:
            out = out.replace(self.node.base, node.base)
        return out

    def sign_in(self, scopes="operate"):
        if self.browser is None:
            self.browser = cdp.Browser()
        b = self.browser
        b.navigate(self.link(scopes))
        want = "read-only" if scopes == "read" else scopes
        b.wait("location.pathname === '/ui/' && document.getElementById('who')"
               f" && document.getElementById('who').textContent.includes('{want}')",
               what=f"signed in with {scopes}")
        return b

    def close(self):
        if self.browser:
            self.browser.close()
            self.browser = None
        for node in self.nodes:
            node.stop()
        self.mongo.drop_database(self.dbname)


def run(scenario, nodes=1, extra_ini="", service="web"):
    """The main of a browser test: see the module's comment."""
    if IMPORT_ERROR is not None:
        print(f"SKIP: {IMPORT_ERROR} (COHORT_TEST_TOOLS=1 bash deploy/setup.sh installs it)")
        return 77
    if len(sys.argv) < 2:
        print(sys.modules["__main__"].__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    shots = None
    if "--screenshots" in sys.argv:
        shots = os.path.abspath(sys.argv[sys.argv.index("--screenshots") + 1])
        os.makedirs(shots, exist_ok=True)
    if not cdp.find_chromium():
        print("SKIP: no chromium (COHORT_TEST_TOOLS=1 bash deploy/setup.sh installs it)")
        return 77
    fx = Fixture(build, shots, service)
    try:
        if nodes:
            fx.start_nodes(nodes, extra_ini)
        scenario(fx)
        if not fx.page_errors_checked:
            fx.check_page_errors()
    except Exception as e:  # a step that could not run fails the test, with its reason
        fx.check(False, f"{type(e).__name__}: {e}")
        if fx.browser:
            try:
                print("  page status:", fx.browser.text("#status")
                      or fx.browser.text("#login-status"))
                print("  page text:", (fx.browser.text("main") or "")[:500])
            except Exception:
                pass
            print("  browser errors:", fx.browser.errors)
    finally:
        fx.close()
    if fx.failures:
        print(f"{len(fx.failures)} check(s) failed; node logs: {fx.tmp}")
        return 1
    print("all checks passed")
    return 0
