#!/usr/bin/env python3
"""test_reload.py -- SIGHUP reload as an operator sees it: no failed request
while reloading under load, a broken file changes nothing, the reported share
of moved keys is what clients observe, and keys move only to the new cache.
usage: test_reload.py RINGPROXY TESTCACHE"""

import concurrent.futures
import http.client
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import ringref  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()


def load_clients(port, nthreads, stop, max_requests, out, done=None):
    """Keep-alive GET loops until stop is set or max_requests each; done
    (a list of nthreads zeros), when given, counts each loop's good
    responses as they come."""

    def loop(i):
        ok = bad = 0
        errors = []
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        extra = {f"X-Extra-{k}": "v" * 100 for k in range(18)}  # 20 header lines, 2.2 kB
        for j in range(max_requests):
            if stop.is_set():
                break
            try:
                conn.request("GET", f"/img/{i}/{j % 500}.jpg?size=200", headers=extra if j % 3 == 0 else {})
                r = conn.getresponse()
                st, be, body = r.status, r.getheader("X-Ringproxy-Backend"), r.read()
                if 200 <= st < 300 and be and len(body) == 200:
                    ok += 1
                    if done is not None:
                        done[i] = ok
                else:
                    bad += 1
                    errors.append(f"status {st} backend {be} len {len(body)}")
            except Exception as e:  # a reset, a close, a timeout: all failures
                bad += 1
                errors.append(f"{type(e).__name__}: {e}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.close()
        out[i] = (ok, bad, errors[:5])

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(nthreads)]
    for th in threads:
        th.start()
    return threads


def main():
    names = [f"cache-{i}" for i in range(1, 10)]
    ports = {n: H.Cache(TC, n).port for n in names}

    # --- 100 reloads, 3 <-> 4 backends, under keep-alive load ---
    # the two files also differ in the sizes that connection buffers are
    # made for, so that keep-alive connections opened under one config
    # serve requests under the other
    a = H.write("a.ini", H.conf_by_name(names[:3], ports, proxy={
        "buffer_size": "16k", "max_headers": "24", "max_head_size": "8k", "client_timeout": "20s"}))
    b = H.write("b.ini", H.conf_by_name(names[:4], ports, proxy={
        "buffer_size": "64k", "max_headers": "100", "max_head_size": "16k", "pool_size": "4"}))
    live = H.tmp_path("live.ini")
    os.symlink(a, live)
    px = H.Proxy(RP, path=live)
    stop = threading.Event()
    results = {}
    done = [0] * 6
    threads = load_clients(px.port, 6, stop, 20000, results, done)
    time.sleep(0.2)
    gen_ok = True
    outcomes = []
    t0 = time.monotonic()
    for i in range(100):
        target = b if i % 2 == 0 else a
        tmp = live + ".new"
        os.symlink(target, tmp)
        os.rename(tmp, live)
        line = px.reload(timeout=10)
        outcomes.append(line)
        if not line or not line.startswith(f"reload {i + 2}:"):
            gen_ok = False
        # the next reload once the clients have done some work since this
        # one (not after a time, which a loaded machine fills with less)
        seen = sum(done)
        H.wait_until(lambda: sum(done) >= seen + 6, 10, step=0.002)
        if time.monotonic() - t0 > 120:
            break
    stop.set()
    for th in threads:
        th.join(timeout=30)
    ok = sum(r[0] for r in results.values())
    bad = sum(r[1] for r in results.values())
    t.note(f"100 reloads in {time.monotonic() - t0:.1f}s; {ok} requests ok, {bad} failed")
    for r in results.values():
        for e in r[2]:
            t.note(e)
    t.check(len(outcomes) == 100 and gen_ok,
            "100 SIGHUPs give 100 successful reloads, generations 2..101 in order")
    t.check(outcomes[0] is not None and "+cache-4" in outcomes[0]
            and outcomes[1] is not None and "-cache-4" in outcomes[1],
            "the reports name the added and the removed backend")
    t.check(len(results) == 6 and ok > 500, f"the clients kept working during reloads ({ok} requests)")
    t.check(bad == 0, "no request failed, no connection was reset during 100 reloads")
    t.check(px.alive(), "ringproxy still runs")

    # --- a broken file: routing unchanged, file:line logged, next reload works ---
    paths = [f"/b/{i}.jpg" for i in range(300)]
    deadline = time.monotonic() + 30
    before = H.backends_of(px.port, paths, deadline)
    gen = int(re.findall(r"reload (\d+):", px.log())[-1])
    broken = H.write("broken.ini",
                     H.conf_by_name(names[:4], ports, backend={"cache-1": {"weight": -2}})
                     + "\n[backend cache-9]\nurl = gopher://127.0.0.1:1\n")
    tmp = live + ".new"
    os.symlink(broken, tmp)
    os.rename(tmp, live)
    since = px.log_size()
    line = px.reload()
    logged = px.log()[since:]
    t.note(logged)
    t.check(line is not None and line.startswith(f"reload failed: {live}: 2 errors; still serving generation {gen}: "),
            "a broken file: 'reload failed: FILE: 2 errors; still serving generation G: ...'")
    t.check(re.search(re.escape(live) + r":\d+: weight", logged) is not None
            and re.search(re.escape(live) + r":\d+: url", logged) is not None,
            "every error is logged as FILE:LINE")
    after = H.backends_of(px.port, paths, deadline)
    t.check(before == after and len(after) == len(paths) and all(v.startswith("cache-") for v in after.values()),
            "after a failed reload every URL goes to the same backend as before")
    # a name that does not resolve does not fail the reload (test_resolve.py
    # has the rest): a warning with FILE:LINE, the backend down, its keys
    # on the next backends -- so routing is what it was
    unresolvable = H.write("unresolvable.ini", H.conf_by_name(names[:3], ports)
                           + "\n[backend cache-x]\nurl = http://no-such-host.invalid:80\n")
    line_no = open(unresolvable).read().splitlines().index("[backend cache-x]") + 2  # its url
    tmp = live + ".new"
    os.symlink(unresolvable, tmp)
    os.rename(tmp, live)
    since = px.log_size()
    line = px.reload(timeout=30)
    logged = px.log()[since:]
    t.note(logged)
    t.check(line is not None and line.startswith(f"reload {gen + 1}: +cache-x"),
            "an unresolvable backend: the reload is done ('reload G: +cache-x; ...')")
    t.check(re.search(r"warn: " + re.escape(f"{live}:{line_no}: backend cache-x: cannot resolve 'no-such-host.invalid'"),
                      logged) is not None,
            "the resolution problem is logged as a warning, as FILE:LINE")
    t.check(H.backends_of(px.port, paths, deadline) == before,
            "routing unchanged after it too (cache-x is down: its keys stay where they were)")
    gen += 1
    tmp = live + ".new"
    os.symlink(a, tmp)
    os.rename(tmp, live)
    line = px.reload()
    t.check(line is not None and line.startswith(f"reload {gen + 1}:"),
            f"the next good reload works and is generation {gen + 1}")
    px.signal(signal.SIGTERM)
    t.check(px.wait(30) == 0, "ringproxy exits 0 on SIGTERM")

    # --- 8 -> 9 backends: observed movement = reported movement, all to the new one ---
    c8 = H.write("c8.ini", H.conf_by_name(names[:8], ports))
    c9 = H.write("c9.ini", H.conf_by_name(names[:9], ports))
    live2 = H.tmp_path("live2.ini")
    os.symlink(c8, live2)
    px = H.Proxy(RP, path=live2)
    urls = [f"/thumb/{i}/{(i * 7919) % 100003}.jpg" for i in range(20000)]
    chunks = [urls[i::4] for i in range(4)]
    deadline = time.monotonic() + 120

    def measure():
        m = {}
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            for part in ex.map(lambda c: H.backends_of(px.port, c, deadline), chunks):
                m.update(part)
        return m

    t0 = time.monotonic()
    m8 = measure()
    tmp = live2 + ".new"
    os.symlink(c9, tmp)
    os.rename(tmp, live2)
    line = px.reload()
    t.note(line)
    m9 = measure()
    t.note(f"40,000 requests in {time.monotonic() - t0:.1f}s")
    rep = re.match(r"reload 2: \+cache-9; ([0-9.]+)% of keys moved, all to cache-9; ring [0-9a-f]{16}$", line or "")
    t.check(rep is not None, "the 8 -> 9 report: 'reload 2: +cache-9; X% of keys moved, all to cache-9'")
    t.check(len(m8) == len(m9) == len(urls), "all 20,000 URLs answered before and after")
    moved = [u for u in urls if m8.get(u) != m9.get(u)]
    observed = 100.0 * len(moved) / len(urls)
    reported = float(rep.group(1)) if rep else -1
    t.note(f"reported {reported:.3f}%, observed {observed:.3f}%")
    t.check(abs(observed - reported) <= 1.0, f"observed share moved {observed:.3f}% is within 1 point of the reported {reported:.3f}%")
    t.check(moved and all(m9[u] == "cache-9" for u in moved), "every moved URL moved to cache-9")
    t.check(all(m8[u].startswith("cache-") for u in urls), "every answer before named a backend")

    # --- a new URL for a name keeps its keys and is used at once ---
    sample = urls[:400]
    served_by = {}  # name -> set of X-Backend (the testcache that answered)

    def serve(paths):
        conn = http.client.HTTPConnection("127.0.0.1", px.port, timeout=10)
        out = {}
        for p in paths:
            conn.request("GET", p)
            r = conn.getresponse()
            r.read()
            out[p] = (r.getheader("X-Ringproxy-Backend"), r.getheader("X-Backend"))
        conn.close()
        return out

    before = serve(sample)  # also leaves pooled connections to the old address
    moved_ports = dict(ports, **{"cache-3": ports["cache-9"]})
    tmp = live2 + ".new"
    os.symlink(H.write("c9b.ini", H.conf_by_name(names[:9], moved_ports)), tmp)
    os.rename(tmp, live2)
    line = px.reload()
    t.note(line)
    t.check(re.fullmatch(re.escape(f"reload 3: @cache-3 (new url http://127.0.0.1:{ports['cache-9']}); 0.000% of keys "
                                   "moved; ring ") + "[0-9a-f]{16}", line or ""),
            "a new URL: '@cache-3 (new url U); 0.000% of keys moved'")
    after = serve(sample)
    t.check(all(after[u][0] == before[u][0] for u in sample), "a new URL moves no key")
    mine = [u for u in sample if after[u][0] == "cache-3"]
    t.check(mine and all(after[u][1] == "cache-9" for u in mine),
            f"cache-3's {len(mine)} keys are served from its new address at once (no pooled connection to the old one)")

    # --- a weight change: the report names it and every flow goes to it ---
    tmp = live2 + ".new"
    heavy = {"cache-1": {"weight": 2}}
    os.symlink(H.write("c9c.ini", H.conf_by_name(names[:9], moved_ports, backend=heavy)), tmp)
    os.rename(tmp, live2)
    line = px.reload()
    t.note(line)
    rep = re.match(r"reload 4: ~cache-1 \(weight 1 -> 2\); ([0-9.]+)% of keys moved, all to cache-1; ring [0-9a-f]{16}$", line or "")
    t.check(rep is not None and 5 < float(rep.group(1)) < 15,
            "a weight change: '~cache-1 (weight 1 -> 2); X% of keys moved, all to cache-1'")
    again = serve(sample)
    t.check(all(again[u][0] in (after[u][0], "cache-1") for u in sample),
            "after a weight increase keys move only to that backend")
    px.signal(signal.SIGTERM)
    t.check(px.wait(30) == 0, "ringproxy exits 0 on SIGTERM")
    test_health_kept(ports)


def test_health_kept(ports):
    """Health is per name and outlives a reload; a new URL is checked afresh."""
    names = ["cache-1", "cache-2", "cache-3"]
    hc = {"path": "/__health", "interval": "100ms", "timeout": "500ms", "rise": "2", "fall": "2"}
    live = H.write("health.ini", H.conf_by_name(names, ports, health=hc))
    px = H.Proxy(RP, path=live)
    paths = [f"/h/{i}.jpg" for i in range(300)]
    deadline = time.monotonic() + 60
    before = H.backends_of(px.port, paths, deadline)
    own2 = [p for p in paths if before[p] == "cache-2"]
    c = http.client.HTTPConnection("127.0.0.1", ports["cache-2"], timeout=5)
    c.request("GET", "/__set?health=503")
    c.getresponse().read()
    c.close()
    t.check(px.wait_log(r"backend cache-2: up -> down", timeout=10) is not None, "cache-2 fails its checks and goes down")
    H.write("health.ini", H.conf_by_name(names + ["cache-4"], ports, health=hc))
    since = px.log_size()
    line = px.reload()
    after = H.backends_of(px.port, own2, deadline)
    t.check(line is not None and line.startswith("reload 2:") and own2 and all(v != "cache-2" for v in after.values()),
            f"after a reload cache-2 is still down: its {len(own2)} keys still go elsewhere")
    t.check("cache-2: down -> up" not in px.log()[since:], "the reload did not bring cache-2 up")
    # a new URL (a healthy cache behind the name) is checked afresh: up at once
    moved = dict(ports, **{"cache-2": ports["cache-5"]})
    H.write("health.ini", H.conf_by_name(names + ["cache-4"], moved, health=hc))
    line = px.reload()
    t.check(line is not None and "@cache-2 (new url" in line and
            re.search(r"backend cache-2: down -> up \(new url [^)]*checked afresh\)", px.log()) is not None,
            "a new URL for a down backend: checked afresh, up at once")
    back = H.backends_of(px.port, own2, deadline)
    ring4 = ringref.Ring([(n, 1) for n in names + ["cache-4"]], 160)
    want = [p for p in own2 if ring4.lookup(p.encode()) == "cache-2"]
    t.check(want and all(back[p] == "cache-2" for p in want),
            f"its {len(want)} keys (those cache-4 did not take) come back to it")
    px.signal(signal.SIGTERM)
    t.check(px.wait(30) == 0, "exit 0")
    test_checks_not_postponed(ports)


def test_checks_not_postponed(ports):
    """Reloads much more frequent than the check interval do not keep
    pushing the checks of unchanged backends away."""
    names = ["cache-1", "cache-2", "cache-3"]
    hc = {"path": "/__health", "interval": "3s", "timeout": "500ms", "rise": "1", "fall": "1"}
    live = H.write("slow-checks.ini", H.conf_by_name(names, ports, health=hc))
    px = H.Proxy(RP, path=live)
    # new at start, cache-3 is checked at once; the check that must not be
    # postponed is the one an interval after that first, passed one
    px.wait_log(r"backend cache-3: checking -> up", 5)
    c = http.client.HTTPConnection("127.0.0.1", ports["cache-3"], timeout=5)
    c.request("GET", "/__set?health=503")
    c.getresponse().read()
    c.close()
    # 10 reloads a second for 4 s: the first check of cache-3 is due within
    # its 3 s interval, whatever the reloads do
    end = time.monotonic() + 4
    n = 0
    while time.monotonic() < end and "backend cache-3: up -> down" not in px.log():
        px.reload()
        n += 1
        time.sleep(0.1)
    t.check("backend cache-3: up -> down" in px.log(),
            f"with a reload every 100 ms ({n} of them), a 3 s health check still runs and marks cache-3 down")
    c = http.client.HTTPConnection("127.0.0.1", ports["cache-3"], timeout=5)
    c.request("GET", "/__set?health=200")
    c.getresponse().read()
    c.close()
    px.signal(signal.SIGTERM)
    t.check(px.wait(30) == 0, "exit 0")


H.run_main(t, main)
