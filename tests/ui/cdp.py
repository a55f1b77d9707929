"""cdp.py - a small driver for headless Chromium over the DevTools protocol, for the
dashboard's browser tests (tests/ui/dashboard.py).

Starts Debian's `chromium` headless with a throw-away profile and a free debugging port, talks
to one page over its WebSocket (python3-websocket), and offers what the tests need: navigate,
evaluate JavaScript (awaiting promises), wait for a condition, click, answer confirm()
dialogs, screenshots, and the console errors and exceptions the page raised (a CSP violation
is one). Debian packages only: no Selenium, no Node.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket


class BrowserError(Exception):
    pass


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, width=1280, height=800):
        exe = find_chromium()
        if not exe:
            raise BrowserError("no chromium on PATH (apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="cohort-ui-chromium-")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-dev-shm-usage",
             "--remote-debugging-port=0", "--remote-allow-origins=*",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = self._debug_port()
        page = self._page_target(port)
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30,
                                              suppress_origin=True)
        self.next_id = 0
        self.events = []
        self.errors = []  # console errors, exceptions, CSP reports
        self.dialog_answer = True
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Log.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _debug_port(self):
        path = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise BrowserError("chromium exited at start (code %s)" % self.proc.returncode)
            try:
                with open(path) as f:
                    return int(f.readline().strip())
            except (OSError, ValueError):
                time.sleep(0.1)
        raise BrowserError("chromium did not open its debugging port within 30 s")

    def _page_target(self, port):
        deadline = time.time() + 10
        while time.time() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                targets = json.load(r)
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return pages[0]
            time.sleep(0.1)
        raise BrowserError("chromium has no page target")

    def _handle_event(self, msg):
        method = msg.get("method")
        params = msg.get("params", {})
        if method == "Page.javascriptDialogOpening":
            self.send_nowait("Page.handleJavaScriptDialog", accept=self.dialog_answer)
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.errors.append("exception: " + json.dumps(
                d.get("exception", {}).get("description") or d.get("text")))
        elif method == "Log.entryAdded":
            e = params.get("entry", {})
            if e.get("level") == "error":
                self.errors.append(f"log ({e.get('source')}): {e.get('text')} {e.get('url', '')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append("console.error: " + json.dumps(params.get("args")))
        self.events.append(msg)

    def send_nowait(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        return self.next_id

    def send(self, method, **params):
        want = self.send_nowait(method, **params)
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == want:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self._handle_event(msg)

    def eval(self, expression):
        """The value of a JavaScript expression (promises awaited), as JSON would carry it."""
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression}: {r['exceptionDetails'].get('text')} "
                               f"{r['exceptionDetails'].get('exception', {}).get('description')}")
        return r.get("result", {}).get("value")

    def navigate(self, url):
        """Loads `url` as a new document (a change of #fragment alone: use go())."""
        self.eval("window.__cohortOld = true")
        self.send("Page.navigate", url=url)
        self.wait("!window.__cohortOld && document.readyState === 'complete'", what=f"load {url}")

    def go(self, fragment):
        """Moves the single-page app to `fragment` ("#/services/web") and waits until it shows
        that page (the app marks <main data-route> once a page is built)."""
        self.eval(f"location.hash = {json.dumps(fragment)}")
        self.wait(f"document.querySelector('main').dataset.route === {json.dumps(fragment)}",
                  what=f"page {fragment}")

    def wait(self, expression, timeout=15, what=None):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                last = self.eval(f"!!({expression})")
                if last:
                    return last
            except BrowserError as e:
                last = str(e)
            time.sleep(0.1)
        raise BrowserError(f"timed out waiting for {what or expression} (last: {last!r})")

    def click(self, selector):
        found = self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                          f" if (!e) return false; e.click(); return true; }})()")
        if not found:
            raise BrowserError(f"nothing to click at {selector}")

    def text(self, selector):
        return self.eval(f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent")

    def screenshot(self, path, width=None, height=None):
        if width:
            self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                      deviceScaleFactor=1, mobile=width < 700)
            time.sleep(0.3)
        data = self.send("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
