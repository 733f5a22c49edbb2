#!/usr/bin/env python3
"""test_limits.py -- [proxy] settings an operator turns: the name of the
backend header (or none), and max_connections (connections over it are
closed at once; the ones under it keep working).
usage: test_limits.py RINGPROXY TESTCACHE"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

caches = [harness.Cache(TC, n) for n in ("l1", "l2")]
try:
    # ---- backend_header renamed, then off ------------------------------
    p = harness.Proxy(RP, harness.conf_text(caches, proxy={"backend_header": "X-Cache-Node"}), "limits-hdr")
    st, h, body = p.get("/x/1.jpg")
    hd = h
    t.check(st == 200 and hd.get("x-cache-node") in ("l1", "l2") and "x-ringproxy-backend" not in hd,
            "backend_header = X-Cache-Node: the backend's name under that header only", hd)
    t.check(p.stop() == 0, "exit 0")
    p = harness.Proxy(RP, harness.conf_text(caches, proxy={"backend_header": ""}), "limits-nohdr")
    st, h, body = p.get("/x/1.jpg")
    hd = h
    t.check(st == 200 and "x-ringproxy-backend" not in hd and "x-cache-node" not in hd,
            "backend_header empty: no backend header at all", hd)
    t.check(p.stop() == 0, "exit 0")

    # ---- max_connections ------------------------------------------------
    p = harness.Proxy(RP, harness.conf_text(caches, proxy={"max_connections": 3, "workers": 1}), "limits-max")
    held = []
    for i in range(3):
        s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
        s.sendall(b"GET /held/%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
        t.check(s.recv(65536).startswith(b"HTTP/1.1 200"), f"connection {i + 1} of 3 is served")
        held.append(s)
    extra = socket.create_connection(("127.0.0.1", p.port), timeout=5)
    try:
        extra.sendall(b"GET /over HTTP/1.1\r\nHost: x\r\n\r\n")
        got = extra.recv(65536)
    except (ConnectionResetError, BrokenPipeError):
        got = b""
    t.check(got == b"", "a 4th connection over max_connections = 3 is closed without a response", got[:80])
    extra.close()
    for i, s in enumerate(held):
        s.sendall(b"GET /again/%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
        t.check(s.recv(65536).startswith(b"HTTP/1.1 200"), f"connection {i + 1} still works on keep-alive")
    held.pop().close()
    ok = False
    deadline = time.monotonic() + 5
    while not ok and time.monotonic() < deadline:
        s = socket.create_connection(("127.0.0.1", p.port), timeout=5)
        try:
            s.sendall(b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
            ok = s.recv(65536).startswith(b"HTTP/1.1 200")
        except (ConnectionResetError, BrokenPipeError):
            pass
        s.close()
        if not ok:
            time.sleep(0.05)
    t.check(ok, "once one of the 3 closes, a new connection is served")
    for s in held:
        s.close()
    t.check(p.stop() == 0, "exit 0")
finally:
    for c in caches:
        c.stop()
t.done()
