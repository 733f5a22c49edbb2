#!/usr/bin/env python3
"""test_backend_reach.py -- the requests ringproxy makes of its own
(background refreshes, purges, active health checks, -t --probe) reach a
backend as a client's request does:

  - the path (issue 22, finding 2): what the request path sends --
    dot-segments removed, then the backend URL's prefix, then the query --
    never libcurl's squashing of "/../" after the prefix: GET /../secret
    and its refresh both fetch /pfx/secret, /%2e%2e/secret3 is /pfx/secret3
    for both, POST /purge?url=http://h.example/../secret sends PURGE
    /pfx/secret;
  - the load (finding 6): a refresh holds an in-flight slot under
    max_inflight (20 stale objects on one pipelined connection, max_inflight
    = 2: the backend sees 2 at once, /stats shows them in flight and
    counts refreshes and the ones skipped), successive refreshes share
    connections, and a worker runs at most [cache] refresh_max;
  - the route (finding 10): straight to the backend, never through a
    proxy named by http_proxy / all_proxy in the environment (a fake one
    on loopback answers a poisoned body and counts its connections).

The backend is scripted (harness.Fake): it records every request (method,
target, connection) and tells a refresh from a client's request by the
X-Client header clients send (a refresh carries only Host,
Accept-Encoding, validators and Via); refreshes can be held until the
test releases them.
usage: test_backend_reach.py RINGPROXY TESTCACHE"""

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
CC = "max-age=1, stale-while-revalidate=60"


class Backend:
    """A scripted cache: every response is storable for 1 s and stale for
    60 more; its body names the target it was asked for."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reqs = []              # (method, target, conn, from_client)
        self.now = 0                # requests being answered now
        self.most = 0               # the most at once
        self.hold = False           # hold refreshes until release is set
        self.release = threading.Event()
        self.fake = harness.Fake(self.handler)
        self.port = self.fake.port

    def handler(self, fake, s, n):
        for method, target, head, _, _ in fake.requests(s):
            client = re.search(rb"\r\nx-client:", head, re.I) is not None
            with self.lock:
                self.reqs.append((method, target, n, client))
                self.now += 1
                self.most = max(self.most, self.now)
                hold = self.hold and not client and method == "GET"
            if hold:
                self.release.wait(15)
            body = f"backend {method} {target}\n".encode()
            cc = f"Cache-Control: {CC}\r\n" if method == "GET" and target != "/hc" else ""
            try:
                s.sendall(f"HTTP/1.1 200 OK\r\n{cc}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            finally:
                with self.lock:
                    self.now -= 1

    def refreshes(self):
        """(target, connection) of every refresh so far."""
        with self.lock:
            return [(tg, c) for m, tg, c, cl in self.reqs if m == "GET" and not cl and tg != "/hc"]

    def count(self, method, target, client=None):
        with self.lock:
            return sum(1 for m, tg, _, cl in self.reqs
                       if m == method and tg == target and (client is None or cl == client))


def conf(be, prefix="", backend="", cache="", health=""):
    return (f"[proxy]\nlisten = 127.0.0.1:0\nworkers = 2\nadmin_listen = 127.0.0.1:0\nretries = 0\n"
            f"[ring]\nbalance_factor = 0\n[health]\npassive = off\n{health}"
            f"[cache]\nsize = 8m\nmin_uses = 1\n{cache}"
            f"[backend c0]\nurl = http://127.0.0.1:{be.port}{prefix}\n{backend}")


def start(text, tag, env=None):
    """The proxy for config text: it, its port, its admin listener's."""
    proxy = harness.Proxy(RP, text, tag=tag, env=env)
    return proxy, proxy.port, int(proxy.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))


def admin(port, path, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def stats_backend(port):
    st, body = admin(port, "/stats")
    return json.loads(body)["backends"][0] if st == 200 else {}


def purge(port, url):
    return admin(port, "/purge?url=" + urllib.parse.quote(url, safe=""), "POST")


def get(port, target):
    """One GET of the raw target (sent as it is), as a client: the response."""
    (r,), rd = harness.raw(port, f"GET {target} HTTP/1.1\r\nHost: h.example\r\nX-Client: 1\r\n\r\n".encode())
    rd.s.close()
    return r


def stale_refresh(be, P, target):
    """Store target, let it go stale, hit it: the refresh's target (None
    if none came within 10 s) and the hit's Cache-Status."""
    get(P, target)
    time.sleep(2.2)
    before = len(be.refreshes())
    cs = get(P, target).h("cache-status", "")
    harness.wait_until(lambda: len(be.refreshes()) > before, 10)
    new = be.refreshes()[before:]
    return (new[0][0] if new else None), cs


def test_prefix():
    """Finding 2: a refresh and a purge send the request path's target."""
    be = Backend()
    proxy, P, A = start(conf(be, prefix="/pfx"), "reach-prefix")

    for target, want in (("/../secret", "/pfx/secret"), ("/%2e%2e/secret3", "/pfx/secret3"),
                         ("/a/./b/../c?q=1", "/pfx/a/c?q=1")):
        got, cs = stale_refresh(be, P, target)
        t.check(be.count("GET", want, client=True) == 1,
                f"GET {target}: the request path fetches {want}", be.reqs)
        t.check("fwd=stale" in cs and got == want,
                f"GET {target}: its background refresh fetches {want} too (got {got})", (cs, be.reqs))
        harness.wait_until(lambda: be.now == 0, 5)
        r = get(P, target)
        t.check(r.body == f"backend GET {want}\n".encode(),
                f"GET {target}: what the refresh stored is {want}'s body", r.body)
    t.check(be.count("GET", "/secret") == 0 and be.count("GET", "/pfx/%2e%2e/secret3") == 0,
            "nothing was ever fetched outside the prefix or with an encoded dot-segment", be.reqs)

    for url, want in (("http://h.example/../secret", "/pfx/secret"),
                      ("http://h.example/%2e%2e/secret3", "/pfx/secret3")):
        st, body = purge(A, url)
        t.check(st == 200 and be.count("PURGE", want) == 1,
                f"POST /purge?url={url}: PURGE {want} (as a GET of it would be sent)", (st, body, be.reqs))
    t.check(be.count("PURGE", "/secret") == 0, "no PURGE /secret", be.reqs)
    proxy.stop()
    be.fake.stop()


def burst(P, paths, rd=None):
    """GET every path pipelined on one connection (rd's, or a new one):
    the responses, and the reader of the connection, still open (its
    worker's refreshes share that worker's connections)."""
    data = b"".join(f"GET {p} HTTP/1.1\r\nHost: h.example\r\nX-Client: 1\r\n\r\n".encode() for p in paths)
    if rd is None:
        return harness.raw(P, data, n=len(paths))
    rd.s.sendall(data)
    return [rd.response() for _ in paths], rd


def stale_burst(be, text, tag, n):
    """A proxy for text that stores 20 objects; once they are stale, one
    pipelined connection GETs them all while be holds the refreshes, n of
    which are awaited (and 0.5 s more for any more to arrive). The proxy,
    its ports, the 20 responses, the paths, the connection's reader."""
    proxy, P, A = start(text, tag)
    paths = [f"/{tag}/{i}" for i in range(20)]
    for p in paths:
        get(P, p)
    time.sleep(2.2)
    be.hold = True
    be.release.clear()
    rs, rd = burst(P, paths)
    harness.wait_until(lambda: be.now >= n, 5)
    time.sleep(0.5)
    return proxy, P, A, rs, paths, rd


def test_inflight():
    """Finding 6: refreshes hold in-flight slots, are counted, share
    connections."""
    be = Backend()
    proxy, P, A, rs, paths, rd = stale_burst(be, conf(be, backend="max_inflight = 2\n"), "inflight", 2)
    t.check(all(r.status == 200 and "fwd=stale" in r.h("cache-status", "") for r in rs),
            "20 stale objects on one pipelined connection: all 20 answered stale at once",
            [(r.status, r.h("cache-status")) for r in rs])
    s = stats_backend(A)
    t.check(be.most == 2, f"with max_inflight = 2 the backend saw 2 requests at once (most: {be.most})",
            be.refreshes())
    t.check(s.get("inflight") == 2 and s.get("refreshes") == 2 and s.get("refreshes_skipped") == 18,
            "/stats shows the 2 refreshes in flight, 2 sent and 18 skipped",
            {k: s.get(k) for k in ("inflight", "refreshes", "refreshes_skipped", "requests")})
    be.release.set()
    harness.wait_until(lambda: be.now == 0, 10)
    # two more rounds on the same connection (the same worker): the
    # skipped objects are refreshed by later hits
    for _ in range(2):
        harness.wait_until(lambda: stats_backend(A).get("inflight") == 0, 10)
        burst(P, paths, rd)
        harness.wait_until(lambda: be.now == 0 and stats_backend(A).get("inflight") == 0, 10)
    rd.s.close()
    refs = be.refreshes()
    conns = {c for _, c in refs}
    t.check(len(refs) >= 6 and be.most == 2 and len(conns) <= 2,
            f"{len(refs)} refreshes over three rounds came on {len(conns)} connections, never more than 2 at once",
            refs)
    t.check(stats_backend(A).get("refreshes") == len(refs), "/stats counts every refresh sent",
            (stats_backend(A), len(refs)))
    proxy.stop()
    be.fake.stop()


def test_refresh_max():
    """Finding 6: [cache] refresh_max caps a worker's refreshes."""
    be = Backend()
    proxy, P, A, rs, paths, rd = stale_burst(be, conf(be, cache="refresh_max = 3\n"), "max", 3)
    rd.s.close()
    s = stats_backend(A)
    t.check(be.most == 3 and s.get("refreshes") == 3 and s.get("refreshes_skipped") == 17,
            f"refresh_max = 3, no max_inflight: 3 refreshes at once (most: {be.most}), 17 skipped",
            {k: s.get(k) for k in ("inflight", "refreshes", "refreshes_skipped")})
    be.release.set()
    proxy.stop()
    be.fake.stop()


def test_env_proxy():
    """Finding 10: http_proxy / all_proxy are never used."""
    be = Backend()
    poison = b"POISONED by the environment's proxy\n"
    hits = []

    def fake_proxy(fake, s, n):
        head, _ = fake.read_head(s)
        hits.append(head.split(b"\r\n")[0])
        s.sendall(b"HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(poison), poison))

    fp = harness.Fake(fake_proxy)
    env = {k: f"http://127.0.0.1:{fp.port}" for k in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")}
    env.update(no_proxy="", NO_PROXY="")
    text = conf(be, health="path = /hc\ninterval = 200ms\n")
    proxy, P, A = start(text, "reach-env", env)

    got, cs = stale_refresh(be, P, "/p/env")
    harness.wait_until(lambda: be.now == 0, 5)
    r = get(P, "/p/env")
    t.check(got == "/p/env" and r.body == b"backend GET /p/env\n",
            "with http_proxy/all_proxy set, a refresh reaches the backend and stores its answer",
            (got, r.body, hits[:5]))
    harness.wait_until(lambda: be.count("GET", "/hc") >= 3, 5)
    t.check(be.count("GET", "/hc") >= 3, "active health checks reach the backend", be.reqs)
    st, body = purge(A, "http://h.example/p/env")
    t.check(st == 200 and be.count("PURGE", "/p/env") == 1, "a purge reaches the backend", (st, body))
    before = be.count("GET", "/hc")
    pr = subprocess.run([RP, "-t", "--probe", "-c", proxy.conf], env=dict(os.environ, **env),
                        capture_output=True, text=True, timeout=60)
    t.check(pr.returncode == 0 and be.count("GET", "/hc") > before,
            "-t --probe reaches the backend", pr.stdout + pr.stderr)
    t.check(not hits, f"the environment's proxy was never contacted ({len(hits)} requests)", hits[:5])
    proxy.stop()
    fp.stop()
    be.fake.stop()


def main():
    test_prefix()
    test_inflight()
    test_env_proxy()
    test_refresh_max()      # last: an old binary refuses the key


harness.run_main(t, main)
