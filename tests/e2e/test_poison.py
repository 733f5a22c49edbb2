#!/usr/bin/env python3
"""test_poison.py -- a URL that makes every cache drop the connection (a
poison URL: an image that crashes the resizer) must not take the tier
down. Three caches, the default config; bursts of 3 requests for one
poison URL (testcache's drop knob) before every 150 ordinary requests,
1,000 ordinary ones in all: no backend is marked down, every ordinary
request is answered 200, each poison request reaches two caches (its
owner and one retry) and is logged with its URL and its request id.
usage: test_poison.py RINGPROXY TESTCACHE"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

ORDINARY = 1000
EVERY = 150
POISON = "/poison/1.jpg?drop=1"


def burst(port, n):
    """n requests for the poison URL at once, each on its own connection:
    [(status, body)]."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(n)]
    for s in socks:
        s.sendall(f"GET {POISON} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    out = []
    for s in socks:
        try:
            r = harness.Reader(s).response()
            out.append((r.status, r.body))
        except (OSError, EOFError) as e:
            out.append((0, repr(e).encode()))
        s.close()
    return out


def main():
    caches = [harness.Cache(TC, f"p{i}") for i in range(1, 4)]
    p = harness.Proxy(RP, harness.conf_text(caches), "poison")
    conn = p.http()
    ordinary, poison = [], []
    deadline = time.monotonic() + 120
    i = 0
    while len(ordinary) < ORDINARY and time.monotonic() < deadline:
        if i % EVERY == 0:
            poison += burst(p.port, 3)
        path = f"/ok/{i}.jpg"
        try:
            st, be, body = harness.get_on(conn, path)
        except (OSError, harness.http.client.HTTPException) as e:
            st, be, body = 0, repr(e), b""
            conn.close()
            conn = p.http()
        ordinary.append((path, st, be))
        i += 1
    conn.close()
    t.note(f"{len(ordinary)} ordinary requests, {len(poison)} poison requests")

    bad = [o for o in ordinary if o[1] != 200]
    t.check(len(ordinary) == ORDINARY and not bad,
            f"{ORDINARY} ordinary requests between bursts of 3 poison ones: every one 200", bad[:5])
    downs = [ln for ln in p.log().splitlines() if "up -> down" in ln]
    t.check(not downs, "no backend is marked down", downs[:5])
    t.check(all(st == 502 for st, _ in poison), "each poison request gets 502",
            [x for x in poison if x[0] != 502][:3])
    seen = sum(c.stats()["requests"] for c in caches)
    t.check(seen == ORDINARY + 2 * len(poison),
            f"each poison request reached two caches, no more ({seen} requests at the caches for "
            f"{ORDINARY} ordinary and {len(poison)} poison)")
    rids = [harness.request_id(body) for _, body in poison]
    missing = [r for r in rids if not r or not p.wait_log(
        rf"warn: request {r}: 502 for GET {POISON.replace('?', '[?]')} from 127\.0\.0\.1: backend p\d "
        rf"\(127\.0\.0\.1:\d+\): connection closed before responding, as backend p\d lost it before", 0)]
    t.check(not missing, "each is logged with its URL, its request id and the two backends",
            missing[:3] + p.log().splitlines()[-5:])
    t.check(p.stop() == 0, "SIGTERM: exit 0")
    for c in caches:
        c.stop()


harness.run_main(t, main)
