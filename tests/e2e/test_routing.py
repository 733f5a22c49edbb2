#!/usr/bin/env python3
"""test_routing.py -- requests land where the ring says: 10,000 URLs through
the real proxy to three test caches, each answer's X-Ringproxy-Backend and
X-Backend checked against ringref.py, the per-backend totals against
`ringproxy plan --keys` and the caches' own /__stats; a second proxy with
the same file routes every URL the same way; a URL asked again goes to the
same cache.
usage: test_routing.py RINGPROXY TESTCACHE"""

import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import ringref  # noqa: E402

RP, TC = harness.cli_args()
t = harness.Tap()
NURLS = 10000
NTHREADS = 4


def urls():
    return [f"/thumbs/{i % 977}/{i}_200x200.jpg?v={i % 7}&size=64" for i in range(NURLS)]


def fetch_all(proxy, paths, deadline_s=240):
    """GET every path over NTHREADS keep-alive connections: {path: (backend
    header, X-Backend, body ok)}; bounded in count (len(paths)) and time."""
    out = {}
    errors = []
    lock = threading.Lock()
    deadline = time.monotonic() + deadline_s

    def run(part):
        c = proxy.http()
        res = {}
        try:
            for p in part:
                if time.monotonic() > deadline:
                    errors.append("time limit")
                    return
                c.request("GET", p)
                r = c.getresponse()
                body = r.read()
                res[p] = (r.getheader("X-Ringproxy-Backend"), r.getheader("X-Backend"),
                          r.status == 200 and body == harness.body_for(p, 64))
                if r.will_close:
                    c.close()
                    c = proxy.http()
        except Exception as e:   # reported below as a count mismatch
            errors.append(repr(e))
        finally:
            c.close()
            with lock:
                out.update(res)

    ths = [threading.Thread(target=run, args=(paths[i::NTHREADS],)) for i in range(NTHREADS)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    return out, errors


caches = [harness.Cache(TC, n) for n in ("cache-a", "cache-b", "cache-c")]
proxy2 = None
try:
    # bounded load off: routing must be the pure ring here
    conf = harness.conf_text(caches, ring={"vnodes": 160, "balance_factor": 0})
    proxy = harness.Proxy(RP, conf, "routing")
    ring = ringref.Ring([(c.name, 1.0) for c in caches], 160)
    paths = urls()
    keyfile = harness.write("keys.txt", "\n".join(paths) + "\n")

    t0 = time.monotonic()
    got, errors = fetch_all(proxy, paths)
    t.note(f"{len(got)} requests in {time.monotonic() - t0:.1f}s")
    t.check(not errors and len(got) == NURLS, f"all {NURLS} requests answered", errors[:3])
    t.check(all(v[2] for v in got.values()), "every body is the cache's body for that URL")
    want = {p: ring.lookup(p.encode()) for p in paths}
    bad = [p for p in paths if p in got and got[p][0] != want[p]]
    t.check(not bad, "X-Ringproxy-Backend equals ringref's owner for every URL",
            [f"{p}: {got[p][0]} != {want[p]}" for p in bad[:5]])
    t.check(all(v[0] == v[1] for v in got.values()),
            "X-Ringproxy-Backend names the cache that answered (its X-Backend)")

    counts = {c.name: 0 for c in caches}
    for v in got.values():
        if v[0] in counts:
            counts[v[0]] += 1
    p = subprocess.run([RP, "plan", proxy.conf, "--keys", keyfile, "--json"],
                       capture_output=True, text=True, timeout=120)
    plan = {b["name"]: b["keys"] for b in json.loads(p.stdout)["backends"]}
    t.check(plan == counts, f"per-backend counts equal `ringproxy plan --keys` ({plan})", counts)
    stats = {c.name: c.stats()["requests"] for c in caches}
    t.check(stats == counts, "per-backend counts equal the caches' /__stats", stats)
    t.check(min(counts.values()) > NURLS // 6, "every cache gets a fair part of the keys")

    # the same URL again, on other connections: the same cache
    again, errors = fetch_all(proxy, paths[:2000][::-1])
    t.check(not errors and all(again[p][0] == got[p][0] for p in again) and len(again) == 2000,
            "2,000 URLs asked again reach the same cache")

    # a second instance with the same file routes identically
    proxy2 = harness.Proxy(RP, conf, "routing2")
    t.check(proxy2.port != proxy.port, "a second proxy starts on its own port")
    got2, errors = fetch_all(proxy2, paths)
    diff = [p for p in paths if got2.get(p, (None,))[0] != got[p][0]]
    t.check(not errors and not diff, f"a second proxy with the same file routes all {NURLS} URLs identically",
            diff[:5])

    t.check(proxy2.stop() == 0, "SIGTERM: the second proxy exits 0")
    t.check(proxy.stop() == 0, "SIGTERM: the proxy exits 0")
finally:
    if proxy2:
        proxy2.stop()
    for c in caches:
        c.stop()
t.done()
