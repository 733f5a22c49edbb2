#!/usr/bin/env python3
"""test_unkeyed.py -- what is not in a cache key (Host + target) never
reaches another client through a stored object: a GET's body (Content-
Length or chunked) bypasses the cache; a request without a Host (HTTP/1.0)
or with an empty one is not cached; the forwarding headers a client can set
(X-Forwarded-Host, Forwarded, X-Forwarded-Port, X-Original-URL) are not
forwarded on a cacheable request; a backend's own X-Ringproxy-Backend is
stored neither by a fill nor by a background refresh. And a POST whose
300,000-byte body streamed through the read buffer still invalidates its
URL. One scripted backend echoes what reached it into the body.
usage: test_unkeyed.py RINGPROXY TESTCACHE"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

ECHOED = ("host", "x-forwarded-host", "forwarded", "x-forwarded-port", "x-original-url")


class Origin:
    """The backend: answers every request 200 with the headers in ECHOED
    and the request body echoed in its body, cacheable (max-age=60, or
    max-age=1 with stale-while-revalidate to a client's request for
    /swr/), and a made-up X-Ringproxy-Backend: forged-name on every
    response (on /swr/ only to requests without X-Forwarded-For: the
    background refresh's)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = []          # (method, target, headers, body)
        self.fake = harness.Fake(self.serve)
        self.port = self.fake.port

    def serve(self, fake, s, n):
        for _, _, head, h, body in fake.requests(s):
            method, target = head.split(b" ")[:2]
            with self.lock:
                self.seen.append((method.decode(), target.decode(), h, body))
            echo = ";".join(f"{k}={h.get(k, '-')}" for k in ECHOED) + ";body=" + body.decode("latin-1")
            swr = target.startswith(b"/swr/") and "x-forwarded-for" in h
            cc = "max-age=1, stale-while-revalidate=60" if swr else "max-age=60"
            forged = "" if swr else "X-Ringproxy-Backend: forged-name\r\n"
            out = echo.encode()
            s.sendall(f"HTTP/1.1 200 OK\r\nCache-Control: {cc}\r\n{forged}Content-Type: text/plain\r\n"
                      f"Content-Length: {len(out)}\r\n\r\n".encode() + out)

    def count(self, target):
        with self.lock:
            return sum(1 for _, tg, _, _ in self.seen if tg == target)


def send(port, data):
    """One request on its own connection: the response (harness.Resp)."""
    r, rd = harness.raw(port, data)
    rd.s.close()
    return r[0]


def get(port, path, host="h.example", extra=""):
    return send(port, f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode())


def backends(r):
    return [v for k, v in r.headers if k.lower() == "x-ringproxy-backend"]


def main():
    origin = Origin()
    p = harness.Proxy(RP, harness.conf_text([("origin", origin.port)], proxy={"workers": 1},
                                            cache={"size": "1m", "min_uses": 1}), "unkeyed")

    # fat GET, Content-Length (the bytes), then chunked
    fat = send(p.port, b"GET /page HTTP/1.1\r\nHost: h.example\r\nCache-Control: no-cache\r\n"
                       b"Content-Length: 12\r\n\r\nPOISON-CL-01")
    after = [get(p.port, "/page") for _ in range(2)]
    t.check(b"body=POISON-CL-01" in fat.body and fat.h("cache-status") == "ringproxy; fwd=bypass" and
            all(b"POISON" not in r.body for r in after) and after[1].h("cache-status", "").startswith("ringproxy; hit"),
            "a GET with a 12-byte body reaches the backend with it, bypassing the cache; "
            "the next plain GETs get (and then hit) the body-less answer",
            [(fat.h("cache-status"), fat.body)] + [(r.h("cache-status"), r.body) for r in after])
    fat = send(p.port, b"GET /page2 HTTP/1.1\r\nHost: h.example\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"c\r\nPOISON-CK-01\r\n0\r\n\r\n")
    after = get(p.port, "/page2")
    t.check(b"body=POISON-CK-01" in fat.body and fat.h("cache-status") == "ringproxy; fwd=bypass" and
            b"POISON" not in after.body and "hit" not in after.h("cache-status", ""),
            "a chunked GET body bypasses the cache too: the next GET is a miss without it",
            [(fat.h("cache-status"), fat.body), (after.h("cache-status"), after.body)])
    fat = send(p.port, b"GET /page HTTP/1.1\r\nHost: h.example\r\nContent-Length: 12\r\n\r\nPOISON-CL-02")
    t.check(b"body=POISON-CL-02" in fat.body and fat.h("cache-status") == "ringproxy; fwd=bypass",
            "a GET with a body is not answered from the stored object either", (fat.h("cache-status"), fat.body))

    # an empty Host (HTTP/1.1) and no Host (HTTP/1.0): forwarded with
    # different Hosts, so neither is stored under the one key they share
    empty = send(p.port, b"GET /nohost HTTP/1.1\r\nHost: \r\n\r\n")
    none = send(p.port, b"GET /nohost HTTP/1.0\r\n\r\n")
    empty2 = send(p.port, b"GET /nohost HTTP/1.1\r\nHost: \r\n\r\n")
    t.check(empty.body.startswith(b"host=;") and none.body.startswith(f"host=127.0.0.1:{origin.port};".encode())
            and empty2.body.startswith(b"host=;") and origin.count("/nohost") == 3 and
            all(r.h("cache-status") == "ringproxy; fwd=bypass" for r in (empty, none, empty2)),
            "an empty Host and no Host bypass the cache: each answer names the Host it was fetched with",
            [(r.h("cache-status"), r.body) for r in (empty, none, empty2)])

    # client-set forwarding headers are not forwarded on a cacheable GET
    fwd = ("X-Forwarded-Host: evil.example\r\nForwarded: host=evil.example;proto=https\r\n"
           "X-Forwarded-Port: 8443\r\nX-Original-URL: /admin\r\n")
    first = get(p.port, "/fwd", extra=fwd)
    second = get(p.port, "/fwd")
    post = send(p.port, f"POST /fwd-post HTTP/1.1\r\nHost: h.example\r\n{fwd}Content-Length: 1\r\n\r\nx".encode())
    t.check(b"evil" not in first.body and b"8443" not in first.body and b"/admin" not in first.body and
            b"evil" not in second.body and second.h("cache-status", "").startswith("ringproxy; hit"),
            "a cacheable GET reaches the backend without X-Forwarded-Host, Forwarded, X-Forwarded-Port, "
            "X-Original-URL: the stored object (a hit next) knows nothing of them",
            [first.body, (second.h("cache-status"), second.body)])
    t.check(b"x-forwarded-host=evil.example" in post.body and b"x-original-url=/admin" in post.body,
            "a POST (never stored) still carries them", post.body)

    # the backend's own X-Ringproxy-Backend: ours only, on a miss and on a hit
    miss, hit = get(p.port, "/forged"), get(p.port, "/forged")
    t.check(backends(miss) == ["origin"] and backends(hit) == ["origin; cached"] and
            hit.h("cache-status", "").startswith("ringproxy; hit"),
            "a backend's own X-Ringproxy-Backend is neither relayed nor stored: a hit names ours only",
            [miss.headers, hit.headers])
    # ... nor stored by a background refresh (the backend forges it only
    # to a request without X-Forwarded-For: the refresh's)
    get(p.port, "/swr/x")
    time.sleep(2.1)
    stale = get(p.port, "/swr/x")
    harness.wait_until(lambda: origin.count("/swr/x") >= 2, 10)
    time.sleep(0.3)
    fresh = get(p.port, "/swr/x")
    t.check("fwd=stale" in stale.h("cache-status", "") and origin.count("/swr/x") == 2 and
            fresh.h("cache-status", "").startswith("ringproxy; hit") and backends(fresh) == ["origin; cached"],
            "after a background refresh, a hit names ours only", [stale.headers, fresh.headers])

    # a POST with a body larger than the read buffer invalidates its URL
    get(p.port, "/doc")
    hit = get(p.port, "/doc")
    body = b"z" * 300000
    up = send(p.port, b"POST /doc HTTP/1.1\r\nHost: h.example\r\nContent-Length: 300000\r\n\r\n" + body)
    again = get(p.port, "/doc")
    t.check(hit.h("cache-status", "").startswith("ringproxy; hit") and up.status == 200 and
            len(up.body) > 300000 and "hit" not in again.h("cache-status", "x") and origin.count("/doc") == 3,
            "GET /doc after a POST /doc with 300,000 bytes goes to the backend: the URL was invalidated",
            [hit.h("cache-status"), up.status, again.h("cache-status"), origin.count("/doc")])
    t.check(p.stop() == 0, "SIGTERM: exit 0")
    origin.fake.stop()


harness.run_main(t, main)
