#!/usr/bin/env python3
"""test_rewrite.py -- what a backend receives, byte for byte, from a
scripted backend (harness.Fake) that records every request: chunked
request bodies re-framed with the proxy's own chunk sizes, without the
client's extensions and trailers; request paths confined below the
backend URL's prefix, dot-segments removed and ambiguous ones refused
(issue 9, findings 5 and 9).
usage: test_rewrite.py RINGPROXY TESTCACHE"""

import os
import re
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import raw  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

seen = []               # (request line, head, raw chunked body or None)
seen_lock = threading.Lock()


class Stream:
    """Lines and exact byte counts from a socket, after buf."""

    def __init__(self, s, buf):
        self.s, self.buf = s, buf

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError("connection closed")
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        i = self.buf.index(b"\r\n") + 2
        ln, self.buf = self.buf[:i], self.buf[i:]
        return ln

    def exact(self, n):
        while len(self.buf) < n:
            self._fill()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d


def read_chunked(st):
    """A chunked body as sent (any extensions and trailers included), read
    leniently so that whatever the proxy relays is recorded."""
    body = b""
    while True:
        ln = st.line()
        body += ln
        size = int(ln.split(b";")[0].strip(), 16)
        if size == 0:
            break
        body += st.exact(size + 2)
    while True:
        ln = st.line()
        body += ln
        if ln == b"\r\n":
            return body


def handler(fake, s, n):
    rest = b""
    while True:
        head, rest = fake.read_head(s, rest)
        if not head:
            return
        body = None
        if re.search(rb"\r\ntransfer-encoding: *chunked", head, re.I):
            st = Stream(s, rest)
            body = read_chunked(st)
            rest = st.buf
        with seen_lock:
            seen.append((head.split(b"\r\n")[0], head, body))
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")


def last():
    """The last request the backend saw, or (None, None, None)."""
    with seen_lock:
        return seen[-1] if seen else (None, None, None)


def decode(body):
    """(data, canonical): the data of a chunked body, and whether its framing
    is the proxy's own: lowercase hex sizes without leading zeros, no
    extensions, no trailers."""
    data, pos, canonical = b"", 0, True
    while True:
        end = body.index(b"\r\n", pos)
        line = body[pos:end]
        canonical = canonical and re.fullmatch(rb"0|[1-9a-f][0-9a-f]*", line) is not None
        size = int(line.split(b";")[0], 16)
        pos = end + 2
        if size == 0:
            return data, canonical and body[pos:] == b"\r\n"
        data += body[pos:pos + size]
        pos += size + 2


fake = harness.Fake(handler)
try:
    text = harness.conf_text([("fake", fake.port)], proxy={"workers": 1, "retries": 0})
    text = text.replace(f"url = http://127.0.0.1:{fake.port}\n", f"url = http://127.0.0.1:{fake.port}/pfx\n")
    proxy = harness.Proxy(RP, text, "rewrite")
    P = proxy.port

    # ---- finding 5: chunked request bodies are re-framed ----------------
    body = (b"0005;ext=1\r\nhello\r\n00A;x=\"y\"\r\n0123456789\r\n0\r\n"
            b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\nHost: evil\r\nX-T: 1\r\n\r\n")
    (r,), rd = raw(P, b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
    line, head, got = last()
    t.check(r.status == 200 and got == b"5\r\nhello\r\na\r\n0123456789\r\n0\r\n\r\n",
            "zero-padded sizes, extensions and trailers (Content-Length, Transfer-Encoding, Host) "
            "do not reach the backend: our sizes, the data, the last chunk", got)
    t.check(head is not None and len(re.findall(rb"\r\ntransfer-encoding:", head, re.I)) == 1 and
            not re.search(rb"\r\n(content-length|x-t|trailer):", head, re.I) and b"evil" not in head,
            "... with one Transfer-Encoding: chunked of ours in the head, no Content-Length", head)
    rd.s.sendall(b"POST /empty HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0;x\r\nX-T: 1\r\n\r\n")
    r = rd.response()
    line, head, got = last()
    t.check(r.status == 200 and line == b"POST /pfx/empty HTTP/1.1" and got == b"0\r\n\r\n",
            "an empty chunked body with an extension and a trailer: the backend gets 0 CRLF CRLF", got)
    rd.s.sendall(b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
    r = rd.response()
    t.check(r.status == 200 and last()[0] == b"GET /pfx/after HTTP/1.1",
            "the client connection goes on after chunked bodies")
    rd.s.close()

    # many small chunks, more than one write's worth of our size lines,
    # over several reads of the client buffer (64 KiB)
    n = 20000
    data = bytes(0x61 + i % 26 for i in range(n))
    body = b"".join(b"01;i=%d\r\n%c\r\n" % (i, data[i]) for i in range(n)) + b"0\r\nX-T: 1\r\n\r\n"
    (r,), rd = raw(P, b"POST /tiny HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
    line, head, got = last()
    dec, canonical = decode(got) if got else (None, False)
    t.check(r.status == 200 and dec == data and canonical,
            f"{n} one-byte chunks with extensions ({len(body)} bytes): the backend gets the data "
            f"in chunks of our own framing ({len(got or b'')} bytes)", [r.status, (got or b"")[:80]])
    rd.s.close()

    # ---- finding 9: a backend URL prefix confines every path -------------
    s = proxy.sock()
    rd = harness.Reader(s)
    for target, want in ((b"/../secret", b"/pfx/secret"),
                         (b"/%2e%2e/secret", b"/pfx/secret"),
                         (b"/%2E./secret", b"/pfx/secret"),
                         (b"/a/./../../b", b"/pfx/b"),
                         (b"http://x/../secret", b"/pfx/secret"),
                         (b"/a/b/..?q=/../x", b"/pfx/a/?q=/../x"),
                         (b"/a%2Fb/c", b"/pfx/a%2Fb/c")):
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % target)
        r = rd.response()
        line = last()[0]
        t.check(r.status == 200 and line == b"GET %s HTTP/1.1" % want,
                f"GET {target.decode()}: the backend sees {want.decode()}", line)
    s.close()
    for target in (b"/..%2fsecret", b"/..%2Fsecret", b"/..%5csecret", b"/..\\secret", b"/..;/secret",
                   b"http://x/a/..%2f..%2fsecret"):
        before = len(seen)
        (r,), rd = raw(P, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % target)
        closed = rd.closed(5)
        rd.s.close()
        t.check(r.status == 400 and closed and len(seen) == before,
                f"GET {target.decode()} (a dot-segment next to an encoded slash, a backslash or ';'): "
                "400, never forwarded", [r.status, closed, seen[before:]])

    st, h, b = proxy.get("/fine")
    t.check(st == 200 and last()[0] == b"GET /pfx/fine HTTP/1.1", "an ordinary request after all of them")
    t.check(proxy.stop() == 0, "SIGTERM: exit 0")
finally:
    fake.stop()
t.done()
