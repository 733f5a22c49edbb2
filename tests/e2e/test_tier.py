#!/usr/bin/env python3
"""test_tier.py -- the tier's own hit ratio against real Varnish 7.1
caches (tests/e2e/varnishd.py): ringproxy reads each response's X-Varnish
([proxy] tier_status = auto), and its hit ratio per cache and for the tier
is within 1 point of varnishstat's cache_hit / (cache_hit + cache_miss)
over the same requests; after a reload that adds a cache a log line says
the tier's miss ratio in the minute before, and a minute later in the minute after (the
moved keys' misses), each within 1 point of Varnish's own; /metrics and
the page show it. Skips only where varnishd is not installed.
usage: test_tier.py RINGPROXY TESTCACHE"""

import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from varnishd import VARNISHD, VARNISHSTAT, Varnish  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
URLS = 400
N = 1500


def path_of(i):
    """The i-th request's path: URLS thumbnails, in a scrambled order, so
    each repeats (hits) after its first fetch (a miss)."""
    return f"/tier/{(i * 2654435761) % URLS}.jpg"


def stats(admin):
    st, _, body = H.get(admin, "/stats")
    return json.loads(body)


def counts(v):
    c = v.counters("MAIN.cache_hit", "MAIN.cache_miss")
    return c["MAIN.cache_hit"], c["MAIN.cache_miss"]


def settled(vs, base, want):
    """Varnish's hits and misses since base, once its workers have added
    theirs to the shared counters (they do so in batches, when idle):
    until want lookups are counted, for at most 15 s."""
    got = {}

    def done():
        for v in vs:
            h, m = counts(v)
            got[v.name] = (h - base[v.name][0], m - base[v.name][1])
        return sum(h + m for h, m in got.values()) >= want
    H.wait_until(done, 15, step=0.2)
    return got


def ratio(h, m):
    return h / (h + m) if h + m else None


def conf(vs, admin_opts):
    return H.conf_text([(v.name, v.port) for v in vs], proxy=admin_opts, ring={"balance_factor": 0},
                       health={"path": "/health", "interval": "1s"})


def run(port, offset):
    res = H.load(port, lambda i: path_of(offset + i), clients=8, seconds=60, max_requests=N)
    return [r for r in res if r[1] != 200], len(res)


def main():
    if not VARNISHD or not VARNISHSTAT:
        t.skip("the tier's hit ratio against Varnish", "no varnishd (Debian package varnish)")
        return
    origin = H.Cache(TC, "origin")
    vs = [Varnish(f"v{i}", origin.port) for i in range(1, 4)]
    for v in vs:
        v.start()
    opts = {"admin_listen": "127.0.0.1:0"}
    path = H.write("tier.ini", conf(vs[:2], opts))
    p = H.Proxy(RP, path=path)
    p.wait_checked([v.name for v in vs[:2]])
    admin = int(p.wait_log(r"stats on http://127\.0\.0\.1:(\d+)/", 10).group(1))
    time.sleep(1.5)                 # the first one-a-second sample is taken
    base = {v.name: counts(v) for v in vs}
    failed, n = run(p.port, 0)
    t.check(n == N and not failed, f"{N} GETs of {URLS} thumbnails through 2 Varnish caches: all 200", failed[:5])
    got = settled(vs, base, N)
    time.sleep(1.5)                 # the last requests are in a sample
    st = stats(admin)
    be = {b["name"]: b for b in st["backends"]}
    tot_h = tot_m = 0
    for v in vs[:2]:
        h, m = got[v.name]
        tot_h, tot_m = tot_h + h, tot_m + m
        b = be[v.name]
        t.check(b["tier_hits"] + b["tier_misses"] == b["responses_2xx"] and b["responses_2xx"] > 0,
                f"{v.name}: a verdict for each of its {b['responses_2xx']} responses (X-Varnish)", str(b))
        t.check(b["tier_hit_ratio"] is not None and abs(b["tier_hit_ratio"] - ratio(h, m)) <= 0.01,
                f"{v.name}: hit ratio {b['tier_hit_ratio']} within 1 point of varnishstat's "
                f"{h} / ({h} + {m}) = {ratio(h, m):.4f}")
    tier = st["tier"]
    t.check(abs(tier["hit_ratio"] - ratio(tot_h, tot_m)) <= 0.01 and tier["misses"] > 0,
            f"the tier: hit ratio {tier['hit_ratio']} within 1 point of Varnish's {ratio(tot_h, tot_m):.4f} "
            f"(origin fetches {tier['misses']}, Varnish's misses {tot_m})", str(tier))
    t.check(tier["origin_fetches_per_second_5m"] > 0, "origin fetches per second over 5 minutes",
            str(tier))
    _, _, metrics = H.get(admin, "/metrics")
    metrics = metrics.decode()
    m = re.search(r"(?m)^ringproxy_tier_hit_ratio ([0-9.]+)$", metrics)
    t.check(m and abs(float(m.group(1)) - ratio(tot_h, tot_m)) <= 0.01 and
            re.search(r'(?m)^ringproxy_backend_tier_misses_total\{backend="v1"\} [1-9]\d*$', metrics) and
            re.search(r'(?m)^ringproxy_tier_origin_fetches_per_second [0-9.]+$', metrics),
            "/metrics: ringproxy_tier_hit_ratio, per-backend tier counters, origin fetches per second",
            m.group(0) if m else metrics[-1500:])
    _, _, page = H.get(admin, "/")
    m = re.search(r'<div class="tile" id="t-tier"><span>[^<]*</span><b>([0-9.]+)%</b>', page.decode())
    t.check(m and abs(float(m.group(1)) / 100 - ratio(tot_h, tot_m)) <= 0.011,
            "the page's tile: the tier's hit ratio", m.group(0) if m else "")
    t.check(page.decode().count('class="tier">its cache hits ') == 2, "the page: each cache's hit ratio")

    # add v3: the keys it takes are cold there, the tier's misses jump
    before = ratio(tot_m, tot_h)
    H.write("tier.ini", conf(vs, opts))
    mark = p.log_size()
    line = p.reload()
    m = p.wait_log(r"tier miss ratio before reload 2: ([0-9.]+)% in the minute before \(\d+ responses?\)\n", 5, mark)
    t.check(line and line.startswith("reload 2: +v3;") and m and abs(float(m.group(1)) / 100 - before) <= 0.01,
            f"after the reload's report, a line: the tier's miss ratio in the minute before, Varnish's "
            f"{before:.4f}", m.group(0) if m else p.log()[-1500:])
    base = {v.name: counts(v) for v in vs}
    failed, n = run(p.port, N)
    t.check(n == N and not failed, f"{N} more GETs after the reload: all 200", failed[:5])
    got = settled(vs, base, N)
    h = sum(x[0] for x in got.values())
    mi = sum(x[1] for x in got.values())
    after = ratio(mi, h)
    t.check(after > before / 3, f"the moved keys miss at v3: Varnish's miss ratio {after:.4f} after, "
            f"{before:.4f} before (the second round alone would be all hits)")
    m = p.wait_log(r"tier miss ratio after reload 2: ([0-9.]+)% in the minute after \(\d+ responses?; ([0-9.]+)% before\)", 90, mark)
    t.check(m and abs(float(m.group(1)) / 100 - after) <= 0.01 and abs(float(m.group(2)) / 100 - before) <= 0.01,
            f"a minute later, a line: the tier's miss ratio in the minute after, Varnish's {after:.4f}",
            m.group(0) if m else p.log()[-2000:])
    p.stop()
    for v in vs:
        v.stop()


H.run_main(t, main)
