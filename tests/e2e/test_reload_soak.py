#!/usr/bin/env python3
"""test_reload_soak.py -- many reloads leak nothing: after a warm-up, 1,000
SIGHUPs (alternating two files, with some traffic between them and active
health checks running) leave the
proxy's open fds unchanged and its RSS flat within 4 MB. Under a
sanitizer build (libasan mapped in the proxy, or RINGPROXY_SANITIZED=1) RSS is not
judged (ASan's quarantine holds freed memory); LeakSanitizer at exit
covers memory there. A reload takes milliseconds even under ASan, so the
count stays 1,000; TIME_LIMIT bounds the loop all the same.
usage: test_reload_soak.py RINGPROXY TESTCACHE"""

import http.client
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

RP, TC = H.cli_args()
t = H.Tap()
WARMUP = 100
COUNT = 1000
TIME_LIMIT = 150


def main():
    names = [f"cache-{i}" for i in range(1, 6)]
    ports = {n: H.Cache(TC, n).port for n in names}
    # active health checks every 100 ms: reloads restart them, often
    # with a check in flight (curl handles, timers, sockets to free)
    hc = {"path": "/__health", "interval": "100ms", "timeout": "500ms"}
    a = H.write("a.ini", H.conf_by_name(names[:4], ports, health=hc))
    b = H.write("b.ini", H.conf_by_name(names[:5], ports, proxy={"connect_timeout": "700ms"},
                                        ring={"balance_factor": "1.25"}, health=hc))
    live = H.tmp_path("live.ini")
    os.symlink(a, live)
    px = H.Proxy(RP, path=live)
    conn = http.client.HTTPConnection("127.0.0.1", px.port, timeout=10)
    t0 = time.monotonic()
    done = 0
    gen = 1
    bad = []
    fds0 = rss0 = None
    for i in range(WARMUP + COUNT):
        if time.monotonic() - t0 > TIME_LIMIT:
            break
        if i == WARMUP:
            fds0, rss0, kinds0 = px.nfds(), px.rss_kb(), px.fd_kinds()
            t.note(f"fds after warm-up: {kinds0}")
        tmp = live + ".new"
        os.symlink(b if i % 2 == 0 else a, tmp)
        os.rename(tmp, live)
        line = px.reload(timeout=10)
        gen += 1
        if not line or not line.startswith(f"reload {gen}:"):
            bad.append(f"reload #{i}: {line!r}")
            break
        done += 1
        if i % 10 == 0:  # traffic, so that workers adopt and retire snapshots
            for j in range(20):
                st, _, _ = H.get_on(conn, f"/soak/{i}/{j}.jpg")
                if st != 200:
                    bad.append(f"status {st}")
    fds1, rss1, kinds1 = px.nfds(), px.rss_kb(), px.fd_kinds()
    t.note(f"fds at the end: {kinds1}")
    conn.close()
    t.note(f"{done} reloads in {time.monotonic() - t0:.1f}s; fds {fds0} -> {fds1}; "
           f"RSS {rss0} kB -> {rss1} kB ({(rss1 - rss0) / 1024:+.1f} MB)")
    for x in bad[:5]:
        t.note(x)
    t.check(done == WARMUP + COUNT and not bad, f"{WARMUP + COUNT} reloads succeed, each logged with its generation")
    # Pooled backend sockets come and go (a cache may close an idle one),
    # so sockets may differ by a few; everything else must match exactly.
    # A leak per reload would show as hundreds.
    sock0, sock1 = kinds0.pop("socket", 0), kinds1.pop("socket", 0)
    t.check(kinds1 == kinds0, f"no fd other than sockets opened or closed over {COUNT} reloads")
    t.check(sock1 <= sock0 + 2, f"sockets: {sock0} -> {sock1} over {COUNT} reloads (pooled ones may differ by 2)")
    if px.sanitized():
        t.skip("RSS flat", "under a sanitizer")
    else:
        t.check(rss1 - rss0 <= 4096, f"RSS flat within 4 MB over {COUNT} reloads ({rss0} -> {rss1} kB)")
    px.signal(signal.SIGTERM)
    t.check(px.wait(30) == 0, "exit 0 after the soak (and, under ASan, no leak reported)")


H.run_main(t, main)
