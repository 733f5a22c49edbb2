#!/usr/bin/env python3
"""test_timeouts.py -- every timeout a request restarts still ends when it
should, measured from the last restart: a keep-alive client's idle
timeout and a head's 408 count from the last response, a pooled backend
connection's response timeout from the request, its idle timeout from its
last response. The timers are re-armed lazily (src/base/deadline.c): a restart
leaves an earlier timer where it is and moves the deadline only, so each
case restarts a timeout that is already running, and checks that the end
comes neither at the old deadline nor much after the new one.
usage: test_timeouts.py RINGPROXY TESTCACHE"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

T = 1.0                 # each timeout under test
EARLY = 0.05            # the client sees a response this much after the proxy sent it
LATE = 0.6              # a loaded two-core machine's scheduling


def read_response(s):
    """One response with a Content-Length from socket s: (status line, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, buf
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(rest) < n:
        d = s.recv(65536)
        if not d:
            break
        rest += d
    return head.split(b"\r\n", 1)[0], rest


def get(s, path):
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return read_response(s)


def closed_after(s, since):
    """Seconds from since until the proxy closes s (None: not within 5 s)."""
    s.settimeout(5)
    try:
        d = s.recv(1)
    except socket.timeout:
        return None
    return time.monotonic() - since if d == b"" else None


def within(dt):
    return dt is not None and T - EARLY <= dt < T + LATE


cache = harness.Cache(TC, "t1")
try:
    px = harness.Proxy(RP, harness.conf_text([cache], proxy={
        "workers": 1, "client_timeout": "1s", "response_timeout": "1s", "backend_idle_timeout": "1s"},
        health={"passive": "off"}), "timeouts")
    P = px.port

    # ---- a keep-alive client's idle timeout, restarted by a request ------
    # the first response starts it; the second, 0.6 s later, moves it
    s = socket.create_connection(("127.0.0.1", P), timeout=10)
    st1, _ = get(s, "/idle/1")
    time.sleep(0.6)
    st2, _ = get(s, "/idle/2")
    dt = closed_after(s, time.monotonic())
    s.close()
    t.check(st1 == st2 == b"HTTP/1.1 200 OK" and within(dt),
            f"an idle keep-alive client is closed client_timeout after its last response, not its first "
            f"({dt if dt is None else round(dt, 2)}s, client_timeout 1s)", [st1, st2])

    # ---- a head in pieces after a response: 408 at client_timeout --------
    s = socket.create_connection(("127.0.0.1", P), timeout=10)
    get(s, "/head/0")
    time.sleep(0.6)
    st, _ = get(s, "/head/1")
    t1 = time.monotonic()
    time.sleep(0.3)
    s.sendall(b"GET /head/2 HTTP/1.1\r\nHost: x\r\n")
    st408, _ = read_response(s)
    dt = time.monotonic() - t1
    s.close()
    t.check(st == b"HTTP/1.1 200 OK" and st408 is not None and st408.startswith(b"HTTP/1.1 408") and within(dt),
            f"a head not complete client_timeout after the last response: 408 ({round(dt, 2)}s)", st408)

    # ---- a pooled connection's response timeout, from the request --------
    # the pooled connection's timer runs from its first request; the slow
    # request comes 0.5 s later and has its whole response_timeout
    s = socket.create_connection(("127.0.0.1", P), timeout=10)
    get(s, "/resp/1")
    time.sleep(0.5)
    t0 = time.monotonic()
    st, body = get(s, "/resp/2?delay=5000")
    dt = time.monotonic() - t0
    s.close()
    t.check(st is not None and st.startswith(b"HTTP/1.1 504") and within(dt),
            f"a slow response on a pooled connection: 504 response_timeout after the request ({dt:.2f}s)",
            [st, body])

    # ---- a pooled connection's idle timeout, from its last response -----
    cache.reset()
    px2 = harness.Proxy(RP, harness.conf_text([cache], proxy={
        "workers": 1, "backend_idle_timeout": "1s"}, health={"passive": "off"}), "timeouts-idle")
    s = socket.create_connection(("127.0.0.1", px2.port), timeout=10)
    seen = []
    for i, pause in enumerate((0, 0.6, 0.6, 1.0 + LATE + 0.3)):
        time.sleep(pause)
        st, _ = get(s, f"/pool/{i}")
        seen.append((st, cache.stats()["connections"]))
    s.close()
    # each stats() is a connection of its own to the cache: not counted
    conns = [c - prev - 1 for (_, c), prev in zip(seen, [0] + [c for _, c in seen])]
    t.check(all(st == b"HTTP/1.1 200 OK" for st, _ in seen) and conns == [1, 0, 0, 1],
            "a pooled connection is reused while each response restarts its idle timeout (0.6 s apart, "
            "backend_idle_timeout 1s), and closed once that passes with no request", [seen, conns])
    t.check(px.stop() == 0 and px2.stop() == 0, "SIGTERM: exit 0")
finally:
    cache.stop()
t.done()
