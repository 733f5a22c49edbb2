#!/usr/bin/env python3
"""test_connmem.py -- an idle client connection costs little memory, and a
connection's memory comes and goes with its requests without losing any:
2,000 connections opened and left idle, then each sends one request (250
at a time) and is idle again: the proxy's RSS grows by less than MAX_IDLE bytes per
connection before, MAX_AFTER after (a connection used to cost ~20 KB
either way; now ~0.6 KB, and after bursts of 250 backend requests
the workers' bounded free lists, a few MB in all, come on top; HAProxy
2.6: ~1.1 KB before a request and ~12 KB after, tests/bench/connmem.sh).
Around it, what a small first read buffer must not break: a head larger
than it, a request body, pipelined requests that span several reads, and a
connection that went idle and is used again. Under a sanitizer build
(libasan mapped in the proxy, or RINGPROXY_SANITIZED=1) RSS is not judged
(ASan's shadow and quarantine hold memory per allocation).
usage: test_connmem.py RINGPROXY TESTCACHE"""

import os
import resource
import selectors
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
CONNS = 2000
MAX_IDLE = 4000         # bytes of RSS per idle connection, nothing sent
MAX_AFTER = 12000       # ... after a request, free lists included
TIME_LIMIT = 120
BATCH = 250             # requests in flight at once (more than the free lists keep)


def settle_rss(px, secs=2.5):
    # freed memory is handed back once a second at most
    time.sleep(secs)
    return px.rss_kb()


def open_conns(port, n, deadline):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.settimeout(max(1.0, deadline - time.monotonic()))
        s.connect(("127.0.0.1", port))
        socks.append(s)
    return socks


def one_request_each(socks, path, deadline):
    """Send a GET on every socket, then read every response; the number
    answered 200 in full."""
    req = f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
    for s in socks:
        s.sendall(req)
    sel = selectors.DefaultSelector()
    bufs = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        bufs[s] = b""
    ok = 0
    while bufs and time.monotonic() < deadline:
        for key, _ in sel.select(1):
            s = key.fileobj
            d = s.recv(65536)
            if not d:
                sel.unregister(s)
                del bufs[s]
                continue
            b = bufs[s] + d
            bufs[s] = b
            end = b.find(b"\r\n\r\n")
            if end < 0:
                continue
            head = b[:end].decode("latin-1").lower().split("\r\n")
            clen = next((int(x.split(":")[1]) for x in head if x.startswith("content-length:")), 0)
            if len(b) >= end + 4 + clen:
                sel.unregister(s)
                del bufs[s]
                ok += head[0].startswith("http/1.1 200")
    sel.close()
    for s in socks:
        s.setblocking(True)
    return ok


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * CONNS + 200     # client and backend sockets
    if soft < need and hard >= need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    cache = H.Cache(TC, "cache-1", "--size", "1000")
    px = H.Proxy(RP, H.conf_text([cache], proxy={"response_timeout": "60s"}), nofile=need if hard >= need else None)
    deadline = time.monotonic() + TIME_LIMIT

    # a small first buffer grows for what does not fit it
    big = "x" * 9000
    st, _, body = H.get(px.port, "/big-head.jpg", headers={"X-Big": big})
    t.check(st == 200 and len(body) == 1000, f"a 9 KB request head is served (status {st})")
    payload = os.urandom(300000)
    c = px.http()
    c.request("POST", "/upload", body=payload)
    r = c.getresponse()
    got = r.read()
    t.check(r.status == 200 and got == payload, f"a 300 KB request body goes through whole (status {r.status})")
    time.sleep(0.2)    # idle between requests: the connection's memory goes back
    st, _, body = H.get_on(c, "/after-idle.jpg")
    t.check(st == 200 and len(body) == 1000, "the same connection, idle and used again, is served")
    c.close()
    pipe = b"".join(f"GET /p/{i}.jpg HTTP/1.1\r\nHost: t\r\nX-Pad: {'y' * 500}\r\n\r\n".encode()
                    for i in range(40))
    rs, rd = H.raw(px.port, pipe, n=40)
    rd.s.close()
    t.check(all(x.status == 200 and len(x.body) == 1000 for x in rs),
            "40 pipelined requests (20 KB, more than a small buffer) all answered")

    rss0 = settle_rss(px, 1.5)
    socks = open_conns(px.port, CONNS, deadline)
    rss1 = settle_rss(px)
    # in batches: one test cache answers them, under ASan on a busy box
    ok = sum(one_request_each(socks[i:i + BATCH], "/same.jpg", deadline)
             for i in range(0, CONNS, BATCH))
    rss2 = settle_rss(px)
    t.check(ok == CONNS, f"{ok} of {CONNS} connections answered 200")
    st, _, _ = H.get(px.port, "/new-client.jpg")
    t.check(st == 200, f"a new client is served beside {CONNS} idle ones")
    per1 = (rss1 - rss0) * 1024 // CONNS
    per2 = (rss2 - rss0) * 1024 // CONNS
    t.note(f"RSS {rss0} kB; {CONNS} idle connections: {rss1} kB ({per1} B each); "
           f"after a request each: {rss2} kB ({per2} B each)")
    if px.sanitized():
        t.skip("RSS per idle connection", "under a sanitizer")
    else:
        t.check(per1 < MAX_IDLE, f"an idle connection, nothing sent yet, costs {per1} B < {MAX_IDLE}")
        t.check(per2 < MAX_AFTER, f"an idle connection after a request costs {per2} B < {MAX_AFTER}")
    for s in socks:
        s.close()


H.run_main(t, main)
