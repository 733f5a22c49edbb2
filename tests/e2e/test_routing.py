#!/usr/bin/env python3
"""test_routing.py -- requests land where the ring says: 10,000 URLs through
the real proxy to three test caches, each answer's X-Ringproxy-Backend and
X-Backend checked against ringref.py, the per-backend totals against
`ringproxy plan --keys` and the caches' own /__stats; a second proxy with
the same file routes every URL the same way; a URL asked again goes to the
same cache; keys of any length (the 2,047-byte query of a past crash,
keys up to 60 KB in every key mode) reach the owner of the whole key, as
`plan --keys` says.
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
    proxy2 = None

    # ---- keys longer than any buffer, in every key mode -------------------
    # The request that once made the proxy hash an uninitialised key (an
    # absolute-form target with an empty path and a 2,047-byte query): with
    # the default config it is routed by MD5 of its whole key "/?aaa...",
    # like every long key in every mode, and `plan --keys` agrees.
    issue = b"GET http://x?" + b"a" * 2047 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    pd = harness.Proxy(RP, harness.conf_text(caches), "routing-default")
    try:
        (r,), rd = harness.raw(pd.port, issue)
        rd.s.close()
        got = (r.status, r.h("X-Ringproxy-Backend"), r.body)
    except (OSError, EOFError) as e:
        got = (0, repr(e), b"")
    key = b"/?" + b"a" * 2047
    t.check(got == (200, ring.lookup(key), harness.body_for(key.decode())),
            "the issue's request (absolute-form, empty path, 2,047-byte query), default config: 200 from "
            "the owner of its whole key", [got[:2], ring.lookup(key)])
    t.check(pd.alive() and pd.get("/after")[0] == 200, "... and the proxy lives on")
    t.check(pd.stop() == 0, "SIGTERM: exit 0")
    reports = harness.sanitizer_reports()
    t.check(not reports, "no sanitizer report from any proxy", reports[:10])

    def key_of(mode, target):
        """The key ringproxy hashes for target (ringref's side: no C)."""
        path, q, query = target.partition("?")
        if path.startswith("http://"):
            path = "/" + path[7:].partition("/")[2]
        if mode == "path" or not q:
            return path
        if mode == "path+sorted-query":
            params = sorted((p for p in query.split("&") if p), key=str.encode)
            return path + "?" + "&".join(params) if params else path
        return path + "?" + query

    targets = []
    for n in (2047, 2048, 2049, 9000, 60000):
        targets += [f"http://x?{'a' * n}", f"http://img.example/t/{'p' * n}?z=1&y=2",
                    f"/t/{n}.jpg?z=1&{'b' * n}=1&a=2", f"/{'q' * n}"]
    for mode in ("path+query", "path", "path+sorted-query"):
        pm = harness.Proxy(RP, harness.conf_text(caches, proxy={"max_head_size": "64k"},
                                                 ring={"key": mode, "balance_factor": 0}), "routing-long")
        wrong, counts = [], {c.name: 0 for c in caches}
        for tg in targets:
            want = ring.lookup(key_of(mode, tg).encode())
            try:
                (r,), rd = harness.raw(pm.port, f"GET {tg} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                rd.s.close()
                st, be = r.status, r.h("X-Ringproxy-Backend")
            except (OSError, EOFError) as e:
                st, be = 0, repr(e)
            counts[be] = counts.get(be, 0) + 1
            if st != 200 or be != want:
                wrong.append((len(tg), tg[:24], st, be, want))
        t.check(not wrong, f"[ring] key = {mode}: {len(targets)} keys of 2 to 60 KB each reach the owner of "
                "the whole key", wrong[:5])
        kf = harness.write(f"long-{mode}.txt", "".join(key_of(mode, tg) + "\n" for tg in targets))
        p = subprocess.run([RP, "plan", pm.conf, "--keys", kf, "--json"], capture_output=True, text=True,
                           timeout=120)
        plan = {b["name"]: b["keys"] for b in json.loads(p.stdout)["backends"]}
        t.check(plan == counts, f"... and `plan --keys` with those keys counts the same per backend ({plan})",
                counts)
        t.check(pm.stop() == 0, "SIGTERM: exit 0")
finally:
    if proxy2:
        proxy2.stop()
    for c in caches:
        c.stop()
t.done()
