"""client.py -- HTTP clients of the end-to-end tests: http.client
requests, a raw HTTP/1.1 response reader for what http.client hides
(pipelining, framing, interim responses, connection close), and a sender
for pipelined bursts. Standard
library only."""

import http.client
import re
import socket
import threading
import time

# ---- clients ----------------------------------------------------------------


def get(port, path, method="GET", headers=None, body=None, timeout=30):
    """One request on a new connection: (status, headers dict lower-case, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def request_id(body):
    """The request id in a reply of the proxy's own ("... (request ID)"),
    or None."""
    m = re.search(rb"\(request ([0-9a-f]{20})\)\n$", body or b"")
    return m.group(1).decode() if m else None


def get_on(conn, path):
    """One GET on an open keep-alive connection: (status, backend, body)."""
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    return r.status, r.getheader("X-Ringproxy-Backend"), body


def backends_of(port, paths, deadline):
    """{path: backend (or "status N")} through the proxy on one keep-alive
    connection, as many paths as fit before deadline (monotonic)."""
    out = {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for p in paths:
            if time.monotonic() > deadline:
                break
            st, be, _ = get_on(conn, p)
            out[p] = be if st == 200 else f"status {st}"
    finally:
        conn.close()
    return out


def routes_on(port, keys, batch=200, host="routes"):
    """{key: backend} through the proxy at port on one connection,
    pipelining batch requests at a time (HEAD: the header is all we need),
    with Host: host."""
    out = {}
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    rd = Reader(s)
    try:
        for i in range(0, len(keys), batch):
            part = keys[i:i + batch]
            s.sendall(b"".join(f"HEAD {k} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode() for k in part))
            for k in part:
                r = rd.response(head_only=True)
                out[k] = r.h("X-Ringproxy-Backend") if r.status == 200 else f"status {r.status}"
    finally:
        s.close()
    return out


# ---- raw responses ------------------------------------------------------------

class Resp:
    """One response as read by Reader: status line, headers as sent,
    body, and how the body was framed."""

    def __init__(self, version, status, reason, headers, body, framing):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers          # list of (name, value) as sent
        self.body = body
        self.framing = framing          # "length", "chunked", "close", "none"

    def h(self, name, default=None):
        """The first value of header name (any case), or default."""
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default


class Reader:
    """Reads responses from a socket, buffering what follows."""

    def __init__(self, sock):
        self.s = sock
        self.buf = b""
        self.eof = False

    def _fill(self):
        """Read more into the buffer; False at EOF."""
        if self.eof:
            return False
        d = self.s.recv(262144)
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def line(self):
        """The next CRLF-terminated line, without the CRLF."""
        while b"\r\n" not in self.buf:
            if not self._fill():
                raise EOFError("connection closed in a head")
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln.decode("latin-1")

    def exact(self, n):
        """The next n bytes."""
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError(f"connection closed with {n - len(self.buf)} body bytes missing")
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def rest(self):
        """Everything until the peer closes."""
        while self._fill():
            pass
        d, self.buf = self.buf, b""
        return d

    def closed(self, timeout=5):
        """True when the peer closes with nothing more to read."""
        if self.buf:
            return False
        self.s.settimeout(timeout)
        try:
            return not self._fill()
        except (socket.timeout, TimeoutError):
            return False
        except ConnectionResetError:
            return True

    def response(self, head_only=False):
        """The next response (interim ones included: the caller skips them)."""
        st = self.line()
        ver, code, *reason = st.split(" ", 2)
        status = int(code)
        headers = []
        while True:
            ln = self.line()
            if ln == "":
                break
            k, _, v = ln.partition(":")
            headers.append((k, v.strip()))
        r = Resp(ver, status, reason[0] if reason else "", headers, b"", "none")
        te = r.h("transfer-encoding")
        cl = r.h("content-length")
        if head_only or status < 200 or status in (204, 304):
            return r
        if te is not None and "chunked" in te.lower():
            r.framing = "chunked"
            parts = []
            while True:
                size = int(self.line().split(";")[0].strip(), 16)
                if size == 0:
                    while self.line() != "":
                        pass
                    break
                parts.append(self.exact(size))
                if self.exact(2) != b"\r\n":
                    raise ValueError("bad chunk end")
            r.body = b"".join(parts)
        elif cl is not None:
            r.framing = "length"
            r.body = self.exact(int(cl))
        else:
            r.framing = "close"
            r.body = self.rest()
        return r


def raw(port, data, n=1, timeout=30, head_only=False):
    """Send data on a new connection, read n responses (interim ones
    skipped). Returns (responses, reader) -- the socket still open."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    rd = Reader(s)
    out = []
    while len(out) < n:
        r = rd.response(head_only=head_only)
        if r.status >= 200:
            out.append(r)
    return out, rd


class Sender(threading.Thread):
    """Sends data on socket s from a thread of its own, so that a test can
    read the replies to a pipelined burst while it is still being sent.
    sent: the bytes sent once run (all of data, or 0 if the send failed)."""

    def __init__(self, s, data):
        super().__init__(daemon=True)
        self.s, self.data, self.sent = s, data, 0

    def run(self):
        try:
            self.s.sendall(self.data)
            self.sent = len(self.data)
        except OSError:
            pass
