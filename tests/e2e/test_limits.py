#!/usr/bin/env python3
"""test_limits.py -- [proxy] settings an operator turns: the name of the
backend header (or none; a backend's own header of that name never reaches
the client), header names with '_' (dropped unless underscores_in_headers
= on), and max_connections (connections over it are closed at once; the
ones under it keep working), and client connections spread evenly over
the workers.
usage: test_limits.py RINGPROXY TESTCACHE"""

import json
import os
import re
import socket
import subprocess
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

    # ---- a backend's own backend header; header names with '_' ---------
    heads = []

    def handler(fake, sock, n):
        rest = b""
        while True:
            head, rest = fake.read_head(sock, rest)
            if not head:
                return
            heads.append(head)
            sock.sendall(b"HTTP/1.1 200 OK\r\nX-Ringproxy-Backend: internal-7\r\nX-Cache-Node: node-9\r\n"
                         b"Content-Length: 2\r\n\r\nok")

    fake = harness.Fake(handler)
    try:
        req = (b"GET /u/1 HTTP/1.1\r\nHost: x\r\nX_Forwarded_User: admin\r\nX-Forwarded-User: bob\r\n"
               b"X_y: 1\r\n\r\n")
        p = harness.Proxy(RP, harness.conf_text([("fk", fake.port)]), "limits-fake")
        (r,), rd = harness.raw(p.port, req)
        rd.s.close()
        mine = [v for k, v in r.headers if k.lower() == "x-ringproxy-backend"]
        t.check(r.status == 200 and mine == ["fk"], "a backend's own X-Ringproxy-Backend is dropped: the "
                "client reads one, the proxy's", r.headers)
        sent = heads[-1].lower()
        t.check(b"x-forwarded-user: bob" in sent and b"x_forwarded_user" not in sent and b"x_y" not in sent,
                "request header names with '_' are not forwarded by default (X_Forwarded_User could pose "
                "as X-Forwarded-User)", heads[-1])
        t.check(p.stop() == 0, "exit 0")
        p = harness.Proxy(RP, harness.conf_text([("fk", fake.port)], proxy={
            "backend_header": "X-Cache-Node", "underscores_in_headers": "on"}), "limits-fake2")
        (r,), rd = harness.raw(p.port, req)
        rd.s.close()
        nodes = [v for k, v in r.headers if k.lower() == "x-cache-node"]
        t.check(r.status == 200 and nodes == ["fk"] and r.h("X-Ringproxy-Backend") == "internal-7",
                "backend_header = X-Cache-Node: the backend's X-Cache-Node is dropped (its "
                "X-Ringproxy-Backend is just a header now)", r.headers)
        sent = heads[-1]
        t.check(b"X_Forwarded_User: admin" in sent and b"X-Forwarded-User: bob" in sent and b"X_y: 1" in sent,
                "underscores_in_headers = on: they are forwarded", sent)
        t.check(p.stop() == 0, "exit 0")
    finally:
        fake.stop()
    out = subprocess.run([RP, "--help-config"], capture_output=True, text=True, timeout=30).stdout
    t.check(re.search(r"underscores_in_headers.*default: off", out, re.S) is not None,
            "--help-config lists underscores_in_headers, default off", out[-400:])

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

    # ---- client connections spread evenly over the workers -------------
    # The kernel's SO_REUSEPORT hash alone splits 64 connections between two
    # listeners anywhere from 32/32 to 40/24 (a busiest worker at 35 or more
    # about half the time); the busier worker's clients wait longer.
    p = harness.Proxy(RP, harness.conf_text(caches, proxy={"admin_listen": "127.0.0.1:0"}), "limits-spread")
    admin = p.admin_port()

    def stats():
        return json.loads(harness.get(admin, "/stats")[2])

    busiest, served, handed = [], 0, 0
    for trial in range(5):
        conns = [socket.create_connection(("127.0.0.1", p.port), timeout=10) for _ in range(64)]
        for rnd in range(2):
            for i, s in enumerate(conns):
                s.sendall(b"GET /spread/%d/%d HTTP/1.1\r\nHost: x\r\n\r\n" % (trial, i))
            for s in conns:
                served += s.recv(65536).startswith(b"HTTP/1.1 200")
        st = stats()
        busiest.append((st["connections"], st["connections_busiest_worker"]))
        handed = st["accept_handoffs"]
        for s in conns:
            s.close()
        harness.wait_until(lambda: stats()["connections"] == 0, 10)
    t.check(served == 5 * 64 * 2, "64 connections x 2 requests x 5 rounds, two workers: every request is "
            "served, on the worker the connection was handed to as on the one that accepted it",
            served)
    t.check(all(n == 64 and most <= 34 for n, most in busiest),
            "each round the busiest of the two workers holds at most 34 of the 64 connections "
            "(open, busiest worker)", busiest)
    t.check(handed > 0 and handed <= 5 * 64, "accept_handoffs counts the connections handed over", handed)
    t.check(p.stop() == 0, "exit 0")
finally:
    for c in caches:
        c.stop()
t.done()
