#!/usr/bin/env python3
"""test_fleet.py -- several ringproxy instances with the same file route
every key the same way without talking to each other: two proxies started
on one config file serve 10,000 keys from the same caches (their
X-Ringproxy-Backend headers agree, and agree with the ring model), and
still do after both reload a file with a fourth cache. During a slow-start
ramp each proxy decides by its own clock: the test measures how far the
two disagree then (each key at its owner or the next cache on the ring,
the disagreement bounded by the gap between the two proxies' checks) and
that they agree again once the ramp is over.
usage: test_fleet.py RINGPROXY TESTCACHE"""

import concurrent.futures
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import ringref  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
KEYS = [f"/thumbs/{i % 1000}/{i}_{(64, 128, 256)[i % 3]}.jpg?v={i % 5}" for i in range(10000)]


def routes(port, keys, parts=4):
    """{key: backend} through the proxy at port, on parts connections."""
    chunks = [keys[i::parts] for i in range(parts)]
    out = {}
    with concurrent.futures.ThreadPoolExecutor(parts) as ex:
        for got in ex.map(lambda ks: H.routes_on(port, ks, host="fleet"), chunks):
            out.update(got)
    return out


def agree(pa, pb, ring, what):
    """Both proxies route every key, alike, and as the model says."""
    a, b = routes(pa.port, KEYS), routes(pb.port, KEYS)
    want = {k: ring.lookup(k.encode()) for k in KEYS}
    diff = [k for k in KEYS if a.get(k) != b.get(k)]
    t.check(len(a) == len(b) == len(KEYS) and not diff,
            f"{what}: the two proxies route all {len(KEYS)} keys alike ({len(diff)} differ)",
            "\n".join(f"{k}: {a.get(k)} vs {b.get(k)}" for k in diff[:10]))
    wrong = [k for k in KEYS if a.get(k) != want[k]]
    t.check(not wrong, f"{what}: ... each to its owner on the ring ({len(wrong)} not)",
            "\n".join(f"{k}: {a.get(k)} vs {want[k]}" for k in wrong[:10]))
    return a


def main():
    names = ["c1", "c2", "c3", "c4"]
    caches = {n: H.Cache(TC, n) for n in names}
    ports = {n: c.port for n, c in caches.items()}
    health = {"path": "/__health", "interval": "200ms", "rise": 1, "fall": 1}
    conf = H.write("fleet.ini", H.conf_by_name(names[:3], ports, health=health))
    # the same file, twice: listen = 127.0.0.1:0 gives each its own port
    pa = H.Proxy(RP, tag="fleet-a", path=conf)
    pb = H.Proxy(RP, tag="fleet-b", path=conf)
    pa.wait_checked(names[:3])
    pb.wait_checked(names[:3])
    t.check(pa.port != pb.port, "two proxies from one file")
    before = agree(pa, pb, ringref.ring_of(conf), "one file")

    # both reload a file with a fourth cache
    H.write("fleet.ini", H.conf_by_name(names, ports, health=health))
    ma, mb = pa.log_size(), pb.log_size()
    ra, rb = pa.reload(), pb.reload()
    pa.wait_checked(["c4"], since=ma)
    pb.wait_checked(["c4"], since=mb)
    t.check(ra and rb and ra.split(";")[1] == rb.split(";")[1] and "+c4" in ra,
            f"both reload the same change ({ra} | {rb})")
    after = agree(pa, pb, ringref.ring_of(conf), "after a reload of both")
    moved = [k for k in KEYS if before[k] != after[k]]
    t.check(moved and all(after[k] == "c4" for k in moved),
            f"keys moved only to the new cache ({len(moved)} of {len(KEYS)})")

    # a slow-start ramp: each proxy ramps by its own clock
    span = 6.0
    H.write("fleet.ini", H.conf_by_name(names, ports, health=health,
                                        backend={"c2": {"slow_start": f"{int(span)}s"}}))
    t.check(pa.reload() and pb.reload(), "both reload with slow_start = 6s on c2")
    ring = ringref.ring_of(conf)
    keys = KEYS[:2000]
    owner = {k: ring.lookup(k.encode()) for k in keys}
    nxt = {k: next(n for n in ring.walk(k.encode()) if n != "c2") for k in keys}
    caches["c2"].stop()
    t.check(pa.wait_log(r"backend c2: up -> down") and pb.wait_log(r"backend c2: up -> down"),
            "c2 stopped: both proxies mark it down")
    caches["c2"].start(caches["c2"].port)
    t.check(pa.wait_log(r"backend c2: down -> up") and pb.wait_log(r"backend c2: down -> up"),
            "c2 back: both bring it up (each after its own check)")
    time.sleep(span / 4)
    a, b = {}, {}
    for i in range(0, len(keys), 50):   # alternate: both asked at nearly the same time
        a.update(H.routes_on(pa.port, keys[i:i + 50], host="fleet"))
        b.update(H.routes_on(pb.port, keys[i:i + 50], host="fleet"))
    legal = all(a[k] in (owner[k], nxt[k]) and b[k] in (owner[k], nxt[k]) for k in keys)
    back_a = sum(1 for k in keys if owner[k] == "c2" and a[k] == "c2")
    back_b = sum(1 for k in keys if owner[k] == "c2" and b[k] == "c2")
    ours = sum(1 for k in keys if owner[k] == "c2")
    diff = sum(1 for k in keys if a[k] != b[k])
    t.note(f"mid-ramp: c2 has {back_a} (a) and {back_b} (b) of its {ours} keys back; "
           f"{diff} of {len(keys)} keys routed differently")
    t.check(legal, "mid-ramp: every key at its owner or the next cache on the ring, on both")
    t.check(0 < back_a < ours and 0 < back_b < ours, "mid-ramp: part of c2's keys are back, on both")
    # the proxies' checks are at most an interval (200 ms) apart: a 6 s
    # ramp then differs by at most ~3% of c2's keys; 10% leaves room
    t.check(diff <= 0.10 * ours + 2, f"mid-ramp: they disagree on {diff} keys, within the check gap")
    time.sleep(span)
    agree(pa, pb, ring, "after the ramp")


H.run_main(t, main)
