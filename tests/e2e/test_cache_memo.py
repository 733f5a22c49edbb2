#!/usr/bin/env python3
"""test_cache_memo.py -- the workers' memos of their hits (cache.h): with
two workers and a dozen keep-alive connections spread over them, every
connection hits one object (the repeats answered from its worker's
memo); the object is purged, and the next request on each connection
sees the new copy, never the purged one; the same when it expires and the
backend's next response replaces it; /stats and /metrics count every hit
exactly, right after the requests; and a repeated hit answered from a
memo is byte for byte the shared cache's answer (GET, HEAD, a matching
If-None-Match, a Range).

The backend is scripted (harness.Fake): each GET of a path gets the
path's next version in its body and ETag.
usage: test_cache_memo.py RINGPROXY TESTCACHE"""

import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
TOKEN = "memo-test-token"
CONNS = 12
lock = threading.Lock()
versions = {}


def handler(fake, s, n):
    """Each GET of a path: its next version, max-age 1 under /short/, else
    60; anything else (the purge's PURGE) a bare 200."""
    for method, target, _, _, _ in fake.requests(s):
        if method != "GET":
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            continue
        with lock:
            v = versions.get(target, 0) + 1
            versions[target] = v
        body = f"v{v} {target}\n".encode()
        age = 1 if target.startswith("/short/") else 60
        s.sendall(f"HTTP/1.1 200 OK\r\nCache-Control: max-age={age}\r\nETag: \"v{v}\"\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body)


def fetches(path):
    with lock:
        return versions.get(path, 0)


def admin(port, path, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, headers={"Authorization": f"Bearer {TOKEN}"})
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def cache_stats(port):
    return json.loads(admin(port, "/stats")[1])["cache"]


def metrics_hits(port):
    m = re.search(r"^ringproxy_cache_hits(?:_total)? (\d+)", admin(port, "/metrics")[1], re.M)
    return int(m.group(1)) if m else None


def get_on(conn, path, headers=None):
    """(status, cache-status, body) of a GET on an open connection."""
    h = {"Host": "img.test"}
    h.update(headers or {})
    conn.request("GET", path, headers=h)
    r = conn.getresponse()
    return r.status, r.getheader("Cache-Status", ""), r.read()


def round_on(conns, path):
    """One GET on each connection in turn: [(status, cache-status, body)]."""
    return [get_on(c, path) for c in conns]


def pair(port, req):
    """req sent three times pipelined on a new connection: the first hit
    on its worker takes the shared path (and its memo takes the object),
    the second is answered from the memo. Their statuses, heads as sent
    and bodies; sent again when they differ only in Age and
    Cache-Status's ttl (a second ticked between them)."""
    for _ in range(5):
        (r1, r2, _), rd = harness.raw(port, req * 3, n=3, head_only=req.startswith(b"HEAD"))
        rd.s.close()
        a = (r1.status, r1.headers, r1.body)
        b = (r2.status, r2.headers, r2.body)
        if a == b or [h for h in r1.headers if h[0] not in ("Age", "Cache-Status")] != \
                [h for h in r2.headers if h[0] not in ("Age", "Cache-Status")]:
            break
    return a, b


def version(body):
    """N of a test cache's body "vN PATH\n", -1 for anything else."""
    w = body.split(b" ", 1)[0]
    return int(w[1:]) if w[:1] == b"v" and w[1:].isdigit() else -1


def main():
    fake = harness.Fake(handler)
    conf = harness.conf_text([("m0", fake.port)],
                             proxy={"workers": 2, "retries": 0, "admin_listen": "127.0.0.1:0",
                                    "admin_token": TOKEN},
                             ring={"balance_factor": 0}, health={"passive": "off"},
                             cache={"size": "8m", "min_uses": 1, "grace": 0})
    proxy = harness.Proxy(RP, conf, tag="memo")
    P = proxy.port
    A = int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))
    conns = [http.client.HTTPConnection("127.0.0.1", P, timeout=30) for _ in range(CONNS)]

    # ---- a dozen connections hit one object, then it is purged --------------
    got = [round_on(conns, "/m/1") for _ in range(3)]
    flat = [r for rnd in got for r in rnd]
    t.check(all(st == 200 and body == b"v1 /m/1\n" for st, _, body in flat) and fetches("/m/1") == 1,
            f"{CONNS} connections x 3 GETs of /m/1: one backend fetch, every answer v1",
            [(cs, body) for _, cs, body in flat[:4]])
    t.check(sum(cs.startswith("ringproxy; hit") for _, cs, _ in flat) == 3 * CONNS - 1,
            "every request after the first is a hit", [cs for _, cs, _ in flat])
    c = cache_stats(A)
    t.check(c["hits"] == 3 * CONNS - 1 and c["misses"] == 1,
            f"/stats right after: hits {3 * CONNS - 1} exactly, misses 1", c)
    t.check(metrics_hits(A) == 3 * CONNS - 1, "/metrics counts the same hits", metrics_hits(A))
    st, j = admin(A, "/purge?url=" + urllib.parse.quote("http://img.test/m/1", safe=""), "POST")
    t.check(st == 200 and json.loads(j)["removed"] == 1, "POST /purge removes it", j)
    after = round_on(conns, "/m/1")
    t.check(all(st == 200 and body == b"v2 /m/1\n" for st, _, body in after) and fetches("/m/1") == 2,
            "the next request on every connection gets the new copy, v2 (one more fetch), none the purged v1",
            [body for _, _, body in after])
    t.check(after[0][1].startswith("ringproxy; fwd=miss")
            and all(cs.startswith("ringproxy; hit") for _, cs, _ in after[1:]),
            "the first is a miss, the others hit the new copy", [cs for _, cs, _ in after])
    again = round_on(conns, "/m/1") + round_on(conns, "/m/1")
    t.check(all(body == b"v2 /m/1\n" and cs.startswith("ringproxy; hit") for _, cs, body in again),
            "and the repeats hit v2", [body for _, _, body in again])
    c = cache_stats(A)
    want = 3 * CONNS - 1 + (CONNS - 1) + 2 * CONNS
    t.check(c["hits"] == want and c["misses"] == 2, f"/stats: hits {want} exactly, misses 2", c)

    # ---- expired, and replaced by the backend's next response ---------------
    first = round_on(conns, "/short/1") + round_on(conns, "/short/1")
    t.check(all(body == b"v1 /short/1\n" for _, _, body in first) and fetches("/short/1") == 1,
            "a 1-second object: every connection hits v1 twice", [body for _, _, body in first])
    time.sleep(2.2)
    after = round_on(conns, "/short/1")
    # the round itself may outlast the new copy's second on a loaded
    # machine (TSan): then a later copy follows it, in order, one fetch each
    vers = [version(body) for _, _, body in after]
    t.check(vers[0] == 2 and vers == sorted(vers) and fetches("/short/1") == max(vers),
            "expired: the next request on every connection gets the backend's v2 (or a later copy, once "
            "v2 expired in turn), none the expired v1",
            [(cs, body) for _, cs, body in after])
    for c_ in conns:
        c_.close()

    # ---- a memo's answer is the shared cache's, byte for byte ---------------
    cases = [
        ("GET", b"GET /b/get HTTP/1.1\r\nHost: img.test\r\n\r\n"),
        ("HEAD", b"HEAD /b/head HTTP/1.1\r\nHost: img.test\r\n\r\n"),
        ("If-None-Match", b"GET /b/inm HTTP/1.1\r\nHost: img.test\r\nIf-None-Match: \"v1\"\r\n\r\n"),
        ("Range", b"GET /b/range HTTP/1.1\r\nHost: img.test\r\nRange: bytes=0-3\r\n\r\n"),
        ("HTTP/1.0", b"GET /b/ten HTTP/1.0\r\nHost: img.test\r\nConnection: keep-alive\r\n\r\n"),
    ]
    for name, req in cases:
        path = req.split(b" ")[1].decode()
        harness.get(P, path, headers={"Host": "img.test"})      # stored
        a, b = pair(P, req)
        t.check(a == b and a[0] in (200, 206, 304), f"{name}: a repeated hit answered the same, byte for byte",
                (a, b))
    t.check(proxy.stop() == 0, "the proxy exits cleanly")


harness.run_main(t, main)
