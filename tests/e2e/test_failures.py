#!/usr/bin/env python3
"""test_failures.py -- what clients see when caches or other clients
misbehave: a stopped cache's keys go to the next distinct cache on the
ring (ringref's walk), all caches down gives 502 within the connect
timeout, a slow cache 504 naming it, a dropped connection is retried and
ends in a well-formed 502, a wrong Content-Length from the cache cuts the
client off without a full body, and clients that leave mid-response leave
no file descriptor or backend request behind.
usage: test_failures.py RINGPROXY TESTCACHE"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import ringref  # noqa: E402
from harness import body_for, raw  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

names = ("f1", "f2", "f3")
caches = [harness.Cache(TC, n) for n in names]
by_name = {c.name: c for c in caches}
try:
    # passive health checks off: these cases are about one request's fate;
    # marking a failing cache down is test_health.py's subject
    conf = harness.conf_text(caches, proxy={"connect_timeout": "2s", "response_timeout": "700ms",
                                            "retries": 2},
                             ring={"balance_factor": 0}, health={"passive": "off"})
    proxy = harness.Proxy(RP, conf, "failures")
    P = proxy.port
    ring = ringref.Ring([(n, 1.0) for n in names], 160)

    # ---- a slow cache: 504 naming it, not retried ----------------------
    t0 = time.monotonic()
    st, h, body = proxy.get("/slow/1?delay=3000")
    dt = time.monotonic() - t0
    owner = ring.lookup(b"/slow/1?delay=3000")
    t.check(st == 504 and 0.6 < dt < 2.5, f"a cache slower than response_timeout: 504 after {dt:.2f}s")
    rid = harness.request_id(body)
    # the request id is hex, and so are the names f1-f3: look at the rest
    rest = body.replace(rid.encode(), b"") if rid else body
    t.check(rid and owner.encode() not in rest and b"127.0.0.1" not in rest,
            "the 504 body names neither the cache nor its address, and carries a request id", body)
    m = proxy.wait_log(rf"warn: request {rid}: 504 for GET /slow/1\?delay=3000 from 127\.0\.0\.1: "
                       rf"backend {owner} \(127\.0\.0\.1:{by_name[owner].port}\): no response within 700ms")
    t.check(m, "... the log line with that request id names the cache, its address and the timeout",
            proxy.log()[-2000:])
    t.check(sum(c.stats()["requests"] for c in caches) == 1, "a response timeout is not retried elsewhere")

    # a POST whose body streamed through the read buffer (larger than it):
    # the head's bytes are gone from the buffer by the time of the 504,
    # its log line still names the request
    st, h, body = proxy.get("/slow/2?delay=3000", method="POST", body=b"x" * 600_000)
    rid = harness.request_id(body)
    t.check(st == 504 and rid and proxy.wait_log(
        rf"warn: request {rid}: 504 for POST /slow/2\?delay=3000 from 127\.0\.0\.1: backend \S+ "),
            "a streamed POST's 504: the log line names its method and target", proxy.log()[-1500:])

    # ---- a response timeout on a pooled connection: not resent ----------
    # (a warm pool: the request goes out on a reused keep-alive connection;
    # only a connection lost before the backend took any of the request is
    # resent, never one that simply got no answer in time)
    pw = harness.Proxy(RP, harness.conf_text([caches[0]], proxy={"workers": 1, "response_timeout": "700ms"},
                                             health={"passive": "off"}), "failures-warm")
    conn = pw.http()
    for i in range(4):
        harness.get_on(conn, f"/warm/{i}")
    conn.close()
    caches[0].reset()
    t0 = time.monotonic()
    st, h, body = pw.get("/never/1?delay=5000")
    dt = time.monotonic() - t0
    seen = caches[0].stats()["requests"]
    t.check(st == 504 and 0.6 < dt < 1.25, f"warm pool, a cache that never answers: 504 after {dt:.2f}s "
            "(response_timeout 700ms, once)", [st, body])
    t.check(seen == 1, f"... and the cache saw the request once ({seen})")
    t.check(pw.stop() == 0, "SIGTERM: exit 0")

    # ---- a dropped connection: retried along the walk, then 502 ---------
    for c in caches:
        c.reset()
    st, h, body = proxy.get("/drop/1?drop=1")
    reqs = {c.name: c.stats()["requests"] for c in caches}
    t.check(st == 502 and body.startswith(b"ringproxy: "), "GET dropped by every cache: a well-formed 502",
            [st, body])
    walk = list(ring.walk(b"/drop/1?drop=1"))
    t.check(reqs == {n: int(n in walk[:2]) for n in names},
            "the GET was tried on its owner and the next distinct cache, not on the third: two caches "
            "losing it the same way make it the request's fault", [reqs, walk])
    for c in caches:
        c.reset()
    st, h, body = proxy.get("/drop/2?drop=1", method="POST", body=b"x" * 100)
    reqs = {c.name: c.stats()["requests"] for c in caches}
    t.check(st == 502 and sum(reqs.values()) == 1, "a POST dropped by its cache: 502, not retried", reqs)

    # ---- wrong Content-Length from the cache -----------------------------
    s = proxy.sock()
    s.sendall(b"GET /wl/1?wronglen=1&size=300000 HTTP/1.1\r\nHost: x\r\n\r\n")
    rd = harness.Reader(s)
    r = rd.response(head_only=True)
    cl = int(r.h("Content-Length"))
    got = len(rd.rest())
    t.check(r.status == 200 and got < cl, f"a cache that sends less than its Content-Length: the client "
            f"connection closes short ({got} of {cl} bytes)")
    s.close()
    st, h, body = proxy.get("/wl/2?size=300000")
    t.check(st == 200 and body == body_for("/wl/2?size=300000", 300000), "the proxy keeps serving after it")

    # ---- clients leaving mid-response -------------------------------------
    for i in range(3):
        proxy.get(f"/warm/{i}")
    base = proxy.settled_client_fds()
    socks = []
    for i in range(6):
        s = proxy.sock()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(f"GET /leave/{i}?size={50 * 1024 * 1024} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        socks.append(s)
    for s in socks:
        n = 0
        while n < 200000:
            d = s.recv(65536)
            if not d:
                break
            n += len(d)
    during = proxy.client_fds()
    for s in socks:
        s.close()
    # and some that leave while the cache is still thinking
    for i in range(4):
        s = proxy.sock()
        s.sendall(f"GET /leave/slow{i}?delay=300 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        s.close()
    back = harness.wait_until(lambda: proxy.client_fds() <= base, 10)
    t.check(during == base + 6, f"fds other than backend connections while 6 big responses stream: "
            f"{during} (baseline {base})")
    t.check(back, f"clients that leave mid-response: those fds return to {base} ({proxy.client_fds()})")
    idle = harness.wait_until(lambda: sum(c.stats()["inflight"] for c in caches) == 0, 10)
    t.check(idle, "... and no cache is left sending to nobody")
    st, h, body = proxy.get("/after/leave")
    t.check(st == 200 and body == body_for("/after/leave"), "the proxy serves after clients left")

    # ---- a cache that does not accept: connect_timeout, then the next -----
    # (a listener whose accept queue is full drops SYNs: connect hangs)
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(0)
    fill = []
    for i in range(4):
        f = socket.socket()
        f.setblocking(False)
        try:
            f.connect(hang.getsockname())
        except BlockingIOError:
            pass
        fill.append(f)
    time.sleep(0.2)
    p3 = harness.Proxy(RP, harness.conf_text([("hang", hang.getsockname()[1]), caches[0]], proxy={
        "workers": 1, "connect_timeout": "300ms"}, ring={"balance_factor": 0},
        health={"passive": "off"}), "failures-hang")
    r2 = ringref.Ring([("hang", 1.0), (caches[0].name, 1.0)], 160)
    hk = [k for k in (f"/hang/{i}" for i in range(100)) if r2.lookup(k.encode()) == "hang"][:3]
    res = []
    for k in hk:
        t0 = time.monotonic()
        st, h, body = p3.get(k)
        res.append((st, h.get("x-ringproxy-backend"), round(time.monotonic() - t0, 2)))
    t.check(all(r[0] == 200 and r[1] == caches[0].name and 0.25 < r[2] < 2 for r in res),
            "a cache that never accepts: its GETs go to the next cache after connect_timeout", res)
    t0 = time.monotonic()
    st, h, body = p3.get(hk[0], method="POST", body=b"abc")
    dt = time.monotonic() - t0
    rid = harness.request_id(body)
    t.check(st == 504 and b"hang" not in body and rid and dt < 2,
            f"... a POST there is not retried: 504 with a request id ({dt:.2f}s)", [st, body])
    t.check(p3.wait_log(rf"request {rid}: 504 for POST {hk[0]} from [^\n]*: backend hang \([^)]*\): "
                        r"no connection within 300ms"),
            "... its log line names the cache and the timeout", p3.log()[-2000:])
    t.check(p3.stop() == 0, "... and that proxy exits 0")
    for f in fill:
        f.close()
    hang.close()

    # ---- a stopped cache: its keys go to the next distinct cache -----------
    keys = [f"/fo/{i}.jpg" for i in range(300)]
    victim = "f2"
    mine = [k for k in keys if ring.lookup(k.encode()) == victim]
    by_name[victim].stop()
    wrong = []
    for k in mine:
        st, h, body = proxy.get(k)
        want = list(ring.walk(k.encode()))[1]
        if st != 200 or h.get("x-ringproxy-backend") != want or body != body_for(k):
            wrong.append((k, st, h.get("x-ringproxy-backend"), want))
    t.check(mine and not wrong, f"{len(mine)} keys of a stopped cache are served by the next distinct "
            "cache on the ring", wrong[:5])
    others = [k for k in keys if ring.lookup(k.encode()) != victim][:50]
    t.check(all(proxy.get(k)[1].get("x-ringproxy-backend") == ring.lookup(k.encode()) for k in others),
            "other keys stay where they were")

    # ---- out of file descriptors: no spinning, no log flood, recovers ------
    p2 = harness.Proxy(RP, harness.conf_text(caches, proxy={"workers": 1}), "failures-nofile", nofile=48)
    socks = []
    for i in range(70):
        socks.append(socket.create_connection(("127.0.0.1", p2.port), timeout=10))
    time.sleep(0.3)
    lines0 = p2.log().count("\n")
    c0 = p2.cpu_ticks()
    time.sleep(1)
    spent = p2.cpu_ticks() - c0
    lines = p2.log().count("\n") - lines0
    t.check(spent < 20, f"over its fd limit with connections queued, the proxy does not spin ({spent} ticks in 1s)")
    t.check(lines <= 3, f"... nor flood the log ({lines} lines in 1s)")
    for s in socks:
        s.close()
    ok = harness.wait_until(lambda: p2.get("/fd/again")[0] == 200, 10, step=0.2)
    t.check(ok, "... and serves again once fds are free")
    t.check(p2.stop() == 0, "... and exits 0 on SIGTERM")

    # ---- every cache stopped: 502 within the connect timeout ---------------
    for c in caches:
        c.stop()
    t0 = time.monotonic()
    st, h, body = proxy.get("/all/down")
    dt = time.monotonic() - t0
    t.check(st == 502 and dt < 2.0, f"every cache down: 502 in {dt:.2f}s (connect_timeout 2s)", [st, body])
    rid = harness.request_id(body)
    t.check(rid and b"connect" not in body and b"127.0.0.1" not in body,
            "the 502 body keeps the reason and the addresses to the log", body)
    t.check(proxy.wait_log(rf"request {rid}: 502 for GET /all/down from [^\n]*: backend f\d "
                           r"\(127\.0\.0\.1:\d+\): connect: Connection refused"),
            "... whose line with the request id says the connect was refused", proxy.log()[-2000:])
    (r,), rd = raw(P, b"GET /all/down2 HTTP/1.1\r\nHost: x\r\n\r\n")
    t.check(r.status == 502 and not rd.closed(0.2), "a 502 of the proxy's own keeps the client connection")
    rd.s.sendall(b"GET /all/down3 HTTP/1.1\r\nHost: x\r\n\r\n")
    r = rd.response()
    t.check(r.status == 502, "... which serves the next request")
    rd.s.close()
    (r,), rd = raw(P, b"HEAD /all/head HTTP/1.1\r\nHost: x\r\n\r\n", head_only=True)
    rd.s.sendall(b"GET /all/after-head HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        r2 = rd.response()
        ok = r.status == 502 and r2.status == 502 and r2.body.startswith(b"ringproxy: ")
    except Exception as e:
        ok, r2 = False, repr(e)
    t.check(ok, "the proxy's own 502 to a HEAD has no body: the next response on the connection is intact",
            getattr(r2, "status", r2))
    rd.s.close()
    (r,), rd = raw(P, b"GET /all/down10 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    conn = (r.h("Connection") or "").lower()
    closed = rd.closed(1)
    t.check(r.status == 502 and ((conn == "keep-alive" and not closed) or (conn == "close" and closed)),
            "an HTTP/1.0 keep-alive client's 502 says what happens to the connection", [conn, closed])
    rd.s.close()
    t.check(proxy.alive(), "the proxy is still running")
    t.check(proxy.stop() == 0, "SIGTERM: exit 0")
finally:
    for c in caches:
        c.stop()
t.done()
