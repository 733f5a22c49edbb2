#!/usr/bin/env python3
"""test_bodies.py -- bodies stream through with bounded memory: a 50 MB
response to a fast and to a slow client, a 50 MB request body streamed from
the client, chunked both ways, every byte checked (pattern or FNV-1a), the
proxy's RSS growing by less than 20 MB throughout. Timeouts measure
silence, not duration: response_timeout and client_timeout far below the
transfer times, yet a slow but steady reader gets everything and a reader
that stops is cut off.
usage: test_bodies.py RINGPROXY TESTCACHE"""

import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import body_for, fnv1a  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
BIG = 50 * 1024 * 1024
RSS_LIMIT_KB = 20 * 1024


class RssWatch:
    """Samples the proxy's VmRSS while a transfer runs."""

    def __init__(self, proxy):
        self.proxy = proxy
        self.base = proxy.rss_kb()
        self.peak = self.base
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        while not self.stop_ev.wait(0.02):
            try:
                self.peak = max(self.peak, self.proxy.rss_kb())
            except OSError:
                return

    def growth(self):
        self.stop_ev.set()
        self.th.join()
        self.peak = max(self.peak, self.proxy.rss_kb())
        return self.peak - self.base


def get_stream(port, uri, read_chunk=262144, sleep=0.0, time_limit=120):
    """GET uri; read the body in read_chunk pieces, sleeping between them.
    Returns (status, headers, body_length, body_ok, seconds)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(f"GET {uri} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    rd = harness.Reader(s)
    r = rd.response(head_only=True)
    t0 = time.monotonic()
    want_len = int(r.h("Content-Length"))
    pat = (uri + "\n").encode()
    got = 0
    ok = True
    pending = rd.buf
    rd.buf = b""
    while got < want_len and time.monotonic() - t0 < time_limit:
        if not pending:
            pending = s.recv(read_chunk)
            if not pending:
                break
            if sleep:
                time.sleep(sleep)
        # compare against the pattern at this offset
        off = got % len(pat)
        need = len(pending)
        exp = (pat * ((off + need) // len(pat) + 2))[off:off + need]
        if pending != exp[:len(pending)]:
            ok = False
        got += len(pending)
        pending = b""
    s.close()
    return r.status, r, got, ok and got == want_len, time.monotonic() - t0


caches = [harness.Cache(TC, "b1")]
try:
    # response_timeout far below the slow reader's transfer time: it
    # bounds a backend's silence, not a body's duration
    # client_timeout 1s: a client that reads slowly but steadily is
    # still served; one that stops reading is cut off
    proxy = harness.Proxy(RP, harness.conf_text(caches, proxy={"workers": 1, "response_timeout": "1s",
                                                                "client_timeout": "1s"}),
                          "bodies")
    P = proxy.port
    # warm up: allocate the connection structs once
    for i in range(3):
        proxy.get(f"/warm/{i}?size=200000")

    # ---- 50 MB response to a fast client -------------------------------
    w = RssWatch(proxy)
    uri = f"/big/get?size={BIG}"
    st, r, got, ok, dt = get_stream(P, uri)
    g = w.growth()
    t.check(st == 200 and got == BIG and ok, f"a 50 MB GET arrives whole and byte-exact ({dt:.1f}s)")
    t.check(g < RSS_LIMIT_KB, f"... while the proxy's RSS grows by {g} kB (< 20 MB)")

    # ---- 50 MB response to a slow reader (64 KiB, pause, ...) ----------
    w = RssWatch(proxy)
    uri = f"/big/slow?size={BIG}"
    st, r, got, ok, dt = get_stream(P, uri, read_chunk=65536, sleep=0.003, time_limit=150)
    g = w.growth()
    t.check(st == 200 and got == BIG and ok and dt > 2,
            f"a 50 MB GET to a slow reader arrives whole ({dt:.1f}s, response_timeout 1s)", [got, ok])
    t.check(g < RSS_LIMIT_KB, f"... while the proxy's RSS grows by {g} kB (< 20 MB)")

    # ---- a slow, steady reader: 16 KiB every 20 ms through a small window --
    # The proxy's autotuned send buffer then holds over a second of data:
    # the proxy itself sees no progress for longer than client_timeout
    # (500 ms here), yet the client is reading all the time.
    p2 = harness.Proxy(RP, harness.conf_text(caches, proxy={"workers": 1, "client_timeout": "500ms"}),
                       "bodies-slow")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    s.settimeout(30)
    s.connect(("127.0.0.1", p2.port))
    size = 4000000
    uri = f"/big/veryslow?size={size}"
    s.sendall(f"GET {uri} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    parts = []
    got = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and got < size:
        d = s.recv(16384)
        if not d:
            break
        parts.append(d)
        got += len(d)
        time.sleep(0.02)
    while got < size + 1000 and time.monotonic() - t0 < 60:   # the rest, quickly
        d = s.recv(65536)
        if not d:
            break
        parts.append(d)
        got += len(d)
        if b"".join(parts[-2:]).endswith(body_for(uri, size)[-200:]):
            break
    dt = time.monotonic() - t0
    s.close()
    data = b"".join(parts)
    t.check(data.split(b"\r\n\r\n", 1)[-1] == body_for(uri, size) and dt > 1,
            f"4 MB to a client reading 800 kB/s arrives whole ({dt:.1f}s, client_timeout 500ms)", len(data))
    p2.stop()

    # ---- a client that stops reading is closed after client_timeout ------
    base = proxy.settled_client_fds()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", P))
    s.sendall(f"GET /big/stuck?size={BIG} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    s.recv(1000)
    t0 = time.monotonic()
    gone = harness.wait_until(lambda: proxy.client_fds() <= base, 15)
    dt = time.monotonic() - t0
    t.check(gone and dt < 6, f"a client that stops reading is closed after client_timeout ({dt:.1f}s)")
    s.close()

    # ---- 50 MB request body streamed from the client --------------------
    w = RssWatch(proxy)
    s = socket.create_connection(("127.0.0.1", P), timeout=120)
    s.sendall(f"POST /big/post HTTP/1.1\r\nHost: x\r\nContent-Length: {BIG}\r\n\r\n".encode())
    block = bytes(range(256)) * 1024      # 256 KiB
    sent = 0
    t0 = time.monotonic()
    while sent < BIG and time.monotonic() - t0 < 120:
        s.sendall(block)
        sent += len(block)
    rd = harness.Reader(s)
    r = rd.response(head_only=True)
    g = w.growth()
    t.check(r.status == 200 and r.h("X-Body-Length") == str(BIG),
            f"a 50 MB POST streamed from the client reaches the cache whole ({time.monotonic() - t0:.1f}s)",
            r.headers)
    t.check(g < RSS_LIMIT_KB, f"... while the proxy's RSS grows by {g} kB (< 20 MB)")
    got = 0
    ok = True
    pending = rd.buf
    rd.buf = b""
    want = int(r.h("Content-Length") or 0)
    pos = 0
    while got < want:
        if not pending:
            pending = s.recv(len(block))
            if not pending:
                break
        # the echo is the same 256 KiB block over and over
        if (block * 2)[pos % len(block):pos % len(block) + len(pending)] != pending:
            ok = False
        got += len(pending)
        pos += len(pending)
        pending = b""
    t.check(got == BIG and ok, "... and its echo comes back whole")
    s.close()

    # ---- chunked both ways -------------------------------------------------
    rnd = random.Random(7)
    payload = bytes(rnd.getrandbits(8) for _ in range(300000))
    s = socket.create_connection(("127.0.0.1", P), timeout=60)
    s.sendall(b"POST /ch/up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    off = 0
    sizes = [1, 2, 17, 4096, 65536, 100000]
    i = 0
    while off < len(payload):
        n = min(sizes[i % len(sizes)], len(payload) - off)
        s.sendall(b"%x\r\n" % n + payload[off:off + n] + b"\r\n")
        off += n
        i += 1
    s.sendall(b"0\r\nX-Trailer: t\r\n\r\n")
    rd = harness.Reader(s)
    r = rd.response()
    t.check(r.status == 200 and r.h("X-Body-Length") == str(len(payload)) and
            r.h("X-Body-Sum") == "%08x" % fnv1a(payload) and r.body == payload,
            "a chunked request body (odd chunk sizes, a trailer) reaches the cache intact",
            [r.status, r.h("X-Body-Length"), r.h("X-Body-Sum"), r.h("X-Echo-Transfer-Encoding")])
    s.sendall(b"GET /ch/down?chunked=1&size=333333 HTTP/1.1\r\nHost: x\r\n\r\n")
    r = rd.response()
    t.check(r.status == 200 and r.framing == "chunked" and
            r.body == body_for("/ch/down?chunked=1&size=333333", 333333),
            "a chunked response reaches an HTTP/1.1 client chunked and intact, on the same connection")
    s.sendall(b"POST /ch/cl HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde")
    r = rd.response()
    t.check(r.status == 200 and r.body == b"abcde", "the connection is still good after chunked bodies")
    s.close()

    t.check(proxy.stop() == 0, "SIGTERM: exit 0")
finally:
    for c in caches:
        c.stop()
t.done()
