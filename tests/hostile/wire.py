"""wire.py - HTTP/1.1 on a raw socket for the hostile-client suite (tests/hostile/).

The probes need what ordinary clients hide: bytes sent exactly as written (two
Content-Length headers, a body with a request after it, a header dribbled a byte at a
time), every response the server writes on one connection in order (a smuggled second
answer must be seen), and whether the server closed the connection. Responses are read by
their own framing (Content-Length, chunked, or until close; none for HEAD, 1xx, 204, 304).
"""

import json
import socket
import time


class Response:
    """One HTTP response as read off the wire."""

    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # [(lower-case name, value)], in order
        self.body = body        # bytes

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def json(self):
        """The body as JSON, or None if it is not JSON."""
        try:
            return json.loads(self.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None

    def error_code(self):
        doc = self.json()
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            return doc["error"].get("code")
        return None

    def error_message(self):
        doc = self.json()
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            return str(doc["error"].get("message", ""))
        return ""

    def __repr__(self):
        return f"<{self.status} {self.body[:120]!r}>"


class Closed(Exception):
    """The server closed the connection before a whole response."""


class Conn:
    """One client connection to 127.0.0.1:port."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False
        self.timeout = timeout

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self, deadline):
        """Reads more into buf; False at the end of the stream (or a reset)."""
        if self.eof:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("no answer in time")
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def _line(self, deadline):
        while b"\r\n" not in self.buf:
            if not self._fill(deadline):
                raise Closed()
        i = self.buf.index(b"\r\n")
        line = bytes(self.buf[:i])
        del self.buf[:i + 2]
        return line

    def _exact(self, n, deadline):
        while len(self.buf) < n:
            if not self._fill(deadline):
                raise Closed()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def response(self, timeout=None, head=False):
        """The next response; raises Closed if the connection ends first, socket.timeout if
        none comes within `timeout` seconds."""
        deadline = time.monotonic() + (timeout or self.timeout)
        line = self._line(deadline)
        parts = line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ValueError(f"not a status line: {line!r}")
        status = int(parts[1])
        reason = parts[2] if len(parts) > 2 else ""
        headers = []
        while True:
            h = self._line(deadline)
            if not h:
                break
            name, _, value = h.decode("latin-1").partition(":")
            headers.append((name.strip().lower(), value.strip()))
        resp = Response(status, reason, headers, b"")
        if head or status < 200 or status in (204, 304):
            return resp
        te = (resp.header("transfer-encoding") or "").lower()
        cl = resp.header("content-length")
        if "chunked" in te:
            body = b""
            while True:
                size = int(self._line(deadline).split(b";")[0], 16)
                if size == 0:
                    while self._line(deadline):
                        pass
                    break
                body += self._exact(size, deadline)
                self._line(deadline)
            resp.body = body
        elif cl is not None:
            resp.body = self._exact(int(cl), deadline)
        else:
            while self._fill(deadline):
                pass
            resp.body = bytes(self.buf)
            self.buf = bytearray()
        return resp

    def closed_within(self, seconds):
        """True if the server ends the connection within `seconds` (bytes it sends first are
        kept in buf); False if it is still open then."""
        deadline = time.monotonic() + seconds
        try:
            while self._fill(deadline):
                pass
            return True
        except socket.timeout:
            return False
        except OSError:
            return True


def exchange(port, raw, expect=1, timeout=5.0, close_wait=1.0, head=False):
    """Sends `raw` on a new connection and reads up to `expect` responses, then waits up to
    `close_wait` s for more bytes or the close. Returns (responses, closed, leftover bytes):
    a smuggled request answered shows up as one response too many or as leftover bytes."""
    c = Conn(port, timeout)
    responses = []
    try:
        c.send(raw)
        for _ in range(expect):
            try:
                responses.append(c.response(timeout, head=head))
            except (Closed, socket.timeout):
                break
        closed = c.closed_within(close_wait)
        leftover = bytes(c.buf)
        while leftover.startswith(b"HTTP/"):  # answers past `expect`: parse them too
            try:
                responses.append(c.response(0.5))
                leftover = bytes(c.buf)
            except (Closed, ValueError, socket.timeout):
                break
        return responses, closed, leftover
    finally:
        c.close()


def request(port, method, path, token=None, body=None, headers=None, timeout=10.0):
    """One request on a new connection; `body` a dict (sent as JSON), str or bytes. Returns
    the Response."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    if body is not None:
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(body)}")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")
    c = Conn(port, timeout)
    try:
        c.send(raw)
        return c.response(timeout, head=(method == "HEAD"))
    finally:
        c.close()
