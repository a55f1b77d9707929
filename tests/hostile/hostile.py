#!/usr/bin/python3
"""hostile.py - the HTTP API against careless and hostile clients (issue 23; ctest label
`hostile`, about 30 s).

Usage: hostile.py BUILD_DIR [--only CLASS[,CLASS...]] [--keep]   (MONGODB_URI: the database)

Starts one real cohortd (HTTP API on a free port, five services run by external workers, so
no task runs unless a probe claims it) in a fresh database, makes API tokens of each scope
with cohortctl, enqueues a few due tasks for a stray write to show on, then runs every class
of probe, each as a second process would: auth and scopes, paths, JSON shapes and sizes,
integers, duplicate keys, trailing bytes, framing (raw sockets), slow and idle connections,
abandoned long-polls, lease tokens (guessing, forging, replay), cookies and one-time codes,
and the size of a page. What each request must get is one table, expect.py.

After EACH probe the suite checks that the node still answers /healthz, and (unless the
probe means to write) that nothing was written: the tasks of every queue (all but `data`,
which no refused request can reach without a task appearing), the services' switches and
live settings, the tokens and sessions; an audit entry may appear only for a refusal
(status >= 400). At the end the node must stop cleanly on SIGTERM.

Exit 0 if every check passed, 1 otherwise (the failed checks are listed with the defect of
issue 23 each names), 77 without pymongo.
"""

import datetime
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import pymongo  # Debian's python3-pymongo
    from bson import ObjectId
except ImportError as e:
    # A python3 other than the system's (pyenv, a venv) lacks Debian's package.
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and \
            os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print(f"SKIP: {e} (apt-get install python3-pymongo)")
    sys.exit(77)

import wire  # noqa: E402
from expect import EXPECT, KINDS_TAKE_KINDLESS, PAGE_REPLY_MAX  # noqa: E402

TICK_MS = 250
MAX_CONNECTIONS = 64
LONG_LEASE_MS = 600000  # no lease a probe takes runs out during the suite
SERVICES = ("hostile", "lease", "polls", "kinds", "big")
P = "/api/v1/services/hostile"
TWO_64 = 2 ** 64


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the node --------------------------------------------------------------------------------

class Node:
    """One cohortd with the API, every service external, in its own database."""

    def __init__(self, build, uri, dbname, workdir):
        self.build = build
        self.port = free_port()
        self.ini = os.path.join(workdir, "node.ini")
        self.log_path = os.path.join(workdir, "node.log")
        sections = "".join(f"\n[service:{s}]\nhandler = external\nmax_attempts = 3\n"
                           for s in SERVICES)
        with open(self.ini, "w") as f:
            f.write(f"""# the hostile-client suite's node (tests/hostile/hostile.py)
[cluster]
mongodb_uri = {uri}
database    = {dbname}
tick_ms     = {TICK_MS}
takeover_ms = 2000
node_id     = hostile-node
http_listen = 127.0.0.1:{self.port}
http_max_connections = {MAX_CONNECTIONS}
log_level   = info
{sections}""")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([f"{build}/cohortd", "-c", self.ini], stdout=self.log,
                                     stderr=self.log)

    def wait_ready(self, seconds=30):
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                if wire.request(self.port, "GET", "/readyz", timeout=2).status == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.2)
        return False

    def ctl(self, *args):
        return subprocess.run([f"{self.build}/cohortctl", "-c", self.ini, *args], check=True,
                              capture_output=True, text=True).stdout.strip()

    def token(self, name, scopes):
        return self.ctl("tokens", "create", name, "--scopes", scopes)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait()
        return self.proc.returncode


# ---- what a refused request must not change --------------------------------------------------

class Snapshot:
    """Everything a request could write, but the audit trail (read apart: a refusal may add
    its own entry) and `data` (no refused request reaches it without a task appearing)."""

    def __init__(self, db):
        self.state = {}
        for name in sorted(db.list_collection_names()):
            if name.startswith("queue_"):
                docs = db[name].find({}, {"data": 0}).sort("_id", 1)
                self.state[name] = [repr(sorted(d.items())) for d in docs]
        self.state["services"] = [
            repr((d["_id"], d.get("pause"), d.get("block"), d.get("settings")))
            for d in db.services.find({}).sort("_id", 1)]
        self.state["tokens"] = [d["_id"] for d in db.tokens.find({}, {"_id": 1}).sort("_id", 1)]
        self.state["ui_sessions"] = db.ui_sessions.count_documents({})
        last = list(db.audit.find({}, {"_id": 1}).sort("_id", -1).limit(1))
        self.audit_last = last[0]["_id"] if last else None

    def writes_since(self, db):
        """What changed since this snapshot, as a list of lines (empty: nothing)."""
        now = Snapshot(db)
        out = []
        for key in sorted(set(self.state) | set(now.state)):
            a, b = self.state.get(key), now.state.get(key)
            if a == b:
                continue
            if isinstance(a, list) and isinstance(b, list):
                gone = [x for x in a if x not in b]
                new = [x for x in b if x not in a]
                out.append(f"{key}: {len(a)} -> {len(b)} documents; changed or new: "
                           f"{[x[:200] for x in new[:2]]}; before: {[x[:200] for x in gone[:2]]}")
            else:
                out.append(f"{key}: {str(a)[:200]} -> {str(b)[:200]}")
        query = {"_id": {"$gt": self.audit_last}} if self.audit_last else {}
        for entry in db.audit.find(query):
            if int(entry.get("status") or 0) < 400:
                out.append(f"audit: an entry for a request that was done: {entry}")
        return out


# ---- the suite -------------------------------------------------------------------------------

PROBES = []


def probe(cls, writes=False):
    """Registers a probe of class `cls`. `writes`: the probe means to write (a claim, a
    sign-in), so the nothing-written check is its own business."""
    def register(fn):
        PROBES.append((cls, fn, writes))
        return fn
    return register


class Suite:
    def __init__(self, node, db):
        self.node = node
        self.port = node.port
        self.db = db
        self.failures = []  # (probe, key, what, fix)
        self.checks = 0
        self.current = ""
        self.before = None
        self.tokens = {}
        self.state = {}
        self.dead = False

    # -- requests --
    def api(self, method, path, token=None, body=None, headers=None, timeout=10.0):
        return wire.request(self.port, method, path, token=token, body=body, headers=headers,
                            timeout=timeout)

    def raw(self, method, path, token=None, body=b"", extra="", expect=1, close_wait=1.0):
        """A request written by hand, kept alive: (responses, closed, leftover)."""
        if isinstance(body, str):
            body = body.encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if token:
            head += f"Authorization: Bearer {token}\r\n"
        if body and "Content-Length" not in extra and "Transfer-Encoding" not in extra:
            head += f"Content-Length: {len(body)}\r\n"
        return wire.exchange(self.port, head.encode() + extra.encode() + b"\r\n" + body,
                             expect=expect, close_wait=close_wait)

    def enqueue(self, service, body, token=None):
        return self.api("POST", f"/api/v1/services/{service}/tasks",
                        token or self.tokens["enqueue"], body)

    # -- checks --
    def _record(self, key, problems, seen):
        self.checks += 1
        e = EXPECT[key]
        if not problems:
            print(f"ok   {key}", flush=True)
            return True
        fix = f"  [defect {e.fix}]" if e.fix else ""
        what = "; ".join(problems)
        print(f"FAIL {key}: {what} (got {seen}){fix}", flush=True)
        self.failures.append((self.current, key, what, e.fix))
        return False

    def want(self, key, resp, closed=None, also=None):
        """`resp` (a wire.Response or None) against EXPECT[key]; `closed`: whether the server
        closed the connection; `also`: a further problem found by the probe, or None."""
        e = EXPECT[key]
        problems = []
        if resp is None:
            problems.append("no response")
        else:
            if resp.status not in e.status:
                problems.append(f"status {resp.status}, not {sorted(e.status)}")
            if e.json and resp.status >= 400:
                ctype = resp.header("content-type") or ""
                if not ctype.startswith("application/json") or resp.error_code() is None:
                    problems.append("not the API's JSON error")
                else:
                    if e.code and resp.error_code() != e.code:
                        problems.append(f"code {resp.error_code()!r}, not {e.code!r}")
                    if e.names and e.names not in resp.error_message():
                        problems.append(f"the message does not name {e.names!r}")
        if e.close is not None and closed is not None and closed != e.close:
            problems.append("the connection was closed" if closed else
                            "the connection was left open")
        if also:
            problems.append(also)
        return self._record(key, problems, resp)

    def want_true(self, key, cond, detail):
        return self._record(key, [] if cond else [detail], "")

    def audit_entry(self, path, status, since, seconds=3.0):
        """Waits for an audit entry of `path` with `status` newer than `since` (an ObjectId
        or None): the API writes it after answering."""
        query = {"path": path, "status": status}
        if since:
            query["_id"] = {"$gt": since}
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.db.audit.count_documents(query):
                return True
            time.sleep(0.1)
        return False

    def audit_last(self):
        last = list(self.db.audit.find({}, {"_id": 1}).sort("_id", -1).limit(1))
        return last[0]["_id"] if last else None

    def baseline(self):
        """A probe that had to write to set up (a claim) starts its nothing-written check
        here."""
        self.before = Snapshot(self.db)

    def alive(self):
        if self.node.proc.poll() is not None:
            return f"cohortd exited with {self.node.proc.returncode}"
        try:
            r = wire.request(self.port, "GET", "/healthz", timeout=3)
        except (OSError, wire.Closed) as e:
            return f"/healthz did not answer: {e!r}"
        if r.status != 200 or r.body != b"ok\n":
            return f"/healthz answered {r.status} {r.body[:80]!r}"
        return None

    def run(self, only):
        for cls, fn, writes in PROBES:
            if only and cls not in only:
                continue
            if self.dead:
                break
            self.current = f"{cls}/{fn.__name__}"
            print(f"---- {self.current}", flush=True)
            self.before = None if writes else Snapshot(self.db)
            try:
                fn(self)
            except Exception as e:  # a probe that broke is a failed check, not a crash
                self.checks += 1
                print(f"FAIL {self.current}: the probe raised {e!r}", flush=True)
                self.failures.append((self.current, self.current, repr(e), None))
            self.checks += 1
            why = self.alive()
            if why:
                print(f"FAIL {self.current}: the node no longer answers: {why}", flush=True)
                self.failures.append((self.current, "node alive", why, None))
                self.dead = True
                continue
            if self.before is not None:
                self.checks += 1
                time.sleep(0.1)  # an audit entry is written just after its answer
                wrote = self.before.writes_since(self.db)
                if wrote:
                    # Written by the requests this probe found answered wrongly, if any.
                    fixes = sorted({f for p, _, _, f in self.failures if p == self.current and f})
                    print(f"FAIL {self.current}: a refused request wrote: {wrote}", flush=True)
                    self.failures.append((self.current, "nothing written", "; ".join(wrote),
                                          ", ".join(fixes) or None))


# ---- auth and scopes -------------------------------------------------------------------------

@probe("auth")
def no_or_bad_token(s):
    s.want("auth.no_token", s.api("GET", "/api/v1/services"))
    s.want("auth.malformed_token", s.api("GET", "/api/v1/services",
                                         headers={"Authorization": "Bearer abc"}))
    s.want("auth.unknown_token", s.api("GET", "/api/v1/services", "cht_" + "A" * 43))
    s.want("auth.basic_scheme", s.api("GET", "/api/v1/services",
                                      headers={"Authorization": "Basic dXNlcjpwYXNz"}))
    s.want("auth.token_in_query",
           s.api("GET", "/api/v1/services?access_token=" + s.tokens["admin"]))


@probe("auth")
def scopes(s):
    t = s.tokens
    s.want("auth.read_cannot_enqueue", s.enqueue("hostile", {"data": {}}, t["read"]))
    s.want("auth.enqueue_cannot_operate", s.api("POST", f"{P}/pause", t["enqueue"], {}))
    s.want("auth.work_cannot_read", s.api("GET", f"{P}/tasks", t["work"]))
    s.want("auth.read_cannot_claim", s.api("POST", f"{P}/claims", t["read"], {"worker": "w"}))


@probe("auth")
def revoked_token(s):
    token = s.node.token("h-revoked", "read")
    first = s.api("GET", "/api/v1/services", token)
    s.node.ctl("tokens", "revoke", "h-revoked")
    time.sleep(3 * TICK_MS / 1000 + 0.5)  # a node trusts a token for one tick
    s.want("auth.revoked", s.api("GET", "/api/v1/services", token),
           also=None if first.status == 200 else f"before revoking: {first.status}")


@probe("auth")
def unauthenticated_operator_call(s):
    since = s.audit_last()
    s.want("auth.operate_401", s.api("POST", f"{P}/pause", body={"reason": "x"}))
    s.want_true("auth.operate_401_audited", s.audit_entry(f"{P}/pause", 401, since),
                "no audit entry for a 401 on an operator endpoint")


# ---- paths -----------------------------------------------------------------------------------

@probe("paths")
def traversal_and_encoding(s):
    r = s.tokens["read"]
    s.want("paths.dotdot_service", s.api("GET", "/api/v1/services/../tasks", r))
    s.want("paths.encoded_dotdot", s.api("GET", "/api/v1/services/%2e%2e/tasks", r))
    s.want("paths.encoded_slash", s.api("GET", "/api/v1/services/hostile%2ftasks/tasks", r))
    s.want("paths.bad_task_id", s.api("GET", f"{P}/tasks/..%2f..%2fetc%2fpasswd", r))
    s.want("paths.nul_in_path", s.api("GET", "/api/v1/services/host%00ile/tasks", r))
    s.want("paths.nul_in_query", s.api("GET", f"{P}/tasks?status=pending%00x", r))
    for path in ("/ui/../../../../etc/passwd", "/ui/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
                 "/ui/..%2f..%2f..%2fetc%2fpasswd"):
        resp = s.api("GET", path)
        s.want("paths.ui_traversal", resp,
               also="the reply holds /etc/passwd" if b"root:" in resp.body else None)
    s.want("paths.long_path", s.api("GET", "/api/v1/services/" + "a" * 7000 + "/tasks", r))
    s.want("paths.unknown", s.api("GET", "/api/v1/nothing-here", r))
    resp = s.api("DELETE", "/api/v1/services", r)
    s.want("paths.method", resp, also=None if resp.header("allow") else "no Allow header")


@probe("paths")
def head_requests(s):
    for key, path, token in (("paths.head_api", "/api/v1/services", s.tokens["read"]),
                             ("paths.head_healthz", "/healthz", None)):
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        raw = f"HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n"
        rs, closed, leftover = wire.exchange(s.port, raw.encode(), head=True)
        s.want(key, rs[0] if rs else None,
               also=f"{len(leftover)} body bytes after a HEAD reply" if leftover else None)


@probe("paths")
def ui_security_headers(s):
    resp = s.api("GET", "/ui/")
    missing = [h for h in ("content-security-policy", "x-content-type-options",
                           "x-frame-options") if not resp.header(h)]
    s.want("paths.ui_headers", resp, also=f"missing {missing}" if missing else None)


# ---- JSON shapes and sizes -------------------------------------------------------------------

@probe("json")
def shapes(s):
    e = s.tokens["enqueue"]
    deep = '{"data": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}"
    s.want("json.nesting_object", s.enqueue("hostile", deep))
    wide = '{"data": {"a": ' + "[" * 100000 + "]" * 100000 + "}}"
    s.want("json.nesting_array", s.enqueue("hostile", wide))
    for body in ("[1, 2]", '"text"', "null", "12", '{"data": '):
        s.want("json.not_object", s.enqueue("hostile", body))
    s.want("json.invalid_utf8", s.enqueue("hostile", b'{"data": {"a": "\xff\xfe"}}'))
    s.want("json.unknown_field", s.enqueue("hostile", {"colour": "red"}))
    s.want("json.wrong_type", s.enqueue("hostile", {"priority": "high"}))
    s.want("json.batch_too_many", s.api("POST", f"{P}/tasks:batch", e,
                                        {"tasks": [{"data": {"n": i}} for i in range(1001)]}))
    s.want("json.batch_empty", s.api("POST", f"{P}/tasks:batch", e, {"tasks": []}))


@probe("json")
def keys_the_database_refuses(s):
    s.want("json.empty_key", s.enqueue("hostile", {"data": {"": 1}}))
    s.want("json.batch_empty_key",
           s.api("POST", f"{P}/tasks:batch", s.tokens["enqueue"],
                 {"tasks": [{"data": {"first": 1}}, {"data": {"": 1}}]}))


@probe("json")
def bodies_over_the_limit(s):
    e = s.tokens["enqueue"]
    rs, closed, _ = s.raw("POST", f"{P}/tasks", e, extra="Content-Length: 2000000\r\n")
    s.want("json.over_limit_length", rs[0] if rs else None, closed)
    c = wire.Conn(s.port, timeout=10)
    try:
        c.send(f"POST {P}/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {e}\r\n"
               "Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n" % 65536 + b"a" * 65536 + b"\r\n"
        try:
            for _ in range(20):  # 1.25 MiB, past the 1 MiB limit
                c.send(chunk)
        except OSError:
            pass  # the node closed it part way: the answer is in the socket's buffer
        try:
            resp = c.response(10)
        except (wire.Closed, socket.timeout):
            resp = None
        s.want("json.over_limit_chunked", resp, c.closed_within(2))
    finally:
        c.close()


@probe("json", writes=True)
def trailing_whitespace_is_fine(s):
    before = s.db.queue_hostile.count_documents({})
    s.want("json.trailing_whitespace", s.enqueue("hostile", '{"data": {"ws": 1}}\r\n  \n'))
    after = s.db.queue_hostile.count_documents({})
    s.want_true("json.trailing_whitespace", after == before + 1,
                f"{after - before} tasks created, not 1")


# ---- integers --------------------------------------------------------------------------------

@probe("int")
def integers_outside_int64(s):
    s.want("int.priority_2p64", s.enqueue("hostile", '{"priority": %d}' % (TWO_64 + 5)))
    s.want("int.priority_2p63", s.enqueue("hostile", '{"priority": %d}' % 2 ** 63))
    s.want("int.priority_below_int64",
           s.enqueue("hostile", '{"priority": %d}' % (-2 ** 63 - 1)))
    s.want("int.weight_2p65", s.enqueue("hostile", '{"weight": %d}' % (2 ** 65 + 7)))
    s.want("int.delay_2p64", s.enqueue("hostile", '{"delay_ms": %d}' % (TWO_64 + 60000)))
    s.want("int.data_2p64", s.enqueue("hostile", '{"data": {"n": %d}}' % (TWO_64 + 5)))
    s.want("int.limit_2p64", s.api("GET", f"{P}/tasks?limit={TWO_64 + 1}", s.tokens["read"]))


@probe("int")
def integers_in_claims_and_settings(s):
    w = s.tokens["work"]
    # Wrapped, these are max 1 and a lease of 1 s: a claim of a due task, written.
    s.want("int.claim_max_2p64", s.api("POST", f"{P}/claims", w,
                                       '{"worker": "h-int", "max": %d}' % (TWO_64 + 1)))
    s.want("int.claim_lease_2p64",
           s.api("POST", f"{P}/claims", w,
                 '{"worker": "h-int", "lease_ms": %d}' % (TWO_64 + 600000)))
    # Wrapped, the node's own tick_ms: a live setting written to the config document.
    s.want("int.settings_2p64", s.api("PATCH", f"{P}/settings", s.tokens["operate"],
                                      '{"tick_ms": %d}' % (TWO_64 + TICK_MS)))


# ---- duplicate keys --------------------------------------------------------------------------

@probe("dup")
def duplicate_keys(s):
    s.want("dup.task_field", s.enqueue("hostile", '{"priority": 1, "priority": 2}'))
    rs, closed, _ = s.raw("POST", f"{P}/tasks", s.tokens["enqueue"],
                          '{"data": {"a": 1, "a": 2}}')
    s.want("dup.data_key", rs[0] if rs else None, closed)
    s.want("dup.batch_data_key",
           s.api("POST", f"{P}/tasks:batch", s.tokens["enqueue"],
                 '{"tasks": [{"data": {"first": 1}}, {"data": {"a": 1, "a": 1}}]}'))
    o = s.tokens["operate"]
    s.want("dup.settings", s.api("PATCH", f"{P}/settings", o,
                                 '{"tick_ms": 500, "tick_ms": 600}'))
    s.want("dup.pause_body", s.api("POST", f"{P}/pause", o, '{"kind": "a", "kind": "b"}'))


# ---- trailing bytes --------------------------------------------------------------------------

@probe("trail")
def bytes_after_the_json(s):
    s.want("trail.task", s.enqueue("hostile", '{"data": {}} x'))
    s.want("trail.second_object", s.enqueue("hostile", "{}{}"))
    # A bulk cancel whose body has something after its object: the due tasks must stay.
    s.want("trail.bulk_cancel",
           s.api("POST", f"{P}/tasks:bulk", s.tokens["operate"],
                 '{"action": "cancel", "filter": {"status": "pending"}} {"oops": 1}'))


# ---- framing ---------------------------------------------------------------------------------

@probe("frame")
def content_length_games(s):
    e = s.tokens["enqueue"]
    for key, extra in (("frame.two_content_length", "Content-Length: 2\r\nContent-Length: 2\r\n"),
                       ("frame.content_length_plus", "Content-Length: +2\r\n"),
                       ("frame.content_length_negative", "Content-Length: -2\r\n"),
                       ("frame.content_length_junk", "Content-Length: 0x2\r\n"),
                       ("frame.content_length_huge",
                        "Content-Length: 99999999999999999999999\r\n")):
        rs, closed, _ = s.raw("POST", f"{P}/tasks", e, "{}", extra=extra)
        s.want(key, rs[0] if rs else None, closed)
    te = "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n"
    rs, closed, _ = s.raw("POST", f"{P}/tasks", e, "2\r\n{}\r\n0\r\n\r\n", extra=te)
    s.want("frame.cl_and_te", rs[0] if rs else None, closed)


@probe("frame")
def smuggled_request(s):
    hidden = (f"GET /api/v1/services HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              f"Authorization: Bearer {s.tokens['read']}\r\n\r\n")
    body = "{}" + hidden
    extra = f"Content-Length: 2\r\nContent-Length: {len(body)}\r\n"
    rs, closed, leftover = s.raw("POST", f"{P}/tasks", s.tokens["enqueue"], body, extra=extra,
                                 expect=2)
    also = None
    if len(rs) > 1 or leftover:
        also = f"the request hidden in the body was answered ({rs[1:] or leftover[:40]!r})"
    s.want("frame.smuggled_get", rs[0] if rs else None, closed, also=also)


@probe("frame")
def malformed_requests(s):
    rs, closed, _ = wire.exchange(s.port, b"GARBAGE\r\n\r\n")
    s.want("frame.bad_request_line", rs[0] if rs else None, closed)
    rs, closed, _ = s.raw("GET", "/healthz", extra="X-Big: " + "a" * 9000 + "\r\n")
    s.want("frame.headers_over_8k", rs[0] if rs else None, closed)


@probe("frame")
def pipelining(s):
    two = (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
           b"GET /api/v1/services HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
           s.tokens["read"].encode() + b"\r\n\r\n")
    rs, closed, _ = wire.exchange(s.port, two, expect=2, close_wait=0.5)
    s.want("frame.pipelined", rs[0] if rs else None, closed)
    s.want("frame.pipelined", rs[1] if len(rs) > 1 else None, closed,
           also=None if len(rs) > 1 and b"services" in rs[1].body else "no second answer")


# ---- slow and idle connections (the slow ones run beside the other probes) -------------------

def slow_client(port, request, dribble, out):
    """Sends `request`, then a byte every 0.5 s if `dribble`; records when the node cut it."""
    t0 = time.monotonic()
    c = wire.Conn(port, timeout=1)
    try:
        c.send(request)
        while time.monotonic() - t0 < 20:
            if c.closed_within(0.5):
                out["cut_s"] = time.monotonic() - t0
                return
            if dribble:
                try:
                    c.send(b"x")
                except OSError:
                    out["cut_s"] = time.monotonic() - t0
                    return
    finally:
        c.close()


def start_slow_clients(s):
    s.state["slowloris"], s.state["stalled"] = {}, {}
    body = b'{"data": {"stalled": 1, "x": "'
    stalled = (f"POST {P}/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Authorization: Bearer {s.tokens['enqueue']}\r\nContent-Length: 100\r\n\r\n"
               ).encode() + body
    threads = [threading.Thread(target=slow_client, daemon=True,
                                args=(s.port, b"GET /healthz HTTP/1.1\r\nX-Slow: ", True,
                                      s.state["slowloris"])),
               threading.Thread(target=slow_client, daemon=True,
                                args=(s.port, stalled, False, s.state["stalled"]))]
    for t in threads:
        t.start()
    s.state["slow_threads"] = threads


@probe("slow")
def slow_clients_are_cut(s):
    for t in s.state.get("slow_threads", []):
        t.join(25)
    for key, name in (("slow.slowloris", "slowloris"), ("slow.stalled_body", "stalled")):
        cut = s.state.get(name, {}).get("cut_s")
        # The deadline is 10 s (+ a 100 ms sweep); the upper bound leaves room for a busy box.
        s.want_true(key, cut is not None and 9.0 <= cut <= 16.0,
                    f"cut after {cut} s, not within 9..16 s" if cut else "never cut")
    s.want_true("slow.stalled_body", s.db.queue_hostile.count_documents({"data.stalled": 1}) == 0,
                "the half-sent body made a task")


@probe("slow")
def idle_flood(s):
    conns, worst = [], 0.0
    try:
        for _ in range(3 * MAX_CONNECTIONS):
            conns.append(wire.Conn(s.port))
        for _ in range(3):
            t0 = time.monotonic()
            r = wire.request(s.port, "GET", "/healthz", timeout=5)
            worst = max(worst, time.monotonic() - t0 if r.status == 200 else 99)
        gone = sum(1 for c in conns if c.closed_within(0.01))
    finally:
        for c in conns:
            c.close()
    s.want_true("idle.flood", worst < 2.0 and gone >= 2 * MAX_CONNECTIONS - 4,
                f"/healthz took {worst:.2f} s with {len(conns)} idle connections open; "
                f"{gone} of them closed by the node (cap {MAX_CONNECTIONS})")


# ---- abandoned long-polls --------------------------------------------------------------------

def claim_body(worker, **extra):
    return json.dumps(dict({"worker": worker, "lease_ms": LONG_LEASE_MS}, **extra))


@probe("poll", writes=True)
def abandoned_long_polls(s):
    w = s.tokens["work"]
    conns = []
    for i in range(3):
        body = claim_body(f"gone-{i}", wait_ms=20000).encode()
        c = wire.Conn(s.port)
        c.send(f"POST /api/v1/services/polls/claims HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Authorization: Bearer {w}\r\nContent-Length: {len(body)}\r\n\r\n".encode() +
               body)
        conns.append(c)
    time.sleep(1.0)
    held = [c for c in conns if not c.closed_within(0.01) and not c.buf]
    if len(held) != 3:
        s.want_true("poll.abandoned_claims_take_nothing", False,
                    f"set-up: {3 - len(held)} of the 3 claims were answered at once")
        return
    for c in conns:  # three workers give up their long-polls
        c.close()
    time.sleep(0.5)
    r = s.enqueue("polls", {"data": {"after": "abandoned"}})
    task = r.json()["id"]
    time.sleep(8 * TICK_MS / 1000)  # the held claims try once a tick (and on the enqueue)
    doc = s.db.queue_polls.find_one({"_id": ObjectId(task)})
    ok = s.want_true("poll.abandoned_claims_take_nothing",
                     doc["status"] == "pending" and doc.get("attempts", 0) == 0,
                     f"the task is {doc['status']} with {doc.get('attempts', 0)} attempt(s), "
                     f"claimed by {doc.get('claimed_by')!r}")
    if not ok:
        s.want_true("poll.live_worker_gets_it", False, "skipped: a dead claim holds the task")
        return
    r = s.api("POST", "/api/v1/services/polls/claims", w, claim_body("alive", wait_ms=5000))
    got = (r.json() or {}).get("tasks") or []
    s.want("poll.live_worker_gets_it", r,
           also=None if got and got[0]["id"] == task and got[0]["attempt"] == 1 else
           f"the live worker got {got}")
    if got:
        s.api("POST", f"/api/v1/leases/{got[0]['lease']['token']}/succeed", w, {})


# ---- lease tokens ----------------------------------------------------------------------------

def claim_in_thread(s, service, worker, out, token=None):
    def run():
        r = s.api("POST", f"/api/v1/services/{service}/claims", token or s.tokens["work"],
                  claim_body(worker, wait_ms=10000), timeout=15)
        out["resp"] = r
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def guesses(task_id, service, attempt, until):
    """Lease tokens an attacker computes from a task id the node made just before the claim:
    the claim token's ObjectId shares its process bytes, follows its counter, and was made
    between the task's second and now."""
    ts, proc, counter = int(task_id[:8], 16), task_id[8:18], int(task_id[18:], 16)
    for step in range(1, 5):
        for t in range(ts, until + 1):
            claim = f"{t:08x}{proc}{(counter + step) % (1 << 24):06x}"
            yield f"l1.{service}.{task_id}.{attempt}.{claim}"


@probe("lease", writes=True)
def guessed_lease_token(s):
    victim = {}
    t = claim_in_thread(s, "lease", "victim", victim)
    time.sleep(0.5)  # the victim's claim is held, waiting for work
    task = s.enqueue("lease", {"data": {"secret": "job"}}, s.tokens["attacker"]).json()["id"]
    t.join(15)
    tasks = (victim["resp"].json() or {}).get("tasks") or [] if "resp" in victim else []
    if not tasks or tasks[0]["id"] != task:
        s.want_true("lease.guessed_token", False, f"set-up: the victim claimed {tasks}")
        return
    lease = tasks[0]["lease"]["token"]
    tried, taken = 0, None
    for guess in guesses(task, "lease", 1, int(time.time()) + 1):
        tried += 1
        r = s.api("POST", f"/api/v1/leases/{guess}/succeed", s.tokens["attacker"],
                  {"result": {"by": "attacker"}})
        if r.status < 400 or tried == 1:
            taken = r
        if r.status < 400:
            break
    s.want("lease.guessed_token", taken,
           also=f"the attacker's guess number {tried} was accepted" if taken.status < 400
           else None)
    r = s.api("POST", f"/api/v1/leases/{lease}/succeed", s.tokens["work"],
              {"result": {"by": "victim"}})
    doc = s.db.queue_lease.find_one({"_id": ObjectId(task)})
    s.want("lease.victim_succeeds", r,
           also=None if not (r.json() or {}).get("replayed") and
           doc.get("result") == {"by": "victim"} else
           f"the victim's result was not stored (reply {r.body[:80]!r}, stored "
           f"{doc.get('result')})")
    outcome = [h for h in doc.get("history") or [] if h.get("outcome") == "succeeded"]
    s.want_true("lease.history_names_token",
                bool(outcome) and "h-work" in json.dumps(outcome[-1], default=str),
                f"the history does not name the token that succeeded ({outcome[-1:]})")
    s.state["done_lease"] = lease


@probe("lease")
def replays(s):
    lease = s.state.get("done_lease")
    if not lease:
        s.want_true("lease.replay_same", False, "set-up: no succeeded lease")
        return
    w = s.tokens["work"]
    r = s.api("POST", f"/api/v1/leases/{lease}/succeed", w, {"result": {"by": "victim"}})
    s.want("lease.replay_same", r,
           also=None if (r.json() or {}).get("replayed") is True else "not marked replayed")
    s.want("lease.replay_differs",
           s.api("POST", f"/api/v1/leases/{lease}/succeed", w, {"result": {"by": "other"}}))
    s.want("lease.fail_after_succeed",
           s.api("POST", f"/api/v1/leases/{lease}/fail", w, {"error": "late"}))


@probe("lease")
def forged_tokens_and_bodies(s):
    out = {}
    claim_in_thread(s, "lease", "holder", out).join(0.1)
    task = s.enqueue("lease", {"data": {"n": 2}}).json()["id"]
    deadline = time.time() + 12
    while "resp" not in out and time.time() < deadline:
        time.sleep(0.05)
    tasks = (out["resp"].json() or {}).get("tasks") if "resp" in out else None
    if not tasks:
        s.want_true("lease.forged_token", False, f"set-up: no claim ({out})")
        return
    lease = tasks[0]["lease"]["token"]
    s.baseline()  # from here on nothing may be written
    prefix, _, claim = lease.rpartition(".")
    forged = [prefix + "." + secrets.token_hex(12) for _ in range(6)]
    forged += [lease.replace(".1.", ".2."), lease.replace(".lease.", ".polls."),
               lease.replace(task, "0" * 24), prefix + "." + "0" * 24, lease[:-1],
               lease + "0", lease.upper(), lease.replace(".", "%2e"), lease + "/../x",
               prefix + "." + claim[::-1], "l1", "l1." * 40]
    w = s.tokens["work"]
    for i, token in enumerate(forged):
        action = ("heartbeat", "succeed", "fail", "release")[i % 4]
        s.want("lease.forged_token", s.api("POST", f"/api/v1/leases/{token}/{action}", w, {}))
    # Duplicate keys in a lease call's body (the lease holds: only the body is wrong).
    s.want("dup.result", s.api("POST", f"/api/v1/leases/{lease}/succeed", w,
                               '{"result": {"a": 1, "a": 2}}'))
    s.want("dup.progress", s.api("POST", f"/api/v1/leases/{lease}/heartbeat", w,
                                 '{"progress": {"a": 1, "a": 2}}'))
    s.state["held_lease"] = lease


@probe("lease", writes=True)
def kinds(s):
    e = s.tokens["enqueue"]
    s.enqueue("kinds", {"data": {"n": 1}}, e)
    s.enqueue("kinds", {"data": {"n": 2}, "kind": "sms"}, e)
    r = s.api("POST", "/api/v1/services/kinds/claims", s.tokens["work"],
              claim_body("k", kinds=["mail"]))
    got = (r.json() or {}).get("tasks") or []
    kinds_got = [t.get("kind") for t in got]
    ok = all(k == "mail" or (k is None and KINDS_TAKE_KINDLESS) for k in kinds_got)
    s.want_true("lease.kinds", r.status == 200 and ok,
                f"a claim for kinds ['mail'] got {r.status} with kinds {kinds_got}")
    for t in got:
        s.api("POST", f"/api/v1/leases/{t['lease']['token']}/release", s.tokens["work"], {})


# ---- cookies and one-time codes --------------------------------------------------------------

def sign_in(s, scopes):
    link = s.node.ctl("ui-link", "--scopes", scopes)
    code = urllib.parse.parse_qs(urllib.parse.urlparse(link).query)["code"][0]
    same = {"Sec-Fetch-Site": "same-origin"}
    return code, s.api("POST", "/api/v1/session", body={"code": code}, headers=same)


@probe("cookie", writes=True)
def one_time_codes(s):
    link = s.node.ctl("ui-link", "--scopes", "operate")
    code = urllib.parse.parse_qs(urllib.parse.urlparse(link).query)["code"][0]
    s.want("cookie.signin_cross_site", s.api("POST", "/api/v1/session", body={"code": code}))
    same = {"Sec-Fetch-Site": "same-origin"}
    r = s.api("POST", "/api/v1/session", body={"code": code}, headers=same)
    cookie = r.header("set-cookie") or ""
    s.want("cookie.signin", r, also=None if "HttpOnly" in cookie and "SameSite=Strict" in cookie
           else f"cookie {cookie!r}")
    s.state["cookie"] = cookie.split(";", 1)[0]
    s.want("cookie.code_reused",
           s.api("POST", "/api/v1/session", body={"code": code}, headers=same))


@probe("cookie")
def cross_site_requests(s):
    cookie = s.state.get("cookie", "cohort_session=none")
    since = s.audit_last()
    s.want("cookie.csrf_no_origin",
           s.api("POST", f"{P}/pause", body={"reason": "csrf"}, headers={"Cookie": cookie}))
    s.want_true("cookie.csrf_audited", s.audit_entry(f"{P}/pause", 403, since),
                "no audit entry for a refused cross-site request")
    s.want("cookie.csrf_evil_origin",
           s.api("POST", f"{P}/pause", body={}, headers={"Cookie": cookie,
                                                         "Origin": "http://evil.example"}))
    s.want("cookie.csrf_cross_site",
           s.api("POST", f"{P}/pause", body={}, headers={"Cookie": cookie,
                                                         "Sec-Fetch-Site": "cross-site"}))
    s.want("cookie.get_with_cookie", s.api("GET", "/api/v1/whoami", headers={"Cookie": cookie}))
    s.want("cookie.forged", s.api("GET", "/api/v1/services",
                                  headers={"Cookie": "cohort_session=" + "A" * 43}))
    s.want("cookie.token_wins", s.api("GET", "/api/v1/services",
                                      headers={"Cookie": cookie,
                                               "Authorization": "Bearer cht_" + "B" * 43}))


@probe("cookie", writes=True)
def read_only_link(s):
    _, r = sign_in(s, "read")
    cookie = (r.header("set-cookie") or "").split(";", 1)[0]
    before = s.db.services.find_one({"_id": "hostile"}).get("pause")
    r = s.api("POST", f"{P}/pause", body={}, headers={"Cookie": cookie,
                                                      "Sec-Fetch-Site": "same-origin"})
    after = s.db.services.find_one({"_id": "hostile"}).get("pause")
    s.want("cookie.read_link_cannot_operate", r,
           also=None if before == after else f"the service was paused: {after}")


# ---- the size of a page ----------------------------------------------------------------------

@probe("page", writes=True)
def page_bounded_by_bytes(s):
    """Tasks of almost 1 MB each, written as a node leaves them (the API's body limit is
    1 MiB): one page of all of them must not be one reply of their whole size."""
    n, blob = 20, "a" * 950000
    now = datetime.datetime.now(datetime.timezone.utc)
    s.db.queue_big.insert_many([{"status": "pending", "data": {"i": i, "blob": blob},
                                 "created_at": now, "run_at": now, "attempts": 0,
                                 "priority": 0, "created_by": "hostile"} for i in range(n)])
    try:
        r = s.api("GET", f"/api/v1/services/big/tasks?limit={n}", s.tokens["read"], timeout=60)
        doc = r.json() or {}
        items = len(doc.get("items") or [])
        s.want_true("page.bounded_by_bytes",
                    r.status == 200 and len(r.body) <= PAGE_REPLY_MAX and items >= 1 and
                    (items == n or doc.get("next")),
                    f"a page of {items} tasks was one {len(r.body) / 1e6:.1f} MB reply "
                    f"(bound {PAGE_REPLY_MAX / 1e6:.1f} MB), next {doc.get('next')!r}")
    finally:
        s.db.queue_big.delete_many({})


# ---- main ------------------------------------------------------------------------------------

def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__)
        return 2
    build = os.path.abspath(args[0])
    only = set(args[args.index("--only") + 1].split(",")) if "--only" in args else set()
    uri = os.environ.get("MONGODB_URI", "mongodb://127.0.0.1:27017")
    dbname = f"hostile_{os.getpid()}_{int(time.time())}"
    workdir = tempfile.mkdtemp(prefix="cohort-hostile-")
    mongo = pymongo.MongoClient(uri)
    db = mongo[dbname]
    node = Node(build, uri, dbname, workdir)
    t0 = time.monotonic()
    suite = None
    try:
        if not node.wait_ready():
            print(f"FAIL the node is not ready within 30 s (log: {node.log_path})")
            return 1
        suite = Suite(node, db)
        for name, scopes in (("admin", "admin"), ("read", "read"), ("enqueue", "enqueue"),
                             ("operate", "operate,read"), ("work", "work"),
                             ("attacker", "enqueue,work")):
            suite.tokens[name] = node.token(f"h-{name}", scopes)
        for i in range(5):  # due tasks for a stray claim or cancel to show on
            r = suite.enqueue("hostile", {"data": {"seed": i}})
            if r.status != 201:
                print(f"FAIL set-up: enqueue answered {r.status} {r.body[:200]!r}")
                return 1
        if not only or "slow" in only:
            start_slow_clients(suite)
        suite.run(only)
    finally:
        status = node.stop()
        mongo.drop_database(dbname)
    if status != 0:
        print(f"FAIL cohortd exited with {status} on SIGTERM (log: {node.log_path})")
        suite.failures.append(("shutdown", "shutdown", f"exit {status}", None))
    print(f"hostile: {suite.checks} checks in {time.monotonic() - t0:.0f} s, "
          f"{len(suite.failures)} failed")
    for where, key, what, fix in suite.failures:
        print(f"  {key:40} {('[' + fix + ']') if fix else '':18} {where}")
    if not suite.failures and "--keep" not in args:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"hostile: the node's config and log are in {workdir}")
    return 1 if suite.failures else 0


if __name__ == "__main__":
    sys.exit(main())
