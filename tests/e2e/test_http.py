#!/usr/bin/env python3
"""test_http.py -- HTTP/1.1 semantics through the proxy, seen from raw
sockets: bodiless responses (HEAD, 204, 304), error statuses passed
through, hop-by-hop headers removed, X-Forwarded-For/-Proto and Via added,
pipelining, HTTP/1.0 clients, curl as a client, 100-continue, a head over
max_head_size, the idle client timeout.
usage: test_http.py RINGPROXY TESTCACHE"""

import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import body_for, raw  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

caches = [harness.Cache(TC, n) for n in ("h1", "h2")]
try:
    proxy = harness.Proxy(RP, harness.conf_text(caches, proxy={
        "client_timeout": "1500ms", "max_head_size": "8k"}), "http")
    P = proxy.port
    names = {c.name for c in caches}

    # ---- plain GET, backend header ------------------------------------
    (r,), rd = raw(P, b"GET /a/plain HTTP/1.1\r\nHost: example.test\r\n\r\n")
    t.check(r.status == 200 and r.body == body_for("/a/plain"), "GET: 200 with the cache's body")
    t.check(r.h("X-Ringproxy-Backend") in names and r.h("X-Ringproxy-Backend") == r.h("X-Backend"),
            "X-Ringproxy-Backend names the cache that answered")
    t.check(r.h("X-Echo-Host") == "example.test", "the client's Host reaches the cache")
    t.check(r.version == "HTTP/1.1", "the response is HTTP/1.1")
    rd.s.close()

    # ---- bodiless responses and statuses ------------------------------
    (r,), rd = raw(P, b"HEAD /a/head?size=1234 HTTP/1.1\r\nHost: x\r\n\r\n"
                   b"GET /a/after-head HTTP/1.1\r\nHost: x\r\n\r\n", n=1, head_only=True)
    t.check(r.status == 200 and r.h("Content-Length") == "1234", "HEAD: 200 with the Content-Length of the GET")
    r2 = rd.response()
    t.check(r2.status == 200 and r2.body == body_for("/a/after-head"),
            "HEAD carries no body: the next response on the connection is intact")
    rd.s.close()
    for st in (204, 304):
        (r,), rd = raw(P, f"GET /a/s{st}?status={st} HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /a/next HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        r2 = rd.response()
        t.check(r.status == st and r.h("Content-Length") in (None, "0") and r.h("Transfer-Encoding") is None,
                f"{st}: passed through without a body")
        t.check(r2.status == 200 and r2.body == body_for("/a/next"), f"{st}: the next response follows intact")
        rd.s.close()
    for st in (404, 500, 503):
        (r,), rd = raw(P, f"GET /a/e{st}?status={st}&size=77 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        t.check(r.status == st and r.body == body_for(f"/a/e{st}?status={st}&size=77", 77),
                f"{st} from the cache passed through with its body")
        t.check(not rd.closed(0.2), f"{st} from the cache keeps the client connection")
        rd.s.close()

    # ---- request headers: hop-by-hop out, forwarding headers in --------
    req = (b"GET /a/hop HTTP/1.1\r\nHost: x\r\n"
           b"Connection: X-Hop-Test, Keep-Alive\r\nX-Hop-Test: 1\r\nKeep-Alive: timeout=5\r\n"
           b"TE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: keep-alive\r\n\r\n")
    (r,), rd = raw(P, req)
    t.check(r.status == 200, "a request with hop-by-hop headers is served")
    for h in ("Connection", "Keep-Alive", "TE", "Upgrade", "Proxy-Connection", "X-Hop-Test"):
        v = r.h("X-Echo-" + h)
        ok = v is None or (h == "Connection" and v.lower() == "keep-alive")
        t.check(ok, f"hop-by-hop {h} does not reach the cache", v)
    t.check(r.h("X-Echo-X-Forwarded-For") == "127.0.0.1", "X-Forwarded-For: the client's address",
            r.h("X-Echo-X-Forwarded-For"))
    t.check(r.h("X-Echo-X-Forwarded-Proto") == "http", "X-Forwarded-Proto: http")
    t.check((r.h("X-Echo-Via") or "").endswith("1.1 ringproxy"), "Via names the proxy", r.h("X-Echo-Via"))
    t.check("ringproxy" in (r.h("Via") or ""), "the response's Via names the proxy", r.h("Via"))
    rd.s.close()
    (r,), rd = raw(P, b"GET /a/xff HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.9\r\n"
                   b"Via: 1.0 edge\r\n\r\n")
    t.check(r.h("X-Echo-X-Forwarded-For") == "203.0.113.9, 127.0.0.1", "an existing X-Forwarded-For is appended to",
            r.h("X-Echo-X-Forwarded-For"))
    t.check(r.h("X-Echo-Via") == "1.0 edge, 1.1 ringproxy", "an existing Via is appended to", r.h("X-Echo-Via"))
    rd.s.close()

    # Connection: close from the client ends the client's connection, not
    # the proxy's pooled one to the cache
    proxy.get("/a/warm-pool")
    conns = {c.name: c.stats()["connections"] for c in caches}
    for i in range(5):
        (r,), rd = raw(P, b"GET /a/cc HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        ok = r.status == 200 and (r.h("Connection") or "").lower() == "close" and rd.closed()
        rd.s.close()
        if not ok:
            break
    t.check(ok, "Connection: close from the client: answered with Connection: close, then closed")
    # each stats() call is a connection of its own, counted by the cache;
    # the proxy opens at most one per worker (2) for the 5 requests
    grew = sum(c.stats()["connections"] for c in caches) - sum(conns.values()) - len(caches)
    t.check(grew <= 2, f"... while the proxy reuses its connections to the caches ({grew} new for 5 requests)")

    # ---- pipelining ----------------------------------------------------
    paths = [f"/p/{i}?size={1000 + 5000 * i}" for i in range(12)]
    data = b"".join(f"GET {p} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for p in paths)
    rs, rd = raw(P, data, n=len(paths))
    t.check([r.status for r in rs] == [200] * len(paths), "12 pipelined requests: 12 responses")
    t.check(all(r.body == body_for(p, 1000 + 5000 * i) for i, (r, p) in enumerate(zip(rs, paths))),
            "pipelined responses in order and complete")
    t.check(not rd.closed(0.2), "the connection stays open after pipelining")
    rd.s.close()
    # pipelined with a POST body in the middle, sent byte-split
    data = (b"GET /p/x1 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /p/x2 HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world"
            b"GET /p/x3 HTTP/1.1\r\nHost: x\r\n\r\n")
    rs, rd = raw(P, data, n=3)
    t.check([r.status for r in rs] == [200] * 3 and rs[1].body == b"hello world"
            and rs[2].body == body_for("/p/x3"), "pipelined GET, POST with body, GET")
    rd.s.close()

    # a request pipelined after one with Connection: close is not served
    before = sum(c.stats()["requests"] for c in caches)
    (r,), rd = raw(P, b"GET /p/last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                   b"GET /p/never HTTP/1.1\r\nHost: x\r\n\r\n")
    closed = rd.closed()
    after = sum(c.stats()["requests"] for c in caches)
    t.check(r.status == 200 and closed and after - before == 1,
            "a request pipelined after Connection: close is neither answered nor forwarded", [closed, after - before])
    rd.s.close()

    # pipelined, then a half-close (printf ... | nc -N): every request answered
    s = proxy.sock()
    s.sendall(b"".join(b"GET /p/hc%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(3)))
    s.shutdown(socket.SHUT_WR)
    rd = harness.Reader(s)
    rs = []
    try:
        for i in range(3):
            rs.append(rd.response())
        closed = rd.closed()
    except Exception as e:
        closed = repr(e)
    t.check(len(rs) == 3 and all(r.body == body_for(f"/p/hc{i}") for i, r in enumerate(rs)),
            "3 pipelined requests and a half-close: all 3 answered", closed)
    t.check(closed is True, "... then the proxy closes")
    s.close()

    # ---- HTTP/1.0 clients ---------------------------------------------
    (r,), rd = raw(P, b"GET /o/10 HTTP/1.0\r\nHost: x\r\n\r\n")
    t.check(r.status == 200 and r.body == body_for("/o/10"), "HTTP/1.0: 200 with the body")
    t.check(rd.closed(), "HTTP/1.0 without keep-alive: the proxy closes")
    t.check(r.h("X-Echo-Version") == "1.1", "HTTP/1.0 client: the proxy speaks HTTP/1.1 to the cache",
            r.h("X-Echo-Version"))
    t.check(r.h("X-Echo-Via") == "1.0 ringproxy", "HTTP/1.0 client: Via names the protocol received, 1.0",
            r.h("X-Echo-Via"))
    (r,), rd = raw(P, b"GET /o/10ka HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
    t.check(r.status == 200 and r.body == body_for("/o/10ka") and r.h("Content-Length") is not None,
            "HTTP/1.0 keep-alive: 200 with a Content-Length")
    t.check((r.h("Connection") or "").lower() == "keep-alive", "HTTP/1.0 keep-alive: Connection: keep-alive",
            r.h("Connection"))
    rd.s.sendall(b"GET /o/10ka2 HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
    r = rd.response()
    t.check(r.status == 200 and r.body == body_for("/o/10ka2"), "HTTP/1.0 keep-alive: a second request")
    rd.s.close()
    (r,), rd = raw(P, b"GET /o/10ch?chunked=1&size=100000 HTTP/1.0\r\nHost: x\r\n\r\n")
    t.check(r.status == 200 and r.h("Transfer-Encoding") is None and r.framing == "close",
            "HTTP/1.0 and a chunked response: de-chunked, delimited by close", r.headers)
    t.check(r.body == body_for("/o/10ch?chunked=1&size=100000", 100000), "HTTP/1.0 de-chunked body intact")
    (r,), rd = raw(P, b"GET /o/10chka?chunked=1&size=100000 HTTP/1.0\r\nHost: x\r\n"
                   b"Connection: keep-alive\r\n\r\n")
    t.check(r.status == 200 and r.body == body_for("/o/10chka?chunked=1&size=100000", 100000)
            and rd.closed(), "HTTP/1.0 keep-alive and a chunked response: de-chunked, then closed")

    # ---- curl -v --------------------------------------------------------
    if shutil.which("curl"):
        p = subprocess.run(["curl", "-sS", "-v", "--max-time", "30",
                            f"http://127.0.0.1:{P}/c/one?size=5000",
                            f"http://127.0.0.1:{P}/c/two?chunked=1&size=70000"],
                           capture_output=True, timeout=60)
        err = p.stderr.decode(errors="replace")
        t.check(p.returncode == 0, "curl -v: exit 0", err[-500:])
        t.check(p.stdout == body_for("/c/one?size=5000", 5000) + body_for("/c/two?chunked=1&size=70000", 70000),
                "curl -v: both bodies intact")
        t.check("Re-using existing connection" in err or "Reusing existing connection" in err,
                "curl -v: the second transfer reuses the connection", err[-800:])
        t.check("< X-Ringproxy-Backend:" in err, "curl -v sees X-Ringproxy-Backend")
    else:
        t.check(False, "curl is installed")

    # ---- 100-continue ----------------------------------------------------
    s = proxy.sock()
    s.sendall(b"POST /e/cont HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
    rd = harness.Reader(s)
    try:
        r = rd.response()
        t.check(r.status == 100 and r.version == "HTTP/1.1", "Expect: 100-continue: 100 Continue before the body",
                r.status)
        s.sendall(b"0123456789")
        r = rd.response()
        t.check(r.status == 200 and r.body == b"0123456789", "then the final response with the echoed body")
    except Exception as e:
        t.check(False, "Expect: 100-continue answered", repr(e))
    s.close()

    # ---- limits and timeouts ---------------------------------------------
    big = b"GET /l/big HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"X-Filler-%d: %s\r\n" % (i, b"y" * 200) for i in range(60)) + b"\r\n"
    try:
        (r,), rd = raw(P, big)
        t.check(r.status == 431, "a head over max_head_size: 431", r.status)
        t.check(rd.closed(), "... and the connection closed")
    except Exception as e:
        t.check(False, "a head over max_head_size is answered", repr(e))
    (r,), rd = raw(P, b"GET /l/idle HTTP/1.1\r\nHost: x\r\n\r\n")
    t0 = time.monotonic()
    closed = rd.closed(timeout=10)
    dt = time.monotonic() - t0
    t.check(closed and 1.0 < dt < 6, f"an idle keep-alive client is closed after client_timeout ({dt:.2f}s)")
    s = proxy.sock()
    s.sendall(b"GET /l/slow HTTP/1.1\r\nHost: x\r\n")
    rd = harness.Reader(s)
    t0 = time.monotonic()
    try:
        r = rd.response()
        t.check(r.status == 408 and rd.closed(), "a head not finished within client_timeout: 408, closed")
    except Exception as e:
        t.check(False, "a head not finished within client_timeout: 408", repr(e))
    s.close()

    (r,), rd = raw(P, b"GET /z/last HTTP/1.1\r\nHost: x\r\n\r\n")
    t.check(r.status == 200, "the proxy still serves after all of this")
    rd.s.close()

    # ---- SIGTERM: requests in flight finish, idle connections close ------
    (r,), idle = raw(P, b"GET /sd/idle HTTP/1.1\r\nHost: x\r\n\r\n")
    busy = proxy.sock()
    busy.sendall(b"GET /sd/busy?delay=700&size=3000000 HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    t0 = time.monotonic()
    proxy.proc.terminate()
    t.check(idle.closed(5), "SIGTERM: an idle keep-alive client connection is closed")
    try:
        rd = harness.Reader(busy)
        r = rd.response()
        ok = r.status == 200 and r.body == body_for("/sd/busy?delay=700&size=3000000", 3000000)
        closed = rd.closed(5)
    except Exception as e:
        ok, closed, r = False, False, repr(e)
    t.check(ok, "SIGTERM: a request in flight is answered in full", getattr(r, "status", r))
    t.check(closed and (getattr(r, "h", lambda _: None)("Connection") or "").lower() == "close",
            "... with Connection: close, then the connection closes")
    try:
        rc = proxy.proc.wait(timeout=10)
    except Exception:
        rc = None
    t.check(rc == 0 and time.monotonic() - t0 < 5, f"SIGTERM: exit 0 once it is done ({rc})")
    proxy.stop()

    # a request slower than shutdown_timeout does not hold the exit
    proxy = harness.Proxy(RP, harness.conf_text(caches, proxy={"shutdown_timeout": "500ms"}), "http-sd")
    busy = proxy.sock()
    busy.sendall(b"GET /sd/slow?delay=5000 HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    t0 = time.monotonic()
    proxy.proc.terminate()
    try:
        rc = proxy.proc.wait(timeout=10)
    except Exception:
        rc = None
    dt = time.monotonic() - t0
    t.check(rc == 0 and 0.3 < dt < 3, f"SIGTERM: exit 0 after shutdown_timeout with a request still busy ({dt:.2f}s)")
    busy.close()
    proxy.stop()
finally:
    for c in caches:
        c.stop()
t.done()
