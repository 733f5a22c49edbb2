#!/usr/bin/env python3
"""test_stale.py -- serving stale (RFC 5861) and conditional requests as a
client and a backend see them: stale-while-revalidate answers at once
with Cache-Status fwd=stale and refreshes the object with exactly one
background request however many clients hit it; stale-if-error answers
with the expired copy when the backend fails (5xx, connection closed
before a response, timeout, connect error) and not without the
directive or past its window; [cache] grace is the window of responses
naming none, and a response's own window wins over it; a client's
If-None-Match / If-Modified-Since that matches a fresh object gets 304
from the cache. Last, a cache killed under load: the GETs that fail for
objects the proxy holds, with stale-if-error and without it.

The backend is scripted (harness.Fake): each path's behaviour can be
switched by the test (mode), and every request it receives is counted.
usage: test_stale.py RINGPROXY TESTCACHE"""

import os
import re
import socket
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()

lock = threading.Lock()
counts = {}             # path -> requests received
modes = {}              # path -> "ok" | "503" | "drop" | "slow" | "slowok"
versions = {}           # path -> the body version served now
heads = {}              # path -> the last request head received

LM = "Mon, 30 Nov 2026 10:00:00 GMT"


def fetches(path):
    with lock:
        return counts.get(path, 0)


def set_mode(path, mode):
    with lock:
        modes[path] = mode


def cc_of(p):
    """Cache-Control a path's responses carry."""
    if p.startswith("/swr"):
        return "max-age=3, stale-while-revalidate=30"
    if p.startswith("/sie"):
        return "max-age=1, stale-if-error=60"
    if p.startswith("/own"):
        return "max-age=1, stale-if-error=1, stale-while-revalidate=0"
    if p.startswith("/mustrev"):
        return "max-age=1, stale-if-error=60, must-revalidate"
    if p.startswith("/etag"):
        return "max-age=60"
    return "max-age=1"


def handler(fake, s, n):
    rest = b""
    while True:
        head, rest = fake.read_head(s, rest)
        if not head:
            return
        target = head.split(b"\r\n")[0].decode().split(" ")[1]
        p = target.split("?")[0]
        with lock:
            counts[p] = counts.get(p, 0) + 1
            heads[p] = head
            mode = modes.get(p, "ok")
            if mode != "304":
                versions[p] = versions.get(p, 0) + (1 if counts[p] > 1 else 0)
            v = versions.get(p, 0)
        if mode == "drop":
            return
        if mode in ("slow", "slowok"):
            time.sleep(0.8 if mode == "slowok" else 3)
        if mode == "304" and re.search(rb"\r\nif-none-match: ", head, re.I):
            out = f"HTTP/1.1 304 Not Modified\r\nCache-Control: max-age=60\r\nETag: \"e{v}\"\r\n\r\n".encode()
        elif mode == "503":
            body = b"busy\n"
            out = b"HTTP/1.1 503 X\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        else:
            body = (f"{p} v{v}\n" * 32).encode()
            hdrs = f"Cache-Control: {cc_of(p)}\r\nETag: \"e{v}\"\r\nLast-Modified: {LM}\r\n"
            out = (f"HTTP/1.1 200 OK\r\n{hdrs}Content-Length: {len(body)}\r\n\r\n").encode() + body
        s.sendall(out)


def cs(h):
    return h.get("cache-status", "")


def conf(fake, grace="0", retries=0):
    return harness.conf_text([("fake", fake.port)],
                             proxy={"workers": 2, "retries": retries, "response_timeout": "2s",
                                    "connect_timeout": "500ms"},
                             health={"passive": "off"},
                             cache={"size": "8m", "max_object": "64k", "grace": grace, "min_uses": 1})


def expire():
    """Past the max-age=1 of everything stored so far (whole seconds)."""
    time.sleep(2.2)


def main():
    fake = harness.Fake(handler)
    proxy = harness.Proxy(RP, conf(fake), tag="stale")
    P = proxy.port

    # ---- stale-while-revalidate -------------------------------------------
    st, h, b0 = harness.get(P, "/swr/1")
    t.check(st == 200 and b"v0" in b0 and cs(h).endswith("stored"), "an object with stale-while-revalidate is stored", h)
    time.sleep(3.2)                     # past its max-age=3
    set_mode("/swr/1", "slowok")          # the refresh takes 0.8 s
    n = 24
    out = [None] * n
    go = threading.Event()

    def one(i):
        go.wait()
        t0 = time.monotonic()
        try:
            st, h, b = harness.get(P, "/swr/1", timeout=10)
            out[i] = (st, b, time.monotonic() - t0, cs(h))
        except Exception as e:
            out[i] = (0, repr(e).encode(), time.monotonic() - t0, "")

    th = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for x in th:
        x.start()
    go.set()
    for x in th:
        x.join(20)
    slowest = max(o[2] for o in out)
    t.check(all(o[0] == 200 and o[1] == b0 and o[3].startswith("ringproxy; hit; fwd=stale") for o in out),
            f"{n} concurrent GETs of the expired object are all answered with the stale copy, fwd=stale",
            [o[3] for o in out][:3])
    t.check(slowest < 0.5, f"no client waits for the refresh (slowest {slowest:.3f} s; it takes 0.8 s)", slowest)
    time.sleep(1.2)                     # the refresh is over
    t.check(fetches("/swr/1") == 2,
            f"exactly one background request refreshed it for the {n} clients", fetches("/swr/1"))
    with lock:
        rh = heads.get("/swr/1", b"")
    t.check(re.search(rb"\r\nhost: ", rh, re.I) is not None, "the refresh carries the client's Host", rh)
    t.check(re.findall(rb"(?i)\r\naccept-encoding:[ \t]*([^\r]*)", rh) == [b"identity"],
            "... and the variant's canonical Accept-Encoding, identity for a client that accepts no coding "
            "(the line a miss sends)", rh)
    set_mode("/swr/1", "ok")
    st, h, b = harness.get(P, "/swr/1")
    t.check(st == 200 and b"v1" in b and cs(h).startswith("ringproxy; hit; ttl=") and fetches("/swr/1") == 2,
            "the refreshed object answers the next GET from memory", (h, b[:20]))
    st, h, b = harness.get(P, "/plain/swr")
    expire()
    st, h, b = harness.get(P, "/plain/swr")
    t.check(st == 200 and not cs(h).startswith("ringproxy; hit") and fetches("/plain/swr") == 2,
            "without stale-while-revalidate (and grace 0) an expired object is fetched, not served stale", h)

    # ---- stale-if-error ---------------------------------------------------
    for path, mode, what in [("/sie/503", "503", "a 5xx"), ("/sie/drop", "drop", "a connection closed before a response"),
                             ("/sie/slow", "slow", "a response timeout")]:
        st, h, b0 = harness.get(P, path)
        expire()
        set_mode(path, mode)
        st, h, b = harness.get(P, path, timeout=10)
        t.check(st == 200 and b == b0 and cs(h).startswith("ringproxy; hit; fwd=stale; detail=stale-if-error"),
                f"stale-if-error: {what} for the expired object is answered with the stale copy", (st, h))
    st, h, b = harness.get(P, "/plain/503")
    expire()
    set_mode("/plain/503", "503")
    st, h, b = harness.get(P, "/plain/503")
    t.check(st == 503, "without stale-if-error the 5xx reaches the client", (st, h))
    st, h, b = harness.get(P, "/mustrev/1")
    expire()
    set_mode("/mustrev/1", "503")
    st, h, b = harness.get(P, "/mustrev/1")
    t.check(st == 503, "must-revalidate forbids serving it stale on error", (st, h))
    st, h, b = harness.get(P, "/own/1")
    time.sleep(3.2)                       # past max-age=1 + stale-if-error=1
    set_mode("/own/1", "503")
    st, h, b = harness.get(P, "/own/1")
    t.check(st == 503, "past its stale-if-error window the error reaches the client", (st, h))
    set_mode("/sie/503", "ok")
    st, h, b = harness.get(P, "/sie/503")
    t.check(st == 200 and b"v" in b and cs(h).endswith("stored"),
            "once the backend answers again the object is replaced", h)

    # ---- revalidation of expired objects ---------------------------------
    st, h, b0 = harness.get(P, "/reval/1")
    expire()
    set_mode("/reval/1", "304")
    st, h, b = harness.get(P, "/reval/1")
    with lock:
        rh = heads.get("/reval/1", b"")
    t.check(re.search(rb'\r\nif-none-match: "e0"(\r\n|$)', rh, re.I) is not None and
            re.search(rb"\r\nif-modified-since: " + LM.encode() + rb"(\r\n|$)", rh, re.I) is not None,
            "an expired object with ETag and Last-Modified is revalidated: If-None-Match and If-Modified-Since", rh)
    t.check(st == 200 and b == b0 and "fwd-status=304" in cs(h) and h.get("cache-control") == "max-age=60",
            "a 304 answers the client with the stored body under the refreshed head", (st, h))
    st, h, b = harness.get(P, "/reval/1")
    t.check(st == 200 and b == b0 and fetches("/reval/1") == 2 and
            re.fullmatch(r"ringproxy; hit; ttl=(59|60)", cs(h)) is not None,
            "... and refreshes its lifetime: the next GET is a hit with the 304's max-age=60", h)
    st, h, b0 = harness.get(P, "/reval/2")
    expire()
    st, h, b = harness.get(P, "/reval/2")
    t.check(st == 200 and b != b0 and b"v1" in b and cs(h).endswith("stored"),
            "a 200 to the revalidation replaces the object", (h, b[:12]))
    st, h, b2 = harness.get(P, "/reval/2")
    t.check(b2 == b and fetches("/reval/2") == 2 and cs(h).startswith("ringproxy; hit"),
            "... and the new object is served from memory", h)
    st, h, b0 = harness.get(P, "/reval/3")
    expire()
    set_mode("/reval/3", "304")
    st, h, b = harness.get(P, "/reval/3", headers={"If-None-Match": '"e0"'})
    t.check(st == 304 and b == b"", "a client's own conditional on an expired object is the client's: its 304 passes", st)
    st, h, b0 = harness.get(P, "/swr/reval")
    time.sleep(3.2)
    set_mode("/swr/reval", "304")
    st, h, b = harness.get(P, "/swr/reval")
    time.sleep(0.5)
    st, h, b = harness.get(P, "/swr/reval")
    t.check(st == 200 and b == b0 and re.fullmatch(r"ringproxy; hit; ttl=(59|60)", cs(h)) is not None and
            fetches("/swr/reval") == 2,
            "the background refresh revalidates too: its 304 gives the stored body the new lifetime", h)

    # ---- client conditionals ---------------------------------------------
    st, h, b = harness.get(P, "/etag/1")
    et = h.get("etag")
    st, h, b = harness.get(P, "/etag/1", headers={"If-None-Match": et})
    t.check(st == 304 and b == b"" and h.get("etag") == et and fetches("/etag/1") == 1 and
            h.get("cache-control") == "max-age=60" and cs(h).startswith("ringproxy; hit"),
            "If-None-Match matching a fresh object: 304 from the cache with its ETag and Cache-Control", (st, h))
    st, h, b = harness.get(P, "/etag/1", headers={"If-Modified-Since": LM})
    t.check(st == 304 and b == b"" and fetches("/etag/1") == 1, "If-Modified-Since not older: 304 from the cache", (st, h))
    st, h, b = harness.get(P, "/etag/1", headers={"If-None-Match": '"other"'})
    t.check(st == 200 and len(b) > 0 and fetches("/etag/1") == 1, "a non-matching If-None-Match gets the object", st)
    st, h, b = harness.get(P, "/etag/1", headers={"If-Modified-Since": "Sun, 29 Nov 2026 10:00:00 GMT"})
    t.check(st == 200 and len(b) > 0, "If-Modified-Since older than Last-Modified gets the object", st)
    st, h, b = harness.get(P, "/etag/1", method="HEAD", headers={"If-None-Match": et})
    t.check(st == 304, "HEAD with a matching If-None-Match: 304", st)
    t.check(proxy.stop() == 0, "the proxy exits cleanly")

    # ---- grace -------------------------------------------------------------
    proxy = harness.Proxy(RP, conf(fake, grace="30s"), tag="stale-grace")
    P = proxy.port
    st, h, b0 = harness.get(P, "/plain/g1")
    expire()
    st, h, b = harness.get(P, "/plain/g1")
    t.check(st == 200 and b == b0 and cs(h).startswith("ringproxy; hit; fwd=stale"),
            "[cache] grace: an expired object naming no window is served stale while refreshed", h)
    time.sleep(0.5)
    t.check(fetches("/plain/g1") == 2, "... and one background request refreshes it", fetches("/plain/g1"))
    st, h, b0 = harness.get(P, "/plain/g2")
    expire()
    set_mode("/plain/g2", "503")
    # the stale hit refreshes in the background (a 503: nothing stored)
    st, h, b = harness.get(P, "/plain/g2")
    time.sleep(0.5)
    t.check(st == 200 and b == b0, "[cache] grace: the stale copy answers while the backend fails", (st, h))
    st, h, b = harness.get(P, "/own/2")
    time.sleep(3.2)
    set_mode("/own/2", "503")
    st, h, b = harness.get(P, "/own/2")
    t.check(st == 503, "a response's own stale-if-error=1 wins over grace 30s", (st, h))
    t.check(proxy.stop() == 0, "the proxy exits cleanly (grace)")

    # ---- connect error: the backend is gone --------------------------------
    proxy = harness.Proxy(RP, conf(fake), tag="stale-dead")
    P = proxy.port
    st, h, b0 = harness.get(P, "/sie/dead")
    st, h, b1 = harness.get(P, "/plain/dead")
    expire()
    # a listening socket closed while its accept() blocks in another
    # thread keeps accepting: shut it down first
    fake.ls.shutdown(socket.SHUT_RDWR)
    fake.stop()
    st, h, b = harness.get(P, "/sie/dead")
    t.check(st == 200 and b == b0 and "stale-if-error" in cs(h),
            "stale-if-error: a connect error (the backend is gone) is answered with the stale copy", (st, h))
    st, h, b = harness.get(P, "/plain/dead")
    t.check(st in (502, 503), "without it the client gets the error", (st, h))
    t.check(proxy.stop() == 0, "the proxy exits cleanly (dead backend)")

    # ---- a cache killed under load ----------------------------------------
    with_sie = killed_run("max-age=1, stale-if-error=60", "sie")
    without = killed_run("max-age=1", "nosie")
    t.note(f"cache killed under load: failed GETs {with_sie[0]} of {with_sie[1]} with stale-if-error, "
           f"{without[0]} of {without[1]} without")
    t.check(with_sie[0] == 0 and with_sie[1] > 0,
            f"a cache killed under load with stale-if-error: 0 failed GETs of {with_sie[1]} for objects the proxy holds",
            with_sie)
    t.check(without[0] > 0, f"the same run without stale-if-error: {without[0]} failed GETs of {without[1]}", without)


def killed_run(cc, tag):
    """3 testcaches, 60 objects stored in the proxy with Cache-Control cc
    and expired; 16 clients GET them for 3 s; one cache is SIGKILLed
    after 0.5 s. retries = 0, so a request to the dead cache is not moved
    along the walk: what it meets is what the cache step makes of it.
    Returns (failed GETs, GETs)."""
    caches = [harness.Cache(TC, f"{tag}{i}") for i in range(3)]
    text = harness.conf_text(caches, proxy={"workers": 2, "retries": 0, "response_timeout": "2s"},
                             cache={"size": "8m", "min_uses": 1})
    proxy = harness.Proxy(RP, text, tag=f"stale-kill-{tag}")
    q = "?cc=" + urllib.parse.quote(cc, safe="")
    paths = [f"/hot/{i}.jpg{q}" for i in range(60)]
    for p in paths:
        harness.get(proxy.port, p)
    expire()

    def killer():
        time.sleep(0.5)
        caches[1].kill9()

    k = threading.Thread(target=killer)
    k.start()
    res = harness.load(proxy.port, lambda i: paths[i % len(paths)], clients=16, seconds=3.0, max_requests=20000)
    k.join()
    proxy.stop()
    for c in caches:
        c.stop()
    return sum(1 for r in res if r[1] != 200), len(res)


harness.run_main(t, main)
