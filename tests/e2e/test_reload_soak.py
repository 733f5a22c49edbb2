#!/usr/bin/env python3
"""test_reload_soak.py -- many reloads leak nothing: after a warm-up, 1,000
SIGHUPs (alternating two files, with some traffic between them) leave the
proxy's open fd count unchanged and its RSS flat within 4 MB. Under a
sanitizer build (RINGPROXY_SANITIZED or ASAN_OPTIONS set) the count is
smaller and RSS is not judged (ASan's quarantine holds freed memory); the
leak checker at exit covers memory there.
usage: test_reload_soak.py RINGPROXY TESTCACHE"""

import http.client
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reload_harness as h  # noqa: E402

RP, TC = sys.argv[1], sys.argv[2]
t = h.Tap()
procs = h.Procs()
WARMUP = 100
COUNT = 300 if h.ASAN else 1000
TIME_LIMIT = 150


def main():
    names = [f"cache-{i}" for i in range(1, 6)]
    ports = h.start_caches(procs, TC, names)
    a = procs.write("a.ini", h.conf_text(names[:4], ports))
    b = procs.write("b.ini", h.conf_text(names[:5], ports, proxy={"connect_timeout": "700ms"},
                                         ring={"balance_factor": "1.25"}))
    live = procs.path("live.ini")
    os.symlink(a, live)
    px = h.Proxy(procs, RP, live)
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
            fds0, rss0 = px.fds(), px.rss_kb()
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
                st, _, _ = h.get(conn, f"/soak/{i}/{j}.jpg")
                if st != 200:
                    bad.append(f"status {st}")
    conn.close()
    fds1, rss1 = px.fds(), px.rss_kb()
    t.diag(f"{done} reloads in {time.monotonic() - t0:.1f}s; fds {fds0} -> {fds1}; "
           f"RSS {rss0} kB -> {rss1} kB ({(rss1 - rss0) / 1024:+.1f} MB)")
    for x in bad[:5]:
        t.diag(x)
    t.check(done == WARMUP + COUNT and not bad, f"{WARMUP + COUNT} reloads succeed, each logged with its generation")
    t.check(fds1 == fds0, f"open fds unchanged over {COUNT} reloads ({fds0} -> {fds1})")
    if h.ASAN:
        print(f"ok {t.n + 1} - RSS flat # SKIP under a sanitizer", flush=True)
        t.n += 1
    else:
        t.check(rss1 - rss0 <= 4096, f"RSS flat within 4 MB over {COUNT} reloads ({rss0} -> {rss1} kB)")
    px.signal(signal.SIGTERM)
    t.check(px.wait(30) == 0, "exit 0 after the soak (and, under ASan, no leak reported)")


try:
    main()
except Exception as e:
    import traceback
    t.check(False, f"unexpected {type(e).__name__}: {e}")
    t.diag(traceback.format_exc())
finally:
    procs.stop_all()
t.done()
